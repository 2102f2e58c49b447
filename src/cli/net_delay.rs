//! `kvcr-e2e net-delay --queue N --delay-ms D --jitter-ms J --stats FILE`
//! (hidden): the packet delayer a degraded link's delay runs inside node
//! 1's namespace ([`crate::proc::net_delay`]). Not for people: the harness
//! starts it and stops it.

use std::process::ExitCode;

pub fn net_delay(args: &[String]) -> ExitCode {
    match crate::proc::net_delay::main(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("net-delay: {e}");
            ExitCode::FAILURE
        }
    }
}
