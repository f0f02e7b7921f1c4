//! The engine interface: everything a [`crate::Store`] asks of its storage. The façade
//! checks the arguments, owns the delivery (the notice queue, the wakes, the metrics), the
//! host's callbacks and the upstream monitor, and calls one engine value for the rest. Each
//! engine lives in its folder (`sqlite/engine.rs`, `postgres/engine.rs`) and owns its
//! connections and its background work. A call an engine does not serve is said here once,
//! by a provided method that answers [`unsupported`]; an engine that serves it overrides it.
//! docs/architecture.md ("The engine interface") says why this is a trait object.

use crate::cursors::WatchOptions;
use crate::error::{Error, Result};
use crate::event::{RecordInput, StateEvent};
use crate::log::{Changes, ChangesRef};
use crate::prune::{PruneReport, SweepReport};
use crate::queue::Notice;
use crate::shapes::CursorRow;
use crate::upstream::link_store::LinkStore;
use crate::upstream::LinkRow;

/// Given how many jobs wait in the Promise API's queue, the failure a new job settles with at
/// once instead of waiting (a PostgreSQL store whose connection is down, `maxWaitingCalls`).
/// Defined here, below the writer, since an engine makes it.
pub type Gate = std::sync::Arc<dyn Fn(usize) -> Option<Error> + Send + Sync>;

/// The answer of a call `engine` does not serve: `ERR_INVALID_ARG` "`call` is not on
/// `engine` yet".
pub(crate) fn unsupported(engine: &str, call: &str) -> Error {
    Error::invalid(format!("{call} is not on {engine} yet"))
}

/// A store's storage: its rows, its connections and its background work. Every argument
/// arrives checked by the façade (keys parsed, agents resolved, `after` and `limit` in
/// range); the engine answers `ERR_CLOSED` once closed. The monitor's link rows and the
/// record that writes one come from the supertrait, [`LinkStore`].
pub(crate) trait Engine: LinkStore {
    /// The engine's name in an error (`SQLite`, `PostgreSQL`).
    fn name(&self) -> &'static str;

    /// True for an engine whose calls block on the network: its synchronous JS methods
    /// that need the database answer `ERR_ASYNC_ONLY`, and the Promise API serves them.
    fn is_remote(&self) -> bool {
        false
    }

    /// True once [`Engine::mark_closed`] ran.
    fn is_closed(&self) -> bool;

    /// Marks the engine closed: every later call answers `ERR_CLOSED`. True for the call
    /// that closed it, false when it was already closed.
    fn mark_closed(&self) -> bool;

    /// Stops the engine's background work and closes its connections (the façade has
    /// closed the wakes and stopped the monitor; it closes the queue after).
    fn close(&self);

    /// Serves `watcher` (semantics.md#processes): notices opened for it elsewhere enter this
    /// store's queue.
    fn serve(&self, watcher: &str);

    /// Serves `watcher` for a call that reads its queue and runs no SQL.
    fn serve_reading(&self, watcher: &str);

    /// Records one event (semantics.md#recording), input unchecked: the write path checks it.
    fn record(&self, input: RecordInput, now: i64) -> Result<Option<StateEvent>>;

    /// Records `items` as one group (semantics.md#promise-api).
    fn record_group(&self, items: Vec<(RecordInput, i64)>) -> Vec<Result<Option<StateEvent>>>;

    /// Prunes now and restarts the automatic-prune hour.
    fn prune(&self, now: i64) -> Result<PruneReport>;

    /// `watch` of a watchable pair whose target's agent is `agent` (semantics.md#cursors).
    fn watch(
        &self,
        watcher: &str,
        target: &str,
        agent: &str,
        o: &WatchOptions,
        now: i64,
    ) -> Result<()>;

    /// Removes the cursor and its queued notice. True if a cursor was removed.
    fn unwatch(&self, watcher: &str, target: &str) -> Result<bool>;

    /// The cursor rows as stored, by watcher then target.
    fn cursor_rows(&self, watcher: Option<&str>, target: Option<&str>) -> Result<Vec<CursorRow>>;

    /// Hands out the watcher's queued notices, acknowledged (the queue holds some).
    fn drain(&self, watcher: &str, now: i64) -> Result<Vec<Notice>>;

    /// Acknowledges the watcher's pending notices on `targets` (distinct).
    fn acknowledge(
        &self,
        watcher: &str,
        targets: &[&str],
        scope: Option<&str>,
        through: Option<i64>,
        now: i64,
    ) -> Result<u64>;

    /// The sweep's re-freeze of `only` (every watcher when `None`), then a prune.
    fn sweep(&self, only: Option<&[String]>, now: i64) -> Result<SweepReport>;

    /// The watchers with unacknowledged material history.
    fn sweep_candidates(&self) -> Result<Vec<String>>;

    /// The watcher's cursors and queued notices go.
    fn reset_session(&self, session_key: &str) -> Result<()>;

    /// The session's events, head and link for `agent` go; with `own`, its cursors too.
    fn delete_session(&self, session_key: &str, agent: &str, own: bool) -> Result<()>;

    /// The session's state version (0 when none).
    fn state_version(&self, session_key: &str, agent: &str) -> Result<i64>;

    /// The versions above 0 of the resolved sessions: each one's index and version.
    fn state_versions(&self, resolved: &[(&str, &str)]) -> Result<Vec<(usize, i64)>>;

    /// The typed delta after `after`, at most `limit` events (semantics.md#reading).
    fn changes_since(
        &self,
        session_key: &str,
        agent: &str,
        after: i64,
        limit: u32,
    ) -> Result<Changes>;

    /// [`Engine::changes_since`], lent to `f` (called once, on this thread, before it returns):
    /// an engine that holds the events in memory lends them without copying. `f` must not call
    /// the store. By default the owned answer, lent.
    fn changes_since_with(
        &self,
        session_key: &str,
        agent: &str,
        after: i64,
        limit: u32,
        f: &mut dyn FnMut(ChangesRef<'_>),
    ) -> Result<()> {
        let c = self.changes_since(session_key, agent, after, limit)?;
        f(ChangesRef::of(&c));
        Ok(())
    }

    /// A follower was registered: background work that looks for other hosts' commits to
    /// followed sessions starts looking now. Nothing by default.
    fn followed(&self) {}

    /// The number of watchers served (the `watchers.served` gauge).
    fn served_count(&self) -> u64;

    /// The frames in the write-ahead log (the `wal.frames` gauge); 0 without one.
    fn wal_frames(&self) -> u64 {
        0
    }

    /// The bytes the engine's read cache holds (the `read_cache.size` gauge); 0 without one.
    fn read_cache_bytes(&self) -> u64 {
        0
    }

    /// For the Promise API's queue: the failure a new call settles with at once, given how
    /// many calls wait (docs/postgres.md#faults); `None` for an engine that never refuses one.
    fn waiting_gate(&self) -> Option<Gate> {
        None
    }

    /// The link row of a session and agent (OpenClaw's link-row API).
    fn link_row(&self, _session_key: &str, _agent_id: &str) -> Result<Option<LinkRow>> {
        Err(unsupported(self.name(), "this call"))
    }

    /// The link rows of watched sessions.
    fn watched_link_rows(&self) -> Result<Vec<LinkRow>> {
        Err(unsupported(self.name(), "this call"))
    }

    /// Writes a link row with OpenClaw's conflict rule. True when written.
    fn upsert_link_row(&self, _row: &LinkRow, _if_absent: bool, _now: i64) -> Result<bool> {
        Err(unsupported(self.name(), "this call"))
    }

    /// Sets a link's marker, while its `updated_at` is `expected` when given.
    fn set_link_marker(
        &self,
        _session_key: &str,
        _agent_id: &str,
        _marker_json: &str,
        _now: i64,
        _expected: Option<i64>,
    ) -> Result<bool> {
        Err(unsupported(self.name(), "this call"))
    }

    /// Deletes the link row of a session and agent. True if there was one.
    fn delete_link_row(&self, _session_key: &str, _agent_id: &str) -> Result<bool> {
        Err(unsupported(self.name(), "this call"))
    }

    /// True when `watcher` is served (a test hook).
    #[cfg(any(test, feature = "test-hooks"))]
    fn serves(&self, watcher: &str) -> bool;

    /// Looks for other processes' or hosts' changes now (a test hook).
    #[cfg(any(test, feature = "test-hooks"))]
    fn sync_now(&self) -> Result<()>;

    /// True while the background work that delivers other processes' or hosts' notices runs.
    #[cfg(any(test, feature = "test-hooks"))]
    fn is_syncing(&self) -> bool;

    /// How many times the engine's listener connected (0 without one).
    #[cfg(any(test, feature = "test-hooks"))]
    fn listener_connects(&self) -> u64 {
        0
    }

    /// True while an automatic prune runs in the background.
    #[cfg(any(test, feature = "test-hooks"))]
    fn is_pruning(&self) -> bool;

    /// Holds the next catch-up of other hosts' notices between its read of the rows and its
    /// update of the queue (`None` for an engine without one).
    #[cfg(any(test, feature = "test-hooks"))]
    fn pause_next_catch_up(&self) -> Option<crate::pause::Pause> {
        None
    }
}
