//! The store's metrics (docs/metrics.md): its counters with the gauges read now, and the
//! histogram values kept for a host that feeds them to OpenTelemetry.

use std::time::Instant;

use crate::error::Result;
use crate::event::StateEvent;
use crate::metrics::{Gauges, Hist, MetricsSnapshot, HISTOGRAMS};
use crate::store::Store;

impl Store {
    /// The store's counters and gauges now (docs/metrics.md); a closed store's gauges are 0.
    /// Takes no connection lock: the queue's and the served set's locks for their sizes, and
    /// a `stat` of the WAL.
    pub fn metrics(&self) -> MetricsSnapshot {
        let r = &self.inner.recorder;
        if self.is_closed() {
            return self.delivery().metrics.snapshot(Gauges::default());
        }
        self.delivery().metrics.snapshot(Gauges {
            notices_pending: self.delivery().queue().len() as u64,
            watchers_served: r.sync.as_ref().map_or(0, |s| s.served_count() as u64),
            wal_frames: r.maintenance.wal_frames(),
            followers_open: self.delivery().follows.open(),
            read_cache_bytes: if self.is_remote() {
                0
            } else {
                self.db().read_cache_bytes() as u64
            },
        })
    }

    /// From now on, keeps every histogram value one by one for
    /// [`Store::take_metric_samples`] (a bounded ring each: [`crate::SAMPLE_RING`]).
    pub fn keep_metric_samples(&self) {
        self.delivery().metrics.keep_samples();
    }

    /// The histogram values kept since the last call, per histogram in the order of
    /// [`Hist`]: nanoseconds, or records for the group size. Empty until
    /// [`Store::keep_metric_samples`].
    pub fn take_metric_samples(&self) -> [Vec<u64>; HISTOGRAMS] {
        self.delivery().metrics.take_samples()
    }

    /// Counts the result of a record that ran on the writer (`recordAsync`): its failure,
    /// and the time since it was queued.
    pub(crate) fn recorded_async(&self, r: &Result<Option<StateEvent>>, queued: Instant) {
        let m = &self.delivery().metrics;
        m.since(Hist::RecordAsync, queued);
        if let Err(e) = r {
            m.failed(e);
        }
    }
}
