//! The wake-ups of followers (semantics.md#follow): the sessions this store's host follows,
//! which of them may have new rows, and the one signal that tells the host so. A follower
//! reads its rows itself, with `changesSince`, when its consumer pulls; this only says when a
//! read may find something. One signal per store, whatever the number of followers.
//!
//! A session is touched by a commit of this store (the record path, after its commit), by
//! the poll that sees another process's commit on the file, and by the PostgreSQL catch-up
//! that sees another host's. A touch is a hint: a follower that reads and finds nothing new
//! waits again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// Told when followed sessions were touched (semantics.md#follow), so that the host reads
/// them. Called once every lock is released; it must not block. The binding implements it
/// with a weak, non-blocking JS callback, one call in flight.
pub trait FollowSignal: Send + Sync + 'static {
    /// Followed sessions may have new rows: take them with [`crate::Store::take_followed`].
    fn touched(&self);
}

/// One followed session.
struct Followed {
    /// Open followers of it.
    count: u32,
    /// The largest sequence this store knows of (its own commits, the heads it read).
    head: i64,
    /// Touched since the host last took the touched sessions.
    touched: bool,
}

#[derive(Default)]
struct Inner {
    // (agent, session key) -> the followed session.
    sessions: HashMap<(String, String), Followed>,
    open: u64,
    // A touch not told yet.
    due: bool,
    signal: Option<Arc<dyn FollowSignal>>,
}

/// The followed sessions of one store.
#[derive(Default)]
pub(crate) struct Follows {
    // True while a session is followed: the one load a commit pays when nobody follows.
    any: AtomicBool,
    inner: Mutex<Inner>,
}

impl Follows {
    /// One more follower of the session (`agent` resolved).
    pub(crate) fn follow(&self, agent: &str, key: &str) {
        let mut g = self.inner.lock();
        g.sessions
            .entry((agent.to_owned(), key.to_owned()))
            .or_insert(Followed {
                count: 0,
                head: 0,
                touched: false,
            })
            .count += 1;
        g.open += 1;
        self.any.store(true, Ordering::Release);
    }

    /// One follower of the session less (it ended). Unknown sessions are ignored.
    pub(crate) fn unfollow(&self, agent: &str, key: &str) {
        let mut g = self.inner.lock();
        let k = (agent.to_owned(), key.to_owned());
        let Some(f) = g.sessions.get_mut(&k) else {
            return;
        };
        f.count -= 1;
        if f.count == 0 {
            g.sessions.remove(&k);
        }
        g.open -= 1;
        self.any.store(!g.sessions.is_empty(), Ordering::Release);
    }

    /// True while any session is followed.
    pub(crate) fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// The open followers.
    pub(crate) fn open(&self) -> u64 {
        self.inner.lock().open
    }

    /// This store committed the event `sequence` of the session. Cheap when nobody follows.
    pub(crate) fn committed(&self, agent: &str, key: &str, sequence: i64) {
        if !self.any() {
            return;
        }
        let mut g = self.inner.lock();
        let Some(f) = g.sessions.get_mut(&(agent.to_owned(), key.to_owned())) else {
            return;
        };
        f.head = f.head.max(sequence);
        f.touched = true;
        g.due = true;
    }

    /// Another connection wrote events of the sessions `keys` (of any agent): the poll of the
    /// file found them.
    pub(crate) fn touch_keys(&self, keys: &[String]) {
        if !self.any() || keys.is_empty() {
            return;
        }
        let mut g = self.inner.lock();
        let mut any = false;
        for ((_, key), f) in &mut g.sessions {
            if keys.iter().any(|k| k == key) {
                f.touched = true;
                any = true;
            }
        }
        g.due |= any;
    }

    /// Another connection wrote events of sessions it could not name: every followed session
    /// is touched (a follower that finds nothing new waits again).
    pub(crate) fn touch_all(&self) {
        if !self.any() {
            return;
        }
        let mut g = self.inner.lock();
        for f in g.sessions.values_mut() {
            f.touched = true;
        }
        g.due |= !g.sessions.is_empty();
    }

    /// The followed sessions, (agent, key): for a read of their heads.
    pub(crate) fn sessions(&self) -> Vec<(String, String)> {
        self.inner.lock().sessions.keys().cloned().collect()
    }

    /// Heads read from the store, (agent, key, head): a session whose head is above the one
    /// known is touched.
    pub(crate) fn heads(&self, heads: &[(String, String, i64)]) {
        let mut g = self.inner.lock();
        let mut any = false;
        for (agent, key, head) in heads {
            if let Some(f) = g.sessions.get_mut(&(agent.clone(), key.clone())) {
                if *head > f.head {
                    f.head = *head;
                    f.touched = true;
                    any = true;
                }
            }
        }
        g.due |= any;
    }

    /// Tells the signal of the touches since the last call. Called after every lock is
    /// released ([`crate::delivery::Delivery::wake_all`]).
    pub(crate) fn tell(&self) {
        if !self.any() {
            return;
        }
        let signal = {
            let mut g = self.inner.lock();
            if !g.due {
                return;
            }
            g.due = false;
            g.signal.clone()
        };
        if let Some(s) = signal {
            s.touched();
        }
    }

    /// Takes the sessions touched since the last call, (agent, key), and clears their mark.
    pub(crate) fn take(&self) -> Vec<(String, String)> {
        let mut g = self.inner.lock();
        let mut out = Vec::new();
        for (k, f) in &mut g.sessions {
            if f.touched {
                f.touched = false;
                out.push(k.clone());
            }
        }
        out
    }

    /// Sets (or, with `None`, removes) the signal.
    pub(crate) fn set_signal(&self, signal: Option<Arc<dyn FollowSignal>>) {
        self.inner.lock().signal = signal;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[derive(Default)]
    struct Count(AtomicU32);

    impl FollowSignal for Count {
        fn touched(&self) {
            self.0.fetch_add(1, Ordering::AcqRel);
        }
    }

    fn pair(a: &str, k: &str) -> (String, String) {
        (a.to_owned(), k.to_owned())
    }

    #[test]
    fn a_commit_of_a_followed_session_is_told_once_and_taken_once() {
        let f = Follows::default();
        let s = Arc::new(Count::default());
        f.set_signal(Some(s.clone() as Arc<dyn FollowSignal>));
        f.committed("main", "agent:main:a", 3);
        f.tell();
        assert_eq!(
            s.0.load(Ordering::Acquire),
            0,
            "nobody follows: nothing told"
        );
        f.follow("main", "agent:main:a");
        f.follow("main", "agent:main:a");
        assert_eq!(f.open(), 2);
        f.committed("main", "agent:main:b", 4);
        f.tell();
        assert_eq!(
            s.0.load(Ordering::Acquire),
            0,
            "another session: nothing told"
        );
        f.committed("main", "agent:main:a", 5);
        f.committed("main", "agent:main:a", 6);
        f.tell();
        f.tell();
        assert_eq!(s.0.load(Ordering::Acquire), 1);
        assert_eq!(f.take(), vec![pair("main", "agent:main:a")]);
        assert!(f.take().is_empty());
        // The head known is 6: a read of 6 touches nothing, of 7 touches.
        f.heads(&[("main".into(), "agent:main:a".into(), 6)]);
        assert!(f.take().is_empty());
        f.heads(&[("main".into(), "agent:main:a".into(), 7)]);
        f.tell();
        assert_eq!(s.0.load(Ordering::Acquire), 2);
        assert_eq!(f.take(), vec![pair("main", "agent:main:a")]);
    }

    #[test]
    fn keys_touch_every_agent_and_unfollow_forgets() {
        let f = Follows::default();
        f.follow("main", "k");
        f.follow("x", "k");
        f.follow("main", "other");
        f.touch_keys(&["k".to_owned()]);
        let mut t = f.take();
        t.sort();
        assert_eq!(t, vec![pair("main", "k"), pair("x", "k")]);
        f.touch_all();
        assert_eq!(f.take().len(), 3);
        f.unfollow("main", "k");
        f.unfollow("x", "k");
        f.unfollow("main", "other");
        f.unfollow("main", "never");
        assert_eq!(f.open(), 0);
        assert!(!f.any());
        assert!(f.sessions().is_empty());
    }
}
