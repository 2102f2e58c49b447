//! The harness's async runtime. Cases are plain synchronous functions (as
//! libtest-mimic runs them); they use [`block_on`] for HTTP and streams.

use std::future::Future;

use once_cell::sync::Lazy;
use tokio::runtime::Runtime;

static RUNTIME: Lazy<Runtime> = Lazy::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("kvcr-e2e-io")
        .enable_all()
        .build()
        .expect("the harness cannot start its async runtime")
});

/// Runs `future` to completion on the shared runtime.
pub fn block_on<F: Future>(future: F) -> F::Output {
    RUNTIME.block_on(future)
}

/// The shared runtime's handle, for spawning concurrent requests.
pub fn handle() -> tokio::runtime::Handle {
    RUNTIME.handle().clone()
}
