//! The lease table in SQLite (see [`crate::lease`] for the rules): created with the shared
//! tables of a file the store makes, read by primary key, renewed in one write transaction.

use rusqlite::{params, Connection};

use crate::error::Result;
use crate::lease::{Lease, LeaseRows, Renewal};
use crate::sqlite::conn::ConnGuard;
use crate::sqlite::tx::Tx;

const CREATE: &str = "CREATE TABLE IF NOT EXISTS session_awareness_served (
  watcher_key TEXT NOT NULL,
  instance_id TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (watcher_key, instance_id)
) STRICT;";

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

impl LeaseRows for Connection {
    fn leases_of(&self, watcher: &str) -> Result<Vec<Lease>> {
        let mut stmt = self.prepare_cached(
            "SELECT instance_id, expires_at FROM session_awareness_served WHERE watcher_key = ?1",
        )?;
        let rows = stmt.query_map([watcher], |r| {
            Ok(Lease {
                instance: r.get(0)?,
                expires_at: r.get(1)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn renew(&self, r: &Renewal<'_>) -> Result<()> {
        let tx = Tx::immediate(self)?;
        if !r.serving.is_empty() {
            let keys = serde_json::to_string(r.serving).unwrap_or_else(|_| "[]".into());
            // `WHERE true` tells the parser the ON CONFLICT belongs to the INSERT.
            tx.prepare_cached(
                "INSERT INTO session_awareness_served (watcher_key, instance_id, expires_at) \
                 SELECT value, ?2, ?3 FROM json_each(?1) WHERE true \
                 ON CONFLICT (watcher_key, instance_id) DO UPDATE SET expires_at = excluded.expires_at",
            )?
            .execute(params![keys, r.instance, r.expires_at])?;
        }
        if !r.released.is_empty() {
            let keys = serde_json::to_string(r.released).unwrap_or_else(|_| "[]".into());
            tx.prepare_cached(
                "DELETE FROM session_awareness_served WHERE instance_id = ?2 \
                 AND watcher_key IN (SELECT value FROM json_each(?1))",
            )?
            .execute(params![keys, r.instance])?;
        }
        tx.prepare_cached("DELETE FROM session_awareness_served WHERE expires_at < ?1")?
            .execute([r.stale_before])?;
        tx.commit()
    }

    fn release_all(&self, instance: &str) -> Result<()> {
        self.prepare_cached("DELETE FROM session_awareness_served WHERE instance_id = ?1")?
            .execute([instance])?;
        Ok(())
    }
}

/// The store's connection under its lock reads the leases as the connection does.
impl LeaseRows for ConnGuard<'_> {
    fn leases_of(&self, watcher: &str) -> Result<Vec<Lease>> {
        (**self).leases_of(watcher)
    }

    fn renew(&self, r: &Renewal<'_>) -> Result<()> {
        (**self).renew(r)
    }

    fn release_all(&self, instance: &str) -> Result<()> {
        (**self).release_all(instance)
    }
}
