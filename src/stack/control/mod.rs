//! How this run controls its stack, chosen once: [`Local`] when it
//! provisioned the stack (its own children, torn down at the end), or
//! [`ByHooks`] when it attached to one another process owns (`kvcr-e2e
//! stack up`): kills and replacements through the description's hooks
//! where it names them, no teardown, no Guard restart. Every decision that
//! depends on who owns the stack is made here, in one of the two.
//!
//! The mechanics (a SIGKILL verified from outside, a hook run, a
//! replacement awaited) are the stack's own; a control only picks them.

mod by_hooks;
mod local;

pub use by_hooks::{ByHooks, Reach};
pub use local::Local;

use std::path::Path;
use std::sync::Arc;

use crate::proc::{StopReport, Supervised};

use super::{KillReport, Stack, StackError, Worker};

/// What this run may do to its stack's processes, and how.
pub trait Control: Send + Sync {
    /// Whether this run started the stack (and so tears it down).
    fn owns(&self) -> bool;

    /// Whether this run sees the stack's processes (pids, `/proc`), as
    /// opposed to their URLs only.
    fn sees_processes(&self) -> bool;

    /// Where this run mirrors the stack's logs, when it reads them through
    /// the URL its owner serves them at.
    fn mirror_dir(&self) -> Option<&Path>;

    /// Kills `worker` (a crash: its whole group) and verifies it is gone.
    fn kill_worker(&self, stack: &Stack, worker: &Worker) -> Result<KillReport, StackError>;

    /// Whether the worker `kill` killed is gone.
    fn killed_worker_gone(&self, stack: &Stack, kill: &KillReport) -> bool;

    /// Whether something listens on `worker`'s control port (after its
    /// death: the Guard).
    fn control_port_listening(&self, worker: &Worker) -> bool;

    /// Starts a replacement in `name`'s slot and waits until it serves.
    fn replace_worker(&self, stack: &Stack, name: &str) -> Result<Arc<Worker>, StackError>;

    /// Starts the replacement in `name`'s slot from this process (what a
    /// replace hook such as `kvcr-e2e stack replace-worker` does).
    fn start_replacement(&self, stack: &Stack, name: &str) -> Result<Arc<Worker>, StackError>;

    /// The Guard service `service`, when this run may kill and restart it.
    fn restartable_guard(
        &self,
        stack: &Stack,
        service: &str,
    ) -> Result<Arc<Supervised>, StackError>;

    /// Gives a ready process the engine's lower priority, where this run
    /// started the stack.
    fn lower_priority(&self, stack: &Stack, process: &Supervised);

    /// Stops every component this run owns; returns what each stop did.
    fn teardown(&self, stack: &Stack) -> Vec<StopReport>;

    /// SIGKILLs the frontend and verifies it is gone.
    fn kill_frontend(&self, stack: &Stack) -> Result<u32, StackError> {
        stack.kill_frontend_group()
    }

    /// Starts a new frontend on the same port once the old one is gone.
    fn restart_frontend(&self, stack: &Stack) -> Result<(), StackError> {
        stack.start_new_frontend()
    }
}

/// How a kill reaches a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KillRoute {
    /// A process this run sees: SIGKILL of its group (or the description's
    /// kill hook, when it names one), verified through `/proc`.
    Signal,
    /// A worker seen only through its URLs: the kill hook, verified by its
    /// metrics port refusing connections.
    Hook,
}

/// How a replacement comes to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReplaceRoute {
    /// The description's replace hook starts it; it is found by URLs.
    Hook(Vec<String>),
    /// Started from this process; `outlives_run` when the stack's owner,
    /// not this run, stops it.
    Here { outlives_run: bool },
    /// Neither is possible: why.
    Refused(String),
}

/// Whether `kill` is gone: its pid through `/proc`, or, for a worker seen
/// only through its URLs, its metrics port.
fn killed_worker_gone(
    stack: &Stack,
    kill: &KillReport,
    route: impl Fn(&Worker) -> KillRoute,
) -> bool {
    match stack.worker(&kill.worker) {
        Ok(w) if route(&w) == KillRoute::Hook => !w.process.is_running(),
        _ => !crate::proc::procfs::is_alive(kill.pid),
    }
}

fn kill_by(stack: &Stack, worker: &Worker, route: KillRoute) -> Result<KillReport, StackError> {
    match route {
        KillRoute::Signal => stack.kill_visible_worker(worker),
        KillRoute::Hook => stack.kill_remote_worker(worker),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn hook(words: &[&str]) -> Option<Vec<String>> {
        Some(words.iter().map(|w| w.to_string()).collect())
    }

    #[test]
    fn a_provisioned_stack_is_controlled_locally() {
        let local = Local;
        assert!(local.owns() && local.sees_processes());
        assert_eq!(local.mirror_dir(), None);
        assert_eq!(local.kill_route(false), KillRoute::Signal);
        // A worker a replace hook started is seen through URLs even here.
        assert_eq!(local.kill_route(true), KillRoute::Hook);
    }

    #[test]
    fn an_attached_stack_in_this_pid_namespace_signals_its_processes() {
        let attached = ByHooks::new(Reach::Processes);
        assert!(!attached.owns() && attached.sees_processes());
        assert_eq!(attached.mirror_dir(), None);
        assert_eq!(attached.kill_route(false), KillRoute::Signal);
        assert_eq!(attached.kill_route(true), KillRoute::Hook);
        // Without a replace hook the replacement starts here and outlives
        // this run; with one, the hook starts it.
        assert_eq!(
            attached.replace_route("A", None),
            ReplaceRoute::Here { outlives_run: true }
        );
        assert_eq!(
            attached.replace_route("A", hook(&["up", "{worker}"])),
            ReplaceRoute::Hook(hook(&["up", "{worker}"]).unwrap_or_default())
        );
    }

    #[test]
    fn an_attached_stack_seen_through_urls_is_reached_by_hooks_only() {
        let mirror = PathBuf::from("/tmp/mirror");
        let attached = ByHooks::new(Reach::Urls {
            mirror_dir: mirror.clone(),
        });
        assert!(!attached.owns() && !attached.sees_processes());
        assert_eq!(attached.mirror_dir(), Some(mirror.as_path()));
        assert_eq!(attached.kill_route(false), KillRoute::Hook);
        assert_eq!(
            attached.replace_route("A", hook(&["up"])),
            ReplaceRoute::Hook(hook(&["up"]).unwrap_or_default())
        );
        match attached.replace_route("A", None) {
            ReplaceRoute::Refused(why) => assert!(
                why.contains("hooks.replace_worker") && why.starts_with("worker A "),
                "{why}"
            ),
            other => panic!("a stack seen through URLs, no hook: {other:?}"),
        }
    }

    #[test]
    fn the_reach_of_an_attached_stack_follows_its_pid_namespace() {
        let mirror = PathBuf::from("/tmp/mirror");
        let ours = Some("pid:[4026531836]");
        assert_eq!(Reach::of(None, ours, &mirror), Reach::Processes);
        assert_eq!(Reach::of(ours, ours, &mirror), Reach::Processes);
        assert_eq!(
            Reach::of(Some("pid:[4026532999]"), ours, &mirror),
            Reach::Urls {
                mirror_dir: mirror.clone()
            }
        );
        // Our own namespace unknown: a described one is another one.
        assert_eq!(
            Reach::of(ours, None, &mirror),
            Reach::Urls { mirror_dir: mirror }
        );
    }
}
