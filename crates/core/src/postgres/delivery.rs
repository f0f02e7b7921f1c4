//! `drain`, `acknowledge` and `sweep` on PostgreSQL (semantics.md#cursors-acknowledge,
//! semantics.md#cursors-sweep), over the same in-memory [`Delivery`] as SQLite's.
//!
//! Hand-out is exactly once across hosts: a drain takes the watcher's notices from memory and
//! acknowledges them in one transaction that locks their cursor rows (in target order) and
//! writes each only where the row still holds the positions it was read at. A notice whose
//! row another host consumed meanwhile (its L is no longer the one the notice names, or
//! nothing is pending) is not handed out, and this host drops its copy. A deadlock or
//! serialization failure between hosts is retried (three tries in all).

use tokio_postgres::Client;

use super::catchup::Notices;
use super::cursors::{self, Cached, Move};
use crate::cursors::Pending;
use crate::delivery::Delivery;
use crate::error::Result;
use crate::metrics::Count;
use crate::queue::{Notice, Queued};

const TRIES: usize = 3;

/// Runs the transaction `$tx` (an expression of a future, made anew for each try) between
/// [`begin`] and [`end`], again while it fails with a deadlock or a serialization failure,
/// [`TRIES`] times in all; the outcome of the last try. A failed `BEGIN` returns its error at
/// once.
macro_rules! retried {
    ($client:expr, $tx:expr) => {{
        let mut outcome = Err(crate::error::Error::Closed);
        for _ in 0..TRIES {
            // A BEGIN that fails (the connection is gone) fails the call like any statement,
            // so the caller's failure path runs (a drain puts the notices it took back).
            outcome = match begin($client).await {
                Ok(()) => {
                    let r = $tx.await;
                    end($client, r).await
                }
                Err(e) => Err(e),
            };
            match &outcome {
                Err(e) if cursors::is_retryable(e) => continue,
                _ => break,
            }
        }
        outcome
    }};
}

/// Runs `BEGIN`; the caller ends it with [`end`].
pub(crate) async fn begin(c: &Client) -> Result<()> {
    c.batch_execute("BEGIN").await.map_err(cursors::db)
}

/// Commits when `r` is `Ok`, else rolls back (a failed rollback only means the connection
/// is gone, and the server rolls back itself).
pub(crate) async fn end<T>(c: &Client, r: Result<T>) -> Result<T> {
    match r {
        Ok(v) => {
            c.batch_execute("COMMIT").await.map_err(cursors::db)?;
            Ok(v)
        }
        Err(e) => {
            let _ = c.batch_execute("ROLLBACK").await;
            Err(e)
        }
    }
}

/// Decides the drain of `queued` against the locked rows and writes it: the moves written.
async fn drain_tx(
    c: &mut Cached<'_>,
    watcher: &str,
    queued: &[Queued],
    now: i64,
) -> Result<(Vec<Move>, Vec<cursors::Row3>)> {
    let targets: Vec<String> = queued.iter().map(|q| q.target.to_string()).collect();
    let rows = cursors::lock_rows(c, watcher, &targets).await?;
    let mut moves = Vec::new();
    for q in queued {
        let Some(row) = rows.iter().find(|r| *r.target == *q.target) else {
            continue;
        };
        // The notice names L: a row whose L moved was consumed on another host.
        if row.at.last_seen != q.changes_since {
            continue;
        }
        moves.extend(acknowledged(row, None));
    }
    let moves = write(c, watcher, moves, now).await?;
    Ok((moves, rows))
}

/// The move acknowledging `row` (read up to `through` when given), if it has anything pending.
fn acknowledged(row: &cursors::Row3, through: Option<i64>) -> Option<Move> {
    let to = row.at.after_acknowledge(through)?;
    Some(Move {
        target: row.target.clone(),
        from: row.at,
        to,
    })
}

/// Writes `moves` (each only where its row still holds the positions it was read at) and
/// returns those written.
async fn write(
    c: &mut Cached<'_>,
    watcher: &str,
    mut moves: Vec<Move>,
    now: i64,
) -> Result<Vec<Move>> {
    let written = cursors::write_moves(c, watcher, &moves, now).await?;
    moves.retain(|m| written.contains(&m.target));
    Ok(moves)
}

/// After a drain or an acknowledge of `watcher`: queues the notices of the cursors it
/// `reopened`, withdraws the watcher's scheduled wake when nothing is left queued, releases
/// the sync lock (`guard`) before waking, and tells the other hosts when it `consumed` any.
async fn reopen(
    c: &mut Cached<'_>,
    notices: &Notices,
    delivery: &Delivery,
    watcher: &str,
    reopened: &[Pending],
    guard: tokio::sync::MutexGuard<'_, ()>,
    consumed: bool,
) {
    delivery
        .metrics
        .add(Count::OpenedReopen, reopened.len() as u64);
    let wakes = delivery.enqueue(reopened);
    delivery.withdraw_if_idle(watcher);
    drop(guard);
    delivery.wake_all(wakes);
    if consumed {
        notices.consumed(c, watcher).await;
    }
}

/// Hands out `watcher`'s queued notices, acknowledged (semantics.md#cursors-acknowledge):
/// with nothing queued it runs no SQL. A watcher served since the last catch-up first has its
/// pending cursors read. On failure the notices taken stay queued; a drain that leaves the
/// watcher nothing queued withdraws its scheduled wake.
pub(crate) async fn drain(
    c: &mut Cached<'_>,
    notices: &Notices,
    delivery: &Delivery,
    watcher: &str,
    now: i64,
) -> Result<Vec<Notice>> {
    notices.read_fresh(c, watcher).await?;
    if !delivery.queue().has_any(watcher) {
        return Ok(Vec::new());
    }
    let st = notices.state();
    let guard = st.sync_lock().await;
    let queued = delivery.queue().take(watcher);
    let outcome = retried!(c.client, drain_tx(c, watcher, &queued, now));
    let (moves, rows) = match outcome {
        Ok(v) => v,
        Err(e) => {
            let mut q = delivery.queue();
            for n in queued {
                q.push(watcher, &n.target, n.changes_since, n.scope);
            }
            return Err(e);
        }
    };
    let mut out = Vec::with_capacity(moves.len());
    let mut reopened = Vec::new();
    for m in &moves {
        let row = rows
            .iter()
            .find(|r| r.target == m.target)
            .expect("a moved row was read");
        out.push(Notice::new(
            watcher,
            &m.target,
            m.from.last_seen,
            row.scope.as_deref(),
        ));
        if m.to.is_pending() {
            reopened.push(cursors::pending(watcher, row, m.to));
        }
    }
    delivery.metrics.add(Count::Delivered, out.len() as u64);
    reopen(
        c,
        notices,
        delivery,
        watcher,
        &reopened,
        guard,
        !out.is_empty(),
    )
    .await;
    Ok(out)
}

async fn acknowledge_tx(
    c: &mut Cached<'_>,
    watcher: &str,
    targets: &[String],
    scope: Option<&str>,
    through: Option<i64>,
    now: i64,
) -> Result<(Vec<Move>, Vec<cursors::Row3>)> {
    let rows = cursors::lock_rows(c, watcher, targets).await?;
    let mut moves = Vec::new();
    for row in &rows {
        if scope.is_some_and(|s| row.scope.as_deref() != Some(s)) {
            continue;
        }
        moves.extend(acknowledged(row, through));
    }
    let moves = write(c, watcher, moves, now).await?;
    Ok((moves, rows))
}

/// Acknowledges `watcher`'s pending notices on `targets` (distinct, checked), only those of
/// cursors bound to `scope` when it is given, read up to `through` when it is given
/// (semantics.md#cursors-acknowledge). Returns how many it acknowledged.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn acknowledge(
    c: &mut Cached<'_>,
    notices: &Notices,
    delivery: &Delivery,
    watcher: &str,
    targets: &[&str],
    scope: Option<&str>,
    through: Option<i64>,
    now: i64,
) -> Result<u64> {
    let st = notices.state();
    let targets: Vec<String> = targets.iter().map(|t| (*t).to_owned()).collect();
    let guard = st.sync_lock().await;
    let (moves, rows) = retried!(
        c.client,
        acknowledge_tx(c, watcher, &targets, scope, through, now)
    )?;
    let mut reopened: Vec<Pending> = Vec::new();
    {
        let mut q = delivery.queue();
        for m in &moves {
            q.remove(watcher, &m.target);
            if m.to.is_pending() {
                let row = rows
                    .iter()
                    .find(|r| r.target == m.target)
                    .expect("a moved row was read");
                reopened.push(cursors::pending(watcher, row, m.to));
            }
        }
    }
    let count = moves.len() as u64;
    delivery.metrics.add(Count::Acknowledged, count);
    reopen(c, notices, delivery, watcher, &reopened, guard, count > 0).await;
    Ok(count)
}

/// The sweep's re-freeze (semantics.md#cursors-sweep) of the cursors of `only` (every
/// watcher when `None`), in one transaction; the notices are queued in the calling store
/// whoever serves the watcher (the host's explicit start-up call), and their wakes scheduled.
/// Returns the pending cursors, for the count after the prune.
pub(crate) async fn refreeze(
    c: &mut Cached<'_>,
    delivery: &Delivery,
    only: Option<&[String]>,
) -> Result<Vec<Pending>> {
    let pending = retried!(c.client, cursors::refreeze(c, only))?;
    let wakes = delivery.enqueue(&pending);
    delivery.wake_all(wakes);
    Ok(pending)
}
