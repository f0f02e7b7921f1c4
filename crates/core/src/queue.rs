//! The in-memory pending-notice queue (§7): a cache of the cursor rows whose notice is open.
//!
//! At most one entry per (watcher, target). Entries keep the order in which they entered.

use std::collections::HashMap;

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

/// Pending notices per watcher, in arrival order.
#[derive(Debug, Default)]
pub struct NoticeQueue {
    by_watcher: HashMap<String, Vec<Notice>>,
}

impl NoticeQueue {
    /// Queues a notice unless the pair already has one. Returns true when it entered.
    pub fn push(&mut self, watcher: &str, target: &str, last_seen: i64) -> bool {
        let list = self.by_watcher.entry(watcher.to_owned()).or_default();
        if list.iter().any(|n| n.target_key == target) {
            return false;
        }
        list.push(Notice::new(watcher, target, last_seen));
        true
    }

    /// Replaces the pair's notice if its position differs (another process acknowledged it
    /// and a fresh one opened), else queues it. Returns true when a notice entered.
    pub fn upsert(&mut self, watcher: &str, target: &str, last_seen: i64) -> bool {
        if let Some(list) = self.by_watcher.get_mut(watcher) {
            if let Some(n) = list.iter_mut().find(|n| n.target_key == target) {
                if n.changes_since == last_seen {
                    return false;
                }
                // The old notice was consumed elsewhere; this is a new one, so it goes last.
                list.retain(|n| n.target_key != target);
            }
        }
        self.push(watcher, target, last_seen)
    }

    /// True when the pair has a queued notice.
    pub fn contains(&self, watcher: &str, target: &str) -> bool {
        self.by_watcher
            .get(watcher)
            .is_some_and(|l| l.iter().any(|n| n.target_key == target))
    }

    /// The position (L) the pair's queued notice names, if it has one.
    pub fn position(&self, watcher: &str, target: &str) -> Option<i64> {
        self.by_watcher
            .get(watcher)?
            .iter()
            .find(|n| n.target_key == target)
            .map(|n| n.changes_since)
    }

    /// Every queued (watcher, target) pair.
    pub fn pairs(&self) -> Vec<(String, String)> {
        self.by_watcher
            .values()
            .flatten()
            .map(|n| (n.watcher_key.clone(), n.target_key.clone()))
            .collect()
    }

    /// True when the watcher has queued notices. Costs no SQL: the empty-drain fast path.
    pub fn has_any(&self, watcher: &str) -> bool {
        self.by_watcher.get(watcher).is_some_and(|l| !l.is_empty())
    }

    /// The watcher's notices, in order, without removing them.
    pub fn peek(&self, watcher: &str) -> Vec<Notice> {
        self.by_watcher.get(watcher).cloned().unwrap_or_default()
    }

    /// Removes and returns the watcher's notices, in order.
    pub fn take(&mut self, watcher: &str) -> Vec<Notice> {
        self.by_watcher.remove(watcher).unwrap_or_default()
    }

    /// Drops the pair's notice. Returns true if there was one.
    pub fn remove(&mut self, watcher: &str, target: &str) -> bool {
        let Some(list) = self.by_watcher.get_mut(watcher) else {
            return false;
        };
        let before = list.len();
        list.retain(|n| n.target_key != target);
        let removed = list.len() != before;
        if list.is_empty() {
            self.by_watcher.remove(watcher);
        }
        removed
    }

    /// Drops every notice of `watcher`.
    pub fn remove_watcher(&mut self, watcher: &str) {
        self.by_watcher.remove(watcher);
    }

    /// Drops every notice whose target is `target`.
    pub fn remove_target(&mut self, target: &str) {
        self.by_watcher.retain(|_, list| {
            list.retain(|n| n.target_key != target);
            !list.is_empty()
        });
    }

    /// The number of queued notices.
    pub fn len(&self) -> usize {
        self.by_watcher.values().map(Vec::len).sum()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.by_watcher.is_empty()
    }

    /// Every watcher that has queued notices.
    pub fn watchers(&self) -> impl Iterator<Item = &str> {
        self.by_watcher.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_notice_per_pair_in_arrival_order() {
        let mut q = NoticeQueue::default();
        assert!(q.push("w", "b", 3));
        assert!(q.push("w", "a", 1));
        assert!(!q.push("w", "b", 9));
        let p = q.peek("w");
        assert_eq!(
            p.iter()
                .map(|n| (n.target_key.as_str(), n.changes_since))
                .collect::<Vec<_>>(),
            [("b", 3), ("a", 1)]
        );
        assert!(q.has_any("w"));
        assert_eq!(q.take("w").len(), 2);
        assert!(!q.has_any("w"));
        assert!(q.is_empty());
    }

    #[test]
    fn upsert_replaces_a_consumed_position() {
        let mut q = NoticeQueue::default();
        q.push("w", "a", 1);
        q.push("w", "b", 1);
        assert!(!q.upsert("w", "a", 1));
        assert!(q.upsert("w", "a", 5));
        assert_eq!(q.position("w", "a"), Some(5));
        assert_eq!(q.position("w", "c"), None);
        assert_eq!(q.position("x", "a"), None);
        let mut pairs = q.pairs();
        pairs.sort();
        assert_eq!(
            pairs,
            [
                ("w".to_owned(), "a".to_owned()),
                ("w".to_owned(), "b".to_owned())
            ]
        );
        let p = q.peek("w");
        assert_eq!(
            p.iter()
                .map(|n| (n.target_key.as_str(), n.changes_since))
                .collect::<Vec<_>>(),
            [("b", 1), ("a", 5)]
        );
    }

    #[test]
    fn removals() {
        let mut q = NoticeQueue::default();
        q.push("w1", "t", 0);
        q.push("w2", "t", 0);
        q.push("w2", "u", 0);
        q.remove_target("t");
        assert_eq!(q.len(), 1);
        assert!(q.remove("w2", "u"));
        assert!(!q.remove("w2", "u"));
        assert!(q.is_empty());
    }
}
