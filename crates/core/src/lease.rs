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

use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::{params, Connection};

use crate::error::Result;
use crate::sqlite::tx::Tx;

const CREATE: &str = "CREATE TABLE IF NOT EXISTS session_awareness_served (
  watcher_key TEXT NOT NULL,
  instance_id TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (watcher_key, instance_id)
) STRICT;";

/// The shortest lease, whatever the poll interval.
const MIN_LEASE_MS: i64 = 1000;

/// True when the file has no `session_state_events` table yet: the store is about to create
/// the shared tables, so the file is its own. Called inside the schema transaction.
pub(crate) fn before_install(conn: &Connection) -> Result<bool> {
    Ok(!exists_table(conn, "session_state_events")?)
}

/// Creates the lease table when `fresh` (see [`before_install`]), inside the caller's transaction.
pub(crate) fn install(conn: &Connection, fresh: bool) -> Result<()> {
    if fresh {
        conn.execute_batch(CREATE)?;
    }
    Ok(())
}

fn exists_table(conn: &Connection, name: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
        )?
        .query_row([name], |r| r.get(0))?)
}

/// True when the file holds the lease table.
pub(crate) fn present(conn: &Connection) -> Result<bool> {
    exists_table(conn, "session_awareness_served")
}

/// The lease length for a poll every `interval_ms`: max(3 × interval, 1 s).
pub(crate) fn length_ms(interval_ms: u32) -> i64 {
    (3 * i64::from(interval_ms)).max(MIN_LEASE_MS)
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

/// Writes this instance's leases in one write transaction: `serving` until `expires_at`,
/// `released` dropped, and the rows of any instance that expired before `stale_before`
/// deleted (a crashed process's).
pub(crate) fn renew(
    conn: &Connection,
    instance: &str,
    serving: &[String],
    released: &[String],
    expires_at: i64,
    stale_before: i64,
) -> Result<()> {
    let tx = Tx::immediate(conn)?;
    if !serving.is_empty() {
        let keys = serde_json::to_string(serving).unwrap_or_else(|_| "[]".into());
        // `WHERE true` tells the parser the ON CONFLICT belongs to the INSERT.
        tx.prepare_cached(
            "INSERT INTO session_awareness_served (watcher_key, instance_id, expires_at) \
             SELECT value, ?2, ?3 FROM json_each(?1) WHERE true \
             ON CONFLICT (watcher_key, instance_id) DO UPDATE SET expires_at = excluded.expires_at",
        )?
        .execute(params![keys, instance, expires_at])?;
    }
    if !released.is_empty() {
        let keys = serde_json::to_string(released).unwrap_or_else(|_| "[]".into());
        tx.prepare_cached(
            "DELETE FROM session_awareness_served WHERE instance_id = ?2 \
             AND watcher_key IN (SELECT value FROM json_each(?1))",
        )?
        .execute(params![keys, instance])?;
    }
    tx.prepare_cached("DELETE FROM session_awareness_served WHERE expires_at < ?1")?
        .execute([stale_before])?;
    tx.commit()
}

/// Drops every lease of this instance (the store closes).
pub(crate) fn release_all(conn: &Connection, instance: &str) -> Result<()> {
    conn.prepare_cached("DELETE FROM session_awareness_served WHERE instance_id = ?1")?
        .execute([instance])?;
    Ok(())
}

/// True when another instance holds a live lease on `watcher`.
pub(crate) fn served_elsewhere(
    conn: &Connection,
    watcher: &str,
    instance: &str,
    now: i64,
) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "SELECT 1 FROM session_awareness_served WHERE watcher_key = ?1 \
             AND instance_id != ?2 AND expires_at > ?3 LIMIT 1",
        )?
        .exists(params![watcher, instance, now])?)
}
