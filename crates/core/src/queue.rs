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
}

impl Notice {
    /// Builds the notice of `watcher` on `target` at acknowledged position `last_seen`.
    pub fn new(watcher: &str, target: &str, last_seen: i64) -> Self {
        Notice {
            watcher_key: watcher.to_owned(),
            target_key: target.to_owned(),
            changes_since: last_seen,
            text: keys::notice_text(target, last_seen),
            context_key: keys::encode_notice_context_key(target),
        }
    }
}

/// One queued entry: the target and the position L its notice names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// The session that changed.
    pub target: Arc<str>,
    /// L.
    pub changes_since: i64,
}

/// What a reader without the queue's lock may know of it: two words the queue and the store
/// keep current, so that the JS side of `drain` can answer an empty drain without a call
/// into the addon. Word 0 is [`QueueSignal::EMPTY`], [`QueueSignal::QUEUED`] or
/// [`QueueSignal::CLOSED`]; word 1 changes each time a watcher stops being served (semantics.md#processes), so
/// that a reader's list of watchers already served is dropped.
#[derive(Debug, Default)]
pub struct QueueSignal {
    /// The two words, in this order.
    pub words: [AtomicI32; 2],
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
    by_watcher: HashMap<Box<str>, IndexMap<Arc<str>, i64, RandomState>, RandomState>,
    signal: Arc<QueueSignal>,
}

impl NoticeQueue {
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

    /// Queues a notice unless the pair already has one. Returns true when it entered.
    pub fn push(&mut self, watcher: &str, target: &str, last_seen: i64) -> bool {
        if self.contains(watcher, target) {
            return false;
        }
        self.insert(watcher, Arc::from(target), last_seen);
        true
    }

    fn insert(&mut self, watcher: &str, target: Arc<str>, last_seen: i64) {
        match self.by_watcher.get_mut(watcher) {
            Some(list) => {
                list.insert(target, last_seen);
            }
            None => {
                let mut list = IndexMap::with_capacity_and_hasher(1, RandomState::default());
                list.insert(target, last_seen);
                self.by_watcher.insert(watcher.into(), list);
                self.publish();
            }
        }
    }

    /// Replaces the pair's notice if its position differs (another process acknowledged it
    /// and a fresh one opened), else queues it. Returns true when a notice entered. The
    /// target is shared, not copied: the watchers of one change hold one string.
    pub fn upsert(&mut self, watcher: &str, target: &Arc<str>, last_seen: i64) -> bool {
        if let Some(list) = self.by_watcher.get_mut(watcher) {
            if let Some(i) = list.get_index_of(&**target) {
                if list[i] == last_seen {
                    return false;
                }
                // The old notice was consumed elsewhere; this is a new one, so it goes last.
                list.shift_remove_index(i);
            }
        }
        self.insert(watcher, Arc::clone(target), last_seen);
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
        self.by_watcher.get(watcher)?.get(target).copied()
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
                .map(|(target, &since)| Notice::new(watcher, target, since))
                .collect()
        })
    }

    /// Removes and returns the watcher's entries, in order.
    pub fn take(&mut self, watcher: &str) -> Vec<Queued> {
        let taken = self.by_watcher.remove(watcher).map_or_else(Vec::new, |l| {
            l.into_iter()
                .map(|(target, changes_since)| Queued {
                    target,
                    changes_since,
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
    #[cfg(test)]
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
        assert!(q.push("w", "b", 3));
        assert!(q.push("w", "a", 1));
        assert!(!q.push("w", "b", 9));
        assert_eq!(order(&q, "w"), [("b".into(), 3), ("a".into(), 1)]);
        assert!(q.has_any("w"));
        assert_eq!(
            q.take("w"),
            [
                Queued {
                    target: "b".into(),
                    changes_since: 3
                },
                Queued {
                    target: "a".into(),
                    changes_since: 1
                }
            ]
        );
        assert!(!q.has_any("w"));
        assert!(q.is_empty());
    }

    #[test]
    fn notices_are_built_when_handed_out() {
        let mut q = NoticeQueue::default();
        q.push("agent:main:main", "agent:main:subagent:c", 7);
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
            }]
        );
    }

    #[test]
    fn upsert_replaces_a_consumed_position() {
        let mut q = NoticeQueue::default();
        q.push("w", "a", 1);
        q.push("w", "b", 1);
        let a: Arc<str> = Arc::from("a");
        assert!(!q.upsert("w", &a, 1));
        assert!(q.upsert("w", &a, 5));
        assert_eq!(order(&q, "w"), [("b".into(), 1), ("a".into(), 5)]);
        assert!(q.upsert("v", &a, 2));
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
        q.push("w1", "t", 0);
        q.push("w2", "t", 0);
        q.push("w2", "u", 0);
        q.push("w2", "v", 0);
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
            assert!(q.push("w", &format!("t{i}"), i));
        }
        assert!(!q.push("w", "t1999", 0));
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
        assert!(q.push("w", "a", 1));
        assert_eq!(state(), QueueSignal::QUEUED);
        assert!(q.push("w", "b", 1));
        assert!(q.remove("w", "a"));
        assert_eq!(state(), QueueSignal::QUEUED, "one notice is left");
        assert!(q.remove("w", "b"));
        assert_eq!(state(), QueueSignal::EMPTY);
        assert!(q.upsert("v", &Arc::from("a"), 2));
        assert_eq!(state(), QueueSignal::QUEUED);
        assert_eq!(q.take("v").len(), 1);
        assert_eq!(state(), QueueSignal::EMPTY);
        q.push("w", "a", 1);
        q.push("v", "a", 1);
        q.remove_target("a");
        assert_eq!(state(), QueueSignal::EMPTY);
        q.push("w", "a", 1);
        q.remove_watcher("w");
        assert_eq!(state(), QueueSignal::EMPTY);
        q.push("w", "a", 1);
        q.clear();
        assert_eq!(state(), QueueSignal::EMPTY);
        signal.close();
        q.push("w", "a", 1);
        assert_eq!(state(), QueueSignal::CLOSED, "closed stays closed");
        let before = signal.words[1].load(Ordering::Acquire);
        signal.unserved();
        assert_eq!(signal.words[1].load(Ordering::Acquire), before + 1);
    }
}
