//! Served-watcher leases (semantics.md#processes): which processes serve which watchers,
//! seen by every process on the file. Each store names itself with an instance id and keeps
//! one row per watcher it serves in `session_awareness_served`, renewed by its poll; a row
//! whose `expires_at` has passed (its process crashed or stopped polling) no longer counts.
//! A record queues a notice it opened for a watcher this process does not serve only when no
//! live lease of another process names that watcher.
//!
//! The table is the store's own: it is created only when the store creates the shared tables
//! of a file (a file it made), never in a file whose tables another writer (OpenClaw, or this
//! store before leases existed) created; there the old rule applies (semantics.md#storage-tables).
//!
//! The rules are here: how long a lease lasts, when one is live, which rows a renewal writes
//! and which it deletes. A store provides the rows ([`LeaseRows`]; SQLite's are in
//! `sqlite/lease.rs`).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Result;

/// The shortest lease, whatever the poll interval.
const MIN_LEASE_MS: i64 = 1000;

/// One lease row: an instance serving a watcher until `expires_at` (wall clock ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lease {
    /// The instance (store) holding it.
    pub(crate) instance: String,
    /// When it stops counting.
    pub(crate) expires_at: i64,
}

/// A renewal of one instance's leases, as [`renewal`] decides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Renewal<'a> {
    /// The instance renewing.
    pub(crate) instance: &'a str,
    /// The watchers it serves: each leased (inserted or extended) until `expires_at`.
    pub(crate) serving: &'a [String],
    /// The watchers it stopped serving: their leases of this instance are dropped.
    pub(crate) released: &'a [String],
    /// The new end of the `serving` leases.
    pub(crate) expires_at: i64,
    /// Rows of any instance that expired before this go (a crashed process's).
    pub(crate) stale_before: i64,
}

/// The lease rows a store keeps: SQLite's are in `sqlite/lease.rs`.
pub(crate) trait LeaseRows {
    /// The leases on `watcher`, of every instance.
    fn leases_of(&self, watcher: &str) -> Result<Vec<Lease>>;
    /// Writes `r` in one write transaction.
    fn renew(&self, r: &Renewal<'_>) -> Result<()>;
    /// Drops every lease of `instance`.
    fn release_all(&self, instance: &str) -> Result<()>;
}

/// The lease length for a poll every `interval_ms`: max(3 × interval, 1 s).
pub(crate) fn length_ms(interval_ms: u32) -> i64 {
    (3 * i64::from(interval_ms)).max(MIN_LEASE_MS)
}

/// The renewal of `instance`'s leases at `now` for leases of `length_ms`: `serving` leased
/// until a lease length from now, `released` dropped, and the rows that expired a lease
/// length ago deleted.
pub(crate) fn renewal<'a>(
    instance: &'a str,
    serving: &'a [String],
    released: &'a [String],
    now: i64,
    length_ms: i64,
) -> Renewal<'a> {
    Renewal {
        instance,
        serving,
        released,
        expires_at: now + length_ms,
        stale_before: now - length_ms,
    }
}

/// True when a lease other than `instance`'s is live at `now` (expires after it).
pub(crate) fn live_elsewhere(leases: &[Lease], instance: &str, now: i64) -> bool {
    leases
        .iter()
        .any(|l| l.instance != instance && l.expires_at > now)
}

/// True when another instance holds a live lease on `watcher`.
pub(crate) fn served_elsewhere(
    rows: &dyn LeaseRows,
    watcher: &str,
    instance: &str,
    now: i64,
) -> Result<bool> {
    Ok(live_elsewhere(&rows.leases_of(watcher)?, instance, now))
}

/// A name for this store, unique among the stores of every process on the file.
pub(crate) fn instance_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{}-{:x}-{}",
        std::process::id(),
        nanos,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The wall clock leases are written and compared in: shared by the processes of one host,
/// never the store's own clock (which a host may move).
pub(crate) fn now() -> i64 {
    crate::hooks::system_now()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(instance: &str, expires_at: i64) -> Lease {
        Lease {
            instance: instance.into(),
            expires_at,
        }
    }

    #[test]
    fn only_another_instance_s_unexpired_lease_counts() {
        let rows = [lease("me", 500), lease("other", 100)];
        assert!(!live_elsewhere(&rows, "me", 100));
        assert!(live_elsewhere(&rows, "me", 99));
        assert!(!live_elsewhere(&rows[..1], "me", 0));
        assert!(live_elsewhere(&rows[..1], "other", 0));
        assert!(!live_elsewhere(&[], "me", 0));
    }

    #[test]
    fn a_renewal_leases_one_length_ahead_and_drops_one_length_behind() {
        let r = renewal("me", &[], &[], 10_000, 3_000);
        assert_eq!((r.expires_at, r.stale_before), (13_000, 7_000));
        assert_eq!((length_ms(100), length_ms(500)), (1_000, 1_500));
    }
}
