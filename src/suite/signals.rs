//! SIGINT / SIGTERM end a run cleanly: the stack is torn down, then the
//! process exits with 128 + the signal number.
//!
//! The signals are blocked in every thread (the mask is inherited, so this
//! runs before any other thread starts) and one thread waits for them.

use nix::sys::signal::{SigSet, SigmaskHow, Signal};

/// Blocks SIGINT and SIGTERM and calls `on_signal` from a dedicated thread
/// when one arrives; then exits.
pub fn install(on_signal: impl FnOnce(Signal) + Send + 'static) {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    if let Err(e) = nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None) {
        tracing::warn!(
            "cannot block SIGINT/SIGTERM ({e}); an interrupted run relies on the reaper"
        );
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("kvcr-e2e-signals".into())
        .spawn(move || {
            if let Ok(signal) = set.wait() {
                crate::events::emit(crate::events::RunEvent::SignalReceived {
                    signal: signal.to_string(),
                });
                on_signal(signal);
                std::process::exit(128 + signal as i32);
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(
            "cannot start the signal thread ({e}); an interrupted run relies on the reaper"
        );
    }
}
