//! A small in-memory model of semantics.md#recording–semantics.md#retention, written from the SPEC's words: plain maps and
//! vectors, no SQL, no shortcuts. Section references point at the sentence each rule follows.
//!
//! The rules for single values (kinds, keys, agents, summary, notice text): `rules.rs`; the
//! reads: `reads.rs`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

mod reads;
mod rules;

pub use reads::Delta;
pub use rules::*;

/// One stored event (semantics.md#storage `session_state_events`).
#[derive(Debug, Clone, PartialEq)]
pub struct Ev {
    pub seq: i64,
    pub key: String,
    pub agent: String,
    pub kind: String,
    pub actor_type: String,
    pub actor_id: Option<String>,
    pub run_id: Option<String>,
    pub session_id: Option<String>,
    pub occurred_at: i64,
    pub summary: String,
    pub payload: Option<String>,
    pub dedupe: Option<String>,
}

/// What a caller passes to `record` (semantics.md#api), already in Rust types.
#[derive(Debug, Clone, Default)]
pub struct Input {
    pub key: String,
    pub agent: Option<String>,
    pub session_id: Option<String>,
    pub kind: String,
    pub actor_type: String,
    pub actor_id: Option<String>,
    pub run_id: Option<String>,
    pub summary: String,
    pub payload: Option<Value>,
    pub occurred_at: Option<f64>,
    pub dedupe: Option<String>,
    pub watchers: Vec<String>,
    pub only_if_watched: bool,
}

/// A head (semantics.md#storage `session_state_heads`): the state version and the pruned watermark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub last: i64,
    pub pruned: i64,
}

/// A cursor (semantics.md#cursors): L, N, M, provenance, updated_at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cur {
    pub l: i64,
    pub n: i64,
    pub m: i64,
    pub explicit: bool,
    pub updated: i64,
}

/// A queued notice: (watcher, target, L).
pub type Queued = (String, String, i64);

pub struct Model {
    pub now: i64,
    pub retention: i64,
    pub max_events: u64,
    /// The largest sequence ever handed out (AUTOINCREMENT never reuses one).
    top_seq: i64,
    pub events: BTreeMap<i64, Ev>,
    pub heads: BTreeMap<(String, String), Head>,
    pub cursors: BTreeMap<(String, String), Cur>,
    /// Every pending notice, in the order it entered the queue (semantics.md#cursors "in the order they
    /// entered the queue"); a watcher's list is this one filtered.
    pub queue: Vec<Queued>,
    /// Watchers with a wake due and not yet delivered (semantics.md#wake; delivery is far in the future).
    pub wakes: BTreeSet<String>,
    /// When this instance last pruned (semantics.md#recording); opening never prunes.
    pub last_prune: Option<i64>,
    /// How many prunes ran (automatic, explicit or a sweep's).
    pub prunes: u64,
    /// Whether the store was reopened: the queue, a cache of the cursor rows, then misses
    /// the pending notices until a sweep or the target's next material event (semantics.md#cursors).
    restarted: bool,
}

impl Model {
    pub fn new(now: i64, retention: i64, max_events: u64) -> Self {
        Model {
            now,
            retention,
            max_events,
            top_seq: 0,
            events: BTreeMap::new(),
            heads: BTreeMap::new(),
            cursors: BTreeMap::new(),
            queue: Vec::new(),
            wakes: BTreeSet::new(),
            last_prune: None,
            prunes: 0,
            restarted: false,
        }
    }

    /// The store is closed and opened again: what lived in memory is gone, the rows stay.
    pub fn restart(&mut self) {
        self.queue.clear();
        self.wakes.clear();
        self.last_prune = None;
        self.restarted = true;
    }

    /// The largest sequence handed out so far.
    pub fn top_seq(&self) -> i64 {
        self.top_seq
    }

    /// semantics.md#cursors: a notice enters the queue (unless the pair already has one); semantics.md#wake: a main-like
    /// watcher with an explicit cursor gets a wake.
    fn enqueue(&mut self, w: &str, t: &str) {
        if self.queue.iter().any(|(qw, qt, _)| qw == w && qt == t) {
            return;
        }
        let c = self.cursors[&(w.to_owned(), t.to_owned())];
        self.queue.push((w.to_owned(), t.to_owned(), c.l));
        if c.explicit && own_agent(w).is_some() && !is_nested(w) {
            self.wakes.insert(w.to_owned());
        }
    }

    fn unqueue(&mut self, keep: impl Fn(&str, &str) -> bool) {
        self.queue.retain(|(w, t, _)| keep(w, t));
    }

    /// semantics.md#cursors Seed: L = N = M = `at`; provenance kept, or the given one for a new cursor; the
    /// pair's pending notice is dropped.
    fn seed(&mut self, w: &str, t: &str, at: i64, explicit: bool) {
        let explicit = self
            .cursors
            .get(&(w.to_owned(), t.to_owned()))
            .map_or(explicit, |c| c.explicit);
        let c = Cur {
            l: at,
            n: at,
            m: at,
            explicit,
            updated: self.now,
        };
        self.cursors.insert((w.to_owned(), t.to_owned()), c);
        self.unqueue(|qw, qt| !(qw == w && qt == t));
    }

    /// semantics.md#cursors Material event `s` on `t` for `w`.
    fn material(&mut self, w: &str, t: &str, s: i64) {
        let now = self.now;
        let c = self
            .cursors
            .entry((w.to_owned(), t.to_owned()))
            .or_insert(Cur {
                l: 0,
                n: 0,
                m: 0,
                explicit: true,
                updated: now,
            });
        if c.n == c.l {
            c.n = s;
        }
        c.m = s;
        c.updated = now;
        if c.n != c.l {
            self.enqueue(w, t);
        }
    }

    /// semantics.md#cursors Acknowledge one pair. Returns the L the consumed notice named, if one was pending.
    fn ack(&mut self, w: &str, t: &str) -> Option<i64> {
        let now = self.now;
        let c = self.cursors.get_mut(&(w.to_owned(), t.to_owned()))?;
        if c.n == c.l {
            return None;
        }
        let old_l = c.l;
        let old_n = c.n;
        c.l = old_n;
        c.n = c.m.max(old_n);
        c.updated = now;
        let reopened = c.n != c.l;
        self.unqueue(|qw, qt| !(qw == w && qt == t));
        if reopened {
            self.enqueue(w, t);
        }
        Some(old_l)
    }

    /// semantics.md#api/semantics.md#recording `record`.
    pub fn record(&mut self, i: &Input) -> Result<Option<Ev>, &'static str> {
        let (ev, fresh) = self.write(i)?;
        if fresh {
            self.auto_prune();
        }
        Ok(ev)
    }

    /// semantics.md#promise-api: records taken together by the writer thread, in call order,
    /// each exactly as alone; the automatic prune, if due, runs once after the group (when
    /// one of them wrote an event), not between its records.
    pub fn record_group(&mut self, items: &[Input]) -> Vec<Result<Option<Ev>, &'static str>> {
        let mut fresh = false;
        let out = items
            .iter()
            .map(|i| {
                self.write(i).map(|(ev, f)| {
                    fresh |= f;
                    ev
                })
            })
            .collect();
        if fresh {
            self.auto_prune();
        }
        out
    }

    /// Whether the next record that writes an event prunes (semantics.md#recording).
    pub fn prune_due(&self) -> bool {
        self.last_prune.is_none_or(|t| self.now - t > HOUR)
    }

    /// semantics.md#recording: the first record after opening prunes, then once more than an
    /// hour passed.
    fn auto_prune(&mut self) {
        if self.prune_due() {
            self.prune();
        }
    }

    /// The writes of one `record`, without the automatic prune: the result, and whether an
    /// event was written (not a dedupe hit, not skipped by `onlyIfWatched`).
    fn write(&mut self, i: &Input) -> Result<(Option<Ev>, bool), &'static str> {
        let now = self.now;
        // Step 1: validate.
        if blank(&i.key)
            || i.watchers.iter().any(|w| blank(w))
            || !(NOTIFY.contains(&i.kind.as_str())
                || LOG_ONLY.contains(&i.kind.as_str())
                || i.kind == "child_spawned")
            || !["human", "agent", "system"].contains(&i.actor_type.as_str())
        {
            return Err(INVALID);
        }
        let agent = resolve_agent(&i.key, i.agent.as_deref())?;
        let payload = match &i.payload {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) => Some(v.to_string()),
            Some(_) => return Err(INVALID),
        };
        let present = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        let occurred_at = match i.occurred_at {
            Some(v) if v.is_finite() => (v.floor() as i64).clamp(now - DAY, now),
            _ => now,
        };
        let qualified = own_agent(&i.key).is_some();
        let mut named: Vec<String> = Vec::new();
        if qualified {
            for w in &i.watchers {
                if own_agent(w).is_some() && *w != i.key && !named.contains(w) {
                    named.push(w.clone());
                }
            }
        }
        let watched = qualified && self.cursors.keys().any(|(_, t)| *t == i.key);
        if i.only_if_watched && named.is_empty() && !watched {
            return Ok((None, false));
        }
        // Step 2: a dedupe hit returns the first row and changes nothing, but (semantics.md#recording note)
        // SQLite's AUTOINCREMENT still consumes a value.
        self.top_seq += 1;
        let dedupe = present(&i.dedupe);
        if let Some(d) = &dedupe {
            if let Some(first) = self.events.values().find(|e| e.dedupe.as_ref() == Some(d)) {
                return Ok((Some(first.clone()), false));
            }
        }
        let s = self.top_seq;
        let ev = Ev {
            seq: s,
            key: i.key.clone(),
            agent: agent.clone(),
            kind: i.kind.clone(),
            actor_type: i.actor_type.clone(),
            actor_id: present(&i.actor_id),
            run_id: present(&i.run_id),
            session_id: present(&i.session_id),
            occurred_at,
            summary: one_line(&i.summary),
            payload,
            dedupe,
        };
        self.events.insert(s, ev.clone());
        // Step 3: the head.
        let head = self
            .heads
            .entry((i.key.clone(), agent))
            .or_insert(Head { last: 0, pruned: 0 });
        head.last = head.last.max(s);
        // Steps 4–5: watchers.
        if qualified {
            if i.kind == "child_spawned" {
                for w in &named {
                    self.seed(w, &i.key, s, true);
                }
            } else if NOTIFY.contains(&i.kind.as_str()) {
                let mut all = named.clone();
                for (w, t) in self.cursors.keys() {
                    if *t == i.key && !all.contains(w) {
                        all.push(w.clone());
                    }
                }
                for w in all {
                    if ev.actor_id.as_deref() != Some(w.as_str()) {
                        self.material(&w, &i.key, s);
                    }
                }
            }
        }
        Ok((Some(ev), true))
    }

    /// semantics.md#retention Prune. Returns (events deleted, cursors deleted) and restarts the hour.
    pub fn prune(&mut self) -> (u64, u64) {
        let cutoff = self.now - self.retention;
        self.last_prune = Some(self.now);
        self.prunes += 1;
        let mut victims: Vec<i64> = self
            .events
            .values()
            .filter(|e| e.occurred_at < cutoff)
            .map(|e| e.seq)
            .collect();
        let survivors: Vec<i64> = self
            .events
            .keys()
            .copied()
            .filter(|s| !victims.contains(s))
            .collect();
        let over = survivors.len().saturating_sub(self.max_events as usize);
        victims.extend(&survivors[..over]);
        for s in &victims {
            let e = &self.events[s];
            let h = self
                .heads
                .get_mut(&(e.key.clone(), e.agent.clone()))
                .expect("every event's session has a head");
            h.pruned = h.pruned.max(*s);
        }
        for s in &victims {
            self.events.remove(s);
        }
        let expired: Vec<(String, String)> = self
            .cursors
            .iter()
            .filter(|(_, c)| c.updated < cutoff)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &expired {
            self.cursors.remove(k);
        }
        self.unqueue(|w, t| !expired.contains(&(w.to_owned(), t.to_owned())));
        (victims.len() as u64, expired.len() as u64)
    }

    /// semantics.md#cursors `watch`.
    pub fn watch(&mut self, w: &str, t: &str, explicit: bool) -> Result<bool, &'static str> {
        if blank(w) || blank(t) {
            return Err(INVALID);
        }
        let Some(agent) = own_agent(t) else {
            return Ok(false);
        };
        if own_agent(w).is_none() || w == t {
            return Ok(false);
        }
        let key = (w.to_owned(), t.to_owned());
        if let Some(c) = self.cursors.get_mut(&key) {
            c.explicit |= explicit;
            c.updated = self.now;
            return Ok(true);
        }
        let head = self
            .heads
            .get(&(t.to_owned(), agent.to_owned()))
            .map_or(0, |h| h.last);
        self.seed(w, t, head, explicit);
        Ok(true)
    }

    /// `unwatch`: true if a cursor was removed; its pending notice goes with it.
    pub fn unwatch(&mut self, w: &str, t: &str) -> Result<bool, &'static str> {
        if blank(w) || blank(t) {
            return Err(INVALID);
        }
        let removed = self.cursors.remove(&(w.to_owned(), t.to_owned())).is_some();
        self.unqueue(|qw, qt| !(qw == w && qt == t));
        Ok(removed)
    }

    /// Whether some pending notice is missing from the queue (after a restart).
    pub fn lost_notices(&self) -> bool {
        self.cursors
            .iter()
            .any(|((w, t), c)| c.n != c.l && !self.queue.iter().any(|q| q.0 == *w && q.1 == *t))
    }

    /// `peek`: the watcher's notices in queue order.
    pub fn peek(&self, w: &str) -> Vec<Queued> {
        self.queue.iter().filter(|q| q.0 == w).cloned().collect()
    }

    /// `drain`: the watcher's notices in queue order, each acknowledged.
    pub fn drain(&mut self, w: &str) -> Result<Vec<Queued>, &'static str> {
        if blank(w) {
            return Err(INVALID);
        }
        let out = self.peek(w);
        for (_, t, _) in &out {
            self.ack(w, t).expect("a queued notice is pending");
        }
        // semantics.md#wake: a drain that took notices and left none withdraws the wake (one
        // with nothing queued runs nothing).
        if !out.is_empty() {
            self.withdraw_if_idle(w);
        }
        Ok(out)
    }

    /// semantics.md#wake: the watcher's scheduled wake goes when nothing is queued for it.
    fn withdraw_if_idle(&mut self, w: &str) {
        if !self.queue.iter().any(|q| q.0 == w) {
            self.wakes.remove(w);
        }
    }

    /// `acknowledge`: the number of pending notices acknowledged (a repeated target once).
    pub fn acknowledge(&mut self, w: &str, targets: &[String]) -> Result<u64, &'static str> {
        if blank(w) || targets.iter().any(|t| blank(t)) {
            return Err(INVALID);
        }
        let mut seen: Vec<&String> = Vec::new();
        let mut count = 0;
        for t in targets {
            if seen.contains(&t) {
                continue;
            }
            seen.push(t);
            if self.ack(w, t).is_some() {
                count += 1;
            }
        }
        self.withdraw_if_idle(w);
        Ok(count)
    }

    /// semantics.md#cursors Sweep, then a prune. Returns (notices, events deleted, cursors deleted), where
    /// notices counts the re-frozen cursors still pending after the prune (the README's
    /// "Sweep count": one re-queued and then expired by the prune is not pending).
    pub fn sweep(&mut self, exists: Option<&BTreeSet<String>>) -> (u64, u64, u64) {
        let mut refrozen: Vec<(i64, String, String)> = Vec::new();
        for ((w, t), c) in self.cursors.iter_mut() {
            if c.m > c.l && exists.is_none_or(|e| e.contains(w)) {
                c.n = c.m;
                refrozen.push((c.n, w.clone(), t.clone()));
            }
        }
        refrozen.sort();
        for (_, w, t) in &refrozen {
            self.enqueue(w, t);
        }
        let (events, cursors) = self.prune();
        let still = refrozen
            .iter()
            .filter(|(_, w, t)| self.cursors.contains_key(&(w.clone(), t.clone())))
            .count();
        (still as u64, events, cursors)
    }

    /// semantics.md#retention `resetSession`. Also cancels the watcher's scheduled wake (the project's choice:
    /// nothing is left to wake it for).
    pub fn reset(&mut self, k: &str) -> Result<(), &'static str> {
        if blank(k) {
            return Err(INVALID);
        }
        self.cursors.retain(|(w, _), _| w != k);
        self.unqueue(|w, _| w != k);
        self.wakes.remove(k);
        Ok(())
    }

    /// semantics.md#retention `deleteSession`.
    pub fn delete(&mut self, k: &str, agent: Option<&str>) -> Result<(), &'static str> {
        let agent = resolve_agent(k, agent)?;
        self.events.retain(|_, e| !(e.key == k && e.agent == agent));
        self.heads.remove(&(k.to_owned(), agent.clone()));
        if agent == resolve_agent(k, None)? {
            self.cursors.retain(|(w, t), _| w != k && t != k);
            self.unqueue(|w, t| w != k && t != k);
            self.wakes.remove(k);
        }
        Ok(())
    }

    /// The model's own bookkeeping must hold after every step: the queue holds pending
    /// cursors (N != L) only, once each, naming their L, and all of them unless the store was
    /// reopened; N sits between L and M.
    pub fn check(&self) {
        let mut queued: Vec<&Queued> = self.queue.iter().collect();
        queued.sort();
        queued.dedup();
        assert_eq!(queued.len(), self.queue.len(), "a pair queued twice");
        let mut pending: Vec<Queued> = self
            .cursors
            .iter()
            .filter(|(_, c)| c.n != c.l)
            .map(|((w, t), c)| (w.clone(), t.clone(), c.l))
            .collect();
        pending.sort();
        let queued: Vec<Queued> = queued.into_iter().cloned().collect();
        if self.restarted {
            assert!(
                queued.iter().all(|q| pending.contains(q)),
                "queued, not pending"
            );
        } else {
            assert_eq!(queued, pending, "queue != pending cursors");
        }
        for c in self.cursors.values() {
            assert!(c.l <= c.n && c.n <= c.m, "{c:?}");
        }
    }
}
