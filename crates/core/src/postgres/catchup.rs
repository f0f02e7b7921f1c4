//! Notices across hosts on PostgreSQL (semantics.md#processes): which watchers this store
//! serves, its leases, and the background task that keeps its queue in line with the cursor
//! rows.
//!
//! The task runs on the core runtime over a connection of its own (the listener): it LISTENs
//! on the schema's channel ([`super::listen`]), and catches up from the cursor rows of the
//! served watchers at every (re)connect and every `syncIntervalMs` (notifications are lost
//! while disconnected), and for the watchers a notification names as soon as it arrives. The
//! same connection writes the leases ([`super::lease`]). A lost connection is retried with
//! backoff (50 ms doubling to 5 s); a failure is reported to `onError` once until the task
//! is connected again.
//!
//! A record's notices are queued here by [`Notices::after_commit`] under the lease rule: on
//! this host when it serves the watcher or no live host does.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, GenericClient};

mod queue;
mod rebuild;

use super::cursors;
use super::follow::{self, Elsewhere};
use super::lease;
use super::listen::{self, Hint};
use crate::cursors::Pending;
use crate::delivery::{Delivery, Wake};
use crate::error::{Error, Result};
use crate::hooks::{Host, Task};
use crate::keys;
use crate::options::SchemaName;
use crate::postgres::cursors::Cached;
use crate::postgres::tail::{notify, notify_if_served, Prepared, Tail, Told};

/// Opens the listener's connection: a client whose connection is driven on the core runtime,
/// and the payloads of its notifications ([`listen::drive`]).
pub(crate) type Connector = Arc<
    dyn Fn() -> Pin<
            Box<dyn Future<Output = Result<(Client, mpsc::UnboundedReceiver<String>)>> + Send>,
        > + Send
        + Sync,
>;

const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Served {
    all: HashSet<String, foldhash::fast::RandomState>,
    // Served since the last catch-up: read at the next one.
    fresh: Vec<String>,
    // Leases to write at the next turn of the task, and to drop.
    lease_due: bool,
    released: Vec<String>,
}

/// What the store and its task share.
pub(crate) struct State {
    /// The schema, and the hint's channel.
    pub(crate) schema: SchemaName,
    /// This store's name among the hosts.
    pub(crate) instance: String,
    delivery: Arc<Delivery>,
    host: Host,
    interval: Duration,
    lease_ms: i64,
    served: Mutex<Served>,
    renewed_at: AtomicI64,
    // A catch-up's read and its queue update, and a drain's, never interleave.
    sync_lock: tokio::sync::Mutex<()>,
    kick: tokio::sync::Notify,
    closed: AtomicBool,
    // The task is in a turn (a lease write may be in flight): a close lets it finish.
    in_turn: AtomicBool,
    failing: AtomicBool,
    listener: Mutex<Option<Arc<Client>>>,
    connects: AtomicU64,
    catch_ups: AtomicU64,
    /// The sessions other hosts follow, and what this host announced.
    elsewhere: Elsewhere,
    // While a catch-up reads the rows: the pairs this store queued meanwhile
    // (`State::queue_here`), which the catch-up may not take out.
    reading: Mutex<Option<HashSet<(String, String)>>>,
    #[cfg(any(test, feature = "test-hooks"))]
    hold: Mutex<Option<crate::pause::Hold>>,
}

/// The cross-host state of one PostgreSQL store and its background task.
pub(crate) struct Notices {
    state: Arc<State>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Notices {
    /// The state of a store on `schema`, its task not started; `interval_ms` is
    /// `syncIntervalMs` (0: no task, no leases, the recording host queues everything).
    pub(crate) fn new(
        schema: SchemaName,
        interval_ms: u32,
        delivery: Arc<Delivery>,
        host: Host,
    ) -> Self {
        Notices {
            state: Arc::new(State {
                schema,
                instance: crate::lease::instance_id(),
                delivery,
                host,
                interval: Duration::from_millis(u64::from(interval_ms)),
                lease_ms: crate::lease::length_ms(interval_ms),
                served: Mutex::new(Served::default()),
                renewed_at: AtomicI64::new(0),
                sync_lock: tokio::sync::Mutex::new(()),
                kick: tokio::sync::Notify::new(),
                closed: AtomicBool::new(false),
                in_turn: AtomicBool::new(false),
                failing: AtomicBool::new(false),
                listener: Mutex::new(None),
                connects: AtomicU64::new(0),
                catch_ups: AtomicU64::new(0),
                elsewhere: Elsewhere::default(),
                reading: Mutex::new(None),
                #[cfg(any(test, feature = "test-hooks"))]
                hold: Mutex::new(None),
            }),
            task: Mutex::new(None),
        }
    }

    /// The shared state.
    pub(crate) fn state(&self) -> &Arc<State> {
        &self.state
    }

    /// True when notices cross hosts (`syncIntervalMs` > 0).
    pub(crate) fn is_on(&self) -> bool {
        !self.state.interval.is_zero()
    }

    /// Starts the background task over connections from `connect`.
    pub(crate) fn spawn(&self, connect: Connector) {
        if !self.is_on() {
            return;
        }
        let state = Arc::clone(&self.state);
        let task = crate::runtime::handle().spawn(async move { state.run(connect).await });
        *self.task.lock() = Some(task);
    }

    /// Asks the task for a turn now (a follower started: it announces the sessions followed
    /// here at once, semantics.md#follow).
    pub(crate) fn kick(&self) {
        if self.is_on() {
            self.state.kick.notify_one();
        }
    }

    /// Serves `watcher`: its lease is written and its pending notices read at the task's
    /// next turn, which this asks for at once. Cheap when it is served already.
    pub(crate) fn serve(&self, watcher: &str) {
        if !self.is_on() || !keys::is_watchable(watcher) {
            return;
        }
        let mut s = self.state.served.lock();
        if s.all.insert(watcher.to_owned()) {
            s.fresh.push(watcher.to_owned());
            s.released.retain(|w| w != watcher);
            s.lease_due = true;
            drop(s);
            self.state.kick.notify_one();
        }
    }

    /// Stops serving `watcher` (its session was deleted).
    pub(crate) fn unserve(&self, watcher: &str) {
        let mut s = self.state.served.lock();
        if s.all.remove(watcher) {
            s.released.push(watcher.to_owned());
            s.lease_due = true;
        }
        s.fresh.retain(|w| w != watcher);
    }

    /// True when `watcher` is served.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn serves(&self, watcher: &str) -> bool {
        self.state.served.lock().all.contains(watcher)
    }

    /// Reads the pending cursors of `watcher` on `c` and queues them now, when it was served
    /// since the last catch-up (the first `drain` of a watcher on this host answers with what
    /// is pending for it, not `[]`). Costs nothing otherwise.
    pub(crate) async fn read_fresh(&self, c: &mut Cached<'_>, watcher: &str) -> Result<()> {
        let fresh = {
            let mut s = self.state.served.lock();
            match s.fresh.iter().position(|w| w == watcher) {
                Some(i) => {
                    s.fresh.swap_remove(i);
                    true
                }
                None => false,
            }
        };
        if fresh {
            let r = self.state.catch_up(c, vec![watcher.to_owned()]).await;
            if r.is_err() {
                self.state.served.lock().fresh.push(watcher.to_owned());
            }
            r?;
        }
        Ok(())
    }

    /// Queues the notices a committed record opened (`pending`) under the lease rule, and
    /// sends the hint naming their watchers, in a round trip of their own after the commit.
    /// Returns the wakes to schedule. The record path sends both with its `COMMIT` instead
    /// ([`Notices::tail`], [`Notices::settle`]).
    pub(crate) async fn after_commit(&self, c: &mut Cached<'_>, pending: &[Pending]) -> Vec<Wake> {
        let Some(tail) = self.tail(pending, &[], &[]) else {
            return self.state.queue_here(pending);
        };
        let prepared = Prepared::on(c, tail.asks()).await;
        let mut told = tail.send(c.client, prepared).await;
        self.settle(pending, &mut told)
    }

    /// What a commit that opens the notices `pending` sends after its `COMMIT`, or `None`
    /// when notices do not cross hosts or it opens none. `reseeded` (watcher, target): the
    /// pairs whose queued notice the commit drops (a `child_spawned` reseeded the cursor),
    /// taken as not held here.
    pub(crate) fn tail(
        &self,
        pending: &[Pending],
        reseeded: &[(&str, &str)],
        written: &[&str],
    ) -> Option<Tail> {
        if !self.is_on() {
            return None;
        }
        // The sessions written that another host follows: the hint names them (semantics.md#follow).
        let followed = self.state.elsewhere.named(written, crate::lease::now());
        if pending.is_empty() && followed.is_empty() {
            return None;
        }
        let st = &self.state;
        let mut watchers: Vec<&str> = pending.iter().map(|p| p.watcher.as_str()).collect();
        watchers.sort_unstable();
        watchers.dedup();
        // Not served here and not already held at this position: the leases decide.
        let ask: Vec<String> = {
            let served = st.served.lock();
            let q = st.delivery.queue();
            let mut ask: Vec<String> = Vec::new();
            for p in pending {
                let dropped = reseeded.contains(&(p.watcher.as_str(), &*p.target));
                if served.all.contains(&p.watcher)
                    || (!dropped && q.position(&p.watcher, &p.target) == Some(p.last_seen))
                    || ask.contains(&p.watcher)
                {
                    continue;
                }
                ask.push(p.watcher.clone());
            }
            ask
        };
        let payload = follow::hint_payload(&st.instance, &watchers, &followed);
        let named = watchers.into_iter().map(str::to_owned).collect();
        Some(Tail::new(
            st.schema.as_str(),
            payload,
            &st.instance,
            (named, !followed.is_empty()),
            ask,
            crate::lease::now(),
        ))
    }

    /// Queues the committed notices `pending` under the lease rule, given what their
    /// [`Tail`] was told. Returns the wakes to schedule. A failing lease read queues here, as
    /// if nobody else served the watcher; a failing hint is left to the other hosts' periodic
    /// catch-up. A group's notices may be settled in runs, with the same `told`.
    pub(crate) fn settle(&self, pending: &[Pending], told: &mut Told) -> Vec<Wake> {
        let st = &self.state;
        if let Some(e) = told.take_failure() {
            st.failed(e);
        }
        let elsewhere = told.elsewhere();
        if elsewhere.is_empty() {
            return st.queue_here(pending);
        }
        {
            let mut q = st.delivery.queue();
            for p in pending.iter().filter(|p| elsewhere.contains(&p.watcher)) {
                // A notice held here was consumed and a fresh one opened: it goes to the
                // hosts that serve the watcher.
                q.remove(&p.watcher, &p.target);
            }
        }
        let here: Vec<Pending> = pending
            .iter()
            .filter(|p| !elsewhere.contains(&p.watcher))
            .cloned()
            .collect();
        st.queue_here(&here)
    }

    /// Queues the committed notices `pending` here, whatever the leases say (no connection
    /// to read them). Returns the wakes to schedule.
    pub(crate) fn queue_here(&self, pending: &[Pending]) -> Vec<Wake> {
        self.state.queue_here(pending)
    }

    /// Holds the next catch-up between its read and its queue update (a test hook).
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn pause_next(&self) -> crate::pause::Pause {
        let (pause, hold) = crate::pause::pair();
        *self.state.hold.lock() = Some(hold);
        pause
    }

    /// Sends the hint naming `watcher` after a drain, acknowledge, re-seeding `watch`,
    /// `unwatch` or reset consumed or dropped its notices, so the other hosts that serve it
    /// drop their copies at once (none: no hint). Best effort.
    pub(crate) async fn consumed(&self, c: &mut Cached<'_>, watcher: &str) {
        if self.is_on() {
            let st = &self.state;
            let payload = listen::payload(&st.instance, &[watcher]);
            let (channel, me) = (st.schema.as_str(), st.instance.as_str());
            if let Err(e) = notify_if_served(c, channel, &payload, &[watcher], me).await {
                st.failed(e);
            }
        }
    }

    /// Sends the hint that asks every host to catch up every watcher it serves, after a
    /// change whose watchers this store does not know (a session deleted). Best effort.
    pub(crate) async fn changed_all(&self, c: &mut Cached<'_>) {
        if self.is_on() {
            let st = &self.state;
            let payload = serde_json::json!({ "i": st.instance, "w": "*" }).to_string();
            if let Err(e) = notify(c, st.schema.as_str(), &payload).await {
                st.failed(e);
            }
        }
    }

    /// Runs one catch-up of every served watcher now, on the listener's connection (tests).
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) async fn catch_up_now(&self) -> Result<()> {
        let client = self.state.listener.lock().clone();
        match client {
            Some(c) => {
                let mut statements = HashMap::new();
                let mut c = Cached::new(&c, &mut statements, self.state.schema);
                self.state.turn(&mut c, &Hint::All).await
            }
            None => Err(Error::db(
                crate::error::DbFailure::Other,
                "the listener is not connected",
            )),
        }
    }

    /// How often the listener connected (counted once its first turn, the rebuild, ran), and
    /// how many catch-ups ran.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.state.connects.load(Ordering::Acquire),
            self.state.catch_ups.load(Ordering::Acquire),
        )
    }

    /// True while the listener is connected.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn is_listening(&self) -> bool {
        self.state
            .listener
            .lock()
            .as_ref()
            .is_some_and(|c| !c.is_closed())
    }

    /// Stops the task and closes the listener's connection. A turn under way (its lease
    /// write may already be on the server) is let finish, for at most `within`, so that
    /// [`Notices::has_leases`] counts it and the close releases it: aborted mid-write, the
    /// lease stayed behind for its full length and kept the other hosts from queuing that
    /// watcher's notices.
    pub(crate) async fn stop_within(&self, within: Duration) {
        self.state.closed.store(true, Ordering::SeqCst);
        let task = self.task.lock().take();
        if let Some(t) = task {
            if self.state.in_turn.load(Ordering::SeqCst) {
                let abort = t.abort_handle();
                if tokio::time::timeout(within, t).await.is_err() {
                    abort.abort();
                }
            } else {
                t.abort();
            }
        }
        self.state.listener.lock().take();
    }

    /// True once this store wrote leases.
    pub(crate) fn has_leases(&self) -> bool {
        self.state.renewed_at.load(Ordering::Acquire) != 0
    }

    /// Drops this store's leases (it closes), so the other hosts take over at once. Best
    /// effort: a lease left behind expires on its own.
    pub(crate) async fn release<C: GenericClient + Sync>(&self, c: &C) {
        let st = &self.state;
        if st.renewed_at.load(Ordering::Acquire) != 0 {
            let _ = lease::release_all(c, st.schema, &st.instance).await;
        }
    }
}

impl Drop for Notices {
    fn drop(&mut self) {
        if let Some(t) = self.task.get_mut().take() {
            t.abort();
        }
    }
}

impl State {
    /// Held by a catch-up from its read to its queue update, and by a drain or acknowledge
    /// from taking the notices to putting back the reopened ones.
    pub(crate) async fn sync_lock(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.sync_lock.lock().await
    }

    /// Reports a failure of background work to the host, unless the store closed.
    pub(crate) fn report(&self, error: Error, task: Task) {
        if !self.closed.load(Ordering::Acquire) {
            self.host.report(error, task);
        }
    }

    /// True once the store closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn failed(&self, error: Error) {
        if !self.closed.load(Ordering::Acquire) && !self.failing.swap(true, Ordering::AcqRel) {
            self.host.report(error, Task::CatchUp);
        }
    }

    /// The task: connect, LISTEN, catch up, then serve hints and ticks until the connection
    /// ends; again with backoff.
    async fn run(self: Arc<Self>, connect: Connector) {
        let mut backoff = BACKOFF_MIN;
        while !self.closed.load(Ordering::Acquire) {
            let (client, mut hints) = match self.connect(&connect).await {
                Ok(c) => c,
                Err(e) => {
                    self.failed(e);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    continue;
                }
            };
            backoff = BACKOFF_MIN;
            *self.listener.lock() = Some(Arc::clone(&client));
            // The listener's statements, prepared once per connection.
            let mut statements = HashMap::new();
            let mut c = Cached::new(&client, &mut statements, self.schema);
            // The hosts that follow sessions announce them now (semantics.md#follow); best
            // effort, like every hint.
            let _ = notify(
                &mut c,
                self.schema.as_str(),
                &follow::question(&self.instance),
            )
            .await;
            // Whatever was sent while no listener was connected is found in the rows, and
            // what this store holds is rebuilt from them (a failover may have lost rows).
            if !self.begin_turn() {
                break;
            }
            match self.rebuild(&mut c).await {
                Ok(()) => self.failing.store(false, Ordering::Release),
                Err(e) => self.failed(e),
            }
            self.in_turn.store(false, Ordering::SeqCst);
            self.connects.fetch_add(1, Ordering::AcqRel);
            let mut ticker = tokio::time::interval(self.interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                let hint = tokio::select! {
                    m = hints.recv() => match m {
                        None => break,
                        Some(p) => {
                            let mut hint = self.hint_of(&p);
                            // Everything that arrived meanwhile, in one read.
                            while let Ok(more) = hints.try_recv() {
                                hint = merge(hint, self.hint_of(&more));
                            }
                            match hint {
                                Some(h) => h,
                                None => continue,
                            }
                        }
                    },
                    _ = ticker.tick() => Hint::All,
                    _ = self.kick.notified() => Hint::Watchers(Vec::new()),
                };
                if !self.begin_turn() {
                    break;
                }
                match self.turn(&mut c, &hint).await {
                    Ok(()) => self.failing.store(false, Ordering::Release),
                    Err(e) => self.failed(e),
                }
                self.in_turn.store(false, Ordering::SeqCst);
                if client.is_closed() {
                    break;
                }
            }
            *self.listener.lock() = None;
        }
    }

    /// Marks a turn begun, unless the store closed: then false, and the task ends. Marked
    /// before the check, as the close sets `closed` before it reads the mark, so one of the
    /// two always sees the other.
    fn begin_turn(&self) -> bool {
        self.in_turn.store(true, Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            self.in_turn.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    async fn connect(
        &self,
        connect: &Connector,
    ) -> Result<(Arc<Client>, mpsc::UnboundedReceiver<String>)> {
        let (client, hints) = connect().await?;
        listen::listen(&client, self.schema.as_str()).await?;
        Ok((Arc::new(client), hints))
    }

    /// The hint of a payload, or none for this store's own.
    fn hint_of(&self, payload: &str) -> Option<Hint> {
        let here = (self.instance.as_str(), self.lease_ms);
        if let Some(h) = follow::hint_of(payload, &self.delivery.follows, &self.elsewhere, here) {
            return h;
        }
        match listen::parse(payload) {
            (Some(from), _) if from == self.instance => None,
            (_, hint) => Some(hint),
        }
    }

    /// One turn of the task: the leases when due, then the catch-up the hint asks for, with
    /// the watchers served since the last one.
    async fn turn(&self, c: &mut Cached<'_>, hint: &Hint) -> Result<()> {
        // A watcher whose lease row is new got no hint while it had none: it is caught up
        // now, after the row's commit (docs/postgres.md#hint-rule).
        let anew = self.renew(c).await?;
        let follows = &self.delivery.follows;
        let at = (self.instance.as_str(), self.lease_ms);
        if let Some(e) = follow::turn(c, follows, &self.elsewhere, at).await? {
            self.failed(e);
        }
        let watchers: Vec<String> = {
            let mut s = self.served.lock();
            let fresh = std::mem::take(&mut s.fresh);
            match hint {
                Hint::All => s.all.iter().cloned().collect(),
                Hint::Watchers(named) => {
                    let mut ws: Vec<String> = named
                        .iter()
                        .filter(|w| s.all.contains(*w))
                        .cloned()
                        .collect();
                    ws.extend(fresh);
                    ws.extend(anew.into_iter().filter(|w| s.all.contains(w)));
                    ws.sort_unstable();
                    ws.dedup();
                    ws
                }
            }
        };
        if watchers.is_empty() {
            return Ok(());
        }
        self.catch_up(c, watchers).await
    }

    /// Reads the pending cursors of `watchers` and brings their part of the queue in line:
    /// notices pending in the rows enter (and wake, by the rules of a local notice), notices
    /// held here that the rows no longer have pending at their position leave (consumed on
    /// another host), withdrawing a wake that has nothing left to wake for.
    async fn catch_up(&self, c: &mut Cached<'_>, watchers: Vec<String>) -> Result<()> {
        let _g = self.sync_lock.lock().await;
        // A notice this store queues while the rows are read (its own record committing
        // meanwhile) may not be in them: it is noted, and stays.
        *self.reading.lock() = Some(HashSet::new());
        let rows = match cursors::pending_of(c, &watchers).await {
            Ok(rows) => rows,
            Err(e) => {
                self.reading.lock().take();
                return Err(e);
            }
        };
        #[cfg(any(test, feature = "test-hooks"))]
        let hold = self.hold.lock().take();
        #[cfg(any(test, feature = "test-hooks"))]
        let _done = match hold {
            Some(h) => Some(h.hold().await),
            None => None,
        };
        self.catch_ups.fetch_add(1, Ordering::AcqRel);
        let wakes = self.apply(&watchers, rows);
        self.delivery.wake_all(wakes);
        Ok(())
    }
}

fn merge(a: Option<Hint>, b: Option<Hint>) -> Option<Hint> {
    match (a, b) {
        (Some(Hint::All), _) | (_, Some(Hint::All)) => Some(Hint::All),
        (Some(Hint::Watchers(mut x)), Some(Hint::Watchers(y))) => {
            x.extend(y);
            Some(Hint::Watchers(x))
        }
        (x, None) => x,
        (None, y) => y,
    }
}
