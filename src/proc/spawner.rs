//! One long-lived thread forks every child.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked a child exits, not
//! the process. Test runners and async runtimes retire threads freely, so all
//! children are forked from this thread, which lives as long as the harness.

use std::io;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::Mutex;

use once_cell::sync::Lazy;

type Job = (Command, mpsc::Sender<io::Result<Child>>);

static SPAWNER: Lazy<Mutex<mpsc::Sender<Job>>> = Lazy::new(|| {
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("kvcr-e2e-spawner".into())
        .spawn(move || {
            for (mut command, reply) in rx {
                // The caller may have given up waiting; nothing to do then.
                let _ = reply.send(command.spawn());
            }
        })
        .expect("the harness cannot start its process-spawning thread");
    Mutex::new(tx)
});

/// Spawns `command` from the spawner thread.
pub(crate) fn spawn(command: Command) -> io::Result<Child> {
    let (reply_tx, reply_rx) = mpsc::channel();
    SPAWNER
        .lock()
        .map_err(|_| io::Error::other("spawner lock poisoned"))?
        .send((command, reply_tx))
        .map_err(|_| io::Error::other("spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| io::Error::other("spawner thread dropped the request"))?
}
