//! SQLite's side of notices across processes ([`crate::sqlite::sync`] holds the rules): the
//! `data_version` check on the store's own connection, and the read-only connection the poll
//! reads what moved through, one snapshot per poll.

use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction};

use crate::cursors::{self, Pending};
use crate::error::Result;
use crate::keys;
use crate::sqlite::inert;
use crate::sqlite::rows::SqliteRows;

/// How long the reader waits for a lock before it gives up until the next poll. Readers of a
/// WAL database never wait for writers; this only matters for rollback-journal files.
const READER_BUSY_MS: u64 = 50;

/// On the store's own connection: changes whenever another connection (of this process or
/// another) committed, and never for the store's own commits.
pub(crate) fn data_version(conn: &Connection) -> Result<i64> {
    Ok(conn
        .prepare_cached("PRAGMA data_version")?
        .query_row([], |r| r.get(0))?)
}

/// `data_version` and the top sequence of the store's own connection, in one snapshot.
pub(crate) fn own_view(conn: &Connection) -> Result<(i64, i64)> {
    let tx = conn.unchecked_transaction()?;
    let view = (data_version(&tx)?, top_sequence(&tx)?);
    tx.finish()?;
    Ok(view)
}

/// The largest event sequence ever handed out (0 before the first event).
fn top_sequence(conn: &Connection) -> Result<i64> {
    Ok(conn
        .prepare_cached("SELECT seq FROM sqlite_sequence WHERE name = 'session_state_events'")?
        .query_row([], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

/// The read-only connection the poll reads through, beside the store's own.
pub(crate) struct Reader {
    conn: Connection,
}

impl Reader {
    /// Opens the reader on `path`.
    pub(crate) fn open(path: &str) -> Result<Self> {
        crate::sqlite::exclusive::install();
        let conn = Connection::open_with_flags(
            crate::sqlite::schema::sqlite_name(path).as_ref(),
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_millis(READER_BUSY_MS))?;
        conn.set_prepared_statement_cache_capacity(16);
        // Every commit elsewhere empties this connection's page cache before its next read, so a
        // large one would only hold memory.
        conn.pragma_update(None, "cache_size", -256)?;
        inert::register(&conn)?;
        Ok(Reader { conn })
    }

    /// One consistent snapshot of the file, until [`Snapshot::finish`] (or drop).
    pub(crate) fn snapshot(&mut self) -> Result<Snapshot<'_>> {
        Ok(Snapshot {
            tx: self.conn.transaction()?,
        })
    }
}

/// One read transaction of the [`Reader`].
pub(crate) struct Snapshot<'c> {
    tx: Transaction<'c>,
}

impl Snapshot<'_> {
    /// The largest event sequence ever handed out (0 before the first event).
    pub(crate) fn top_sequence(&self) -> Result<i64> {
        top_sequence(&self.tx)
    }

    /// The sessions that may hold cursors (agent-qualified keys) with events in `(after, upto]`,
    /// and how many events that range holds in all (a foreign row's key is counted, not named).
    pub(crate) fn changed_sessions(&self, after: i64, upto: i64) -> Result<(Vec<String>, i64)> {
        let mut stmt = self.tx.prepare_cached(
            "SELECT session_key, COUNT(*) FROM session_state_events \
             WHERE sequence > ?1 AND sequence <= ?2 GROUP BY session_key",
        )?;
        let mut sessions = Vec::new();
        let mut count = 0;
        let mut rows = stmt.query([after, upto])?;
        while let Some(r) = rows.next()? {
            count += r.get::<_, i64>(1)?;
            if let Some(key) = inert::text(r.get_ref(0)?).filter(|k| keys::is_watchable(k)) {
                sessions.push(key.to_owned());
            }
        }
        Ok((sessions, count))
    }

    /// The pending cursors of `watcher`.
    pub(crate) fn pending_of(&self, watcher: &str) -> Result<Vec<Pending>> {
        cursors::pending_of(&mut SqliteRows::new(&self.tx), watcher)
    }

    /// The live cursors on `target`.
    pub(crate) fn on_target(&self, target: &str) -> Result<Vec<Pending>> {
        cursors::on_target(&mut SqliteRows::new(&self.tx), target)
    }

    /// Ends the snapshot.
    pub(crate) fn finish(self) -> Result<()> {
        Ok(self.tx.finish()?)
    }
}
