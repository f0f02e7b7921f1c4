//! Delivery: the notice queue and the wake scheduler of one store. A committed cursor change
//! enters the queue here ([`Delivery::enqueue`], under the connection lock), and the wakes it
//! made due are scheduled once every lock is released ([`Delivery::wake_all`]). A drain's and
//! an acknowledge's writes are the storage-free [`drain_rows`] and [`acknowledge_rows`], which
//! each engine runs in its own transaction.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::cursors::{self, Pending, Provenance};
use crate::error::Result;
use crate::follow::Follows;
use crate::hooks::{on_caller_thread, NoticeSignal};
use crate::keys::SessionKey;
use crate::metrics::{Count, Metrics};
use crate::queue::{Notice, NoticeQueue, QueueSignal, Queued, QueuedNotice};
use crate::rows::Rows;
use crate::wake::{WakeRequest, WakeScheduler, WakeSink};

/// A watcher to wake and the target whose notice made the wake due.
pub(crate) type Wake = (String, String);

/// True when a pending notice of `p` wakes its watcher (semantics.md#wake): an explicit watch by a main-like
/// session.
pub(crate) fn wakes_for(p: &Pending) -> bool {
    p.provenance == Provenance::Explicit && SessionKey::classify(&p.watcher).is_main_like()
}

/// The notice queue and the wake scheduler.
pub(crate) struct Delivery {
    queue: Mutex<NoticeQueue>,
    wake: Option<WakeScheduler>,
    /// The store's counters (docs/metrics.md), shared by every part that holds the delivery.
    pub(crate) metrics: Arc<Metrics>,
    // The queue's words, read without its lock: word 2 says the outbox holds notices.
    words: Arc<QueueSignal>,
    // True while `told` holds a signal: the one load a store without one pays.
    signalled: AtomicBool,
    told: Mutex<Option<Arc<dyn NoticeSignal>>>,
    /// The followed sessions and their signal (semantics.md#follow).
    pub(crate) follows: Follows,
}

/// The host's wake sink, counting each call (`session_awareness.wakes.requested`).
struct Counted(Arc<dyn WakeSink>, Arc<Metrics>);

impl WakeSink for Counted {
    fn wake(&self, request: WakeRequest) {
        self.1.add(Count::Wakes, 1);
        self.0.wake(request);
    }
}

impl Delivery {
    /// An empty queue; wakes go to `sink` after `coalesce_ms`, or nowhere without one. With
    /// `outbox`, every notice entering the queue is also kept for the host's listener.
    pub(crate) fn new(sink: Option<Arc<dyn WakeSink>>, coalesce_ms: u32, outbox: bool) -> Self {
        let metrics = Arc::new(Metrics::default());
        let counted = |s| Arc::new(Counted(s, Arc::clone(&metrics))) as Arc<dyn WakeSink>;
        let queue = NoticeQueue::new(outbox);
        Delivery {
            words: Arc::clone(queue.signal()),
            queue: Mutex::new(queue),
            wake: sink.map(|s| WakeScheduler::new(counted(s), coalesce_ms)),
            metrics,
            signalled: AtomicBool::new(false),
            told: Mutex::new(None),
            follows: Follows::default(),
        }
    }

    /// Sets (or, with `None`, removes) the signal told when background work put notices in the
    /// listener's outbox. A signal set while the outbox already holds notices (background work
    /// queued them before the host registered) is told at once.
    pub(crate) fn set_notice_signal(&self, signal: Option<Arc<dyn NoticeSignal>>) {
        let now = signal
            .clone()
            .filter(|_| self.words.words[2].load(Ordering::Acquire) != 0);
        {
            let mut told = self.told.lock();
            self.signalled.store(signal.is_some(), Ordering::Release);
            *told = signal;
        }
        if let Some(s) = now {
            s.entered();
        }
    }

    /// Tells the signal, if any, that the outbox holds notices, unless this is a thread the host
    /// makes its calls on: the host takes the outbox after each of those calls itself.
    fn tell_entered(&self) {
        if !self.signalled.load(Ordering::Acquire)
            || on_caller_thread()
            || self.words.words[2].load(Ordering::Acquire) == 0
        {
            return;
        }
        let signal = self.told.lock().clone();
        if let Some(s) = signal {
            s.entered();
        }
    }

    /// The queue, locked.
    pub(crate) fn queue(&self) -> MutexGuard<'_, NoticeQueue> {
        self.queue.lock()
    }

    /// The words the queue keeps current for a reader that takes no lock.
    pub(crate) fn signal(&self) -> Arc<QueueSignal> {
        Arc::clone(self.queue.lock().signal())
    }

    /// Queues the notices of `pending` (already committed), keeping one per pair, and returns
    /// the watchers to wake with the target that made the wake due. Caller holds the conn lock.
    pub(crate) fn enqueue(&self, pending: &[Pending]) -> Vec<Wake> {
        let mut q = self.queue.lock();
        let mut wakes = Vec::new();
        // Without a wake sink no wake is scheduled: none is collected. A watcher's first due
        // wake absorbs the later ones (semantics.md#wake): one per watcher is collected, so a
        // sweep of 20,000 notices for 100 watchers schedules 100, not 20,000.
        let collect = self.wake.is_some();
        // A record's one notice needs no set (and allocates none).
        let dedupe = pending.len() > 1;
        let mut woken: std::collections::HashSet<&str, foldhash::fast::RandomState> =
            Default::default();
        for p in pending {
            let wake = wakes_for(p);
            if q.enter(p, wake) && wake && collect && (!dedupe || woken.insert(p.watcher.as_str()))
            {
                wakes.push((p.watcher.clone(), p.target.to_string()));
            }
        }
        wakes
    }

    /// Schedules the due wakes, tells the notice signal of notices that entered from
    /// background work and the follow signal of the followed sessions touched. Called after every lock is released, after every change of the queue
    /// that may let notices in: the one place every background source passes.
    pub(crate) fn wake_all(&self, wakes: Vec<Wake>) {
        if let Some(w) = &self.wake {
            for (watcher, target) in wakes {
                w.due(&watcher, &target);
            }
        }
        self.tell_entered();
        self.follows.tell();
    }

    /// Withdraws the watcher's scheduled wake when it has nothing queued (semantics.md#wake).
    /// Caller holds the connection lock.
    pub(crate) fn withdraw_if_idle(&self, watcher: &str) {
        if self.wake.is_some() && !self.queue().has_any(watcher) {
            self.cancel(watcher);
        }
    }

    /// Takes the notices that entered the queue since the last call (the listener's outbox).
    pub(crate) fn take_entered(&self) -> Vec<QueuedNotice> {
        self.queue.lock().take_entered()
    }

    /// Cancels the watcher's scheduled wake (its session was reset or deleted).
    pub(crate) fn cancel(&self, watcher: &str) {
        if let Some(w) = &self.wake {
            w.cancel(watcher);
        }
    }

    /// The watchers with a wake scheduled and not yet delivered, sorted.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn scheduled_wakes(&self) -> Vec<String> {
        self.wake
            .as_ref()
            .map_or_else(Vec::new, WakeScheduler::scheduled_watchers)
    }

    /// Cancels every scheduled wake and stops later ones.
    pub(crate) fn close_wakes(&self) {
        if let Some(w) = &self.wake {
            w.close();
        }
    }

    /// Empties the queue and closes its signal; the notice signal is released.
    pub(crate) fn close_queue(&self) {
        let mut q = self.queue.lock();
        q.clear();
        q.signal().close();
        drop(q);
        self.set_notice_signal(None);
        self.follows.set_signal(None);
    }
}

/// Drain's writes inside the caller's open transaction: acknowledges the cursor of each
/// `queued` notice of `watcher` (semantics.md#cursors-acknowledge). The cursor row decides: a
/// notice consumed elsewhere (nothing pending any more) is not handed out again. Returns the
/// notices to hand out and the cursors whose notice reopened.
pub(crate) fn drain_rows<R: Rows + ?Sized>(
    rows: &mut R,
    watcher: &str,
    queued: &[Queued],
    now: i64,
) -> Result<(Vec<Notice>, Vec<Pending>)> {
    let mut out = Vec::with_capacity(queued.len());
    let mut reopened = Vec::new();
    for n in queued {
        if let Some(acked) = cursors::acknowledge(rows, watcher, &n.target, None, None, now)? {
            let scope = acked.after.scope.as_deref();
            out.push(Notice::new(watcher, &n.target, acked.old_last_seen, scope));
            if acked.after.notified != acked.after.last_seen {
                reopened.push(acked.after);
            }
        }
    }
    Ok((out, reopened))
}

/// `acknowledge`'s writes inside the caller's open transaction: the watcher's pending cursors
/// on `targets`, only those bound to `scope` when given, read up to `through` when given
/// (semantics.md#cursors-acknowledge). Returns each acknowledged cursor as it is after.
pub(crate) fn acknowledge_rows<R: Rows + ?Sized>(
    rows: &mut R,
    watcher: &str,
    targets: &[&str],
    scope: Option<&str>,
    through: Option<i64>,
    now: i64,
) -> Result<Vec<Pending>> {
    let mut acked = Vec::new();
    for &t in targets {
        if let Some(a) = cursors::acknowledge(rows, watcher, t, scope, through, now)? {
            acked.push(a.after);
        }
    }
    Ok(acked)
}
