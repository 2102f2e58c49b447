//! kvcr-e2e: an end-to-end test harness for KVCR stacks.
pub mod client;
pub mod config;
pub mod engine;
pub mod evidence;
pub mod gpu;
pub mod peer_bench;
pub mod proc;
pub mod prompts;
pub mod pyenv;
pub mod reference;
pub mod rt;
pub mod runner;
pub mod stack;
pub mod suite;
pub mod telemetry;
pub mod verdict;
pub mod wait;
mod words;
