//! The fault matrix of the two-node topology: `cargo test --test fault_matrix_two_node`.
//!
//! Like `fault_matrix`, with worker B and its Guard on a namespace node
//! (`--topology two-node`, root): each row switches one fault on, runs the
//! case that must catch it, and passes only when that case FAILS with the
//! claim the row names. docs/fault-matrix.md lists the rows. Without root
//! (or CAP_SYS_ADMIN and CAP_NET_ADMIN) every row is reported ignored.

#[path = "../phase1/cases/mod.rs"]
#[allow(dead_code)]
mod cases;
mod rows;

fn main() -> std::process::ExitCode {
    kvcr_e2e::suite::Suite::main_with_defaults(
        "fault_matrix_two_node",
        rows::all(),
        // A request into a node that is cut off the network ends at the
        // client's deadline: keep it short here.
        &["--topology", "two-node", "--request-timeout-s", "20"],
    )
}
