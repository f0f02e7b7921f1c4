//! The one background runtime: wake timers and background tasks (automatic prune, upstream
//! scans, cross-process polling). Its threads never keep the Node process alive: Node only
//! waits for its own handles, and every callback into JS goes through a weak handle.

use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle, Runtime};

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The shared runtime's handle, started on first use.
pub fn handle() -> &'static Handle {
    RUNTIME
        .get_or_init(|| {
            Builder::new_multi_thread()
                // Timers and short SQLite batches only: one worker is enough, and a gateway
                // already has its own threads to share two cores with.
                .worker_threads(1)
                .max_blocking_threads(4)
                .thread_name("session-awareness")
                .enable_time()
                // The PostgreSQL store's connections run here.
                .enable_io()
                .build()
                .expect("the background runtime could not start")
        })
        .handle()
}
