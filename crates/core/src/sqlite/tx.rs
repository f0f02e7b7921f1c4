//! Transactions through cached statements. rusqlite's `Transaction` runs `BEGIN`, `COMMIT`
//! and `ROLLBACK` through `execute_batch`, which parses the SQL again every time: two parses
//! per `record`. These statements are prepared once per connection.

use std::ops::Deref;

use rusqlite::Connection;

use crate::error::Result;

/// An open transaction; rolled back when dropped without [`Tx::commit`].
pub struct Tx<'c> {
    conn: &'c Connection,
    open: bool,
}

impl<'c> Tx<'c> {
    /// `BEGIN IMMEDIATE`: the write lock taken up front (semantics.md#storage).
    pub fn immediate(conn: &'c Connection) -> Result<Self> {
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(Tx { conn, open: true })
    }

    /// `BEGIN`: one consistent snapshot for several reads.
    pub fn read(conn: &'c Connection) -> Result<Self> {
        conn.prepare_cached("BEGIN")?.execute([])?;
        Ok(Tx { conn, open: true })
    }

    /// Commits. On failure the transaction is rolled back.
    pub fn commit(mut self) -> Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        self.open = false;
        Ok(())
    }

    /// Rolls back, unless SQLite already did (an error such as `SQLITE_FULL` may end the
    /// transaction by itself).
    pub fn rollback(mut self) -> Result<()> {
        self.open = false;
        if !self.conn.is_autocommit() {
            self.conn.prepare_cached("ROLLBACK")?.execute([])?;
        }
        Ok(())
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open && !self.conn.is_autocommit() {
            // Nothing to report to: the error that dropped the transaction is on its way.
            let _ = self
                .conn
                .prepare_cached("ROLLBACK")
                .and_then(|mut s| s.execute([]));
        }
    }
}

impl Deref for Tx<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::schema;

    fn count(conn: &Connection) -> Result<i64> {
        Ok(
            conn.query_row("SELECT count(*) FROM session_watch_cursors", [], |r| {
                r.get(0)
            })?,
        )
    }

    #[test]
    fn commit_keeps_and_drop_rolls_back() -> Result<()> {
        let conn = schema::open(":memory:", 0)?;
        let insert = "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, \
                      updated_at) VALUES (?1, 't', 0)";
        let tx = Tx::immediate(&conn)?;
        tx.execute(insert, ["a"])?;
        tx.commit()?;
        {
            let tx = Tx::immediate(&conn)?;
            tx.execute(insert, ["b"])?;
        }
        assert!(conn.is_autocommit());
        assert_eq!(count(&conn)?, 1);
        let read = Tx::read(&conn)?;
        assert_eq!(count(&read)?, 1);
        read.commit()?;
        // The cached statements run again and again.
        for w in ["c", "d"] {
            let tx = Tx::immediate(&conn)?;
            tx.execute(insert, [w])?;
            tx.commit()?;
        }
        assert_eq!(count(&conn)?, 3);
        Ok(())
    }
}
