//! The guarded connection: the store's one SQLite connection behind a lock, its open/closed
//! state, and the check for another SQLite library of this process on the file that runs
//! before every statement. A closed store answers `Error::Closed` from every path here.
//!
//! While another library's handle is on the file, writes are refused and reads answered;
//! once it is gone, the next call reopens the store's connections, which takes the
//! process's locks anew (semantics.md#storage, `sqlite::exclusive`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{MappedMutexGuard, Mutex, MutexGuard};
/// The SQLite connection, for the façade's SQLite branch (`Store::with_conn`).
pub(crate) use rusqlite::Connection;

use crate::error::{Error, Result};
use crate::hooks::{ErrorSink, Task};
use crate::sqlite::changes::ChangeCount;
use crate::sqlite::exclusive::{Admit, FileGuard};
use crate::sqlite::read_cache::ReadCache;

/// Closes one of the store's other connections on the file if it is free now (never waits).
pub(crate) type Release = Box<dyn Fn() + Send + Sync>;
/// Installs on a new connection what the store's connection carries (the checkpoint hook).
pub(crate) type Rehook = Box<dyn Fn(&mut Connection) -> Result<()> + Send + Sync>;

/// How the store's connection is opened anew after a foreign handle dropped its locks.
pub(crate) struct Reopen {
    /// Opens a connection on the store's file, configured as the first (`schema::connect`
    /// with the store's path and busy timeout).
    pub(crate) connect: Box<dyn Fn() -> Result<Connection> + Send + Sync>,
    /// The store's other connections on the file.
    pub(crate) release: Vec<Release>,
    /// What the new connection gets.
    pub(crate) rehook: Rehook,
    /// Told once the locks are restored.
    pub(crate) errors: Option<Arc<dyn ErrorSink>>,
}

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
    /// How to open the connection anew once a foreign handle is gone (a file store).
    reopen: OnceLock<Reopen>,
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
            reopen: OnceLock::new(),
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

    /// Sets how the connection is opened anew (once, by the store's open).
    pub(crate) fn set_reopen(&self, reopen: Reopen) {
        let _ = self.reopen.set(reopen);
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

    /// Locks the connection for a call that may write, or fails with `Error::Closed` (closed)
    /// or `Error::FileShared` (another library of this process has the file open).
    pub(crate) fn lock(&self) -> Result<ConnGuard<'_>> {
        self.lock_for(true)
    }

    /// Locks the connection for a call that only reads: answered while another library of
    /// this process has the file open.
    pub(crate) fn read(&self) -> Result<ConnGuard<'_>> {
        self.lock_for(false)
    }

    fn lock_for(&self, write: bool) -> Result<ConnGuard<'_>> {
        let mut guard = match self.conn.try_lock() {
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
        if self.is_closed() {
            // A closing store still uses its connection (the poll releases its leases) until
            // `take` removes it; nothing is reopened once closed.
            return MutexGuard::try_map(guard, Option::as_mut).map_err(|_| Error::Closed);
        }
        // Every call that touches the database comes here, right before its SQL: a handle of
        // another library that appeared since the last call is found before the write.
        if let Some(g) = &self.guard {
            let lost = guard.is_none() && self.reopen.get().is_some();
            let reopen = lost || g.admit(write)? == Admit::Reopen;
            if reopen {
                self.reopen(&mut guard, g)?;
                if write && g.is_refused() {
                    return Err(g.check().err().unwrap_or(Error::Closed));
                }
            }
        }
        MutexGuard::try_map(guard, Option::as_mut).map_err(|_| Error::Closed)
    }

    /// Closes the store's connections on the file and opens its own anew. The locks come back
    /// only when nothing of this process's SQLite was left on the file in between; otherwise
    /// the file stays refused (the connection is open again for reads) and the next call
    /// tries again.
    fn reopen(&self, slot: &mut Option<Connection>, g: &FileGuard) -> Result<()> {
        let Some(r) = self.reopen.get() else {
            return Ok(());
        };
        for release in &r.release {
            release();
        }
        if let Some(old) = slot.take() {
            // Its view of the WAL may be of files the other library deleted: no checkpoint.
            let _ = old.set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                true,
            );
            drop(old);
        }
        let released = g.released();
        let mut conn = (r.connect)()?;
        (r.rehook)(&mut conn)?;
        // A new connection counts its data_version anew: nothing kept proves current any more.
        self.changes.install(&mut conn)?;
        self.cache.lock().reset();
        *slot = Some(conn);
        if released {
            g.restored();
            if let Some(sink) = &r.errors {
                sink.report_task(
                    Error::FileShared(format!(
                        "{}: the other handle on the file is closed; the store reopened its \
                         connections, which took this process's locks anew, and goes on \
                         (nothing it recorded was lost)",
                        g.shown()
                    )),
                    Task::FileGuard,
                );
            }
        }
        Ok(())
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

    /// Runs `f`, which only reads, with the connection, or fails as [`Db::read`] does.
    pub(crate) fn with_read<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        let mut conn = self.read()?;
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
