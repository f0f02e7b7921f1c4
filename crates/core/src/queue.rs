//! The in-memory pending-notice queue (semantics.md#cursors): a cache of the cursor rows whose notice is open.
//!
//! At most one entry per (watcher, target), in the order the entries entered. An entry holds
//! only its target (shared between the watchers of one change) and the position L it names:
//! the notice text and context key are derived from them when a notice is handed out, so a
//! gateway with 100,000 pending notices keeps about 50 bytes per notice, not a few hundred.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use foldhash::fast::RandomState;
use indexmap::IndexMap;

use crate::keys;
use crate::rows::{Pending, Provenance};

/// A pending stale-state notice, as handed to the watcher's turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The watcher session.
    pub watcher_key: String,
    /// The session that changed.
    pub target_key: String,
    /// L: the version to reconcile from.
    pub changes_since: i64,
    /// The pinned one-line text.
    pub text: String,
    /// `session-state:` + hex of the target key.
    pub context_key: String,
    /// The watcher scope of the cursor, if it has one (semantics.md#cursors-scope).
    pub scope: Option<String>,
}

impl Notice {
    /// Builds the notice of `watcher` on `target` at acknowledged position `last_seen`, for a
    /// cursor bound to `scope`.
    pub fn new(watcher: &str, target: &str, last_seen: i64, scope: Option<&str>) -> Self {
        Notice {
            watcher_key: watcher.to_owned(),
            target_key: target.to_owned(),
            changes_since: last_seen,
            text: keys::notice_text(target, last_seen),
            context_key: keys::encode_notice_context_key(target),
            scope: scope.map(str::to_owned),
        }
    }
}

/// A notice as it entered the queue, for the host's notice listener (semantics.md#notices-listener).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedNotice {
    /// The notice.
    pub notice: Notice,
    /// True when the store wakes the watcher for it: an explicit cursor of a main-like watcher.
    pub wake: bool,
    /// True for an `ambient-group` cursor: the notice waits for the watcher's next turn.
    pub queue_only: bool,
}

/// One queued entry: the target, the position L its notice names and the cursor's scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// The session that changed.
    pub target: Arc<str>,
    /// L.
    pub changes_since: i64,
    /// The cursor's watcher scope.
    pub scope: Option<Arc<str>>,
}

/// What the queue keeps per (watcher, target): L and the cursor's scope.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    since: i64,
    scope: Option<Arc<str>>,
}

/// What a reader without the queue's lock may know of it: three words the queue and the store
/// keep current, so that the JS side of `drain` can answer an empty drain without a call
/// into the addon. Word 0 is [`QueueSignal::EMPTY`], [`QueueSignal::QUEUED`] or
/// [`QueueSignal::CLOSED`]; word 1 changes each time a watcher stops being served (semantics.md#processes), so
/// that a reader's list of watchers already served is dropped; word 2 is 1 while the outbox of
/// the notice listener holds notices (semantics.md#notices-listener), else 0.
#[derive(Debug, Default)]
pub struct QueueSignal {
    /// The three words, in this order.
    pub words: [AtomicI32; 3],
}

impl QueueSignal {
    /// Nothing is queued.
    pub const EMPTY: i32 = 0;
    /// At least one notice is queued.
    pub const QUEUED: i32 = 1;
    /// The store is closed: every call must go to the addon, which refuses it.
    pub const CLOSED: i32 = 2;

    fn set(&self, state: i32) {
        // Written under the queue's lock; a reader sees the change in program order on the
        // thread that made it (the JS thread's own record, drain, watch...) and soon after on
        // the others, like a call racing with the background poll.
        if self.words[0].load(Ordering::Relaxed) != Self::CLOSED {
            self.words[0].store(state, Ordering::Release);
        }
    }

    /// Marks the store closed, for good.
    pub fn close(&self) {
        self.words[0].store(Self::CLOSED, Ordering::Release);
    }

    /// A watcher stopped being served.
    pub fn unserved(&self) {
        self.words[1].fetch_add(1, Ordering::AcqRel);
    }
}

/// Pending notices per watcher, in arrival order, each found by its target in O(1).
#[derive(Debug, Default)]
pub struct NoticeQueue {
    by_watcher: HashMap<Box<str>, IndexMap<Arc<str>, Entry, RandomState>, RandomState>,
    signal: Arc<QueueSignal>,
    // The notices that entered since the host last took them; `None` without a listener.
    outbox: Option<Vec<QueuedNotice>>,
}

impl NoticeQueue {
    /// A queue that also keeps every notice entering it for the host's listener
    /// ([`NoticeQueue::take_entered`]) when `outbox` is true.
    pub fn new(outbox: bool) -> Self {
        NoticeQueue {
            outbox: outbox.then(Vec::new),
            ..Default::default()
        }
    }

    /// Queues the notice of a committed pending cursor, replacing a queued one at another
    /// position (see [`NoticeQueue::upsert`]). Returns true when it entered, and then also
    /// keeps it for the listener, with `wake`: whether the store wakes the watcher for it.
    pub fn enter(&mut self, p: &Pending, wake: bool) -> bool {
        if !self.upsert(&p.watcher, &p.target, p.last_seen, p.scope.as_ref()) {
            return false;
        }
        if let Some(out) = &mut self.outbox {
            out.push(QueuedNotice {
                notice: Notice::new(&p.watcher, &p.target, p.last_seen, p.scope.as_deref()),
                wake,
                queue_only: p.provenance == Provenance::AmbientGroup,
            });
            self.signal.words[2].store(1, Ordering::Release);
        }
        true
    }

    /// Takes the notices that entered since the last call, in the order they entered.
    pub fn take_entered(&mut self) -> Vec<QueuedNotice> {
        let Some(out) = &mut self.outbox else {
            return Vec::new();
        };
        self.signal.words[2].store(0, Ordering::Release);
        std::mem::take(out)
    }

    /// The words this queue keeps current.
    pub fn signal(&self) -> &Arc<QueueSignal> {
        &self.signal
    }

    fn publish(&self) {
        self.signal.set(if self.by_watcher.is_empty() {
            QueueSignal::EMPTY
        } else {
            QueueSignal::QUEUED
        });
    }

    /// Drops every notice (the store closed).
    pub fn clear(&mut self) {
        self.by_watcher.clear();
        self.publish();
    }

    /// Queues a notice unless the pair already has one. Returns true when it entered. The
    /// listener is not told: this puts back notices taken by a drain that failed.
    pub fn push(
        &mut self,
        watcher: &str,
        target: &str,
        last_seen: i64,
        scope: Option<Arc<str>>,
    ) -> bool {
        if self.contains(watcher, target) {
            return false;
        }
        self.insert(watcher, Arc::from(target), last_seen, scope);
        true
    }

    fn insert(&mut self, watcher: &str, target: Arc<str>, since: i64, scope: Option<Arc<str>>) {
        let entry = Entry { since, scope };
        match self.by_watcher.get_mut(watcher) {
            Some(list) => {
                list.insert(target, entry);
            }
            None => {
                let mut list = IndexMap::with_capacity_and_hasher(1, RandomState::default());
                list.insert(target, entry);
                self.by_watcher.insert(watcher.into(), list);
                self.publish();
            }
        }
    }

    /// Replaces the pair's notice if its position differs (another process acknowledged it
    /// and a fresh one opened), else queues it. Returns true when a notice entered. The
    /// target is shared, not copied: the watchers of one change hold one string.
    pub fn upsert(
        &mut self,
        watcher: &str,
        target: &Arc<str>,
        last_seen: i64,
        scope: Option<&Arc<str>>,
    ) -> bool {
        if let Some(list) = self.by_watcher.get_mut(watcher) {
            if let Some(i) = list.get_index_of(&**target) {
                if list[i].since == last_seen {
                    return false;
                }
                // The old notice was consumed elsewhere; this is a new one, so it goes last.
                list.shift_remove_index(i);
            }
        }
        self.insert(watcher, Arc::clone(target), last_seen, scope.cloned());
        true
    }

    /// True when the pair has a queued notice.
    pub fn contains(&self, watcher: &str, target: &str) -> bool {
        self.by_watcher
            .get(watcher)
            .is_some_and(|l| l.contains_key(target))
    }

    /// The position (L) the pair's queued notice names, if it has one.
    pub fn position(&self, watcher: &str, target: &str) -> Option<i64> {
        Some(self.by_watcher.get(watcher)?.get(target)?.since)
    }

    /// Every queued (watcher, target) pair.
    pub fn pairs(&self) -> Vec<(String, String)> {
        self.by_watcher
            .iter()
            .flat_map(|(w, list)| list.keys().map(|t| (w.to_string(), t.to_string())))
            .collect()
    }

    /// True when the watcher has queued notices. Costs no SQL: the empty-drain fast path.
    pub fn has_any(&self, watcher: &str) -> bool {
        // Nothing queued at all (the usual state) needs no hashing.
        !self.by_watcher.is_empty() && self.by_watcher.get(watcher).is_some_and(|l| !l.is_empty())
    }

    /// The watcher's notices, in order, without removing them.
    pub fn peek(&self, watcher: &str) -> Vec<Notice> {
        self.by_watcher.get(watcher).map_or_else(Vec::new, |l| {
            l.iter()
                .map(|(target, e)| Notice::new(watcher, target, e.since, e.scope.as_deref()))
                .collect()
        })
    }

    /// Removes and returns the watcher's entries, in order.
    pub fn take(&mut self, watcher: &str) -> Vec<Queued> {
        let taken = self.by_watcher.remove(watcher).map_or_else(Vec::new, |l| {
            l.into_iter()
                .map(|(target, e)| Queued {
                    target,
                    changes_since: e.since,
                    scope: e.scope,
                })
                .collect()
        });
        self.publish();
        taken
    }

    /// Drops the pair's notice. Returns true if there was one.
    pub fn remove(&mut self, watcher: &str, target: &str) -> bool {
        let Some(list) = self.by_watcher.get_mut(watcher) else {
            return false;
        };
        let removed = list.shift_remove(target).is_some();
        if list.is_empty() {
            self.by_watcher.remove(watcher);
            self.publish();
        }
        removed
    }

    /// Drops every notice of `watcher`.
    pub fn remove_watcher(&mut self, watcher: &str) {
        self.by_watcher.remove(watcher);
        self.publish();
    }

    /// Drops every notice whose target is `target`.
    pub fn remove_target(&mut self, target: &str) {
        self.by_watcher.retain(|_, list| {
            list.shift_remove(target);
            !list.is_empty()
        });
        self.publish();
    }

    /// The number of queued notices.
    pub fn len(&self) -> usize {
        self.by_watcher.values().map(IndexMap::len).sum()
    }

    /// True when nothing is queued.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.by_watcher.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(q: &NoticeQueue, w: &str) -> Vec<(String, i64)> {
        q.peek(w)
            .into_iter()
            .map(|n| (n.target_key, n.changes_since))
            .collect()
    }

    #[test]
    fn one_notice_per_pair_in_arrival_order() {
        let mut q = NoticeQueue::default();
        assert!(q.push("w", "b", 3, None));
        assert!(q.push("w", "a", 1, None));
        assert!(!q.push("w", "b", 9, None));
        assert_eq!(order(&q, "w"), [("b".into(), 3), ("a".into(), 1)]);
        assert!(q.has_any("w"));
        assert_eq!(
            q.take("w"),
            [
                Queued {
                    target: "b".into(),
                    changes_since: 3,
                    scope: None,
                },
                Queued {
                    target: "a".into(),
                    changes_since: 1,
                    scope: None,
                }
            ]
        );
        assert!(!q.has_any("w"));
        assert!(q.is_empty());
    }

    #[test]
    fn notices_are_built_when_handed_out() {
        let mut q = NoticeQueue::default();
        q.push("agent:main:main", "agent:main:subagent:c", 7, None);
        assert_eq!(
            q.peek("agent:main:main"),
            [Notice {
                watcher_key: "agent:main:main".into(),
                target_key: "agent:main:subagent:c".into(),
                changes_since: 7,
                text: "Session \"agent:main:subagent:c\" changed (other actor). Reconcile before \
                       acting: session_status sessionKey \"agent:main:subagent:c\" changesSince 7."
                    .into(),
                context_key: "session-state:6167656e743a6d61696e3a7375626167656e743a63".into(),
                scope: None,
            }]
        );
    }

    #[test]
    fn upsert_replaces_a_consumed_position() {
        let mut q = NoticeQueue::default();
        q.push("w", "a", 1, None);
        q.push("w", "b", 1, None);
        let a: Arc<str> = Arc::from("a");
        assert!(!q.upsert("w", &a, 1, None));
        assert!(q.upsert("w", &a, 5, None));
        assert_eq!(order(&q, "w"), [("b".into(), 1), ("a".into(), 5)]);
        assert!(q.upsert("v", &a, 2, None));
        assert_eq!(order(&q, "v"), [("a".into(), 2)]);
        assert_eq!(q.position("w", "a"), Some(5));
        assert_eq!(q.position("w", "c"), None);
        assert_eq!(q.position("x", "a"), None);
        let mut pairs = q.pairs();
        pairs.sort();
        assert_eq!(
            pairs,
            [
                ("v".to_owned(), "a".to_owned()),
                ("w".to_owned(), "a".to_owned()),
                ("w".to_owned(), "b".to_owned())
            ]
        );
    }

    #[test]
    fn removals_keep_the_order_of_the_rest() {
        let mut q = NoticeQueue::default();
        q.push("w1", "t", 0, None);
        q.push("w2", "t", 0, None);
        q.push("w2", "u", 0, None);
        q.push("w2", "v", 0, None);
        q.remove_target("t");
        assert_eq!(q.len(), 2);
        assert!(q.remove("w2", "u"));
        assert!(!q.remove("w2", "u"));
        assert_eq!(order(&q, "w2"), [("v".into(), 0)]);
        assert!(q.remove("w2", "v"));
        assert!(q.is_empty());
    }

    #[test]
    fn many_targets_per_watcher() {
        let mut q = NoticeQueue::default();
        for i in 0..2000 {
            assert!(q.push("w", &format!("t{i}"), i, None));
        }
        assert!(!q.push("w", "t1999", 0, None));
        assert!(q.remove("w", "t0"));
        assert_eq!(q.len(), 1999);
        assert_eq!(order(&q, "w")[0], ("t1".into(), 1));
    }

    #[test]
    fn the_signal_words_follow_the_queue() {
        let mut q = NoticeQueue::default();
        let signal = Arc::clone(q.signal());
        let state = || signal.words[0].load(Ordering::Acquire);
        assert_eq!(state(), QueueSignal::EMPTY);
        assert!(q.push("w", "a", 1, None));
        assert_eq!(state(), QueueSignal::QUEUED);
        assert!(q.push("w", "b", 1, None));
        assert!(q.remove("w", "a"));
        assert_eq!(state(), QueueSignal::QUEUED, "one notice is left");
        assert!(q.remove("w", "b"));
        assert_eq!(state(), QueueSignal::EMPTY);
        assert!(q.upsert("v", &Arc::from("a"), 2, None));
        assert_eq!(state(), QueueSignal::QUEUED);
        assert_eq!(q.take("v").len(), 1);
        assert_eq!(state(), QueueSignal::EMPTY);
        q.push("w", "a", 1, None);
        q.push("v", "a", 1, None);
        q.remove_target("a");
        assert_eq!(state(), QueueSignal::EMPTY);
        q.push("w", "a", 1, None);
        q.remove_watcher("w");
        assert_eq!(state(), QueueSignal::EMPTY);
        q.push("w", "a", 1, None);
        q.clear();
        assert_eq!(state(), QueueSignal::EMPTY);
        signal.close();
        q.push("w", "a", 1, None);
        assert_eq!(state(), QueueSignal::CLOSED, "closed stays closed");
        let before = signal.words[1].load(Ordering::Acquire);
        signal.unserved();
        assert_eq!(signal.words[1].load(Ordering::Acquire), before + 1);
    }
}
