//! The guarded connection: the store's one SQLite connection behind a lock, its open/closed
//! state, and the check for another SQLite library of this process on the file that runs
//! before every statement. A closed store answers `Error::Closed` from every path here.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{MappedMutexGuard, Mutex, MutexGuard};
/// The SQLite connection, for the façade's SQLite branch (`Store::with_conn`).
pub(crate) use rusqlite::Connection;

use crate::error::{Error, Result};
use crate::sqlite::exclusive::FileGuard;
use crate::sqlite::read_cache::{ChangeCount, ReadCache};

/// The store's connection, locked: derefs to the open [`Connection`].
pub(crate) type ConnGuard<'a> = MappedMutexGuard<'a, Connection>;

/// The store's connection and its state.
pub(crate) struct Db {
    conn: Mutex<Option<Connection>>,
    /// Callers blocked waiting for `conn`.
    waiters: AtomicUsize,
    closed: AtomicBool,
    /// Another library of this process on the file (None in memory).
    guard: Option<Arc<FileGuard>>,
    /// What the reads keep in memory; locked only while `conn` is.
    cache: Mutex<ReadCache>,
    /// The event and head rows `conn` changed.
    changes: ChangeCount,
}

impl Db {
    /// Wraps an open connection and the file's guard, with a read cache of `read_budget`
    /// bytes at most (semantics.md#reading-memory).
    pub(crate) fn new(
        mut conn: Connection,
        guard: Option<Arc<FileGuard>>,
        read_budget: usize,
    ) -> Result<Self> {
        let changes = ChangeCount::default();
        changes.install(&mut conn)?;
        Ok(Db {
            conn: Mutex::new(Some(conn)),
            waiters: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            guard,
            cache: Mutex::new(ReadCache::new(read_budget)),
            changes,
        })
    }

    /// The read cache. Lock it only while holding the connection's lock, so what it holds and
    /// the connection's state move together.
    pub(crate) fn read_cache(&self) -> MutexGuard<'_, ReadCache> {
        self.cache.lock()
    }

    /// The bytes the read cache holds now, without the connection's lock.
    pub(crate) fn read_cache_bytes(&self) -> usize {
        self.cache.lock().bytes()
    }

    /// The event and head rows the connection has changed so far (see `read_cache.rs`).
    pub(crate) fn changes(&self) -> u64 {
        self.changes.get()
    }

    /// True once [`Db::close`] ran.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// `Error::Closed` once closed.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Marks the store closed. True for the call that closed it, false when already closed.
    pub(crate) fn mark_closed(&self) -> bool {
        !self.closed.swap(true, Ordering::AcqRel)
    }

    /// Takes the connection out (closing it when dropped); later locks fail with `Closed`.
    pub(crate) fn take(&self) -> Option<Connection> {
        self.conn.lock().take()
    }

    /// Fails with `Error::FileShared` once another library of this process opened the file.
    pub(crate) fn check_guard(&self) -> Result<()> {
        match &self.guard {
            Some(g) => g.check(),
            None => Ok(()),
        }
    }

    /// Locks the connection, or fails with `Error::Closed` (closed) or `Error::FileShared`.
    pub(crate) fn lock(&self) -> Result<ConnGuard<'_>> {
        let guard = match self.conn.try_lock() {
            Some(g) => g,
            None => {
                // Counted, so background work between two transactions lets this caller in
                // first (see `yield_to_waiters`).
                self.waiters.fetch_add(1, Ordering::AcqRel);
                let g = self.conn.lock();
                self.waiters.fetch_sub(1, Ordering::AcqRel);
                g
            }
        };
        let conn = MutexGuard::try_map(guard, Option::as_mut).map_err(|_| Error::Closed)?;
        // Every call that touches the database comes here, right before its SQL: a handle of
        // another library that appeared since the last call is found before the write.
        self.check_guard()?;
        Ok(conn)
    }

    /// The connection if it is free right now: `None` when another caller holds it, `Some(None)`
    /// when closed. Runs no guard check.
    pub(crate) fn try_lock(&self) -> Option<Option<ConnGuard<'_>>> {
        let guard = self.conn.try_lock()?;
        Some(MutexGuard::try_map(guard, Option::as_mut).ok())
    }

    /// Runs `f` with the connection, or fails as [`Db::lock`] does.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        let mut conn = self.lock()?;
        f(&mut conn)
    }

    /// Called by background work between two of its transactions: a caller waiting for the
    /// connection (the JS thread) takes it before the next one. Without this the background
    /// thread, already running, usually locks again before the waiter (spinning or yielding
    /// on a busy machine) notices the connection was free, and the waiter sits through
    /// several batches. Bounded, so a steady stream of callers cannot stall the work.
    pub(crate) fn yield_to_waiters(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(20);
        while self.waiters.load(Ordering::Acquire) > 0 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::schema;

    #[test]
    fn a_closed_connection_answers_closed() -> Result<()> {
        let db = Db::new(schema::open(":memory:", 0)?, None, 0)?;
        assert!(db.with(|c| Ok(c.is_autocommit()))?);
        assert!(matches!(db.try_lock(), Some(Some(_))));
        assert!(db.mark_closed());
        assert!(!db.mark_closed());
        assert_eq!(db.check_open().unwrap_err().code(), "ERR_CLOSED");
        assert!(db.take().is_some());
        assert_eq!(db.lock().map(drop).unwrap_err().code(), "ERR_CLOSED");
        assert!(matches!(db.try_lock(), Some(None)));
        Ok(())
    }
}
