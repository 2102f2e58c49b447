//! kvcr-e2e: an end-to-end test harness for KVCR stacks.
pub mod engine;
pub mod proc;
pub mod prompts;
pub mod pyenv;
pub mod rt;
pub mod stack;
pub mod verdict;
pub mod wait;
