//! Phase 1 on two nodes: `cargo test --test phase1_two_node`.
//!
//! The same cases as `phase1`, with worker B and its own Guard service on a
//! second host the harness makes for the run (its own network, PID and mount
//! namespaces, a private `/dev/shm`, a veth pair with the run's addresses),
//! and the frontend, worker A and node 0's Guard on this host. TC-03 checks,
//! from UCX's own report, that B's reads from A went over TCP through the
//! veth, not shared memory. Needs root (or CAP_SYS_ADMIN and CAP_NET_ADMIN);
//! without it every case is reported ignored with that reason.
//!
//! TC-04 runs here too: its takeover across the veth used to fail under
//! heavy load (its attempts used up the 6.7-10 s in which the router still
//! hints a dead worker's blocks); the attempts now follow back to back from
//! the verified kill for as long as a hint can come (docs/run-history.md).

#[path = "../phase1/cases/mod.rs"]
mod cases;

fn main() -> std::process::ExitCode {
    kvcr_e2e::suite::Suite::main_with_defaults(
        "phase1_two_node",
        cases::all(),
        &["--topology", "two-node"],
    )
}
