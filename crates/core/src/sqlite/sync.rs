//! Notices across processes (semantics.md#processes): several gateway processes share one database file, and a
//! notice opened by a record in one of them reaches the watchers the others serve.
//!
//! The cursor rows are the truth and each process's queue is a cache of them. A background
//! task on the shared runtime asks the store's connection for `PRAGMA data_version` every
//! `syncIntervalMs`; the answer only changes when another connection committed (never for the
//! store's own commits), so an idle poll, or a poll in a process that only writes, is one tiny
//! statement. When it changed, the task reads, on a second, read-only connection, what moved
//! since its last look:
//! the cursors of the sessions that got events (found from the global sequence), the cursors
//! of the notices this process holds (an acknowledge elsewhere writes no event), and every
//! pending cursor of the watchers that just started being served. Then it brings the queue in
//! line, with the same wake rules as a local notice.
//!
//! A process **serves** a watcher once it has drained, peeked or acknowledged for it, watched
//! for it, named it in a record's `watchers`, or been given it in `serveWatchers`. Notices
//! opened elsewhere enter the queue only for served watchers. A notice this process's own
//! record opens is queued here unless this process does not serve its watcher and another
//! live process does: the served watchers are leased in the file ([`crate::lease`]), and the
//! poll renews this process's leases.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::task::AbortHandle;
use tokio::time::MissedTickBehavior;

use crate::cursors::{self, Pending};
use crate::delivery::{wakes_for, Delivery, Wake};
use crate::error::{Error, Result};
use crate::hooks::{Host, Task};
use crate::keys;
use crate::lease::{self, LeaseRows};
use crate::metrics::Count;
use crate::runtime;
use crate::sqlite::conn::Db;
use crate::sqlite::poll::{self, Reader};
use crate::sqlite::rows::SqliteRows;

#[derive(Default)]
struct Served {
    all: HashSet<String, foldhash::fast::RandomState>,
    // Served since the last poll: their pending cursors are read in full once.
    fresh: Vec<String>,
    // Leases to write (a watcher started being served) and to drop (one stopped) at the
    // next poll.
    lease_due: bool,
    released: Vec<String>,
}

/// This store's leases on the file (semantics.md#processes): only in a file with the lease
/// table.
struct Leases {
    instance: String,
    length_ms: i64,
    // When the poll last wrote them (wall clock ms); 0 before the first write.
    renewed_at: AtomicI64,
}

/// What the poller knows of the file.
struct Poller {
    /// None once released for a reopen of the store's connections; opened again by the next poll.
    reader: Option<Reader>,
    data_version: i64,
    last_sequence: i64,
}

/// The cross-process state of one store: the served watchers and the poller.
pub(crate) struct SyncState {
    path: String,
    db: Arc<Db>,
    delivery: Arc<Delivery>,
    host: Host,
    interval: Duration,
    served: Mutex<Served>,
    poller: Mutex<Option<Poller>>,
    task: Mutex<Option<AbortHandle>>,
    failing: AtomicBool,
    leases: Option<Leases>,
}

impl SyncState {
    /// Opens the reader on `path` and notes where the file stands, so the first poll only
    /// looks at what changes after the store opened. `db` holds the store's connection.
    pub(crate) fn open(
        path: &str,
        interval_ms: u32,
        db: Arc<Db>,
        delivery: Arc<Delivery>,
        host: Host,
    ) -> Result<Self> {
        let (data_version, leased) = db.with(|own| {
            Ok((
                poll::data_version(own)?,
                crate::sqlite::lease::present(own)?,
            ))
        })?;
        let mut reader = Reader::open(path)?;
        let snap = reader.snapshot()?;
        let last_sequence = snap.top_sequence()?;
        snap.finish()?;
        Ok(SyncState {
            path: path.to_owned(),
            db,
            delivery,
            host,
            interval: Duration::from_millis(u64::from(interval_ms)),
            served: Mutex::new(Served::default()),
            poller: Mutex::new(Some(Poller {
                reader: Some(reader),
                data_version,
                last_sequence,
            })),
            task: Mutex::new(None),
            failing: AtomicBool::new(false),
            leases: leased.then(|| Leases {
                instance: lease::instance_id(),
                length_ms: lease::length_ms(interval_ms),
                renewed_at: AtomicI64::new(0),
            }),
        })
    }

    /// Starts serving `watcher` (a bare key never has notices and is ignored). Cheap when it
    /// is served already: one lock and one set lookup.
    pub(crate) fn serve(&self, watcher: &str) {
        // Called on every drain: the usual answer, already served, costs one lookup.
        let mut s = self.served.lock();
        if !s.all.contains(watcher) && keys::is_watchable(watcher) {
            s.all.insert(watcher.to_owned());
            s.fresh.push(watcher.to_owned());
            s.released.retain(|w| w != watcher);
            s.lease_due = true;
        }
    }

    /// Serves `watcher` for a call that reads its queue: true when its pending cursors have
    /// not been read yet (it was not served, or the poll has not looked at it since it was),
    /// and the caller reads them now instead of the poll. Cheap when it is served and read
    /// already: one lock, one set lookup and a look at the (usually empty) list of fresh ones.
    fn serve_unread(&self, watcher: &str) -> bool {
        let mut s = self.served.lock();
        if s.all.contains(watcher) {
            let Some(i) = s.fresh.iter().position(|w| w == watcher) else {
                return false;
            };
            s.fresh.swap_remove(i);
            return true;
        }
        if !keys::is_watchable(watcher) {
            return false;
        }
        s.all.insert(watcher.to_owned());
        s.released.retain(|w| w != watcher);
        s.lease_due = true;
        true
    }

    /// Serves `watcher` for a call that reads its queue (`drain`, `peek`, `has_pending`): a
    /// watcher whose pending cursors this process has not read yet (newly served, or served by
    /// a `watch` or a record since the last poll) gets the notices already pending for it in
    /// the file queued at once, woken like a sweep's, instead of at the next poll. Served and
    /// read already, it costs a set lookup and no SQL. A read that fails (a shared file, a
    /// lock held elsewhere) is left to the poll, which reports a lasting failure once; the
    /// call answers from the queue as before.
    pub(crate) fn serve_reading(&self, watcher: &str) {
        if !self.serve_unread(watcher) {
            return;
        }
        let read = self.db.lock().and_then(|conn| {
            let pending = cursors::pending_of(&mut SqliteRows::new(&conn), watcher)?;
            Ok(self.delivery.enqueue(&pending))
        });
        match read {
            Ok(wakes) => self.delivery.wake_all(wakes),
            Err(_) => {
                // The poll reads it instead.
                let mut s = self.served.lock();
                if s.all.contains(watcher) && !s.fresh.iter().any(|w| w == watcher) {
                    s.fresh.push(watcher.to_owned());
                }
            }
        }
    }

    /// Stops serving `watcher` (its session was deleted).
    pub(crate) fn unserve(&self, watcher: &str) {
        let mut s = self.served.lock();
        if s.all.remove(watcher) && self.leases.is_some() {
            s.released.push(watcher.to_owned());
            s.lease_due = true;
        }
        s.fresh.retain(|w| w != watcher);
    }

    /// How many watchers are served.
    pub(crate) fn served_count(&self) -> usize {
        self.served.lock().all.len()
    }

    /// The watchers of `pending` whose notices this process's own record must not queue:
    /// those it does not serve that another live process serves (semantics.md#processes).
    /// Nothing without the lease table; no SQL for the watchers this process serves or whose
    /// notice it already holds at that position, else one lookup by primary key per watcher.
    /// Caller holds the store's connection lock, and `rows` reads through it. A failing read leaves the notice
    /// here, as without leases.
    pub(crate) fn served_elsewhere(
        &self,
        rows: &dyn LeaseRows,
        pending: &[Pending],
    ) -> Vec<String> {
        let Some(leases) = &self.leases else {
            return Vec::new();
        };
        if pending.is_empty() {
            return Vec::new();
        }
        let served = self.served.lock();
        let mut q = self.delivery.queue();
        let now = lease::now();
        let mut out: Vec<String> = Vec::new();
        for p in pending {
            if served.all.contains(&p.watcher) || out.contains(&p.watcher) {
                continue;
            }
            let held = q.position(&p.watcher, &p.target);
            if held == Some(p.last_seen) {
                continue;
            }
            let elsewhere = lease::served_elsewhere(rows, &p.watcher, &leases.instance, now);
            if elsewhere.unwrap_or(false) {
                if held.is_some() {
                    // The notice held here was consumed and a fresh one opened: it goes to
                    // the process that serves the watcher.
                    q.remove(&p.watcher, &p.target);
                }
                out.push(p.watcher.clone());
            }
        }
        out
    }

    /// True when `watcher` is served.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn serves(&self, watcher: &str) -> bool {
        self.served.lock().all.contains(watcher)
    }

    /// True while the poll task runs.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn is_running(&self) -> bool {
        self.task.lock().as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Starts the poll task. It holds the state weakly, so a store dropped without `close`
    /// still goes away, and the task ends at its next tick.
    pub(crate) fn spawn(self: &Arc<Self>) {
        let interval = self.interval;
        let state: Weak<SyncState> = Arc::downgrade(self);
        let task = runtime::handle().spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            // After a slow poll, wait a whole interval again rather than catching up in a burst.
            ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let Some(sync) = state.upgrade() else {
                    return;
                };
                if sync.db.is_closed() {
                    return;
                }
                // The cheap check runs here; the read that follows a change may wait for the
                // store's connection lock, so it goes to a blocking thread and never holds up
                // the runtime's timers.
                match sync.due() {
                    Ok(false) => continue,
                    Ok(true) => {}
                    Err(e) => {
                        sync.failed(e);
                        continue;
                    }
                }
                let joined = runtime::handle()
                    .spawn_blocking(move || {
                        if let Err(e) = sync.run(false) {
                            sync.failed(e);
                        }
                    })
                    .await;
                if joined.is_err() {
                    return;
                }
            }
        });
        *self.task.lock() = Some(task.abort_handle());
    }

    /// True when a poll may have something to read: newly served watchers, or a commit by
    /// another connection.
    fn due(&self) -> Result<bool> {
        let slot = self.poller.lock();
        let Some(p) = slot.as_ref() else {
            return Ok(false);
        };
        // Its statement below reads the WAL index, which another library's open resets: once
        // such a handle is seen, the poll stops touching the file.
        self.db.check_guard()?;
        let fresh = !self.served.lock().fresh.is_empty();
        if fresh || self.renewal_due() {
            return Ok(true);
        }
        // Asked on the store's own connection, whose data_version ignores its own commits: a
        // process that only writes never reads the cursor tables back. When the JS thread
        // holds the connection, the poll decides under the lock instead of waiting here.
        match self.db.try_lock() {
            None => Ok(true),
            Some(Some(conn)) => Ok(poll::data_version(&conn)? != p.data_version),
            Some(None) => Ok(false),
        }
    }

    fn failed(&self, error: Error) {
        // A closed store is the normal end; a lock held by another process passes by the next
        // poll. Anything else is told once until a poll succeeds again.
        // A shared file is reported by the host's own calls, which the store refuses.
        if matches!(error, Error::Closed | Error::FileShared(_)) || error.is_busy() {
            return;
        }
        if !self.failing.swap(true, Ordering::AcqRel) {
            self.host.report(error, Task::Poll);
        }
    }

    /// One poll: when the file changed (or `force`), reads what moved and updates the queue.
    pub(crate) fn run(&self, force: bool) -> Result<()> {
        let mut slot = self.poller.lock();
        let Some(p) = slot.as_mut() else {
            return Ok(());
        };
        // Holding the store's connection lock from the read to the queue update means no
        // local write lands in between: the queue ends up matching one consistent snapshot.
        let guard = self.db.lock()?;
        self.renew(&guard)?;
        let (version, own_top) = poll::own_view(&guard)?;
        let fresh = std::mem::take(&mut self.served.lock().fresh);
        // No other connection committed since the last poll: every event up to `own_top` is
        // this store's own or was read then, so only the fresh watchers need a look.
        let foreign = force || version != p.data_version;
        if !foreign && fresh.is_empty() {
            p.last_sequence = p.last_sequence.max(own_top);
            return Ok(());
        }
        let read = self.read(p, &fresh, foreign);
        let (rows, top) = match read {
            Ok(r) => r,
            Err(e) => {
                self.served.lock().fresh.extend(fresh);
                return Err(e);
            }
        };
        let wakes = self.apply(rows);
        if version != p.data_version {
            self.delivery.metrics.add(Count::CatchUps, 1);
        }
        drop(guard);
        p.data_version = version;
        p.last_sequence = top.unwrap_or(p.last_sequence.max(own_top));
        self.failing.store(false, Ordering::Release);
        self.delivery.wake_all(wakes);
        Ok(())
    }

    /// Reads, in one snapshot, every cursor that may have changed for this process.
    #[allow(clippy::type_complexity)]
    fn read(
        &self,
        p: &mut Poller,
        fresh: &[String],
        foreign: bool,
    ) -> Result<(HashMap<(String, String), Option<Pending>>, Option<i64>)> {
        let reader = match &mut p.reader {
            Some(r) => r,
            slot @ None => slot.insert(Reader::open(&self.path)?),
        };
        let tx = reader.snapshot()?;
        let mut rows: HashMap<(String, String), Option<Pending>> = HashMap::new();
        if !foreign {
            for w in fresh {
                for c in tx.pending_of(w)? {
                    rows.insert((w.clone(), c.target.to_string()), Some(c));
                }
            }
            tx.finish()?;
            return Ok((rows, None));
        }
        let top = tx.top_sequence()?;
        let mut full: HashSet<String> = fresh.iter().cloned().collect();
        if top != p.last_sequence {
            let (sessions, count) = tx.changed_sessions(p.last_sequence, top)?;
            // Followers of these sessions read them (semantics.md#follow).
            self.delivery.follows.touch_keys(&sessions);
            if count != top - p.last_sequence {
                self.delivery.follows.touch_all();
                // Events are missing from the range (a dedupe hit used a number, a prune or a
                // delete removed rows): the sessions list may be short, so every served
                // watcher is read in full.
                full.extend(self.served.lock().all.iter().cloned());
            }
            for target in sessions {
                for c in tx.on_target(&target)? {
                    rows.insert((c.watcher.clone(), target.clone()), Some(c));
                }
            }
        }
        // An acknowledge in another process writes no event, so the watchers of the notices
        // held here are read in full too: one query per watcher, not per notice.
        let held = self.delivery.queue().pairs();
        full.extend(held.iter().map(|(w, _)| w.clone()));
        for w in &full {
            for c in tx.pending_of(w)? {
                rows.insert((w.clone(), c.target.to_string()), Some(c));
            }
        }
        for pair in held {
            // Not pending any more (acknowledged, re-seeded or deleted elsewhere).
            rows.entry(pair).or_insert(None);
        }
        tx.finish()?;
        Ok((rows, Some(top)))
    }

    /// Brings the queue in line with the rows read. Returns the wakes now due. Caller holds
    /// the store's connection lock.
    fn apply(&self, rows: HashMap<(String, String), Option<Pending>>) -> Vec<Wake> {
        let served = self.served.lock();
        let mut q = self.delivery.queue();
        let mut open = Vec::new();
        let mut emptied = Vec::new();
        for ((w, t), row) in rows {
            match row {
                Some(c) if c.notified != c.last_seen => open.push(c),
                // Acknowledged, re-seeded or deleted elsewhere.
                _ => {
                    if q.remove(&w, &t) {
                        emptied.push(w);
                    }
                }
            }
        }
        // Notices that enter together enter in the order they opened, as a sweep queues them.
        open.sort_by(|a, b| {
            (a.notified, &a.watcher, &a.target).cmp(&(b.notified, &b.watcher, &b.target))
        });
        let mut wakes = Vec::new();
        for c in open {
            if served.all.contains(&c.watcher) {
                let wake = wakes_for(&c);
                if q.enter(&c, wake) && wake {
                    wakes.push((c.watcher, c.target.to_string()));
                }
            } else if q
                .position(&c.watcher, &c.target)
                .is_some_and(|l| l != c.last_seen)
            {
                // The notice held here was consumed elsewhere and a fresh one opened; it goes
                // to the processes that serve the watcher.
                q.remove(&c.watcher, &c.target);
                emptied.push(c.watcher);
            }
        }
        drop(q);
        // A notice consumed elsewhere leaves no wake here for nothing (semantics.md#wake).
        for w in emptied {
            self.delivery.withdraw_if_idle(&w);
        }
        wakes
    }

    /// True when this process's leases are due to be written: a watcher started or stopped
    /// being served, or a third of the lease length passed since the last write.
    fn renewal_due(&self) -> bool {
        let Some(leases) = &self.leases else {
            return false;
        };
        let s = self.served.lock();
        s.lease_due
            || (!s.all.is_empty()
                && lease::now() >= leases.renewed_at.load(Ordering::Acquire) + leases.length_ms / 3)
    }

    /// Writes this process's leases when due. Caller holds the store's connection lock.
    fn renew(&self, rows: &dyn LeaseRows) -> Result<()> {
        let Some(leases) = &self.leases else {
            return Ok(());
        };
        if !self.renewal_due() {
            return Ok(());
        }
        let (serving, released) = {
            let mut s = self.served.lock();
            s.lease_due = false;
            (
                s.all.iter().cloned().collect::<Vec<_>>(),
                std::mem::take(&mut s.released),
            )
        };
        let now = lease::now();
        let written = rows.renew(&lease::renewal(
            &leases.instance,
            &serving,
            &released,
            now,
            leases.length_ms,
        ));
        if let Err(e) = written {
            let mut s = self.served.lock();
            s.lease_due = true;
            s.released.extend(released);
            return Err(e);
        }
        leases.renewed_at.store(now, Ordering::Release);
        Ok(())
    }

    /// Closes the poll's reader if no poll holds it now (never waits); the next poll opens it
    /// again. For the reopen of the store's connections after another library's handle.
    pub(crate) fn release(self: &Arc<Self>) -> crate::sqlite::conn::Release {
        let me = Arc::downgrade(self);
        Box::new(move || {
            if let Some(me) = me.upgrade() {
                if let Some(mut slot) = me.poller.try_lock() {
                    if let Some(p) = slot.as_mut() {
                        p.reader = None;
                    }
                }
            }
        })
    }

    /// Stops the poll task and closes the reader. Waits for a poll in progress to finish.
    /// This process's leases are dropped, so other processes' records queue the watchers'
    /// notices again at once.
    pub(crate) fn stop(&self) {
        if let Some(task) = self.task.lock().take() {
            task.abort();
        }
        let reader = self.poller.lock().take();
        if let (Some(_), Some(leases)) = (&reader, &self.leases) {
            if leases.renewed_at.load(Ordering::Acquire) != 0 {
                // Best effort: a lease left behind expires on its own.
                if let Ok(conn) = self.db.lock() {
                    let _ = conn.release_all(&leases.instance);
                }
            }
        }
        drop(reader);
    }
}

impl Drop for SyncState {
    fn drop(&mut self) {
        if let Some(task) = self.task.get_mut().take() {
            task.abort();
        }
    }
}
