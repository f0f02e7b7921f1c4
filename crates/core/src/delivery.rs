//! Delivery: the notice queue and the wake scheduler of one store. A committed cursor change
//! enters the queue here ([`Delivery::enqueue`], under the connection lock), and the wakes it
//! made due are scheduled once every lock is released ([`Delivery::wake_all`]).

use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::cursors::{Pending, Provenance};
use crate::keys::SessionKey;
use crate::queue::{NoticeQueue, QueueSignal};
use crate::wake::{WakeScheduler, WakeSink};

/// A watcher to wake and the target whose notice made the wake due.
pub(crate) type Wake = (String, String);

/// True when a pending notice of `p` wakes its watcher (§8): an explicit watch by a main-like
/// session.
pub(crate) fn wakes_for(p: &Pending) -> bool {
    p.provenance == Provenance::Explicit && SessionKey::classify(&p.watcher).is_main_like()
}

/// The notice queue and the wake scheduler.
pub(crate) struct Delivery {
    queue: Mutex<NoticeQueue>,
    wake: Option<WakeScheduler>,
}

impl Delivery {
    /// An empty queue; wakes go to `sink` after `coalesce_ms`, or nowhere without one.
    pub(crate) fn new(sink: Option<Arc<dyn WakeSink>>, coalesce_ms: u32) -> Self {
        Delivery {
            queue: Mutex::new(NoticeQueue::default()),
            wake: sink.map(|s| WakeScheduler::new(s, coalesce_ms)),
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
        for p in pending {
            if q.upsert(&p.watcher, &p.target, p.last_seen) && wakes_for(p) {
                wakes.push((p.watcher.clone(), p.target.to_string()));
            }
        }
        wakes
    }

    /// Schedules the due wakes. Called after every lock is released.
    pub(crate) fn wake_all(&self, wakes: Vec<Wake>) {
        if let Some(w) = &self.wake {
            for (watcher, target) in wakes {
                w.due(&watcher, &target);
            }
        }
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

    /// Empties the queue and closes its signal.
    pub(crate) fn close_queue(&self) {
        let mut q = self.queue.lock();
        q.clear();
        q.signal().close();
    }
}
