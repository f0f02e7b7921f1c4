//! The SQLite engine ([`Engine`]): the store's one connection and its guard, the write path
//! over it ([`Recorder`]), the read cache (`read_cache.rs`), and its background work: the cross-process
//! poll ([`SyncState`]), the WAL checkpointer and the automatic prune ([`Maintenance`]).

use std::sync::Arc;

use crate::cursors::{self, WatchOptions};
use crate::delivery::Delivery;
use crate::engine::Engine;
use crate::error::Result;
use crate::event::{RecordInput, StateEvent};
use crate::hooks::{Hooks, Host};
use crate::log::{Changes, ChangesRef};
use crate::metrics::{Count, Hist};
use crate::options::Options;
use crate::prune::{PruneReport, SweepReport};
use crate::queue::Notice;
use crate::rows::Rows;
use crate::shapes::CursorRow;
use crate::sqlite::checkpoint::Checkpointer;
use crate::sqlite::conn::{Db, Rehook, Reopen};
use crate::sqlite::exclusive::FileGuard;
use crate::sqlite::heads;
use crate::sqlite::maintenance::Maintenance;
use crate::sqlite::recorder::Recorder;
use crate::sqlite::rows::SqliteRows;
use crate::sqlite::sync::SyncState;
use crate::sqlite::tx::Tx;
use crate::sqlite::{cursor_rows, link_rows, log, schema};
use crate::upstream::links::LinkRows;
use crate::upstream::LinkRow;

mod links;
mod notices;

/// The SQLite engine of one store.
pub(crate) struct SqliteEngine {
    recorder: Recorder,
}

/// A `changesSince` answer: lent from the read cache, or read from the file.
enum Answer<'a> {
    Lent(ChangesRef<'a>),
    Read(Changes),
}

impl SqliteEngine {
    /// Opens the file at `path` (`:memory:` for a private in-memory database), its
    /// checkpointer and, with `sync_interval_ms` > 0 and a file, its cross-process poll.
    /// Opening never prunes. The caller names the file in an error.
    pub(crate) fn open(
        path: &str,
        opts: Options,
        hooks: &Hooks,
        delivery: Arc<Delivery>,
        host: Host,
    ) -> Result<Self> {
        opts.validate()?;
        schema::prepare(path)?;
        // Before the store's SQLite touches the file: if another library of this process has
        // it open, opening and closing a connection would already drop that library's locks.
        let guard = match path {
            ":memory:" => None,
            _ => Some(Arc::new(FileGuard::open(std::path::Path::new(path))?)),
        };
        let mut conn = schema::connect(path, opts.busy_timeout_ms)?;
        let checkpointer = Checkpointer::install(
            &mut conn,
            opts.busy_timeout_ms,
            hooks.errors.clone(),
            guard.clone(),
        )?;
        let file = conn
            .path()
            .filter(|p| !p.is_empty() && opts.sync_interval_ms > 0)
            .map(str::to_owned);
        if let Some(p) = conn.path().filter(|p| !p.is_empty()) {
            delivery
                .metrics
                .set_wal(std::path::PathBuf::from(format!("{p}-wal")));
        }
        let reopen = guard.as_ref().map(|_| Reopen {
            connect: {
                let (path, busy) = (path.to_owned(), opts.busy_timeout_ms);
                Box::new(move || schema::connect(&path, busy))
            },
            release: checkpointer.iter().map(Checkpointer::release).collect(),
            rehook: checkpointer.as_ref().map_or_else(
                || Box::new(|_: &mut _| Ok(())) as Rehook,
                Checkpointer::rehook,
            ),
            errors: hooks.errors.clone(),
        });
        let db = Arc::new(Db::new(conn, guard, opts.read_cache_bytes as usize)?);
        let sync = match file {
            Some(file) => Some(Arc::new(SyncState::open(
                &file,
                opts.sync_interval_ms,
                Arc::clone(&db),
                Arc::clone(&delivery),
                host.clone(),
            )?)),
            None => None,
        };
        if let Some(mut reopen) = reopen {
            reopen.release.extend(sync.as_ref().map(SyncState::release));
            db.set_reopen(reopen);
        }
        let maintenance = Arc::new(Maintenance::new(
            Arc::clone(&db),
            Arc::clone(&delivery),
            host,
            opts,
            checkpointer,
        ));
        let recorder = Recorder {
            db,
            delivery,
            maintenance,
            sync,
            notify_kinds: opts.notify_kinds,
            seed_resets_provenance: opts.seed_resets_provenance,
        };
        if let Some(sync) = &recorder.sync {
            sync.spawn();
        }
        Ok(SqliteEngine { recorder })
    }

    fn db(&self) -> &Db {
        &self.recorder.db
    }

    fn delivery(&self) -> &Delivery {
        &self.recorder.delivery
    }

    /// `changesSince` handed to `f`: from the read cache's tail when it covers the range (lent
    /// from the cache under its lock), else from the file (the rows read, kept in the tail when
    /// whole).
    fn read_changes<R>(
        &self,
        session_key: &str,
        agent: &str,
        after: i64,
        limit: u32,
        f: impl FnOnce(Answer<'_>) -> R,
    ) -> Result<R> {
        let start = std::time::Instant::now();
        let db = self.db();
        let r = db.with_read(|conn| {
            let mut cache = db.read_cache();
            if !cache.enabled() {
                return log::changes_since(conn, session_key, agent, after, limit)
                    .map(|c| f(Answer::Read(c)));
            }
            cache.refresh(conn, db.changes())?;
            let metrics = &self.delivery().metrics;
            if let Some(c) = cache.tail.lend(session_key, agent, after, limit) {
                metrics.add(Count::ReadCacheHits, 1);
                return Ok(f(Answer::Lent(c)));
            }
            metrics.add(Count::ReadCacheMisses, 1);
            let (c, bounds) = log::read_changes(conn, session_key, agent, after, limit)?;
            if let Some(bounds) = bounds {
                cache.tail.fill(session_key, agent, after, &c, bounds);
            }
            Ok(f(Answer::Read(c)))
        });
        self.delivery().metrics.since(Hist::ChangesSince, start);
        r
    }
}

impl Engine for SqliteEngine {
    fn name(&self) -> &'static str {
        "SQLite"
    }

    fn is_closed(&self) -> bool {
        self.db().is_closed()
    }

    fn mark_closed(&self) -> bool {
        self.db().mark_closed()
    }

    fn close(&self) {
        // The poller's read-only connection goes first: the store's own connection, closed
        // last, checkpoints the WAL into the file and removes the -wal and -shm files, so a
        // closed store leaves one complete file (a read-only connection closed last does not).
        if let Some(s) = &self.recorder.sync {
            s.stop();
        }
        self.recorder.maintenance.close();
        drop(self.db().take());
    }

    fn serve(&self, watcher: &str) {
        self.recorder.mark_served(watcher);
    }

    fn serve_reading(&self, watcher: &str) {
        if let Some(sync) = &self.recorder.sync {
            sync.serve_reading(watcher);
        }
    }

    fn record(&self, input: RecordInput, now: i64) -> Result<Option<StateEvent>> {
        let start = std::time::Instant::now();
        let r = self.recorder.record_with(input, now, |_| Ok(()));
        let m = &self.delivery().metrics;
        m.since(Hist::RecordSync, start);
        if let Err(e) = &r {
            m.failed(e);
        }
        r
    }

    fn record_group(&self, items: Vec<(RecordInput, i64)>) -> Vec<Result<Option<StateEvent>>> {
        self.recorder.record_group(items)
    }

    fn prune(&self, now: i64) -> Result<PruneReport> {
        self.recorder.maintenance.prune(now)
    }

    fn watch(
        &self,
        watcher: &str,
        target: &str,
        agent: &str,
        o: &WatchOptions,
        now: i64,
    ) -> Result<()> {
        self.recorder.mark_served(watcher);
        let conn = self.db().lock()?;
        let tx = Tx::immediate(&conn)?;
        let seeded = cursors::watch(&mut SqliteRows::new(&tx), watcher, target, agent, o, now)?;
        tx.commit()?;
        if seeded {
            self.delivery().queue().remove(watcher, target);
        }
        Ok(())
    }

    fn unwatch(&self, watcher: &str, target: &str) -> Result<bool> {
        let conn = self.db().lock()?;
        let removed = cursors::delete(&mut SqliteRows::new(&conn), watcher, target)?;
        self.delivery().queue().remove(watcher, target);
        Ok(removed)
    }

    fn cursor_rows(&self, watcher: Option<&str>, target: Option<&str>) -> Result<Vec<CursorRow>> {
        self.db()
            .with_read(|conn| cursor_rows::read(conn, watcher, target))
    }

    fn drain(&self, watcher: &str, now: i64) -> Result<Vec<Notice>> {
        SqliteEngine::drain(self, watcher, now)
    }

    fn acknowledge(
        &self,
        watcher: &str,
        targets: &[&str],
        scope: Option<&str>,
        through: Option<i64>,
        now: i64,
    ) -> Result<u64> {
        SqliteEngine::acknowledge(self, watcher, targets, scope, through, now)
    }

    fn sweep(&self, only: Option<&[String]>, now: i64) -> Result<SweepReport> {
        self.recorder.maintenance.sweep(only, now)
    }

    fn sweep_candidates(&self) -> Result<Vec<String>> {
        self.db()
            .with(|conn| cursors::watchers_behind(&mut SqliteRows::new(conn)))
    }

    fn reset_session(&self, session_key: &str) -> Result<()> {
        let conn = self.db().lock()?;
        cursors::delete_watcher(&mut SqliteRows::new(&conn), session_key)?;
        self.delivery().queue().remove_watcher(session_key);
        drop(conn);
        self.delivery().cancel(session_key);
        Ok(())
    }

    fn delete_session(&self, session_key: &str, agent: &str, own: bool) -> Result<()> {
        let conn = self.db().lock()?;
        let tx = Tx::immediate(&conn)?;
        let mut rows = SqliteRows::new(&tx);
        rows.delete_events(session_key, agent)?;
        tx.delete_link(session_key, agent)?;
        if own {
            cursors::delete_watcher(&mut rows, session_key)?;
            cursors::delete_target(&mut rows, session_key)?;
        }
        tx.commit()?;
        if own {
            if let Some(s) = &self.recorder.sync {
                s.unserve(session_key);
                self.delivery().queue().signal().unserved();
            }
            let mut q = self.delivery().queue();
            q.remove_watcher(session_key);
            q.remove_target(session_key);
            drop(q);
            drop(conn);
            self.delivery().cancel(session_key);
        }
        Ok(())
    }

    fn state_version(&self, session_key: &str, agent: &str) -> Result<i64> {
        self.db()
            .with_read(|conn| Ok(log::head(conn, session_key, agent)?.last_sequence))
    }

    fn state_versions(&self, resolved: &[(&str, &str)]) -> Result<Vec<(usize, i64)>> {
        let db = self.db();
        db.with_read(|conn| {
            let tx = Tx::read(conn)?;
            let mut cache = db.read_cache();
            let found = if cache.enabled() {
                // The transaction's first read: the snapshot starts with the stamp.
                cache.refresh(&tx, db.changes())?;
                heads::versions(&tx, Some(&mut cache.heads), resolved)?
            } else {
                heads::versions(&tx, None, resolved)?
            };
            drop(cache);
            tx.commit()?;
            Ok(found)
        })
    }

    fn changes_since(
        &self,
        session_key: &str,
        agent: &str,
        after: i64,
        limit: u32,
    ) -> Result<Changes> {
        self.read_changes(session_key, agent, after, limit, |a| match a {
            Answer::Lent(c) => c.to_owned(),
            Answer::Read(c) => c,
        })
    }

    fn changes_since_with(
        &self,
        session_key: &str,
        agent: &str,
        after: i64,
        limit: u32,
        f: &mut dyn FnMut(ChangesRef<'_>),
    ) -> Result<()> {
        self.read_changes(session_key, agent, after, limit, |a| match a {
            Answer::Lent(c) => f(c),
            Answer::Read(c) => f(ChangesRef::of(&c)),
        })
    }

    fn read_cache_bytes(&self) -> u64 {
        self.db().read_cache_bytes() as u64
    }

    fn served_count(&self) -> u64 {
        self.recorder
            .sync
            .as_ref()
            .map_or(0, |s| s.served_count() as u64)
    }

    fn wal_frames(&self) -> u64 {
        self.recorder.maintenance.wal_frames()
    }

    fn link_row(&self, session_key: &str, agent_id: &str) -> Result<Option<LinkRow>> {
        self.db()
            .with(|conn| link_rows::get(conn, session_key, agent_id))
    }

    fn watched_link_rows(&self) -> Result<Vec<LinkRow>> {
        self.db().with(|conn| link_rows::watched(conn))
    }

    fn upsert_link_row(&self, row: &LinkRow, if_absent: bool, now: i64) -> Result<bool> {
        self.db()
            .with(|conn| link_rows::upsert(conn, row, if_absent, now))
    }

    fn set_link_marker(
        &self,
        session_key: &str,
        agent_id: &str,
        marker_json: &str,
        now: i64,
        expected: Option<i64>,
    ) -> Result<bool> {
        self.db().with(|conn| {
            link_rows::set_marker(conn, session_key, agent_id, marker_json, now, expected)
        })
    }

    fn delete_link_row(&self, session_key: &str, agent_id: &str) -> Result<bool> {
        self.db()
            .with(|conn| conn.delete_link(session_key, agent_id))
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn serves(&self, watcher: &str) -> bool {
        self.recorder
            .sync
            .as_ref()
            .is_some_and(|s| s.serves(watcher))
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn sync_now(&self) -> Result<()> {
        match &self.recorder.sync {
            Some(s) => s.run(true),
            None => Ok(()),
        }
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn is_syncing(&self) -> bool {
        self.recorder.sync.as_ref().is_some_and(|s| s.is_running())
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn is_pruning(&self) -> bool {
        self.recorder.maintenance.is_pruning()
    }
}
