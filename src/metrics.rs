//! The store's counters, gauges and histogram samples for `lib/metrics.ts` (docs/metrics.md),
//! packed into one `Float64Array` per call: the fixed slots named by [`slot_names`] in that
//! order, then, when samples are asked for, one list per histogram (its length, then its
//! values). Durations go out in seconds, the group size in records. `metricsLayout()` hands
//! the slot names to the Jest test that checks `lib/metrics.ts` against them.

use napi_derive::napi;
use session_awareness_core::{EventKind, Hist, MetricsSnapshot, FAILURE_CODES, HISTOGRAMS};

use crate::numbers::Numbers;
use crate::session_state::NativeSessionState;

/// The histograms, in the order of the core's [`Hist`].
const HISTOGRAM_NAMES: [&str; HISTOGRAMS] = [
    "record.sync",
    "record.async",
    "commit",
    "changes_since",
    "commit.group_size",
];

/// The counters after the kinds and codes, in the order [`pack`] writes them.
const COUNTER_NAMES: [&str; 10] = [
    "notices.opened:new",
    "notices.opened:reopen",
    "notices.delivered",
    "notices.acknowledged",
    "wakes.requested",
    "prune.deleted:events",
    "prune.deleted:cursors",
    "sync.catch_ups",
    "read_cache.lookups:hit",
    "read_cache.lookups:miss",
];

/// The gauges, last.
const GAUGE_NAMES: [&str; 6] = [
    "notices.pending",
    "watchers.served",
    "sqlite.wal.size",
    "sqlite.wal.frames",
    "followers.open",
    "read_cache.size",
];

/// The name of every fixed slot, in order.
fn slot_names() -> Vec<String> {
    let mut out: Vec<String> = EventKind::ALL
        .iter()
        .map(|k| format!("events.recorded:{}", k.as_str()))
        .collect();
    out.extend(FAILURE_CODES.iter().map(|c| format!("record.failures:{c}")));
    out.extend(COUNTER_NAMES.iter().map(|s| (*s).to_owned()));
    for h in HISTOGRAM_NAMES {
        for part in ["count", "sum", "dropped"] {
            out.push(format!("{h}:{part}"));
        }
    }
    out.extend(GAUGE_NAMES.iter().map(|s| (*s).to_owned()));
    out
}

/// A histogram value as it goes out: seconds for a duration, records for the group size.
fn value(h: usize, v: u64) -> f64 {
    if h == Hist::GroupSize as usize {
        v as f64
    } else {
        v as f64 / 1e9
    }
}

fn pack(s: &MetricsSnapshot, samples: Option<[Vec<u64>; HISTOGRAMS]>) -> Vec<f64> {
    let extra = samples
        .as_ref()
        .map_or(0, |l| l.iter().map(|v| v.len() + 1).sum());
    let mut out = Vec::with_capacity(48 + extra);
    out.extend(s.events_recorded.iter().map(|&n| n as f64));
    out.extend(s.record_failures.iter().map(|&n| n as f64));
    out.extend(
        [
            s.notices_opened_new,
            s.notices_opened_reopen,
            s.notices_delivered,
            s.notices_acknowledged,
            s.wakes_requested,
            s.prune_deleted_events,
            s.prune_deleted_cursors,
            s.sync_catch_ups,
            s.read_cache_hits,
            s.read_cache_misses,
        ]
        .map(|n| n as f64),
    );
    for (h, t) in s.histograms.iter().enumerate() {
        out.extend([t.count as f64, value(h, t.sum), t.dropped as f64]);
    }
    out.extend(
        [
            s.notices_pending,
            s.watchers_served,
            s.wal_bytes,
            s.wal_frames,
            s.followers_open,
            s.read_cache_bytes,
        ]
        .map(|n| n as f64),
    );
    if let Some(lists) = samples {
        for (h, list) in lists.iter().enumerate() {
            out.push(list.len() as f64);
            out.extend(list.iter().map(|&v| value(h, v)));
        }
    }
    out
}

/// The names of the fixed slots of a packed metrics snapshot, for the test that checks
/// `lib/metrics.ts` against them.
#[napi(object, object_from_js = false)]
pub struct MetricsLayout {
    /// Every fixed slot's name, in order.
    pub slots: Vec<String>,
}

/// The layout of a packed metrics snapshot.
#[napi]
pub fn metrics_layout() -> MetricsLayout {
    MetricsLayout {
        slots: slot_names(),
    }
}

#[napi]
impl NativeSessionState {
    /// The store's counters and gauges, packed as `src/metrics.rs` lays them out; with
    /// `samples`, followed by the histogram values kept since the last such call. Works after
    /// `close` too.
    #[napi(ts_return_type = "Float64Array")]
    pub fn metrics_snapshot(&self, samples: bool) -> Numbers {
        let snapshot = self.store.metrics();
        let lists = samples.then(|| self.store.take_metric_samples());
        Numbers(pack(&snapshot, lists))
    }

    /// From now on, keeps every histogram value for `metricsSnapshot(true)`.
    #[napi]
    pub fn keep_metric_samples(&self) {
        self.store.keep_metric_samples();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_slot_is_written_once() {
        let names = slot_names();
        assert_eq!(pack(&MetricsSnapshot::default(), None).len(), names.len());
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
    }
}
