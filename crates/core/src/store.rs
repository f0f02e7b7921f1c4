//! [`Store`]: the public façade of a session-state store over one SQLite connection. It
//! composes the parts that do the work, each in its own module: the guarded connection
//! ([`crate::sqlite::conn`]), the write path of a record ([`crate::record`]), the notice queue and the
//! wakes ([`crate::delivery`]), prunes and checkpoints ([`crate::maintenance`]), cross-process
//! delivery ([`crate::sync`]) and the upstream monitor ([`crate::upstream::monitor`]). Every
//! method that needs the time takes `now` (epoch ms) from the caller, so the host's clock
//! governs heads, cursors and retention.

use std::sync::Arc;

use crate::cursors::{self, Provenance};
use crate::delivery::Delivery;
use crate::error::{Error, Result};
use crate::event::{RecordInput, StateEvent};
use crate::hooks::{Hooks, Host};
use crate::keys::{self, SessionKey};
use crate::log;
use crate::maintenance::{Maintenance, SweepReport};
use crate::metrics::Hist;
use crate::options::Options;
use crate::prune::PruneReport;
use crate::queue::{Notice, QueueSignal};
use crate::record::Recorder;
use crate::rows::Rows;
use crate::shapes::CursorRow;
use crate::sqlite::checkpoint::Checkpointer;
use crate::sqlite::conn::{Connection, Db, Rehook, Reopen};
use crate::sqlite::cursor_rows;
use crate::sqlite::exclusive::FileGuard;
use crate::sqlite::rows::SqliteRows;
use crate::sqlite::schema;
use crate::sqlite::tx::Tx;
use crate::sync::SyncState;
use crate::upstream::links::LinkRows;
use crate::upstream::monitor::Monitor;

mod follow;
#[cfg(any(test, feature = "test-hooks"))]
mod inside;
mod reads;
mod remote;
mod stats;
mod upstream;

/// A session named for `stateVersions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRef {
    /// The session.
    pub session_key: String,
    /// Its agent, if not the key's own (or `main`).
    pub agent_id: Option<String>,
}

struct Inner {
    recorder: Recorder,
    monitor: Arc<Monitor>,
    host: Host,
    opts: Options,
    /// The PostgreSQL engine of a store opened on a URL (`store/remote.rs`).
    remote: Option<Arc<crate::postgres::PgStore>>,
}

/// A session-state store over one SQLite file. Cheap to clone: clones share everything.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl Store {
    /// Opens the store at `path` (`:memory:` for a private in-memory database).
    /// Opening never prunes. With `sync_interval_ms` > 0 and a database file, a background
    /// task delivers notices opened by other processes (semantics.md#processes).
    /// Every failure of opening names the file ([`Error::at_path`]); a file that is not SQLite
    /// is `ERR_NOT_SQLITE`, and nothing was written to it.
    ///
    /// A `postgres://` or `postgresql://` URL opens a PostgreSQL store instead
    /// (docs/postgres.md); the options `pg_schema`, `connect_timeout_ms` and
    /// `statement_timeout_ms` are refused on a file unless they keep their defaults. Any other
    /// `<scheme>://` text (`mysql://…`) is `ERR_INVALID_ARG`: it names no store.
    pub fn open(path: &str, opts: Options, hooks: Hooks) -> Result<Self> {
        if crate::postgres::conn::is_url(path) {
            return Self::open_remote(path, opts, hooks);
        }
        Self::check_location(path)?;
        opts.check_local()?;
        Self::open_file(path, opts, hooks).map_err(|e| e.at_path(path))
    }

    /// Refuses a `<scheme>://` text that is not a PostgreSQL URL: `ERR_INVALID_ARG` naming
    /// only the scheme, since the rest may hold a password. Refuses a SQLite `file:` URI too
    /// (semantics.md#storage): a store takes a file-system path, and a `file:` name read as a
    /// relative path would create a `file:` folder tree where the URI meant another file.
    /// Every place that takes a store's location (open, the CLI's inspect and import) asks it.
    pub fn check_location(path: &str) -> Result<()> {
        if path
            .get(..5)
            .is_some_and(|p| p.eq_ignore_ascii_case("file:"))
        {
            return Err(Error::invalid(
                "path is a file: URI, which a store does not take: give the file's path \
                 (file:/srv/state.sqlite?mode=ro is /srv/state.sqlite)",
            ));
        }
        match crate::postgres::conn::foreign_scheme(path) {
            Some(scheme) => Err(Error::invalid(format!(
                "{scheme}:// names no store: give a file path, or a postgres:// or postgresql:// URL"
            ))),
            None => Ok(()),
        }
    }

    fn open_file(path: &str, opts: Options, hooks: Hooks) -> Result<Self> {
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
        let wal = conn
            .path()
            .filter(|p| !p.is_empty())
            .map(|p| std::path::PathBuf::from(format!("{p}-wal")));
        let host = Host::of(&hooks);
        let reopen = guard.as_ref().map(|_| Reopen {
            path: path.to_owned(),
            busy_timeout_ms: opts.busy_timeout_ms,
            release: checkpointer.iter().map(Checkpointer::release).collect(),
            rehook: checkpointer.as_ref().map_or_else(
                || Box::new(|_: &mut _| Ok(())) as Rehook,
                Checkpointer::rehook,
            ),
            errors: hooks.errors.clone(),
        });
        let db = Arc::new(Db::new(conn, guard, opts.read_cache_bytes as usize)?);
        let delivery = Arc::new(Delivery::new(
            hooks.wake.clone(),
            opts.wake_coalesce_ms,
            opts.notice_outbox,
        ));
        if let Some(wal) = wal {
            delivery.metrics.set_wal(wal);
        }
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
            host.clone(),
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
        let monitor = Arc::new(Monitor::new(Arc::new(recorder.clone()), host.clone()));
        if let Some(sync) = &recorder.sync {
            sync.spawn();
        }
        Ok(Store {
            inner: Arc::new(Inner {
                recorder,
                monitor,
                host,
                opts,
                remote: None,
            }),
        })
    }

    fn db(&self) -> &Db {
        &self.inner.recorder.db
    }

    fn delivery(&self) -> &Delivery {
        &self.inner.recorder.delivery
    }

    /// Serves `watcher` (semantics.md#processes): notices opened for it by other processes enter this store's
    /// queue and schedule its wakes. Drains, peeks, acknowledges, watches and producer-named
    /// watchers of a record do this implicitly. A bare key is accepted and ignored (it never
    /// has notices); the empty key is `ERR_INVALID_ARG`. Without cross-process delivery (a
    /// `sync_interval_ms` of 0, or an in-memory database) it does nothing.
    pub fn serve(&self, watcher: &str) -> Result<()> {
        self.check_open()?;
        SessionKey::parse_named(watcher, "watcherKey")?;
        self.mark_served(watcher);
        Ok(())
    }

    fn mark_served(&self, watcher: &str) {
        if let Some(pg) = self.remote() {
            return pg.notices().serve(watcher);
        }
        self.inner.recorder.mark_served(watcher);
    }

    /// Serves `watcher` for a call that reads its queue (see [`SyncState::serve_reading`]).
    /// On PostgreSQL, where such a call runs no SQL, the store's task reads its pending
    /// cursors at once instead.
    fn serve_reading(&self, watcher: &str) {
        if let Some(pg) = self.remote() {
            return pg.notices().serve(watcher);
        }
        if let Some(sync) = &self.inner.recorder.sync {
            sync.serve_reading(watcher);
        }
    }

    /// The options in force.
    pub fn options(&self) -> Options {
        self.inner.opts
    }

    /// The clock background work uses.
    pub fn now(&self) -> i64 {
        self.inner.host.now()
    }

    /// True once [`Store::close`] ran.
    pub fn is_closed(&self) -> bool {
        self.db().is_closed()
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        self.db().check_open()
    }

    /// Reports a failure of background task `task` to the host.
    pub fn report(&self, error: Error, task: crate::hooks::Task) {
        self.inner.host.report(error, task);
    }

    /// Runs `f` with the connection, or fails with `ERR_CLOSED`.
    pub(crate) fn with_conn<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        if self.is_remote() {
            return Err(remote::not_yet("this call"));
        }
        self.db().with(f)
    }

    /// Runs `f`, which only reads, with the connection: answered while another library of
    /// this process has the file open (semantics.md#storage).
    pub(crate) fn read_conn<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        if self.is_remote() {
            return Err(remote::not_yet("this call"));
        }
        self.db().with_read(f)
    }

    /// Records one event (semantics.md#recording). `Ok(None)` means `onlyIfWatched` found nobody watching.
    pub fn record(&self, input: RecordInput, now: i64) -> Result<Option<StateEvent>> {
        if let Some(pg) = self.remote() {
            return pg.record(input, now);
        }
        let start = std::time::Instant::now();
        let r = self.inner.recorder.record_with(input, now, |_| Ok(()));
        let m = &self.delivery().metrics;
        m.since(Hist::RecordSync, start);
        if let Err(e) = &r {
            m.failed(e);
        }
        r
    }

    /// Records `items` in call order as one group (semantics.md#promise-api): one write
    /// transaction, a savepoint per event, each result what [`Store::record`] would have
    /// returned for it after the ones before it; notices are queued and wakes scheduled after
    /// the commit. The Promise API's writer thread calls this.
    pub fn record_group(&self, items: Vec<(RecordInput, i64)>) -> Vec<Result<Option<StateEvent>>> {
        if let Some(pg) = self.remote() {
            return pg.record_group(items);
        }
        self.inner.recorder.record_group(items)
    }

    /// Prunes now (semantics.md#retention) and restarts the automatic-prune hour.
    pub fn prune(&self, now: i64) -> Result<PruneReport> {
        if let Some(pg) = self.remote() {
            self.check_open()?;
            return pg.prune(now);
        }
        self.inner.recorder.maintenance.prune(now)
    }

    /// `watch` (semantics.md#cursors). False for a bare watcher or target, or watcher == target.
    pub fn watch(
        &self,
        watcher: &str,
        target: &str,
        provenance: Provenance,
        now: i64,
    ) -> Result<bool> {
        let o = cursors::WatchOptions {
            provenance,
            ..Default::default()
        };
        self.watch_with(watcher, target, &o, now)
    }

    /// `watch` with a watcher scope and the refresh rule (semantics.md#cursors-scope): a
    /// cursor bound to another scope than `o.scope` is re-seeded at the target's head, its
    /// pending notice dropped. A scope must be non-empty and at most 4,096 UTF-8 bytes.
    pub fn watch_with(
        &self,
        watcher: &str,
        target: &str,
        o: &cursors::WatchOptions,
        now: i64,
    ) -> Result<bool> {
        self.check_open()?;
        if let Some(s) = &o.scope {
            keys::check_scope(s)?;
        }
        SessionKey::parse_named(watcher, "watcherKey")?;
        let t = SessionKey::parse_named(target, "targetKey")?;
        let (SessionKey::Qualified { agent, .. }, true) =
            (t, keys::is_watchable(watcher) && watcher != target)
        else {
            return Ok(false);
        };
        if let Some(pg) = self.remote() {
            pg.watch(watcher, target, agent, o, now)?;
            return Ok(true);
        }
        self.mark_served(watcher);
        let conn = self.db().lock()?;
        let tx = Tx::immediate(&conn)?;
        let seeded = cursors::watch(&mut SqliteRows::new(&tx), watcher, target, agent, o, now)?;
        tx.commit()?;
        if seeded {
            self.delivery().queue().remove(watcher, target);
        }
        Ok(true)
    }

    /// The cursor rows of `watcher` and/or `target` as stored (every row when both are
    /// `None`), ordered by watcher, then target. Moves nothing.
    pub fn cursor_rows(
        &self,
        watcher: Option<&str>,
        target: Option<&str>,
    ) -> Result<Vec<CursorRow>> {
        if let Some(pg) = self.remote() {
            return pg.cursor_rows(watcher, target);
        }
        self.check_open()?;
        for (key, name) in [(watcher, "watcherKey"), (target, "targetKey")] {
            if let Some(k) = key {
                SessionKey::check_named(k, name)?;
            }
        }
        self.read_conn(|conn| cursor_rows::read(conn, watcher, target))
    }

    /// Removes the cursor and its pending notice. True if a cursor was removed.
    pub fn unwatch(&self, watcher: &str, target: &str) -> Result<bool> {
        self.check_open()?;
        SessionKey::parse_named(watcher, "watcherKey")?;
        SessionKey::parse_named(target, "targetKey")?;
        if let Some(pg) = self.remote() {
            return pg.unwatch(watcher, target);
        }
        let conn = self.db().lock()?;
        let removed = cursors::delete(&mut SqliteRows::new(&conn), watcher, target)?;
        self.delivery().queue().remove(watcher, target);
        Ok(removed)
    }

    /// The words the notice queue keeps current for a reader that takes no lock
    /// ([`crate::queue::QueueSignal`]).
    pub fn queue_signal(&self) -> Arc<QueueSignal> {
        self.delivery().signal()
    }

    /// Asked on the host's thread when a wake for `watcher` reaches it (semantics.md#wake):
    /// true when the watcher still has queued notices, so the wake goes to the host; false
    /// when a drain or acknowledge withdrew them meanwhile, and the wake is not counted.
    /// Runs no SQL.
    pub fn wake_due(&self, watcher: &str) -> bool {
        let due = self.delivery().queue().has_any(watcher);
        if !due {
            self.delivery()
                .metrics
                .take_back(crate::metrics::Count::Wakes);
        }
        due
    }

    /// True when the watcher has queued notices. Runs no SQL.
    pub fn has_pending(&self, watcher: &str) -> Result<bool> {
        self.check_open()?;
        SessionKey::check_named(watcher, "watcherKey")?;
        self.serve_reading(watcher);
        Ok(self.delivery().queue().has_any(watcher))
    }

    /// The watcher's pending notices, nothing acknowledged. Runs no SQL, except the first time
    /// this process serves the watcher (semantics.md#processes).
    pub fn peek(&self, watcher: &str) -> Result<Vec<Notice>> {
        self.check_open()?;
        SessionKey::parse_named(watcher, "watcherKey")?;
        self.serve_reading(watcher);
        Ok(self.delivery().queue().peek(watcher))
    }

    /// The watcher's pending notices, acknowledged (semantics.md#cursors). With nothing queued it runs no SQL.
    pub fn drain(&self, watcher: &str, now: i64) -> Result<Vec<Notice>> {
        self.check_open()?;
        SessionKey::parse_named(watcher, "watcherKey")?;
        self.serve_reading(watcher);
        if let Some(pg) = self.remote() {
            // An empty drain answers from memory, as on SQLite for a served watcher.
            if !self.delivery().queue().has_any(watcher) {
                return Ok(Vec::new());
            }
            return pg.drain(watcher, now);
        }
        self.delivery().drain(self.db(), watcher, now)
    }

    /// Acknowledges the watcher's pending notices on `targets` (semantics.md#cursors), for hosts that route
    /// notices through their own queue. Returns how many pending notices it acknowledged.
    pub fn acknowledge(&self, watcher: &str, targets: &[String], now: i64) -> Result<u64> {
        self.acknowledge_in(watcher, targets, None, now)
    }

    /// [`Store::acknowledge`], limited to the cursors bound to `scope` when it is given
    /// (semantics.md#cursors-scope): a cursor bound to another scope, or to none, is left
    /// pending and its queued notice stays.
    pub fn acknowledge_in(
        &self,
        watcher: &str,
        targets: &[String],
        scope: Option<&str>,
        now: i64,
    ) -> Result<u64> {
        self.acknowledge_through(watcher, targets, scope, None, now)
    }

    /// [`Store::acknowledge_in`], for a watcher that has read the targets up to sequence
    /// `through` (the last event its `changes_since` returned) when it is given
    /// (semantics.md#cursors-acknowledge): a notice whose material events are all read is
    /// withdrawn, a partial read leaves one notice naming `through`. `through` must be a
    /// non-negative safe integer (`ERR_INVALID_ARG`, nothing changed).
    pub fn acknowledge_through(
        &self,
        watcher: &str,
        targets: &[String],
        scope: Option<&str>,
        through: Option<f64>,
        now: i64,
    ) -> Result<u64> {
        self.check_open()?;
        if let Some(s) = scope {
            keys::check_scope(s)?;
        }
        let through = match through {
            None => None,
            Some(t) => Some(
                log::check_after(t)
                    .map_err(|_| Error::invalid("through must be a non-negative safe integer"))?,
            ),
        };
        SessionKey::parse_named(watcher, "watcherKey")?;
        self.mark_served(watcher);
        let mut unique: Vec<&str> = Vec::with_capacity(targets.len());
        for (i, t) in targets.iter().enumerate() {
            keys::check_entry(t, "targetKeys", i)?;
            if !unique.contains(&t.as_str()) {
                unique.push(t);
            }
        }
        if let Some(pg) = self.remote() {
            return pg.acknowledge(watcher, &unique, scope, through, now);
        }
        self.delivery()
            .acknowledge(self.db(), watcher, &unique, scope, through, now)
    }

    /// Sweep (semantics.md#cursors), then a prune. `watcher_exists` is asked once per watcher with material
    /// history, with no lock held, so it may call back into the store.
    pub fn sweep(
        &self,
        watcher_exists: Option<&mut dyn FnMut(&str) -> bool>,
        now: i64,
    ) -> Result<SweepReport> {
        self.check_open()?;
        let only = match watcher_exists {
            None => None,
            Some(exists) => {
                let candidates = self.sweep_candidates()?;
                Some(
                    candidates
                        .into_iter()
                        .filter(|w| exists(w))
                        .collect::<Vec<_>>(),
                )
            }
        };
        self.sweep_of(only.as_deref(), now)
    }

    /// [`Store::sweep`] of the watchers in `only` (every watcher when `None`): for a caller
    /// that asked about [`Store::sweep_candidates`] elsewhere and passes the ones that exist.
    pub fn sweep_of(&self, only: Option<&[String]>, now: i64) -> Result<SweepReport> {
        self.check_open()?;
        if let Some(pg) = self.remote() {
            return pg.sweep(only, now);
        }
        self.inner.recorder.maintenance.sweep(only, now)
    }

    /// Sets the signal told, on a background thread, when background work (the PostgreSQL
    /// catch-up, the cross-process poll, the upstream monitor) put notices in the listener's
    /// outbox (semantics.md#notices-listener); `None` removes it, and so does [`Store::close`].
    /// Notices entering on a thread marked by [`crate::hooks::mark_caller_thread`] (the host's own
    /// calls, the Promise API's writer) are not signalled.
    pub fn set_notice_signal(&self, signal: Option<Arc<dyn crate::hooks::NoticeSignal>>) {
        if signal.is_some() && self.is_closed() {
            return;
        }
        self.delivery().set_notice_signal(signal);
    }

    /// Takes the notices that entered the queue since the last call, in the order they entered
    /// (semantics.md#notices-listener); always empty unless [`Options::notice_outbox`] is on.
    pub fn take_entered_notices(&self) -> Vec<crate::queue::QueuedNotice> {
        self.delivery().take_entered()
    }

    /// The watchers with unacknowledged material history: the ones [`Store::sweep`] asks its
    /// `watcher_exists` about. For a caller that asks elsewhere, then sweeps with the answer.
    pub fn sweep_candidates(&self) -> Result<Vec<String>> {
        self.check_open()?;
        if let Some(pg) = self.remote() {
            return pg.sweep_candidates();
        }
        self.with_conn(|conn| cursors::watchers_behind(&mut SqliteRows::new(conn)))
    }

    /// The watcher session was reset: its cursors and pending notices go; its own history stays.
    pub fn reset_session(&self, session_key: &str) -> Result<()> {
        self.check_open()?;
        SessionKey::parse(session_key)?;
        if let Some(pg) = self.remote() {
            return pg.reset_session(session_key);
        }
        let conn = self.db().lock()?;
        cursors::delete_watcher(&mut SqliteRows::new(&conn), session_key)?;
        self.delivery().queue().remove_watcher(session_key);
        drop(conn);
        self.delivery().cancel(session_key);
        Ok(())
    }

    /// Deletes the session's events, head and upstream link for `agent_id` (the link's
    /// identity is the session and agent, as in OpenClaw); for its own agent also every cursor
    /// where it is watcher or target, and their notices (semantics.md#retention).
    pub fn delete_session(&self, session_key: &str, agent_id: Option<&str>) -> Result<()> {
        self.check_open()?;
        let agent = keys::resolve_agent(session_key, agent_id)?;
        let own = agent == keys::resolve_agent(session_key, None)?;
        if let Some(pg) = self.remote() {
            return pg.delete_session(session_key, &agent, own);
        }
        let conn = self.db().lock()?;
        let tx = Tx::immediate(&conn)?;
        let mut rows = SqliteRows::new(&tx);
        rows.delete_events(session_key, &agent)?;
        tx.delete_link(session_key, &agent)?;
        if own {
            cursors::delete_watcher(&mut rows, session_key)?;
            cursors::delete_target(&mut rows, session_key)?;
        }
        tx.commit()?;
        if own {
            if let Some(s) = &self.inner.recorder.sync {
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

    /// Closes the store: the connection, the queue and every scheduled wake. Idempotent.
    pub fn close(&self) {
        if !self.db().mark_closed() {
            return;
        }
        self.delivery().close_wakes();
        if let Some(pg) = self.remote() {
            pg.close();
        }
        self.inner.monitor.stop();
        // The poller's read-only connection goes first: the store's own connection, closed
        // last, checkpoints the WAL into the file and removes the -wal and -shm files, so a
        // closed store leaves one complete file (a read-only connection closed last does not).
        if let Some(s) = &self.inner.recorder.sync {
            s.stop();
        }
        self.inner.recorder.maintenance.close();
        let conn = self.db().take();
        self.delivery().close_queue();
        drop(conn);
    }
}
