//! [`Store`]: the public façade of a session-state store. It checks the arguments of every
//! call, owns what every store shares (the delivery: the notice queue, the wakes and the
//! metrics, [`crate::delivery`]; the host's callbacks; the upstream monitor,
//! [`crate::upstream::monitor`]) and hands everything that touches storage to one engine
//! ([`crate::engine::Engine`]): SQLite's (`sqlite/engine.rs`) or PostgreSQL's
//! (`postgres/engine.rs`). Every method that needs the time takes `now` (epoch ms) from the
//! caller, so the host's clock governs heads, cursors and retention.

use std::sync::Arc;

use crate::cursors::{self, Provenance};
use crate::delivery::Delivery;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::event::{RecordInput, StateEvent};
use crate::hooks::{Hooks, Host};
use crate::keys::{self, SessionKey};
use crate::log;
use crate::options::Options;
use crate::postgres::PgStore;
use crate::prune::{PruneReport, SweepReport};
use crate::queue::{Notice, QueueSignal};
use crate::shapes::CursorRow;
use crate::sqlite::engine::SqliteEngine;
use crate::upstream::link_store::LinkStore;
use crate::upstream::monitor::Monitor;

mod follow;
#[cfg(any(test, feature = "test-hooks"))]
mod inside;
mod link_rows;
mod reads;
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
    /// The storage: its connections, its rows and its background work.
    engine: Arc<dyn Engine>,
    /// The notice queue, the wakes and the metrics, built here for either engine.
    delivery: Arc<Delivery>,
    monitor: Arc<Monitor>,
    host: Host,
    opts: Options,
}

/// A session-state store, on a SQLite file or a PostgreSQL database. Cheap to clone: clones share everything.
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
        let host = Host::of(&hooks);
        let delivery = Arc::new(Delivery::new(
            hooks.wake.clone(),
            opts.wake_coalesce_ms,
            opts.notice_outbox,
        ));
        let d = Arc::clone(&delivery);
        // The one place that picks the engine: by the location's form.
        let engine: Arc<dyn Engine> = if crate::postgres::conn::is_url(path) {
            opts.validate()?;
            Arc::new(PgStore::open(path, &opts, d, host.clone())?)
        } else {
            Self::check_location(path)?;
            opts.check_local()?;
            Arc::new(
                SqliteEngine::open(path, opts, &hooks, d, host.clone())
                    .map_err(|e| e.at_path(path))?,
            )
        };
        let links: Arc<dyn LinkStore> = Arc::clone(&engine) as _;
        let monitor = Arc::new(Monitor::new(links, host.clone()));
        Ok(Store {
            inner: Arc::new(Inner {
                engine,
                delivery,
                monitor,
                host,
                opts,
            }),
        })
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

    fn engine(&self) -> &dyn Engine {
        &*self.inner.engine
    }

    fn delivery(&self) -> &Delivery {
        &self.inner.delivery
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
        self.engine().serve(watcher);
    }

    /// Serves `watcher` for a call that reads its queue and runs no SQL
    /// ([`Engine::serve_reading`]).
    fn serve_reading(&self, watcher: &str) {
        self.engine().serve_reading(watcher);
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
        self.engine().is_closed()
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        self.engine().check_open()
    }

    /// True for a store opened on a `postgres://` URL: its synchronous JS methods that need
    /// the database answer `ERR_ASYNC_ONLY`, and the Promise API serves them.
    pub fn is_remote(&self) -> bool {
        self.engine().is_remote()
    }

    /// Reports a failure of background task `task` to the host.
    pub fn report(&self, error: Error, task: crate::hooks::Task) {
        self.inner.host.report(error, task);
    }

    /// For the Promise API's queue: given how many calls wait in it, the failure a new call
    /// settles with at once, while a PostgreSQL store's connection is down and
    /// `maxWaitingCalls` calls wait already (docs/postgres.md#faults); `None` on a file.
    pub(crate) fn waiting_gate(&self) -> Option<crate::engine::Gate> {
        self.engine().waiting_gate()
    }

    /// Records one event (semantics.md#recording). `Ok(None)` means `onlyIfWatched` found nobody watching.
    pub fn record(&self, input: RecordInput, now: i64) -> Result<Option<StateEvent>> {
        self.engine().record(input, now)
    }

    /// Records `items` in call order as one group (semantics.md#promise-api): one write
    /// transaction, a savepoint per event, each result what [`Store::record`] would have
    /// returned for it after the ones before it; notices are queued and wakes scheduled after
    /// the commit. The Promise API's writer thread calls this.
    pub fn record_group(&self, items: Vec<(RecordInput, i64)>) -> Vec<Result<Option<StateEvent>>> {
        self.engine().record_group(items)
    }

    /// Prunes now (semantics.md#retention) and restarts the automatic-prune hour.
    pub fn prune(&self, now: i64) -> Result<PruneReport> {
        self.check_open()?;
        self.engine().prune(now)
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
        self.engine().watch(watcher, target, agent, o, now)?;
        Ok(true)
    }

    /// The cursor rows of `watcher` and/or `target` as stored (every row when both are
    /// `None`), ordered by watcher, then target. Moves nothing.
    pub fn cursor_rows(
        &self,
        watcher: Option<&str>,
        target: Option<&str>,
    ) -> Result<Vec<CursorRow>> {
        self.check_open()?;
        for (key, name) in [(watcher, "watcherKey"), (target, "targetKey")] {
            if let Some(k) = key {
                SessionKey::check_named(k, name)?;
            }
        }
        self.engine().cursor_rows(watcher, target)
    }

    /// Removes the cursor and its pending notice. True if a cursor was removed.
    pub fn unwatch(&self, watcher: &str, target: &str) -> Result<bool> {
        self.check_open()?;
        SessionKey::parse_named(watcher, "watcherKey")?;
        SessionKey::parse_named(target, "targetKey")?;
        self.engine().unwatch(watcher, target)
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
        // An empty drain answers from memory, whatever the engine.
        if !self.delivery().queue().has_any(watcher) {
            return Ok(Vec::new());
        }
        self.engine().drain(watcher, now)
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
        self.engine()
            .acknowledge(watcher, &unique, scope, through, now)
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
        self.engine().sweep(only, now)
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
        self.engine().sweep_candidates()
    }

    /// The watcher session was reset: its cursors and pending notices go; its own history stays.
    pub fn reset_session(&self, session_key: &str) -> Result<()> {
        self.check_open()?;
        SessionKey::parse(session_key)?;
        self.engine().reset_session(session_key)
    }

    /// Deletes the session's events, head and upstream link for `agent_id` (the link's
    /// identity is the session and agent, as in OpenClaw); for its own agent also every cursor
    /// where it is watcher or target, and their notices (semantics.md#retention).
    pub fn delete_session(&self, session_key: &str, agent_id: Option<&str>) -> Result<()> {
        self.check_open()?;
        let agent = keys::resolve_agent(session_key, agent_id)?;
        let own = agent == keys::resolve_agent(session_key, None)?;
        self.engine().delete_session(session_key, &agent, own)
    }

    /// Closes the store: the wakes, the monitor, the engine (its background work, then its
    /// connections), then the queue. Idempotent.
    pub fn close(&self) {
        if !self.engine().mark_closed() {
            return;
        }
        self.delivery().close_wakes();
        self.inner.monitor.stop();
        self.engine().close();
        self.delivery().close_queue();
    }
}
