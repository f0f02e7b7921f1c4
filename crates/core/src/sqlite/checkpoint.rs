//! WAL checkpoints off the hot path. The store's connection runs with `wal_autocheckpoint=0`;
//! each time a commit has added [`CHECKPOINT_PAGES`] frames to the WAL since the last
//! checkpoint was scheduled, a PASSIVE checkpoint runs on a blocking thread of the shared
//! runtime, through a connection of its own.
//!
//! A checkpoint only copies committed pages from the WAL into the database file. A commit is
//! safe from a process crash once its WAL frames are written, which happens before `record`
//! returns, whoever checkpoints and whenever: moving the checkpoint changes no durability.
//! With SQLite's automatic checkpoint, the commit that crossed the threshold copied the pages
//! and ran two `fsync`s before it returned, so every hundred-odd records one waited for the
//! disk.
//!
//! A checkpoint that runs beside a writer cannot copy the frames written meanwhile, so SQLite
//! can only start the WAL over once writes pause long enough for one to catch up (a gateway's
//! writes always do). Under writes that never pause, the WAL would grow without end: at
//! [`WAL_LIMIT_PAGES`] the committing call checkpoints itself, as SQLite's own hook does.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, Result};
use crate::hooks::ErrorSink;
use crate::runtime;
use crate::sqlite::conn::{Rehook, Release};
use crate::sqlite::exclusive::FileGuard;

/// New WAL frames after which a background checkpoint is due: SQLite's own default for its
/// automatic one.
pub const CHECKPOINT_PAGES: c_int = 1000;
/// WAL frames (about 40 MiB at 4 KiB pages) at which a commit checkpoints in the foreground.
pub const WAL_LIMIT_PAGES: c_int = 10_000;
/// How many times, and how long apart, a background checkpoint tries again to copy what
/// writes added while it ran or after it.
const CHASE_ROUNDS: usize = 100;
const CHASE_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);

/// The background checkpointer of one connection.
pub struct Checkpointer {
    inner: Arc<Inner>,
}

struct Inner {
    path: String,
    busy_timeout_ms: u32,
    /// A checkpoint is scheduled or running.
    due: AtomicBool,
    /// Frames in the WAL after the last commit.
    frames: AtomicI32,
    closed: AtomicBool,
    /// Its own connection, opened by the first checkpoint.
    conn: Mutex<Option<Connection>>,
    errors: Option<Arc<dyn ErrorSink>>,
    /// The store's guard: no checkpoint while another library of this process has the file.
    guard: Option<Arc<FileGuard>>,
}

impl Checkpointer {
    /// Moves the checkpoints of `conn` to the background. `None` (and nothing changed) when
    /// the database has no WAL: in memory, or a file system where WAL could not work.
    /// Failed background checkpoints are reported to `errors`.
    pub fn install(
        conn: &mut Connection,
        busy_timeout_ms: u32,
        errors: Option<Arc<dyn ErrorSink>>,
        guard: Option<Arc<FileGuard>>,
    ) -> Result<Option<Self>> {
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        let path = conn.path().filter(|p| !p.is_empty()).map(str::to_owned);
        let (true, Some(path)) = (mode.eq_ignore_ascii_case("wal"), path) else {
            return Ok(None);
        };
        let inner = Arc::new(Inner {
            path,
            busy_timeout_ms,
            due: AtomicBool::new(false),
            frames: AtomicI32::new(0),
            closed: AtomicBool::new(false),
            conn: Mutex::new(None),
            errors,
            guard,
        });
        hook(&inner, conn)?;
        Ok(Some(Checkpointer { inner }))
    }

    /// Installs the hook on a connection the store opened anew (`Db`'s reopen): the
    /// checkpoints of that connection stay with this checkpointer.
    pub(crate) fn rehook(&self) -> Rehook {
        let inner = Arc::downgrade(&self.inner);
        Box::new(move |conn| match inner.upgrade() {
            Some(inner) => hook(&inner, conn),
            None => Ok(()),
        })
    }

    /// Closes this checkpointer's connection if no checkpoint holds it now (never waits); the
    /// next checkpoint opens one again.
    pub(crate) fn release(&self) -> Release {
        let inner = Arc::downgrade(&self.inner);
        Box::new(move || {
            if let Some(inner) = inner.upgrade() {
                if let Some(mut conn) = inner.conn.try_lock() {
                    conn.take();
                }
            }
        })
    }

    /// Frames in the WAL after the last commit: how far it has run since it last started over.
    pub fn frames(&self) -> i32 {
        self.inner.frames.load(Ordering::Acquire)
    }

    /// Checkpoints on the calling thread when the WAL holds [`CHECKPOINT_PAGES`] frames or
    /// more. For background work that writes many transactions back to back (the automatic
    /// prune): checkpointing between them, with no writer running, lets the checkpoint copy
    /// everything, so the WAL starts over instead of growing to [`WAL_LIMIT_PAGES`] (where a
    /// commit, holding the store, would have to checkpoint).
    pub fn catch_up(&self) -> Result<()> {
        if self.inner.frames.load(Ordering::Acquire) >= CHECKPOINT_PAGES {
            self.inner.run()?;
        }
        Ok(())
    }

    /// Stops scheduling, waits for a running checkpoint, and closes the connection. The
    /// store closes it before its own connection, which, closed last, checkpoints and
    /// removes the WAL.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
        let conn = self.inner.conn.lock().take();
        drop(conn);
    }
}

/// Moves the checkpoints of `conn` to `inner`'s background thread.
fn hook(inner: &Arc<Inner>, conn: &mut Connection) -> Result<()> {
    // The pragma installs SQLite's own WAL hook: it must come before ours, which replaces it.
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    let hook = Arc::clone(inner);
    let mut last = 0;
    let mut scheduled_at = 0;
    conn.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages: c_int| {
        if pages < last {
            scheduled_at = 0; // the WAL started over
        }
        last = pages;
        hook.frames.store(pages, Ordering::Release);
        if pages - scheduled_at >= CHECKPOINT_PAGES && hook.schedule() {
            scheduled_at = pages;
        }
        if pages >= WAL_LIMIT_PAGES {
            // An error here would fail the statement whose commit already happened; the
            // next commit simply tries again.
            let _ = wal.checkpoint();
        }
        Ok(())
    }))?;
    Ok(())
}

impl Inner {
    /// Called inside a commit: only hands the work to another thread. False when one is
    /// already scheduled or running (or the checkpointer is closed).
    fn schedule(self: &Arc<Self>) -> bool {
        if self.closed.load(Ordering::Acquire) || self.due.swap(true, Ordering::AcqRel) {
            return false;
        }
        let me = Arc::clone(self);
        runtime::handle().spawn_blocking(move || {
            // A checkpoint beside a writer leaves the frames written meanwhile, and a burst of
            // writes leaves frames no later commit schedules a checkpoint for. Chase them
            // until the WAL is copied whole and no write came for a pause, so that the next
            // write starts the WAL over instead of letting it grow burst after burst. Bounded,
            // for a reader in another process that holds an old snapshot for long.
            for _ in 0..CHASE_ROUNDS {
                if me.closed.load(Ordering::Acquire) {
                    break;
                }
                match me.run() {
                    Ok((log, copied)) => {
                        std::thread::sleep(CHASE_PAUSE);
                        if copied >= log && i64::from(me.frames.load(Ordering::Acquire)) == log {
                            break;
                        }
                    }
                    // A shared file is reported by the store's own calls, which it refuses.
                    Err(Error::FileShared(_)) => break,
                    Err(e) => {
                        if let Some(sink) = &me.errors {
                            sink.report_task(e, crate::hooks::Task::Checkpoint);
                        }
                        break;
                    }
                }
            }
            me.due.store(false, Ordering::Release);
        });
        true
    }

    /// One PASSIVE checkpoint; returns the frames in the WAL and the frames copied (both 0
    /// once closed).
    fn run(&self) -> Result<(i64, i64)> {
        let mut guard = self.conn.lock();
        if self.closed.load(Ordering::Acquire) {
            return Ok((0, 0));
        }
        if let Some(g) = &self.guard {
            g.check()?;
        }
        let conn = match &mut *guard {
            Some(conn) => conn,
            slot @ None => {
                crate::sqlite::exclusive::install();
                let conn = Connection::open_with_flags(
                    &self.path,
                    OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )?;
                conn.busy_timeout(std::time::Duration::from_millis(u64::from(
                    self.busy_timeout_ms,
                )))?;
                // A checkpoint copies frames through a buffer of its own, not the page cache.
                conn.pragma_update(None, "cache_size", -64)?;
                slot.insert(conn)
            }
        };
        // PASSIVE never waits for readers or writers; what it cannot copy now, the next one will.
        Ok(conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((r.get(1)?, r.get(2)?))
        })?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::schema;
    use std::time::{Duration, Instant};

    fn file_pages(path: &std::path::Path) -> u64 {
        std::fs::metadata(path).map_or(0, |m| m.len()) / 4096
    }

    #[test]
    fn the_background_copies_the_wal_into_the_file() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("c.sqlite");
        let mut conn = schema::open(path.to_str().unwrap(), 1000)?;
        let cp = Checkpointer::install(&mut conn, 1000, None, None)?.expect("a WAL database");
        let auto: i64 = conn.query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))?;
        assert_eq!(auto, 0);
        conn.execute_batch("CREATE TABLE t (x BLOB)")?;
        // Every row is a page of its own; until a checkpoint copies them they live in the WAL
        // only, and the database file stays a few pages long.
        for _ in 0..1500 {
            conn.execute("INSERT INTO t VALUES (zeroblob(4000))", [])?;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while file_pages(&path) < 1000 {
            assert!(Instant::now() < deadline, "no checkpoint copied the WAL");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(cp.inner.conn.lock().is_some());
        cp.close();
        assert!(cp.inner.conn.lock().is_none());
        Ok(())
    }

    #[test]
    fn after_a_burst_the_wal_starts_over() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("b.sqlite");
        let mut conn = schema::open(path.to_str().unwrap(), 1000)?;
        let cp = Checkpointer::install(&mut conn, 1000, None, None)?.expect("a WAL database");
        conn.execute_batch("CREATE TABLE t (x BLOB)")?;
        // A burst that outruns the checkpoints scheduled during it.
        for _ in 0..2500 {
            conn.execute("INSERT INTO t VALUES (zeroblob(4000))", [])?;
        }
        assert!(cp.inner.frames.load(Ordering::Acquire) > 2000);
        let deadline = Instant::now() + Duration::from_secs(60);
        while cp.inner.due.load(Ordering::Acquire) {
            assert!(
                Instant::now() < deadline,
                "the checkpointer never caught up"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // Everything was copied while writes paused, so the next write starts the WAL over.
        conn.execute("INSERT INTO t VALUES (1)", [])?;
        assert!(cp.inner.frames.load(Ordering::Acquire) < 10);
        cp.close();
        Ok(())
    }

    #[test]
    fn writes_that_never_pause_keep_the_wal_bounded() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("w.sqlite");
        let mut conn = schema::open(path.to_str().unwrap(), 1000)?;
        let cp = Checkpointer::install(&mut conn, 1000, None, None)?.expect("a WAL database");
        conn.execute_batch("CREATE TABLE t (x BLOB)")?;
        // Holding the checkpointer's connection stalls every background checkpoint.
        let stalled = cp.inner.conn.lock();
        let wal = dir.path().join("w.sqlite-wal");
        let mut largest = 0;
        for _ in 0..12_000 {
            conn.execute("INSERT INTO t VALUES (zeroblob(4000))", [])?;
            largest = largest.max(std::fs::metadata(&wal)?.len());
        }
        drop(stalled);
        let frame = 4096 + 24;
        assert!(largest > 9_000 * frame, "the WAL reached the limit");
        assert!(
            largest < (WAL_LIMIT_PAGES as u64 + 10) * frame,
            "{largest} bytes"
        );
        cp.close();
        Ok(())
    }

    #[test]
    fn closing_the_store_removes_the_wal() -> Result<()> {
        use crate::{Hooks, Options, RecordInput, Store};
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("s.sqlite");
        let store = Store::open(path.to_str().unwrap(), Options::default(), Hooks::default())?;
        for i in 0..600 {
            let input = RecordInput {
                session_key: format!("agent:main:subagent:{i}"),
                kind: "created".into(),
                actor_type: "system".into(),
                summary: "s".repeat(200),
                ..Default::default()
            };
            store.record(input, 1_700_000_000_000)?;
        }
        assert!(dir.path().join("s.sqlite-wal").exists());
        store.close();
        assert!(!dir.path().join("s.sqlite-wal").exists());
        let reopened = Store::open(path.to_str().unwrap(), Options::default(), Hooks::default())?;
        assert_eq!(
            reopened.state_version("agent:main:subagent:599", None)?,
            600
        );
        Ok(())
    }

    #[test]
    fn in_memory_databases_are_left_alone() -> Result<()> {
        let mut conn = schema::open(":memory:", 1000)?;
        assert!(Checkpointer::install(&mut conn, 1000, None, None)?.is_none());
        Ok(())
    }
}
