//! Wake scheduling (semantics.md#wake): coalesced per watcher on a timer, delivered through a [`WakeSink`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::task::AbortHandle;

use crate::runtime;

/// The request handed to the host's `wake` callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WakeRequest {
    /// Always `session-state`.
    pub source: &'static str,
    /// Always `immediate`.
    pub intent: &'static str,
    /// `session-state:<target>`, naming the target whose notice scheduled the wake.
    pub reason: String,
    /// The watcher to wake.
    pub session_key: String,
}

/// Where wakes go. The binding implements it with a weak, non-blocking JS callback.
pub trait WakeSink: Send + Sync + 'static {
    /// Delivers one wake. Called on a background thread, never inside a record.
    fn wake(&self, request: WakeRequest);
}

/// Coalesces due wakes per watcher: the first schedules one delivery `coalesce` later; the
/// ones due before it fires are absorbed.
pub struct WakeScheduler {
    sink: Arc<dyn WakeSink>,
    coalesce: Duration,
    pending: Arc<Mutex<Option<HashMap<String, AbortHandle>>>>,
}

impl WakeScheduler {
    /// A scheduler delivering to `sink` after `coalesce_ms`.
    pub fn new(sink: Arc<dyn WakeSink>, coalesce_ms: u32) -> Self {
        WakeScheduler {
            sink,
            coalesce: Duration::from_millis(u64::from(coalesce_ms)),
            pending: Arc::new(Mutex::new(Some(HashMap::new()))),
        }
    }

    /// A wake is due for `watcher` because of `target`.
    pub fn due(&self, watcher: &str, target: &str) {
        let mut guard = self.pending.lock();
        let Some(pending) = guard.as_mut() else {
            return; // closed
        };
        if pending.contains_key(watcher) {
            return;
        }
        let request = WakeRequest {
            source: "session-state",
            intent: "immediate",
            reason: format!("session-state:{target}"),
            session_key: watcher.to_owned(),
        };
        let sink = Arc::clone(&self.sink);
        let table = Arc::clone(&self.pending);
        let delay = self.coalesce;
        let task = runtime::handle().spawn(async move {
            tokio::time::sleep(delay).await;
            // Leave the table before calling out, so a wake due while the host handles this
            // one schedules a new call instead of being lost.
            let live = table
                .lock()
                .as_mut()
                .is_some_and(|p| p.remove(&request.session_key).is_some());
            if live {
                sink.wake(request);
            }
        });
        pending.insert(watcher.to_owned(), task.abort_handle());
    }

    /// Cancels the watcher's scheduled wake, if any (its session was reset or deleted).
    pub fn cancel(&self, watcher: &str) {
        if let Some(p) = self.pending.lock().as_mut() {
            if let Some(h) = p.remove(watcher) {
                h.abort();
            }
        }
    }

    /// The number of wakes scheduled and not yet delivered.
    #[cfg(test)]
    pub fn scheduled(&self) -> usize {
        self.pending.lock().as_ref().map_or(0, HashMap::len)
    }

    /// The watchers with a wake scheduled and not yet delivered, sorted.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn scheduled_watchers(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .pending
            .lock()
            .as_ref()
            .map_or_else(Vec::new, |p| p.keys().cloned().collect());
        out.sort();
        out
    }

    /// Cancels every scheduled wake; later `due` calls do nothing.
    pub fn close(&self) {
        if let Some(p) = self.pending.lock().take() {
            for h in p.into_values() {
                h.abort();
            }
        }
    }
}

impl Drop for WakeScheduler {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    struct Channel(Mutex<mpsc::Sender<WakeRequest>>);
    impl WakeSink for Channel {
        fn wake(&self, request: WakeRequest) {
            let _ = self.0.lock().send(request);
        }
    }

    fn scheduler(ms: u32) -> (WakeScheduler, mpsc::Receiver<WakeRequest>) {
        let (tx, rx) = mpsc::channel();
        (
            WakeScheduler::new(Arc::new(Channel(Mutex::new(tx))), ms),
            rx,
        )
    }

    #[test]
    fn coalesces_per_watcher_naming_the_first_target() {
        let (s, rx) = scheduler(30);
        for i in 0..20 {
            s.due("agent:main:main", &format!("agent:main:t{i}"));
        }
        s.due("agent:ops:main", "agent:main:x");
        let mut got = [
            rx.recv_timeout(Duration::from_secs(5)).unwrap(),
            rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        ];
        got.sort_by(|a, b| a.session_key.cmp(&b.session_key));
        assert_eq!(got[0].session_key, "agent:main:main");
        assert_eq!(got[0].reason, "session-state:agent:main:t0");
        assert_eq!(got[0].source, "session-state");
        assert_eq!(got[0].intent, "immediate");
        assert_eq!(got[1].reason, "session-state:agent:main:x");
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
        // After delivery, a new due wake schedules a new call.
        s.due("agent:main:main", "agent:main:t5");
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(5)).unwrap().reason,
            "session-state:agent:main:t5"
        );
    }

    #[test]
    fn close_and_cancel_stop_delivery() {
        let (s, rx) = scheduler(50);
        s.due("agent:main:a", "agent:main:x");
        s.due("agent:main:b", "agent:main:x");
        s.cancel("agent:main:a");
        assert_eq!(s.scheduled(), 1);
        s.close();
        s.due("agent:main:c", "agent:main:x");
        assert_eq!(s.scheduled(), 0);
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    }
}
