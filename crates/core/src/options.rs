//! The tunables of a store (semantics.md#api) and their accepted ranges.

use crate::error::{Error, Result};
use crate::event::NotifyKinds;
use crate::log;

/// Tunables of a store (semantics.md#api). Ranges are checked by [`Options::validate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Events and cursors older than this are pruned. Default 30 days.
    pub retention_ms: i64,
    /// At most this many events are kept. Default 50,000.
    pub max_events: u64,
    /// How long a write waits for another writer's lock. Default 30 s.
    pub busy_timeout_ms: u32,
    /// How long a due wake waits for more to coalesce. Default 250 ms.
    pub wake_coalesce_ms: u32,
    /// How often the store looks for cursor changes made by other processes (semantics.md#processes). Default
    /// 100 ms; 0 turns the cross-process delivery off.
    pub sync_interval_ms: u32,
    /// The event kinds that notify watchers (semantics.md#api-options). Default the three
    /// notify kinds.
    pub notify_kinds: NotifyKinds,
    /// A spawn's seed makes an existing cursor `explicit` instead of keeping its provenance
    /// (semantics.md#cursors-scope). Default false.
    pub seed_resets_provenance: bool,
    /// Every notice entering the queue is also kept for the host's listener
    /// (semantics.md#notices-listener). Default false.
    pub notice_outbox: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            retention_ms: 30 * 24 * 60 * 60 * 1000,
            max_events: 50_000,
            busy_timeout_ms: 30_000,
            wake_coalesce_ms: 250,
            sync_interval_ms: 100,
            notify_kinds: NotifyKinds::default(),
            seed_resets_provenance: false,
            notice_outbox: false,
        }
    }
}

/// The largest accepted `retentionMs` (about 285 years) and `wakeCoalesceMs` (one minute).
pub const MAX_RETENTION_MS: i64 = 9_000_000_000_000;
/// See [`MAX_RETENTION_MS`].
pub const MAX_WAKE_COALESCE_MS: u32 = 60_000;
/// The largest accepted `syncIntervalMs` (one minute).
pub const MAX_SYNC_INTERVAL_MS: u32 = 60_000;

impl Options {
    /// Refuses values outside the documented ranges: `retentionMs` in [1, 9e12],
    /// `maxEvents` in [1, 2^53 - 1], `busyTimeoutMs` in [0, 2^31 - 1], `wakeCoalesceMs` and
    /// `syncIntervalMs` in [0, 60000].
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_RETENTION_MS).contains(&self.retention_ms) {
            return Err(Error::invalid(
                "retentionMs must be an integer in [1, 9e12]",
            ));
        }
        if !(1..=log::MAX_SAFE_INTEGER as u64).contains(&self.max_events) {
            return Err(Error::invalid("maxEvents must be a positive safe integer"));
        }
        if self.busy_timeout_ms > i32::MAX as u32 {
            return Err(Error::invalid(
                "busyTimeoutMs must be an integer in [0, 2^31 - 1]",
            ));
        }
        if self.wake_coalesce_ms > MAX_WAKE_COALESCE_MS {
            return Err(Error::invalid(
                "wakeCoalesceMs must be an integer in [0, 60000]",
            ));
        }
        if self.sync_interval_ms > MAX_SYNC_INTERVAL_MS {
            return Err(Error::invalid(
                "syncIntervalMs must be an integer in [0, 60000]",
            ));
        }
        Ok(())
    }
}
