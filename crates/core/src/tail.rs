//! The recent history in memory (semantics.md#reading-memory): per session, the events the
//! store wrote or read lately, enough to answer a `changesSince` whose range it covers without
//! asking SQLite. Storage-free: whoever holds a [`Tail`] decides when it is current (for
//! SQLite, `sqlite/read_cache.rs`) and clears it otherwise.
//!
//! A session's entry holds every event of the session above its `from`, up to its head, so
//! any `after >= from` is answered exactly: the events above `after` (up to the limit), the
//! head, the earliest retained sequence and the pruned watermark the read found. Entries hold
//! only events the store could have written (a session with a foreign row is read from SQLite
//! every time), and the whole tail stays under its byte budget by dropping the least recently
//! used entries.

use std::collections::{HashMap, VecDeque};

use foldhash::fast::RandomState;

use crate::event::StateEvent;
use crate::log::{Changes, ChangesRef};
use crate::read_event::ChangeEvent;

/// The default budget of the memory the read cache holds (the tail and the versions), in bytes
/// (`readCacheBytes`): 4 MiB.
pub const DEFAULT_READ_CACHE_BYTES: u64 = 4 << 20;

/// What one cached session costs besides its events: the entry and its two keys' maps.
const ENTRY_BYTES: usize = 160;

/// What a session's head says beside its events: the pruned watermark and the smallest
/// retained sequence (`None`: no event retained), as the read that filled the entry found them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// `pruned_max_sequence` of the session's head.
    pub(crate) pruned_max: i64,
    /// The smallest sequence among the session's rows.
    pub(crate) earliest: Option<i64>,
}

struct Entry {
    /// Every event of the session with a sequence above `from` is in `events`.
    from: i64,
    /// The session's head (`last_sequence`).
    head: i64,
    bounds: Bounds,
    /// Ascending by sequence.
    events: VecDeque<StateEvent>,
    bytes: usize,
    used: u64,
}

/// The per-session tails, by agent then session key.
#[derive(Default)]
pub(crate) struct Tail {
    budget: usize,
    bytes: usize,
    clock: u64,
    by_agent: HashMap<String, HashMap<String, Entry, RandomState>, RandomState>,
    entries: usize,
}

/// The memory an event is counted for.
fn event_bytes(e: &StateEvent) -> usize {
    std::mem::size_of::<StateEvent>()
        + e.session_key.len()
        + e.agent_id.len()
        + e.actor_id.as_ref().map_or(0, String::len)
        + e.run_id.as_ref().map_or(0, String::len)
        + e.session_id.as_ref().map_or(0, String::len)
        + e.summary.len()
        + e.payload_json.as_ref().map_or(0, String::len)
}

impl Tail {
    /// An empty tail that keeps at most `budget` bytes (0: it keeps nothing).
    pub(crate) fn new(budget: usize) -> Self {
        Tail {
            budget,
            ..Tail::default()
        }
    }

    /// The bytes held now.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// True when no session is held: a write has nothing to bring up to date.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Drops everything.
    pub(crate) fn clear(&mut self) {
        self.by_agent.clear();
        self.bytes = 0;
        self.entries = 0;
    }

    /// The answer to `changesSince(key, after, limit)` when the session's entry covers
    /// `after`, lent from the entry; `None` otherwise.
    pub(crate) fn lend(
        &mut self,
        key: &str,
        agent: &str,
        after: i64,
        limit: u32,
    ) -> Option<ChangesRef<'_>> {
        self.clock += 1;
        let clock = self.clock;
        let entry = self.by_agent.get_mut(agent)?.get_mut(key)?;
        if after < entry.from {
            return None;
        }
        entry.used = clock;
        let start = entry.events.partition_point(|e| e.sequence <= after);
        let available = entry.events.len() - start;
        let take = available.min(limit as usize);
        Some(ChangesRef::held(
            entry.head,
            entry.events.range(start..start + take),
            available > take,
            entry
                .bounds
                .earliest
                .unwrap_or(if entry.head > 0 { entry.head + 1 } else { 0 }),
            after < entry.bounds.pruned_max,
        ))
    }

    /// [`Tail::lend`], owned.
    #[cfg(test)]
    fn answer(&mut self, key: &str, agent: &str, after: i64, limit: u32) -> Option<Changes> {
        self.lend(key, agent, after, limit).map(|c| c.to_owned())
    }

    /// Keeps what a read from the store found: every event of the session above `after`
    /// (`changes` not truncated), its head and `bounds`. A read that met a foreign row, or
    /// whose events alone exceed a quarter of the budget, is not kept.
    pub(crate) fn fill(
        &mut self,
        key: &str,
        agent: &str,
        after: i64,
        changes: &Changes,
        bounds: Bounds,
    ) {
        if changes.truncated || self.budget == 0 {
            return;
        }
        let mut events = VecDeque::with_capacity(changes.events.len());
        let mut bytes = ENTRY_BYTES + key.len() + agent.len();
        for e in &changes.events {
            let ChangeEvent::Stored(e) = e else { return };
            bytes += event_bytes(e);
            events.push_back(e.clone());
        }
        if bytes > self.budget / 4 {
            return;
        }
        self.remove(key, agent);
        self.clock += 1;
        let head = changes.state_version;
        let entry = Entry {
            from: after.min(head),
            head,
            bounds,
            events,
            bytes,
            used: self.clock,
        };
        self.bytes += bytes;
        self.entries += 1;
        let keys = match self.by_agent.get_mut(agent) {
            Some(keys) => keys,
            None => self.by_agent.entry(agent.to_owned()).or_default(),
        };
        keys.insert(key.to_owned(), entry);
        self.trim();
    }

    /// Brings the session's entry, if any, up to date with `event`, just committed by this
    /// store as the session's new head.
    pub(crate) fn append(&mut self, event: &StateEvent) {
        let Some(entry) = self
            .by_agent
            .get_mut(&event.agent_id)
            .and_then(|keys| keys.get_mut(&event.session_key))
        else {
            return;
        };
        let size = event_bytes(event);
        entry.events.push_back(event.clone());
        entry.head = event.sequence;
        entry.bounds.earliest.get_or_insert(event.sequence);
        entry.bytes += size;
        self.bytes += size;
        // A session written far more than it is read keeps its newest events only.
        while entry.bytes > self.budget / 4 {
            let Some(old) = entry.events.pop_front() else {
                break;
            };
            let size = event_bytes(&old);
            entry.from = old.sequence;
            entry.bytes -= size;
            self.bytes -= size;
        }
        self.trim();
    }

    fn remove(&mut self, key: &str, agent: &str) {
        if let Some(keys) = self.by_agent.get_mut(agent) {
            if let Some(old) = keys.remove(key) {
                self.bytes -= old.bytes;
                self.entries -= 1;
            }
            if keys.is_empty() {
                self.by_agent.remove(agent);
            }
        }
    }

    /// Drops the least recently used entries until the tail is within its budget, down to
    /// three quarters of it so that the next few fills do not scan again.
    fn trim(&mut self) {
        if self.bytes <= self.budget {
            return;
        }
        let mut ages: Vec<(u64, usize)> = Vec::with_capacity(self.entries);
        for keys in self.by_agent.values() {
            for e in keys.values() {
                ages.push((e.used, e.bytes));
            }
        }
        ages.sort_unstable();
        let target = self.budget / 4 * 3;
        let mut bytes = self.bytes;
        let mut cutoff = 0;
        for (used, size) in ages {
            if bytes <= target {
                break;
            }
            bytes -= size;
            cutoff = used;
        }
        for keys in self.by_agent.values_mut() {
            keys.retain(|_, e| e.used > cutoff);
        }
        self.by_agent.retain(|_, keys| !keys.is_empty());
        self.bytes = 0;
        self.entries = 0;
        for keys in self.by_agent.values() {
            for e in keys.values() {
                self.bytes += e.bytes;
                self.entries += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ActorType, EventKind};

    fn event(key: &str, sequence: i64) -> StateEvent {
        StateEvent {
            sequence,
            session_key: key.to_owned(),
            agent_id: "main".to_owned(),
            kind: EventKind::RunCompleted,
            actor_type: ActorType::Agent,
            actor_id: None,
            run_id: None,
            session_id: None,
            occurred_at: 1,
            summary: "s".to_owned(),
            payload_json: None,
        }
    }

    fn read(key: &str, seqs: &[i64], head: i64) -> Changes {
        Changes {
            state_version: head,
            events: seqs
                .iter()
                .map(|&s| ChangeEvent::Stored(event(key, s)))
                .collect(),
            truncated: false,
            earliest_available_sequence: 0,
            history_gap: false,
        }
    }

    const K: &str = "agent:main:subagent:a";
    const B: Bounds = Bounds {
        pruned_max: 2,
        earliest: Some(3),
    };

    fn seqs(c: &Changes) -> Vec<i64> {
        c.events.iter().map(ChangeEvent::sequence).collect()
    }

    #[test]
    fn answers_only_the_range_it_covers_with_the_limit_and_bounds() {
        let mut t = Tail::new(1 << 20);
        t.fill(K, "main", 4, &read(K, &[5, 9, 12], 12), B);
        assert!(t.answer(K, "main", 3, 200).is_none());
        assert!(t.answer(K, "other", 4, 200).is_none());
        let c = t.answer(K, "main", 4, 2).unwrap();
        assert_eq!(
            (seqs(&c), c.truncated, c.state_version),
            (vec![5, 9], true, 12)
        );
        assert_eq!((c.earliest_available_sequence, c.history_gap), (3, false));
        let c = t.answer(K, "main", 9, 200).unwrap();
        assert_eq!((seqs(&c), c.truncated), (vec![12], false));
        assert!(t.answer(K, "main", 50, 200).unwrap().events.is_empty());
        t.append(&event(K, 13));
        let c = t.answer(K, "main", 12, 200).unwrap();
        assert_eq!((seqs(&c), c.state_version), (vec![13], 13));
    }

    #[test]
    fn a_gap_below_the_watermark_and_an_empty_session() {
        let mut t = Tail::new(1 << 20);
        t.fill(K, "main", 0, &read(K, &[5], 5), B);
        assert!(t.answer(K, "main", 1, 200).unwrap().history_gap);
        assert!(!t.answer(K, "main", 2, 200).unwrap().history_gap);
        let none = Bounds {
            pruned_max: 0,
            earliest: None,
        };
        t.fill("agent:x:main", "x", 0, &read("agent:x:main", &[], 0), none);
        assert_eq!(
            t.answer("agent:x:main", "x", 0, 9)
                .unwrap()
                .earliest_available_sequence,
            0
        );
        let mut e = event("agent:x:main", 7);
        e.agent_id = "x".to_owned();
        t.append(&e);
        let c = t.answer("agent:x:main", "x", 0, 9).unwrap();
        assert_eq!((seqs(&c), c.earliest_available_sequence), (vec![7], 7));
    }

    #[test]
    fn truncated_or_foreign_reads_and_a_zero_budget_keep_nothing() {
        let mut t = Tail::new(1 << 20);
        let mut c = read(K, &[5], 5);
        c.truncated = true;
        t.fill(K, "main", 0, &c, B);
        assert!(t.is_empty());
        let mut z = Tail::new(0);
        z.fill(K, "main", 0, &read(K, &[5], 5), B);
        assert!(z.is_empty() && z.bytes() == 0);
    }

    #[test]
    fn stays_within_its_budget_dropping_the_least_recently_used() {
        let one = ENTRY_BYTES + K.len() + 4 + event_bytes(&event(K, 1));
        let mut t = Tail::new(one * 10);
        for i in 0..20 {
            let key = format!("agent:main:subagent:{i:02}");
            t.fill(&key, "main", 0, &read(&key, &[i + 1], i + 1), B);
            assert!(
                t.bytes() <= one * 10 + 64,
                "{} over {}",
                t.bytes(),
                one * 10
            );
        }
        assert!(t.answer("agent:main:subagent:19", "main", 0, 9).is_some());
        assert!(t.answer("agent:main:subagent:00", "main", 0, 9).is_none());
        // A session appended to past a quarter of the budget keeps its newest events only.
        let mut t = Tail::new(one * 8);
        t.fill(K, "main", 0, &read(K, &[1], 1), B);
        for s in 2..40 {
            t.append(&event(K, s));
        }
        assert!(t.bytes() <= one * 2 + 64);
        assert!(t.answer(K, "main", 0, 200).is_none());
        assert_eq!(seqs(&t.answer(K, "main", 38, 200).unwrap()), vec![39]);
    }
}
