//! Retention (semantics.md#retention): events older than `retentionMs`, then all but the newest `maxEvents`,
//! deleted in bounded batches; each batch raises the pruned watermarks before it deletes.
//! The rules (which events go, in which order, how many per batch) are here; a store provides
//! the row operations ([`PruneRows`]; SQLite's are in `sqlite/prune.rs`).

use crate::error::Result;

/// An hour: a record prunes when this long has passed since the last prune (semantics.md#recording).
pub(crate) const AUTO_PRUNE_INTERVAL_MS: i64 = 60 * 60 * 1000;

/// The outcome of a sweep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Cursors whose notice is pending after the sweep.
    pub notices: u64,
    /// The prune that followed.
    pub prune: PruneReport,
}

/// Rows the automatic (background) prune deletes per write transaction. A batch touches an
/// index page of nearly every session it deletes from, so its cost grows with its size: at
/// this size one takes 3–5 ms, and the JS thread, which waits for at most one batch, never
/// stalls long while a large backlog is pruned.
pub const BATCH: usize = 250;
/// Rows per write transaction of a prune the caller waits for (`prune`, `sweep`): fewer,
/// larger batches rewrite each index page fewer times.
pub const SYNC_BATCH: usize = 10_000;

/// What a prune removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Events deleted.
    pub events_deleted: u64,
    /// Cursors expired.
    pub cursors_deleted: u64,
}

impl std::ops::AddAssign for PruneReport {
    fn add_assign(&mut self, o: Self) {
        self.events_deleted += o.events_deleted;
        self.cursors_deleted += o.cursors_deleted;
    }
}

/// The row operations of a prune, inside the caller's write transaction. Each that deletes
/// events first raises the pruned watermark of every session it takes events from to the
/// largest sequence the session loses (only a head the session already has, and only by a
/// sequence within it): a reader that sees the rows gone also sees the gap.
pub(crate) trait PruneRows {
    /// The sequences of the oldest `limit` events with `occurred_at < age_cutoff`, by
    /// `occurred_at`, then sequence. A row without an integer `occurred_at` is never one.
    fn aged(&self, age_cutoff: i64, limit: usize) -> Result<Vec<i64>>;
    /// Deletes `victims`, what [`PruneRows::aged`] just returned for the same arguments.
    fn delete_aged(&self, age_cutoff: i64, limit: usize, victims: &[i64]) -> Result<()>;
    /// How many events the log holds.
    fn event_count(&self) -> Result<u64>;
    /// The sequence of the `n`-th event (n >= 1) in sequence order.
    fn nth_sequence(&self, n: u64) -> Result<i64>;
    /// Deletes every event up to sequence `last`.
    fn delete_through(&self, last: i64) -> Result<()>;
}

/// Deletes at most `limit` events that retention no longer keeps, oldest first: by age
/// (`occurred_at < age_cutoff`) while any remain, then by the row cap (`max_events`).
/// Runs inside the caller's write transaction. Returns the number deleted; 0 means done.
///
/// Each batch costs what it deletes, not what the table holds: the cap pass counts the rows
/// and takes the oldest ones past the cap from the start of the table, instead of walking
/// `max_events` rows from its end.
///
/// Only sequences are read into memory, so no stored value can fail the prune: a row with a
/// key that is not text, or not valid UTF-8, goes like any other (semantics.md#storage). A row without an
/// integer `occurred_at` never ages out; the row cap takes it in turn.
pub(crate) fn events_batch(
    rows: &dyn PruneRows,
    age_cutoff: i64,
    max_events: u64,
    limit: usize,
) -> Result<usize> {
    let victims = rows.aged(age_cutoff, limit)?;
    if !victims.is_empty() {
        rows.delete_aged(age_cutoff, limit, &victims)?;
        return Ok(victims.len());
    }
    let excess = rows.event_count()?.saturating_sub(max_events);
    if excess == 0 {
        return Ok(0);
    }
    let take = excess.min(limit as u64);
    // The victims are every row up to the `take`-th: one range raise, one range delete.
    rows.delete_through(rows.nth_sequence(take)?)?;
    Ok(take as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_add_up() {
        let mut r = PruneReport {
            events_deleted: 1,
            cursors_deleted: 2,
        };
        r += PruneReport {
            events_deleted: 3,
            cursors_deleted: 4,
        };
        assert_eq!(
            r,
            PruneReport {
                events_deleted: 4,
                cursors_deleted: 6
            }
        );
    }
}
