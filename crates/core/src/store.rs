//! [`Store`]: the signal log, the cursors, the notice queue and the wake scheduler behind one
//! SQLite connection. Every method that needs the time takes `now` (epoch ms) from the caller,
//! so the host's clock governs heads, cursors and retention.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use rusqlite::Connection;

use crate::checkpoint::Checkpointer;
use crate::cursors::{self, Pending, Provenance};
use crate::error::{Error, Result};
use crate::event::{self, EventKind, RecordInput, StateEvent};
use crate::exclusive::FileGuard;
use crate::keys::{self, SessionKey};
use crate::log::{self, Changes, Inserted};
use crate::prune::{self, PruneReport};
use crate::queue::{Notice, NoticeQueue};
use crate::runtime;
use crate::schema;
use crate::sync::SyncState;
use crate::tx::Tx;
use crate::wake::{WakeScheduler, WakeSink};

/// An hour: a record prunes when this long has passed since the last prune (§6).
pub const AUTO_PRUNE_INTERVAL_MS: i64 = 60 * 60 * 1000;

/// Tunables of a store (§5). Ranges are checked by [`Options::validate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Events and cursors older than this are pruned. Default 30 days.
    pub retention_ms: i64,
    /// At most this many events are kept. Default 50,000.
    pub max_events: u64,
    /// How long a write waits for another writer's lock. Default 30 s.
    pub busy_timeout_ms: u32,
    /// How long a due wake waits for more to coalesce. Default 250 ms.
    pub wake_coalesce_ms: u32,
    /// How often the store looks for cursor changes made by other processes (§12). Default
    /// 100 ms; 0 turns the cross-process delivery off.
    pub sync_interval_ms: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            retention_ms: 30 * 24 * 60 * 60 * 1000,
            max_events: 50_000,
            busy_timeout_ms: 30_000,
            wake_coalesce_ms: 250,
            sync_interval_ms: 100,
        }
    }
}

/// The largest accepted `retentionMs` (about 285 years) and `wakeCoalesceMs` (one minute).
pub const MAX_RETENTION_MS: i64 = 9_000_000_000_000;
/// See [`MAX_RETENTION_MS`].
pub const MAX_WAKE_COALESCE_MS: u32 = 60_000;
/// The largest accepted `syncIntervalMs` (one minute).
pub const MAX_SYNC_INTERVAL_MS: u32 = 60_000;

impl Options {
    /// Refuses values outside the documented ranges: `retentionMs` in [1, 9e12],
    /// `maxEvents` in [1, 2^53 - 1], `busyTimeoutMs` in [0, 2^31 - 1], `wakeCoalesceMs` and
    /// `syncIntervalMs` in [0, 60000].
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_RETENTION_MS).contains(&self.retention_ms) {
            return Err(Error::invalid(
                "retentionMs must be an integer in [1, 9e12]",
            ));
        }
        if !(1..=log::MAX_SAFE_INTEGER as u64).contains(&self.max_events) {
            return Err(Error::invalid("maxEvents must be a positive safe integer"));
        }
        if self.busy_timeout_ms > i32::MAX as u32 {
            return Err(Error::invalid(
                "busyTimeoutMs must be an integer in [0, 2^31 - 1]",
            ));
        }
        if self.wake_coalesce_ms > MAX_WAKE_COALESCE_MS {
            return Err(Error::invalid(
                "wakeCoalesceMs must be an integer in [0, 60000]",
            ));
        }
        if self.sync_interval_ms > MAX_SYNC_INTERVAL_MS {
            return Err(Error::invalid(
                "syncIntervalMs must be an integer in [0, 60000]",
            ));
        }
        Ok(())
    }
}

/// Receives failures of work the caller did not wait for (the automatic prune, background
/// scans). The binding forwards them to the host's `onError`.
pub trait ErrorSink: Send + Sync + 'static {
    /// Reports one failure.
    fn report(&self, error: Error);
}

/// The clock background work reads (foreground calls pass `now` themselves).
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Callbacks into the host.
#[derive(Default, Clone)]
pub struct Hooks {
    /// Where wakes go (§8); none means queue-only.
    pub wake: Option<Arc<dyn WakeSink>>,
    /// Where background failures go.
    pub errors: Option<Arc<dyn ErrorSink>>,
    /// The clock for background work; the system clock when absent.
    pub clock: Option<Clock>,
}

/// The outcome of a sweep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Cursors whose notice is pending after the sweep.
    pub notices: u64,
    /// The prune that followed.
    pub prune: PruneReport,
}

/// A session named for `stateVersions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRef {
    /// The session.
    pub session_key: String,
    /// Its agent, if not the key's own (or `main`).
    pub agent_id: Option<String>,
}

/// When the last prune ran, and a clock reading for one more run requested while one ran.
#[derive(Default)]
struct AutoPrune {
    last: Option<i64>,
    again: Option<i64>,
}

pub(crate) struct Shared {
    pub(crate) conn: Mutex<Option<Connection>>,
    /// Callers blocked waiting for `conn`.
    conn_waiters: AtomicUsize,
    pub(crate) queue: Mutex<NoticeQueue>,
    closed: AtomicBool,
    wake: Option<WakeScheduler>,
    hooks: Hooks,
    pub(crate) opts: Options,
    auto_prune: Mutex<AutoPrune>,
    pruning: AtomicBool,
    pub(crate) monitor: Mutex<crate::upstream::MonitorState>,
    pub(crate) sync: Option<SyncState>,
    checkpointer: Option<Checkpointer>,
    /// Another library of this process on the file (None in memory).
    pub(crate) guard: Option<Arc<FileGuard>>,
}

/// A session-state store over one SQLite file. Cheap to clone: clones share everything.
#[derive(Clone)]
pub struct Store {
    pub(crate) shared: Arc<Shared>,
}

/// The system clock, in epoch ms.
pub fn system_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub(crate) fn wakes_for(p: &Pending) -> bool {
    p.provenance == Provenance::Explicit && SessionKey::classify(&p.watcher).is_main_like()
}

impl Store {
    /// Opens the store at `path` (`:memory:` for a private in-memory database).
    /// Opening never prunes. With `sync_interval_ms` > 0 and a database file, a background
    /// task delivers notices opened by other processes (§12, [`crate::sync`]).
    pub fn open(path: &str, opts: Options, hooks: Hooks) -> Result<Self> {
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
        let sync = match conn.path().filter(|p| !p.is_empty()) {
            Some(file) if opts.sync_interval_ms > 0 => {
                Some(SyncState::open(file, opts.sync_interval_ms, &conn)?)
            }
            _ => None,
        };
        let wake = hooks
            .wake
            .clone()
            .map(|sink| WakeScheduler::new(sink, opts.wake_coalesce_ms));
        let store = Store {
            shared: Arc::new(Shared {
                conn: Mutex::new(Some(conn)),
                conn_waiters: AtomicUsize::new(0),
                queue: Mutex::new(NoticeQueue::default()),
                closed: AtomicBool::new(false),
                wake,
                hooks,
                opts,
                auto_prune: Mutex::new(AutoPrune::default()),
                pruning: AtomicBool::new(false),
                monitor: Mutex::new(Default::default()),
                sync,
                checkpointer,
                guard,
            }),
        };
        if let Some(sync) = &store.shared.sync {
            sync.spawn(Arc::downgrade(&store.shared));
        }
        Ok(store)
    }

    /// Serves `watcher` (§12): notices opened for it by other processes enter this store's
    /// queue and schedule its wakes. Drains, peeks, acknowledges, watches and producer-named
    /// watchers of a record do this implicitly. A bare key is accepted and ignored (it never
    /// has notices); the empty key is `ERR_INVALID_ARG`. Without cross-process delivery (a
    /// `sync_interval_ms` of 0, or an in-memory database) it does nothing.
    pub fn serve(&self, watcher: &str) -> Result<()> {
        self.check_open()?;
        SessionKey::parse(watcher)?;
        self.mark_served(watcher);
        Ok(())
    }

    /// True when `watcher` is served (see [`Store::serve`]).
    pub fn serves(&self, watcher: &str) -> bool {
        self.shared.sync.as_ref().is_some_and(|s| s.serves(watcher))
    }

    fn mark_served(&self, watcher: &str) {
        if let Some(s) = &self.shared.sync {
            s.serve(watcher);
        }
    }

    /// Looks for changes made by other processes now instead of at the next poll, and
    /// brings the queue in line with the cursor rows. A no-op without cross-process delivery.
    pub fn sync_now(&self) -> Result<()> {
        self.check_open()?;
        match &self.shared.sync {
            Some(s) => s.run(self, true),
            None => Ok(()),
        }
    }

    /// True while the background poll for other processes' changes runs (until `close`).
    pub fn is_syncing(&self) -> bool {
        self.shared.sync.as_ref().is_some_and(SyncState::is_running)
    }

    /// The options in force.
    pub fn options(&self) -> Options {
        self.shared.opts
    }

    /// The clock background work uses.
    pub fn now(&self) -> i64 {
        self.shared
            .hooks
            .clock
            .as_ref()
            .map_or_else(system_now, |c| c())
    }

    /// True once [`Store::close`] ran.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Runs `f` with the connection, or fails with `ERR_CLOSED`.
    pub(crate) fn with_conn<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        let mut guard = self.lock_conn()?;
        let conn = guard.as_mut().ok_or(Error::Closed)?;
        f(conn)
    }

    pub(crate) fn lock_conn(&self) -> Result<MutexGuard<'_, Option<Connection>>> {
        let guard = match self.shared.conn.try_lock() {
            Some(g) => g,
            None => {
                // Counted, so background work between two transactions lets this caller in
                // first (see `yield_to_waiters`).
                self.shared.conn_waiters.fetch_add(1, Ordering::AcqRel);
                let g = self.shared.conn.lock();
                self.shared.conn_waiters.fetch_sub(1, Ordering::AcqRel);
                g
            }
        };
        if guard.is_none() {
            return Err(Error::Closed);
        }
        // Every call that touches the database comes here, right before its SQL: a handle of
        // another library that appeared since the last call is found before the write.
        if let Some(g) = &self.shared.guard {
            g.check()?;
        }
        Ok(guard)
    }

    /// Reports a failure of background work to the host.
    pub fn report(&self, error: Error) {
        if let Some(sink) = &self.shared.hooks.errors {
            sink.report(error);
        }
    }

    /// Queues the notices of `pending` (already committed), keeping one per pair, and returns
    /// the watchers to wake with the target that made the wake due. Caller holds the conn lock.
    pub(crate) fn enqueue(&self, pending: &[Pending]) -> Vec<(String, String)> {
        let mut q = self.shared.queue.lock();
        let mut wakes = Vec::new();
        for p in pending {
            if q.upsert(&p.watcher, &p.target, p.last_seen) && wakes_for(p) {
                wakes.push((p.watcher.clone(), p.target.to_string()));
            }
        }
        wakes
    }

    /// Schedules the due wakes. Called after every lock is released.
    pub(crate) fn wake_all(&self, wakes: Vec<(String, String)>) {
        if let Some(w) = &self.shared.wake {
            for (watcher, target) in wakes {
                w.due(&watcher, &target);
            }
        }
    }

    /// Records one event (§6). `Ok(None)` means `onlyIfWatched` found nobody watching.
    pub fn record(&self, input: RecordInput, now: i64) -> Result<Option<StateEvent>> {
        self.record_with(input, now, |_| Ok(()))
    }

    /// [`Store::record`], with `also` run in the same write transaction once the event is in
    /// (or found by its dedupe key): a failure of either leaves neither. `also` does not run
    /// when `onlyIfWatched` finds nobody watching.
    pub(crate) fn record_with(
        &self,
        input: RecordInput,
        now: i64,
        also: impl FnOnce(&Connection) -> Result<()>,
    ) -> Result<Option<StateEvent>> {
        self.check_open()?;
        let v = event::validate(input, now)?;
        for w in &v.watchers {
            self.mark_served(w);
        }
        let target = v.event.session_key.as_str();
        let watchable = keys::is_watchable(target);
        let mut guard = self.lock_conn()?;
        let conn = guard.as_mut().expect("checked open");
        if v.only_if_watched && v.watchers.is_empty() {
            // A read outside the write lock: a watch racing with this record simply lands
            // after it.
            let watched = watchable && cursors::is_watched(conn, target)?;
            if !watched {
                return Ok(None);
            }
        }
        let tx = Tx::immediate(conn)?;
        let sequence = match log::insert_event(&tx, &v)? {
            Inserted::New(seq) => seq,
            Inserted::Duplicate(first) => {
                also(&tx)?;
                tx.commit()?;
                return Ok(Some(first));
            }
        };
        log::bump_head(&tx, target, &v.event.agent_id, sequence, now)?;
        let mut pending = Vec::new();
        let mut reseeded = Vec::new();
        if watchable {
            if v.event.kind == EventKind::ChildSpawned {
                for w in &v.watchers {
                    if cursors::seed(&tx, w, target, sequence, now)? {
                        reseeded.push(w.as_str());
                    }
                }
            } else if v.event.kind.notifies() {
                let actor = v.event.actor_id.as_deref();
                let shared: Arc<str> = Arc::from(target);
                pending = cursors::material_update(&tx, &shared, sequence, actor, now)?;
                for w in v.watchers.iter().filter(|w| Some(w.as_str()) != actor) {
                    pending.extend(cursors::material_insert(&tx, w, &shared, sequence, now)?);
                }
            }
        }
        also(&tx)?;
        tx.commit()?;
        if !reseeded.is_empty() {
            let mut q = self.shared.queue.lock();
            for w in reseeded {
                q.remove(w, target);
            }
        }
        let wakes = self.enqueue(&pending);
        drop(guard);
        self.wake_all(wakes);
        self.maybe_prune_in_background(now);
        let mut event = v.event;
        event.sequence = sequence;
        Ok(Some(event))
    }

    fn maybe_prune_in_background(&self, now: i64) {
        {
            let mut state = self.shared.auto_prune.lock();
            if state
                .last
                .is_some_and(|t| now - t <= AUTO_PRUNE_INTERVAL_MS)
            {
                return;
            }
            state.last = Some(now);
            if self.shared.pruning.load(Ordering::Acquire) {
                // One is running: it runs again with this clock reading when it is done.
                state.again = Some(now);
                return;
            }
            self.shared.pruning.store(true, Ordering::Release);
        }
        let store = self.clone();
        // Pruning a large backlog takes many batches: run them off the caller's thread, taking
        // the connection one batch at a time, so the JS thread never waits more than a batch.
        runtime::handle().spawn_blocking(move || {
            let mut now = now;
            loop {
                match store.prune_batches(now, true) {
                    // A shared file is reported by the caller's own calls, which it refuses.
                    Ok(_) | Err(Error::Closed | Error::FileShared(_)) => {}
                    Err(e) => store.report(e),
                }
                let mut state = store.shared.auto_prune.lock();
                match state.again.take() {
                    Some(next) if !store.is_closed() => now = next,
                    _ => {
                        store.shared.pruning.store(false, Ordering::Release);
                        return;
                    }
                }
            }
        });
    }

    /// True while an automatic prune runs in the background.
    pub fn is_pruning(&self) -> bool {
        self.shared.pruning.load(Ordering::Acquire)
    }

    /// The watchers with a wake scheduled and not yet delivered, sorted (none without a
    /// wake sink). Lets tests check the wake rule (§8) without waiting for the timer.
    pub fn scheduled_wakes(&self) -> Vec<String> {
        self.shared
            .wake
            .as_ref()
            .map_or_else(Vec::new, WakeScheduler::scheduled_watchers)
    }

    /// Prunes now (§10) and restarts the automatic-prune hour.
    pub fn prune(&self, now: i64) -> Result<PruneReport> {
        self.check_open()?;
        self.shared.auto_prune.lock().last = Some(now);
        self.prune_batches(now, false)
    }

    /// Called by background work between two of its transactions: a caller waiting for the
    /// connection (the JS thread) takes it before the next one. Without this the background
    /// thread, already running, usually locks again before the waiter (spinning or yielding
    /// on a busy machine) notices the connection was free, and the waiter sits through
    /// several batches. Bounded, so a steady stream of callers cannot stall the work.
    fn yield_to_waiters(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(20);
        while self.shared.conn_waiters.load(Ordering::Acquire) > 0
            && std::time::Instant::now() < deadline
        {
            std::thread::yield_now();
        }
    }

    /// Prunes in batches. In the `background`, the WAL is checkpointed between batches and
    /// waiting callers go first.
    fn prune_batches(&self, now: i64, background: bool) -> Result<PruneReport> {
        let opts = self.shared.opts;
        let age_cutoff = now.saturating_sub(opts.retention_ms);
        let mut report = PruneReport::default();
        loop {
            let mut guard = self.lock_conn()?;
            let conn = guard.as_mut().expect("checked open");
            let tx = Tx::immediate(conn)?;
            let batch = if background {
                prune::BATCH
            } else {
                prune::SYNC_BATCH
            };
            let n = prune::events_batch(&tx, age_cutoff, opts.max_events, batch)?;
            tx.commit()?;
            drop(guard);
            if background {
                self.yield_to_waiters();
            }
            report.events_deleted += n as u64;
            if let (true, Some(c)) = (background, &self.shared.checkpointer) {
                if let Err(e) = c.catch_up() {
                    self.report(e);
                }
            }
            // A short batch may be the last of the age pass; the row cap still has to run,
            // so only an empty batch means done.
            if n == 0 {
                break;
            }
        }
        let mut after = 0;
        loop {
            let mut guard = self.lock_conn()?;
            let conn = guard.as_mut().expect("checked open");
            let tx = Tx::immediate(conn)?;
            let (expired, deleted, next) =
                cursors::expire_chunk(&tx, age_cutoff, after, cursors::EXPIRE_CHUNK)?;
            tx.commit()?;
            {
                let mut q = self.shared.queue.lock();
                for (w, t) in &expired {
                    q.remove(w, t);
                }
            }
            drop(guard);
            if background {
                self.yield_to_waiters();
            }
            report.cursors_deleted += deleted;
            match next {
                Some(n) => after = n,
                None => break,
            }
        }
        Ok(report)
    }

    /// `watch` (§7). False for a bare watcher or target, or watcher == target.
    pub fn watch(
        &self,
        watcher: &str,
        target: &str,
        provenance: Provenance,
        now: i64,
    ) -> Result<bool> {
        self.check_open()?;
        SessionKey::parse(watcher)?;
        let t = SessionKey::parse(target)?;
        let (SessionKey::Qualified { agent, .. }, true) =
            (t, keys::is_watchable(watcher) && watcher != target)
        else {
            return Ok(false);
        };
        self.mark_served(watcher);
        self.with_conn(|conn| {
            let tx = Tx::immediate(conn)?;
            let head = log::head(&tx, target, agent)?.last_sequence;
            cursors::watch(&tx, watcher, target, head, provenance, now)?;
            tx.commit()?;
            Ok(true)
        })
    }

    /// Removes the cursor and its pending notice. True if a cursor was removed.
    pub fn unwatch(&self, watcher: &str, target: &str) -> Result<bool> {
        self.check_open()?;
        SessionKey::parse(watcher)?;
        SessionKey::parse(target)?;
        let mut guard = self.lock_conn()?;
        let removed = cursors::delete(guard.as_mut().expect("checked open"), watcher, target)?;
        self.shared.queue.lock().remove(watcher, target);
        Ok(removed)
    }

    /// The state version of a session (0 when none).
    pub fn state_version(&self, session_key: &str, agent_id: Option<&str>) -> Result<i64> {
        self.check_open()?;
        let agent = keys::resolve_agent(session_key, agent_id)?;
        self.with_conn(|conn| Ok(log::head(conn, session_key, &agent)?.last_sequence))
    }

    /// The state versions of many sessions, in the order given, leaving out those at 0.
    pub fn state_versions(&self, refs: &[VersionRef]) -> Result<Vec<(String, String, i64)>> {
        self.check_open()?;
        let resolved = refs
            .iter()
            .map(|r| {
                Ok((
                    r.session_key.as_str(),
                    keys::resolve_agent(&r.session_key, r.agent_id.as_deref())?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        self.with_conn(|conn| {
            let tx = Tx::read(conn)?;
            let mut out = Vec::with_capacity(resolved.len());
            for (key, agent) in resolved {
                let v = log::head(&tx, key, &agent)?.last_sequence;
                if v > 0 {
                    out.push((key.to_owned(), agent, v));
                }
            }
            tx.commit()?;
            Ok(out)
        })
    }

    /// The typed delta after `after` (§9). Moves no cursor.
    pub fn changes_since(
        &self,
        session_key: &str,
        after: f64,
        agent_id: Option<&str>,
        limit: Option<f64>,
    ) -> Result<Changes> {
        self.check_open()?;
        let agent = keys::resolve_agent(session_key, agent_id)?;
        let after = log::check_after(after)?;
        let limit = log::clamp_limit(limit)?;
        self.with_conn(|conn| log::changes_since(conn, session_key, &agent, after, limit))
    }

    /// The words the notice queue keeps current for a reader that takes no lock
    /// ([`crate::queue::QueueSignal`]).
    pub fn queue_signal(&self) -> Arc<crate::queue::QueueSignal> {
        Arc::clone(self.shared.queue.lock().signal())
    }

    /// True when the watcher has queued notices. Runs no SQL.
    pub fn has_pending(&self, watcher: &str) -> Result<bool> {
        self.check_open()?;
        SessionKey::check(watcher)?;
        self.mark_served(watcher);
        Ok(self.shared.queue.lock().has_any(watcher))
    }

    /// The watcher's pending notices, nothing acknowledged. Runs no SQL.
    pub fn peek(&self, watcher: &str) -> Result<Vec<Notice>> {
        self.check_open()?;
        SessionKey::parse(watcher)?;
        self.mark_served(watcher);
        Ok(self.shared.queue.lock().peek(watcher))
    }

    /// The watcher's pending notices, acknowledged (§7). With nothing queued it runs no SQL.
    pub fn drain(&self, watcher: &str, now: i64) -> Result<Vec<Notice>> {
        self.check_open()?;
        SessionKey::parse(watcher)?;
        self.mark_served(watcher);
        if !self.shared.queue.lock().has_any(watcher) {
            return Ok(Vec::new());
        }
        let mut guard = self.lock_conn()?;
        let conn = guard.as_mut().expect("checked open");
        let queued = self.shared.queue.lock().take(watcher);
        let outcome = (|| {
            let tx = Tx::immediate(conn)?;
            let mut out = Vec::with_capacity(queued.len());
            let mut reopened = Vec::new();
            for n in &queued {
                // The cursor row decides: a notice consumed elsewhere is not handed out again.
                if let Some(acked) = cursors::acknowledge(&tx, watcher, &n.target, now)? {
                    out.push(Notice::new(watcher, &n.target, acked.old_last_seen));
                    if acked.after.notified != acked.after.last_seen {
                        reopened.push(acked.after);
                    }
                }
            }
            tx.commit()?;
            Ok((out, reopened))
        })();
        match outcome {
            Ok((out, reopened)) => {
                let wakes = self.enqueue(&reopened);
                drop(guard);
                self.wake_all(wakes);
                Ok(out)
            }
            Err(e) => {
                let mut q = self.shared.queue.lock();
                for n in queued {
                    q.push(watcher, &n.target, n.changes_since);
                }
                Err(e)
            }
        }
    }

    /// Acknowledges the watcher's pending notices on `targets` (§7), for hosts that route
    /// notices through their own queue. Returns how many pending notices it acknowledged.
    pub fn acknowledge(&self, watcher: &str, targets: &[String], now: i64) -> Result<u64> {
        self.check_open()?;
        SessionKey::parse(watcher)?;
        self.mark_served(watcher);
        let mut unique: Vec<&str> = Vec::with_capacity(targets.len());
        for t in targets {
            SessionKey::parse(t)?;
            if !unique.contains(&t.as_str()) {
                unique.push(t);
            }
        }
        let mut guard = self.lock_conn()?;
        let conn = guard.as_mut().expect("checked open");
        let tx = Tx::immediate(conn)?;
        let mut count = 0;
        let mut acked = Vec::new();
        for t in unique {
            if let Some(a) = cursors::acknowledge(&tx, watcher, t, now)? {
                count += 1;
                acked.push(a.after);
            }
        }
        tx.commit()?;
        let reopened: Vec<Pending> = {
            let mut q = self.shared.queue.lock();
            for a in &acked {
                q.remove(watcher, &a.target);
            }
            acked
                .into_iter()
                .filter(|a| a.notified != a.last_seen)
                .collect()
        };
        let wakes = self.enqueue(&reopened);
        drop(guard);
        self.wake_all(wakes);
        Ok(count)
    }

    /// Sweep (§7), then a prune. `watcher_exists` is asked once per watcher with material
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
                let candidates = self.with_conn(|conn| cursors::watchers_behind(conn))?;
                Some(
                    candidates
                        .into_iter()
                        .filter(|w| exists(w))
                        .collect::<Vec<_>>(),
                )
            }
        };
        let mut guard = self.lock_conn()?;
        let conn = guard.as_mut().expect("checked open");
        let tx = Tx::immediate(conn)?;
        let pending = cursors::refreeze(&tx, only.as_deref())?;
        tx.commit()?;
        let wakes = self.enqueue(&pending);
        drop(guard);
        self.wake_all(wakes);
        let prune = self.prune(now)?;
        // The prune may expire cursors just re-queued; their notices are not pending after it.
        let notices = {
            let q = self.shared.queue.lock();
            pending
                .iter()
                .filter(|p| q.contains(&p.watcher, &p.target))
                .count()
        };
        Ok(SweepReport {
            notices: notices as u64,
            prune,
        })
    }

    /// The watcher session was reset: its cursors and pending notices go; its own history stays.
    pub fn reset_session(&self, session_key: &str) -> Result<()> {
        self.check_open()?;
        SessionKey::parse(session_key)?;
        let mut guard = self.lock_conn()?;
        cursors::delete_watcher(guard.as_mut().expect("checked open"), session_key)?;
        self.shared.queue.lock().remove_watcher(session_key);
        drop(guard);
        if let Some(w) = &self.shared.wake {
            w.cancel(session_key);
        }
        Ok(())
    }

    /// Deletes the session's events, head and upstream link for `agent_id` (the link's
    /// identity is the session and agent, as in OpenClaw); for its own agent also every cursor
    /// where it is watcher or target, and their notices (§10).
    pub fn delete_session(&self, session_key: &str, agent_id: Option<&str>) -> Result<()> {
        self.check_open()?;
        let agent = keys::resolve_agent(session_key, agent_id)?;
        let own = agent == keys::resolve_agent(session_key, None)?;
        let mut guard = self.lock_conn()?;
        let conn = guard.as_mut().expect("checked open");
        let tx = Tx::immediate(conn)?;
        log::delete_session(&tx, session_key, &agent)?;
        crate::upstream::links::delete(&tx, session_key, &agent)?;
        if own {
            cursors::delete_watcher(&tx, session_key)?;
            cursors::delete_target(&tx, session_key)?;
        }
        tx.commit()?;
        if own {
            if let Some(s) = &self.shared.sync {
                s.unserve(session_key);
                self.shared.queue.lock().signal().unserved();
            }
            let mut q = self.shared.queue.lock();
            q.remove_watcher(session_key);
            q.remove_target(session_key);
            drop(q);
            drop(guard);
            if let Some(w) = &self.shared.wake {
                w.cancel(session_key);
            }
        }
        Ok(())
    }

    /// Closes the store: the connection, the queue and every scheduled wake. Idempotent.
    pub fn close(&self) {
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(w) = &self.shared.wake {
            w.close();
        }
        self.stop_upstream_monitor();
        // The poller's read-only connection goes first: the store's own connection, closed
        // last, checkpoints the WAL into the file and removes the -wal and -shm files, so a
        // closed store leaves one complete file (a read-only connection closed last does not).
        if let Some(s) = &self.shared.sync {
            s.stop();
        }
        // The checkpointer's connection too (after its checkpoint in progress, if any).
        if let Some(c) = &self.shared.checkpointer {
            c.close();
        }
        let conn = self.shared.conn.lock().take();
        let mut q = self.shared.queue.lock();
        q.clear();
        q.signal().close();
        drop(q);
        drop(conn);
    }
}
