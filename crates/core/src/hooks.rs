//! What the host plugs into a store: where wakes and background failures go, and the clock
//! background work reads. A leaf: every part that reports or reads the clock uses it, and it
//! uses none of them.

use std::sync::Arc;

use crate::error::Error;
use crate::wake::WakeSink;

/// Receives failures of work the caller did not wait for (the automatic prune, background
/// scans). The binding forwards them to the host's `onError`.
pub trait ErrorSink: Send + Sync + 'static {
    /// Reports one failure.
    fn report(&self, error: Error);
}

/// The clock background work reads (foreground calls pass `now` themselves).
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

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

    /// Reports a failure of background work to the host (dropped without a sink).
    pub(crate) fn report(&self, error: Error) {
        if let Some(sink) = &self.errors {
            sink.report(error);
        }
    }

    /// The clock background work uses.
    pub(crate) fn now(&self) -> i64 {
        self.clock.as_ref().map_or_else(system_now, |c| c())
    }
}
