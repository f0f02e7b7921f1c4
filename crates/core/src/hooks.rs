//! What the host plugs into a store: where wakes and background failures go, and the clock
//! background work reads. A leaf: every part that reports or reads the clock uses it, and it
//! uses none of them.

use std::cell::Cell;
use std::sync::Arc;

use crate::error::Error;
use crate::wake::WakeSink;

/// The background task a failure reported through [`ErrorSink`] came from
/// (`SessionStateError.during` names it as `task:<name>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Task {
    /// The automatic prune (SQLite or PostgreSQL).
    Prune,
    /// The background WAL checkpoint.
    Checkpoint,
    /// The poll for other processes' notices (SQLite).
    Poll,
    /// The upstream monitor's scans.
    UpstreamMonitor,
    /// The PostgreSQL listener and its catch-up.
    CatchUp,
    /// The guard that restored the store's locks after another library's handle closed.
    FileGuard,
}

impl Task {
    /// The task's stable name.
    pub fn name(self) -> &'static str {
        match self {
            Task::Prune => "prune",
            Task::Checkpoint => "checkpoint",
            Task::Poll => "poll",
            Task::UpstreamMonitor => "upstream-monitor",
            Task::CatchUp => "catch-up",
            Task::FileGuard => "file-guard",
        }
    }
}

/// Receives failures of work the caller did not wait for (the automatic prune, background
/// scans). The binding forwards them to the host's `onError`.
pub trait ErrorSink: Send + Sync + 'static {
    /// Reports one failure.
    fn report(&self, error: Error);

    /// Reports one failure of background task `task`; by default as [`ErrorSink::report`].
    fn report_task(&self, error: Error, task: Task) {
        let _ = task;
        self.report(error);
    }
}

/// The clock background work reads (foreground calls pass `now` themselves).
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Told when background work (the PostgreSQL catch-up, the cross-process poll, the upstream
/// monitor) put notices in the listener's outbox (semantics.md#notices-listener), so that the
/// host can take them at once. The binding implements it with a weak, non-blocking JS callback.
pub trait NoticeSignal: Send + Sync + 'static {
    /// The outbox holds notices. Called on a background thread once every lock is released;
    /// it must not block.
    fn entered(&self);
}

thread_local! {
    // The host takes the outbox itself after each call made on this thread.
    static CALLER: Cell<bool> = const { Cell::new(false) };
}

/// Marks the current thread as one the host makes its calls on (its JS thread) and follows each
/// with a look at the outbox: notices entering on it are not signalled
/// ([`crate::Store::set_notice_signal`]). The Promise API's writer thread is marked by the store.
pub fn mark_caller_thread() {
    CALLER.with(|c| c.set(true));
}

/// True on a thread marked by [`mark_caller_thread`].
pub(crate) fn on_caller_thread() -> bool {
    CALLER.with(Cell::get)
}

/// Callbacks into the host.
#[derive(Default, Clone)]
pub struct Hooks {
    /// Where wakes go (semantics.md#wake); none means queue-only.
    pub wake: Option<Arc<dyn WakeSink>>,
    /// Where background failures go.
    pub errors: Option<Arc<dyn ErrorSink>>,
    /// The clock for background work; the system clock when absent.
    pub clock: Option<Clock>,
}

/// The system clock, in epoch ms.
pub fn system_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The host's error sink and clock, shared by the parts that run work in the background.
#[derive(Clone, Default)]
pub(crate) struct Host {
    errors: Option<Arc<dyn ErrorSink>>,
    clock: Option<Clock>,
}

impl Host {
    /// The error sink and clock of `hooks`.
    pub(crate) fn of(hooks: &Hooks) -> Self {
        Host {
            errors: hooks.errors.clone(),
            clock: hooks.clock.clone(),
        }
    }

    /// Reports a failure of background task `task` to the host (dropped without a sink).
    pub(crate) fn report(&self, error: Error, task: Task) {
        if let Some(sink) = &self.errors {
            sink.report_task(error, task);
        }
    }

    /// The clock background work uses.
    pub(crate) fn now(&self) -> i64 {
        self.clock.as_ref().map_or_else(system_now, |c| c())
    }
}
