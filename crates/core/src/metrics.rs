//! The store's own counters (docs/metrics.md): plain atomics bumped on the paths they count,
//! read together by [`Store::metrics`](crate::Store::metrics). Nothing here allocates or
//! locks on a record: a count is one relaxed `fetch_add`, a duration two of them.
//!
//! Durations are also kept one by one, for a host that feeds them to a histogram, once
//! [`Metrics::keep_samples`] turned that on: each histogram then has a bounded ring of
//! samples that writers fill without a lock and one reader drains ([`Metrics::take_samples`]).
//! A full ring drops the sample and counts it; the count and sum stay exact either way.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::Error;
use crate::event::EventKind;

/// The error codes `record.failures` counts by, in the order of [`MetricsSnapshot::record_failures`].
pub const FAILURE_CODES: [&str; 9] = [
    "ERR_INVALID_ARG",
    "ERR_CLOSED",
    "ERR_DB",
    "ERR_UPSTREAM_PARSE",
    "ERR_NOT_SQLITE",
    "ERR_FILE_SHARED",
    "ERR_FOREIGN_SCHEMA",
    "ERR_IMPORT_DIVERGED",
    "ERR_OUTCOME_UNKNOWN",
];

/// The histograms a store keeps, in the order of [`MetricsSnapshot::histograms`] and of the
/// sample lists of [`Metrics::take_samples`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hist {
    /// `record` on the caller's thread: from the call into the store to its answer (ns).
    RecordSync = 0,
    /// `recordAsync`: from the job queued on the writer to its result (ns).
    RecordAsync = 1,
    /// One write transaction of a record or a group commit, `BEGIN` to `COMMIT` (ns).
    Commit = 2,
    /// `changesSince` in the store (ns).
    ChangesSince = 3,
    /// Records per group commit (a count, not a duration).
    GroupSize = 4,
}

/// How many [`Hist`] there are.
pub const HISTOGRAMS: usize = 5;

/// Samples each histogram's ring holds between two drains.
pub const SAMPLE_RING: usize = 4096;

/// A histogram's count and sum so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistogramTotals {
    /// Values recorded.
    pub count: u64,
    /// Their sum: nanoseconds for a duration, records for the group size.
    pub sum: u64,
    /// Samples the ring dropped because it was full (only while samples are kept).
    pub dropped: u64,
}

/// Every counter and gauge of one store at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// Events recorded (new rows, not dedupe hits), by kind in the order of [`EventKind::ALL`].
    pub events_recorded: [u64; 9],
    /// Records that failed in the store, by code in the order of [`FAILURE_CODES`].
    pub record_failures: [u64; 9],
    /// Notices opened by a material event (the cursor had nothing pending).
    pub notices_opened_new: u64,
    /// Notices reopened by a drain or an acknowledge (material events arrived meanwhile).
    pub notices_opened_reopen: u64,
    /// Notices handed out by `drain`.
    pub notices_delivered: u64,
    /// Notices acknowledged by `acknowledge`.
    pub notices_acknowledged: u64,
    /// Calls of the host's `wake` (after coalescing).
    pub wakes_requested: u64,
    /// Events deleted by prunes.
    pub prune_deleted_events: u64,
    /// Cursors expired by prunes.
    pub prune_deleted_cursors: u64,
    /// Polls for other processes that found the file changed by another connection.
    pub sync_catch_ups: u64,
    /// `changesSince` calls answered from the read cache's tail (semantics.md#reading-memory).
    pub read_cache_hits: u64,
    /// `changesSince` calls the read cache could not answer, read from SQLite.
    pub read_cache_misses: u64,
    /// The histograms' totals, in the order of [`Hist`].
    pub histograms: [HistogramTotals; HISTOGRAMS],
    /// Notices queued now.
    pub notices_pending: u64,
    /// Watchers served across processes now (0 without cross-process delivery).
    pub watchers_served: u64,
    /// Bytes of the `-wal` file now (0 for an in-memory store or when there is none).
    pub wal_bytes: u64,
    /// Frames in the WAL after the last commit: how far it ran since it last started over.
    pub wal_frames: u64,
    /// Followers open now (semantics.md#follow).
    pub followers_open: u64,
    /// Bytes the read cache holds now (semantics.md#reading-memory).
    pub read_cache_bytes: u64,
}

/// The gauges the store reads from its parts for a snapshot.
#[derive(Default)]
pub(crate) struct Gauges {
    pub(crate) notices_pending: u64,
    pub(crate) watchers_served: u64,
    pub(crate) wal_frames: u64,
    pub(crate) followers_open: u64,
    pub(crate) read_cache_bytes: u64,
}

/// Counter indexes of [`Metrics`].
#[derive(Clone, Copy)]
pub(crate) enum Count {
    OpenedNew = 0,
    OpenedReopen,
    Delivered,
    Acknowledged,
    Wakes,
    PrunedEvents,
    PrunedCursors,
    CatchUps,
    ReadCacheHits,
    ReadCacheMisses,
}

const COUNTS: usize = 10;

/// A bounded multi-writer ring of samples; one reader at a time drains it.
struct Ring {
    slots: Box<[AtomicU64]>,
    head: AtomicU64,
    tail: AtomicU64,
    drain: Mutex<()>,
}

impl Ring {
    fn new() -> Self {
        Ring {
            slots: (0..SAMPLE_RING).map(|_| AtomicU64::new(0)).collect(),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            drain: Mutex::new(()),
        }
    }

    /// False when full. A slot holds the value plus one, so 0 marks it free.
    fn push(&self, v: u64) -> bool {
        let cap = SAMPLE_RING as u64;
        let mut h = self.head.load(Ordering::Relaxed);
        loop {
            // The slot `h` is free once the reader moved `tail` past `h - cap`.
            if h.wrapping_sub(self.tail.load(Ordering::Acquire)) >= cap {
                return false;
            }
            match self
                .head
                .compare_exchange_weak(h, h + 1, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => h = now,
            }
        }
        self.slots[(h % cap) as usize].store(v.saturating_add(1), Ordering::Release);
        true
    }

    fn drain_into(&self, out: &mut Vec<u64>) {
        let _one = self.drain.lock();
        let cap = SAMPLE_RING as u64;
        let head = self.head.load(Ordering::Acquire);
        let mut t = self.tail.load(Ordering::Relaxed);
        while t != head {
            let v = self.slots[(t % cap) as usize].swap(0, Ordering::AcqRel);
            // Reserved but not written yet: taken at the next drain.
            if v == 0 {
                break;
            }
            out.push(v - 1);
            t += 1;
        }
        self.tail.store(t, Ordering::Release);
    }
}

#[derive(Default)]
struct Histogram {
    count: AtomicU64,
    sum: AtomicU64,
    dropped: AtomicU64,
    ring: OnceLock<Ring>,
}

impl Histogram {
    fn add(&self, v: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(v, Ordering::Relaxed);
        if let Some(r) = self.ring.get() {
            if !r.push(v) {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn totals(&self) -> HistogramTotals {
        HistogramTotals {
            count: self.count.load(Ordering::Relaxed),
            sum: self.sum.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }
}

/// The counters of one store, shared by its parts.
#[derive(Default)]
pub(crate) struct Metrics {
    recorded: [AtomicU64; 9],
    failures: [AtomicU64; 9],
    counts: [AtomicU64; COUNTS],
    hists: [Histogram; HISTOGRAMS],
    wal: OnceLock<PathBuf>,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Metrics {
    /// Adds `n` to a counter.
    pub(crate) fn add(&self, c: Count, n: u64) {
        if n > 0 {
            self.counts[c as usize].fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Takes back one from a counter: a wake the JS thread found withdrawn was not called.
    pub(crate) fn take_back(&self, c: Count) {
        let _ = self.counts[c as usize]
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1));
    }

    /// One event of `kind` recorded.
    pub(crate) fn recorded(&self, kind: EventKind) {
        self.recorded[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// One record failed with `e`.
    pub(crate) fn failed(&self, e: &Error) {
        let code = e.code();
        if let Some(i) = FAILURE_CODES.iter().position(|c| *c == code) {
            self.failures[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The time since `start`, into a duration histogram.
    pub(crate) fn since(&self, h: Hist, start: Instant) {
        self.hists[h as usize].add(nanos(start.elapsed()));
    }

    /// A value into a histogram.
    pub(crate) fn value(&self, h: Hist, v: u64) {
        self.hists[h as usize].add(v);
    }

    /// Where the store's `-wal` file is, for its size.
    pub(crate) fn set_wal(&self, path: PathBuf) {
        let _ = self.wal.set(path);
    }

    /// Starts keeping each histogram's values one by one, for [`Metrics::take_samples`].
    pub(crate) fn keep_samples(&self) {
        for h in &self.hists {
            h.ring.get_or_init(Ring::new);
        }
    }

    /// The values kept since the last call, per histogram in the order of [`Hist`].
    pub(crate) fn take_samples(&self) -> [Vec<u64>; HISTOGRAMS] {
        std::array::from_fn(|i| {
            let mut out = Vec::new();
            if let Some(r) = self.hists[i].ring.get() {
                r.drain_into(&mut out);
            }
            out
        })
    }

    /// The counters now, with the gauges the caller read.
    pub(crate) fn snapshot(&self, gauges: Gauges) -> MetricsSnapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let c = |i: Count| load(&self.counts[i as usize]);
        MetricsSnapshot {
            events_recorded: std::array::from_fn(|i| load(&self.recorded[i])),
            record_failures: std::array::from_fn(|i| load(&self.failures[i])),
            notices_opened_new: c(Count::OpenedNew),
            notices_opened_reopen: c(Count::OpenedReopen),
            notices_delivered: c(Count::Delivered),
            notices_acknowledged: c(Count::Acknowledged),
            wakes_requested: c(Count::Wakes),
            prune_deleted_events: c(Count::PrunedEvents),
            prune_deleted_cursors: c(Count::PrunedCursors),
            sync_catch_ups: c(Count::CatchUps),
            read_cache_hits: c(Count::ReadCacheHits),
            read_cache_misses: c(Count::ReadCacheMisses),
            histograms: std::array::from_fn(|i| self.hists[i].totals()),
            notices_pending: gauges.notices_pending,
            watchers_served: gauges.watchers_served,
            wal_frames: gauges.wal_frames,
            followers_open: gauges.followers_open,
            read_cache_bytes: gauges.read_cache_bytes,
            wal_bytes: self
                .wal
                .get()
                .and_then(|p| std::fs::metadata(p).ok())
                .map_or(0, |m| m.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_codes_line_up() {
        for (i, k) in EventKind::ALL.into_iter().enumerate() {
            assert_eq!(k as usize, i);
        }
        let m = Metrics::default();
        m.failed(&Error::Closed);
        m.failed(&Error::invalid("x"));
        m.failed(&Error::Io(std::io::Error::other("x")));
        let s = m.snapshot(Gauges::default());
        assert_eq!(s.record_failures, [1, 1, 1, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn samples_are_kept_only_when_asked_and_drained_in_order() {
        let m = Metrics::default();
        m.value(Hist::GroupSize, 3);
        assert!(m.take_samples().iter().all(Vec::is_empty));
        m.keep_samples();
        for v in [5, 0, 7] {
            m.value(Hist::GroupSize, v);
        }
        let s = m.take_samples();
        assert_eq!(s[Hist::GroupSize as usize], vec![5, 0, 7]);
        assert!(m.take_samples()[Hist::GroupSize as usize].is_empty());
        let t = m.snapshot(Gauges::default()).histograms[Hist::GroupSize as usize];
        assert_eq!((t.count, t.sum, t.dropped), (4, 15, 0));
    }

    #[test]
    fn a_full_ring_drops_and_counts_then_takes_again() {
        let m = Metrics::default();
        m.keep_samples();
        for v in 0..(SAMPLE_RING as u64 + 3) {
            m.value(Hist::Commit, v);
        }
        let t = m.snapshot(Gauges::default()).histograms[Hist::Commit as usize];
        assert_eq!((t.count, t.dropped), (SAMPLE_RING as u64 + 3, 3));
        let s = m.take_samples();
        assert_eq!(s[Hist::Commit as usize].len(), SAMPLE_RING);
        assert_eq!(
            s[Hist::Commit as usize][SAMPLE_RING - 1],
            SAMPLE_RING as u64 - 1
        );
        m.value(Hist::Commit, 42);
        assert_eq!(m.take_samples()[Hist::Commit as usize], vec![42]);
    }

    #[test]
    fn writers_on_many_threads_lose_nothing_that_fits() {
        let m = std::sync::Arc::new(Metrics::default());
        m.keep_samples();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let m = std::sync::Arc::clone(&m);
                std::thread::spawn(move || {
                    for i in 0..1000 {
                        m.value(Hist::RecordSync, t * 1000 + i);
                    }
                })
            })
            .collect();
        let mut got = Vec::new();
        for t in threads {
            t.join().unwrap();
        }
        got.extend(m.take_samples()[0].iter().copied());
        got.sort_unstable();
        assert_eq!(got, (0..4000).collect::<Vec<u64>>());
    }
}
