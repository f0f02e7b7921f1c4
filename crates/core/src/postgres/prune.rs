//! Retention on PostgreSQL (semantics.md#retention): events older than `retentionMs`, then
//! all but the newest `maxEvents` over the whole database (every host's), each batch raising
//! its sessions' pruned watermarks in the transaction that deletes; then the cursors not
//! updated within `retentionMs`, with their queued notices.
//!
//! **Decision:** one prune at a time per schema across hosts (a transaction-level advisory
//! lock per batch), so two hosts pruning at once never both count the table and cut past the
//! cap; the heads a batch raises are locked in key order, the order every record group locks
//! them in, so a prune and a group cannot deadlock.

use std::sync::atomic::{AtomicBool, Ordering};

use super::cursors::{db, Cached};
use crate::delivery::Delivery;
use crate::error::Result;
use crate::metrics::Count;
use crate::prune::PruneReport;
use crate::prune::AUTO_PRUNE_INTERVAL_MS;
use parking_lot::Mutex;

/// The automatic prune's hour (semantics.md#recording-auto-prune), as on SQLite: a record
/// prunes in the background when more than an hour passed since the last prune of this
/// store, and any prune restarts the hour.
#[derive(Default)]
pub(crate) struct Auto {
    // When the last prune ran, and a clock reading for one more run asked for while one ran.
    state: Mutex<(Option<i64>, Option<i64>)>,
    running: AtomicBool,
}

impl Auto {
    /// A prune runs now (`prune`, `sweep`): the hour restarts.
    pub(crate) fn ran(&self, now: i64) {
        self.state.lock().0 = Some(now);
    }

    /// True when a record at `now` starts a background prune; false when none is due, or
    /// one runs already (it runs once more with `now` when it is done).
    pub(crate) fn due(&self, now: i64) -> bool {
        let mut st = self.state.lock();
        if st.0.is_some_and(|t| now - t <= AUTO_PRUNE_INTERVAL_MS) {
            return false;
        }
        st.0 = Some(now);
        if self.running.load(Ordering::Acquire) {
            st.1 = Some(now);
            return false;
        }
        self.running.store(true, Ordering::Release);
        true
    }

    /// The background prune is done with its run: the clock reading of one more, if asked
    /// for (and not `closed`); otherwise it stops.
    pub(crate) fn next(&self, closed: bool) -> Option<i64> {
        let mut st = self.state.lock();
        match st.1.take() {
            Some(now) if !closed => Some(now),
            _ => {
                self.running.store(false, Ordering::Release);
                None
            }
        }
    }

    /// True while a background prune runs.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }
}

/// Events per batch of a prune (one transaction each).
pub(crate) const BATCH: i64 = 10_000;
/// Cursor rows expired per transaction.
pub(crate) const EXPIRE_CHUNK: i64 = 5_000;

const LOCK: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))";
const LOCK_HEADS: &str = "SELECT h.session_key, h.agent_id FROM __SCHEMA__.session_state_heads h \
     WHERE (h.session_key, h.agent_id) IN (SELECT DISTINCT session_key, agent_id \
     FROM __SCHEMA__.session_state_events WHERE sequence = ANY($1)) \
     ORDER BY h.session_key, h.agent_id FOR UPDATE";
const RAISE_WATERMARKS: &str = "UPDATE __SCHEMA__.session_state_heads AS h \
     SET pruned_max_sequence = GREATEST(h.pruned_max_sequence, v.lost) \
     FROM (SELECT e.session_key AS k, e.agent_id AS a, max(e.sequence) AS lost \
           FROM __SCHEMA__.session_state_events e JOIN __SCHEMA__.session_state_heads hh \
           ON hh.session_key = e.session_key AND hh.agent_id = e.agent_id \
           WHERE e.sequence = ANY($1) AND e.sequence <= hh.last_sequence \
           GROUP BY 1, 2) AS v \
     WHERE h.session_key = v.k AND h.agent_id = v.a";
const DELETE_EVENTS: &str = "DELETE FROM __SCHEMA__.session_state_events WHERE sequence = ANY($1)";
const OLDER_THAN: &str = "SELECT sequence FROM __SCHEMA__.session_state_events \
     WHERE occurred_at < $1 ORDER BY occurred_at, sequence LIMIT $2";
const COUNT: &str = "SELECT count(*) FROM __SCHEMA__.session_state_events";
const OLDEST: &str =
    "SELECT sequence FROM __SCHEMA__.session_state_events ORDER BY sequence LIMIT $1";
const EXPIRE_CURSORS: &str = "DELETE FROM __SCHEMA__.session_watch_cursors WHERE ctid = ANY(ARRAY(\
     SELECT ctid FROM __SCHEMA__.session_watch_cursors WHERE updated_at < $1 LIMIT $2)) \
     RETURNING watcher_session_key, target_session_key";

async fn lock(c: &mut Cached<'_>) -> Result<()> {
    let st = c.prepare(LOCK).await?;
    let key = format!("session-awareness prune {}", c.schema());
    c.client.execute(&st, &[&key]).await.map_err(db)?;
    Ok(())
}

/// Deletes the events with sequence in `victims` after raising the watermarks of their
/// sessions to the largest sequence each loses (within its head). Inside a transaction.
async fn delete_events(c: &mut Cached<'_>, victims: &[i64]) -> Result<u64> {
    let st = c.prepare(LOCK_HEADS).await?;
    c.client.query(&st, &[&victims]).await.map_err(db)?;
    let st = c.prepare(RAISE_WATERMARKS).await?;
    c.client.execute(&st, &[&victims]).await.map_err(db)?;
    let st = c.prepare(DELETE_EVENTS).await?;
    c.client.execute(&st, &[&victims]).await.map_err(db)
}

/// One batch: by age while any event is older than `age_cutoff`, then by the row cap.
/// Returns how many events it deleted; 0 means done.
async fn events_batch(c: &mut Cached<'_>, age_cutoff: i64, max_events: i64) -> Result<u64> {
    lock(c).await?;
    let st = c.prepare(OLDER_THAN).await?;
    let victims: Vec<i64> = c
        .client
        .query(&st, &[&age_cutoff, &BATCH])
        .await
        .map_err(db)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if !victims.is_empty() {
        return delete_events(c, &victims).await;
    }
    let st = c.prepare(COUNT).await?;
    let count: i64 = c.client.query_one(&st, &[]).await.map_err(db)?.get(0);
    let take = (count - max_events).min(BATCH);
    if take <= 0 {
        return Ok(0);
    }
    let st = c.prepare(OLDEST).await?;
    let victims: Vec<i64> = c
        .client
        .query(&st, &[&take])
        .await
        .map_err(db)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    delete_events(c, &victims).await
}

/// One batch in a transaction of its own.
async fn events_batch_tx(c: &mut Cached<'_>, age_cutoff: i64, max_events: i64) -> Result<u64> {
    c.client.batch_execute("BEGIN").await.map_err(db)?;
    match events_batch(c, age_cutoff, max_events).await {
        Ok(v) => {
            c.client.batch_execute("COMMIT").await.map_err(db)?;
            Ok(v)
        }
        Err(e) => {
            let _ = c.client.batch_execute("ROLLBACK").await;
            Err(e)
        }
    }
}

/// Prunes now (semantics.md#retention): returns what it deleted; the expired cursors' queued
/// notices leave `delivery`'s queue.
pub(crate) async fn prune(
    c: &mut Cached<'_>,
    delivery: &Delivery,
    retention_ms: i64,
    max_events: u64,
    now: i64,
) -> Result<PruneReport> {
    let age_cutoff = now.saturating_sub(retention_ms);
    let max_events = i64::try_from(max_events).unwrap_or(i64::MAX);
    let mut report = PruneReport::default();
    loop {
        let n = events_batch_tx(c, age_cutoff, max_events).await?;
        report.events_deleted += n;
        delivery.metrics.add(Count::PrunedEvents, n);
        if n == 0 {
            break;
        }
    }
    loop {
        let st = c.prepare(EXPIRE_CURSORS).await?;
        let rows = c
            .client
            .query(&st, &[&age_cutoff, &EXPIRE_CHUNK])
            .await
            .map_err(db)?;
        {
            let mut q = delivery.queue();
            for r in &rows {
                q.remove(r.get(0), r.get(1));
            }
        }
        let n = rows.len() as u64;
        report.cursors_deleted += n;
        delivery.metrics.add(Count::PrunedCursors, n);
        if n < EXPIRE_CHUNK as u64 {
            break;
        }
    }
    Ok(report)
}
