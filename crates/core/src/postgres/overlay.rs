//! A group's rows in memory: the [`Rows`] the shared write flow runs over on the PostgreSQL
//! store's fast path ([`crate::postgres::batch`]). Everything the flow can read for the group
//! was fetched first, in one round trip, inside the group's transaction: the heads (locked),
//! every cursor row on the group's targets (`FOR UPDATE`), the rows holding the group's dedupe
//! keys, and one sequence per event drawn after the heads were locked. The flow's writes are
//! kept here and written at the end in one pipeline with the commit. Savepoints are copies of
//! the state: an event that fails leaves nothing, as on the server.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use crate::error::{DbFailure, Error, Result};
use crate::event::{StateEvent, ValidEvent};
use crate::keys::{self, SessionKey};
use crate::log::Head;
use crate::postgres::rows::outside_the_write_flow;
use crate::rows::{Cursor, Expired, Inserted, Pending, Provenance, Rows};
use crate::rules::{self, Positions};

/// One cursor row as the group sees it.
#[derive(Debug, Clone)]
pub(crate) struct CursorState {
    /// L, N, M.
    pub(crate) at: Positions,
    /// The stored provenance (the schema's check admits only the two known).
    pub(crate) provenance: Provenance,
    /// `updated_at`.
    pub(crate) updated_at: i64,
    /// `watcher_store_path`.
    pub(crate) scope: Option<String>,
    /// Written by the group: `Some(true)` a new row, `Some(false)` an update of a fetched one.
    pub(crate) written: Option<bool>,
}

/// The state savepoints copy.
#[derive(Debug, Clone, Default)]
struct State {
    heads: HashMap<(String, String), i64>,
    bumped: HashMap<(String, String), i64>,
    cursors: HashMap<String, BTreeMap<String, CursorState>>,
    dedupe: HashMap<String, Option<StateEvent>>,
    sequences: VecDeque<i64>,
    events: Vec<(Option<String>, StateEvent)>,
}

/// [`Rows`] over a group's fetched rows.
#[derive(Debug, Clone, Default)]
pub(crate) struct Overlay {
    state: State,
    saved: Option<State>,
}

/// What the group wrote, for the final pipeline.
pub(crate) struct Writes {
    /// The new events with their dedupe keys, in sequence order.
    pub(crate) events: Vec<(Option<String>, StateEvent)>,
    /// The heads moved: (session key, agent id) → (last sequence, updated_at).
    pub(crate) heads: Vec<((String, String), (i64, i64))>,
    /// The cursors written: (watcher, target, state).
    pub(crate) cursors: Vec<(String, String, CursorState)>,
}

impl Overlay {
    /// The group's fetched rows: heads (session key, agent id, last sequence), cursors
    /// (watcher, target, state), the rows of the dedupe keys (`None`: a row this store would
    /// not write), and the drawn sequences in ascending order.
    pub(crate) fn new(
        heads: impl IntoIterator<Item = ((String, String), i64)>,
        cursors: impl IntoIterator<Item = (String, String, CursorState)>,
        dedupe: HashMap<String, Option<StateEvent>>,
        sequences: Vec<i64>,
    ) -> Self {
        let mut by_target: HashMap<String, BTreeMap<String, CursorState>> = HashMap::new();
        for (w, t, c) in cursors {
            by_target.entry(t).or_default().insert(w, c);
        }
        Overlay {
            state: State {
                heads: heads.into_iter().collect(),
                cursors: by_target,
                dedupe,
                sequences: sequences.into(),
                ..State::default()
            },
            saved: None,
        }
    }

    /// Replaces the sequences still to hand out with `sequences` (ascending).
    pub(crate) fn set_sequences(&mut self, sequences: Vec<i64>) {
        self.state.sequences = sequences.into();
    }

    /// How many of the sequences given are still to hand out.
    pub(crate) fn sequences_left(&self) -> usize {
        self.state.sequences.len()
    }

    /// What the group wrote.
    pub(crate) fn into_writes(self) -> Writes {
        let s = self.state;
        let mut heads: Vec<_> = s
            .bumped
            .into_iter()
            .map(|(k, now)| {
                let last = s.heads.get(&k).copied().unwrap_or(0);
                (k, (last, now))
            })
            .collect();
        heads.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut cursors = Vec::new();
        for (t, rows) in s.cursors {
            for (w, c) in rows {
                if c.written.is_some() {
                    cursors.push((w, t.clone(), c));
                }
            }
        }
        Writes {
            events: s.events,
            heads,
            cursors,
        }
    }

    /// The head bound of a cursor on `target`: its head under the key's own agent.
    fn bound(&self, target: &str) -> i64 {
        SessionKey::classify(target)
            .agent()
            .and_then(|a| {
                self.state
                    .heads
                    .get(&(target.to_owned(), a.to_owned()))
                    .copied()
            })
            .unwrap_or(0)
    }

    fn live(c: &CursorState, bound: i64) -> bool {
        let p = c.at;
        p.last_seen.min(p.notified).min(p.material) >= 0
            && p.last_seen.max(p.notified).max(p.material) <= bound
    }

    fn write(&mut self, watcher: &str, target: &str, c: CursorState) {
        self.state
            .cursors
            .entry(target.to_owned())
            .or_default()
            .insert(watcher.to_owned(), c);
    }
}

/// The heads a group must hold, in their fixed order: each event's own and, for a cursor's
/// bound, its target's head under the key's own agent. Sorted bytewise, no repeats.
pub(crate) fn heads_of<'a>(events: impl Iterator<Item = &'a ValidEvent>) -> Vec<(String, String)> {
    let mut heads = HashSet::new();
    for v in events {
        let key = &v.event.session_key;
        heads.insert((key.clone(), v.event.agent_id.clone()));
        if let Some(own) = SessionKey::classify(key).agent() {
            heads.insert((key.clone(), own.to_owned()));
        }
    }
    let mut heads: Vec<_> = heads.into_iter().collect();
    heads.sort_unstable();
    heads
}

impl Rows for Overlay {
    fn insert_event(&mut self, v: &ValidEvent) -> Result<Inserted> {
        // A number is used up by a repeated key too, as the server's `ON CONFLICT` and
        // SQLite's AUTOINCREMENT do.
        let seq = self
            .state
            .sequences
            .pop_front()
            .ok_or_else(|| Error::db(DbFailure::Other, "no sequence drawn for the event"))?;
        if let Some(k) = &v.dedupe_key {
            match self.state.dedupe.get(k) {
                Some(Some(first)) => return Ok(Inserted::Duplicate(first.clone())),
                Some(None) => {
                    return Err(Error::db(
                        DbFailure::Other,
                        "dedupe_key is held by a row this store did not write",
                    ))
                }
                None => {}
            }
        }
        let mut event = v.event.clone();
        event.sequence = seq;
        if let Some(k) = &v.dedupe_key {
            self.state.dedupe.insert(k.clone(), Some(event.clone()));
        }
        self.state.events.push((v.dedupe_key.clone(), event));
        Ok(Inserted::New(seq))
    }

    fn bump_head(
        &mut self,
        session_key: &str,
        agent_id: &str,
        sequence: i64,
        now: i64,
    ) -> Result<()> {
        let k = (session_key.to_owned(), agent_id.to_owned());
        let last = self.state.heads.entry(k.clone()).or_insert(0);
        *last = (*last).max(sequence);
        self.state.bumped.insert(k, now);
        Ok(())
    }

    fn cursor(&mut self, watcher: &str, target: &str) -> Result<Option<Cursor>> {
        let bound = self.bound(target);
        let Some(c) = self.state.cursors.get(target).and_then(|r| r.get(watcher)) else {
            return Ok(None);
        };
        if !Self::live(c, bound) {
            return Ok(None);
        }
        Ok(Some(Cursor {
            watcher: watcher.to_owned(),
            target: target.to_owned(),
            last_seen: c.at.last_seen,
            notified: c.at.notified,
            material: c.at.material,
            provenance: c.provenance,
            updated_at: c.updated_at,
            scope: c.scope.clone(),
        }))
    }

    fn stored_provenance(
        &mut self,
        watcher: &str,
        target: &str,
    ) -> Result<Option<Option<Provenance>>> {
        Ok(self
            .state
            .cursors
            .get(target)
            .and_then(|r| r.get(watcher))
            .map(|c| Some(c.provenance)))
    }

    fn put_cursor(
        &mut self,
        watcher: &str,
        target: &str,
        at: Positions,
        provenance: Provenance,
        scope: Option<&str>,
        now: i64,
    ) -> Result<()> {
        let old = self.state.cursors.get(target).and_then(|r| r.get(watcher));
        let c = CursorState {
            at,
            provenance,
            updated_at: now,
            scope: scope
                .map(str::to_owned)
                .or_else(|| old.and_then(|o| o.scope.clone())),
            written: Some(old.is_none_or(|o| o.written == Some(true))),
        };
        self.write(watcher, target, c);
        Ok(())
    }

    fn insert_cursor(
        &mut self,
        watcher: &str,
        target: &str,
        at: Positions,
        provenance: Provenance,
        scope: Option<&str>,
        now: i64,
    ) -> Result<bool> {
        if self
            .state
            .cursors
            .get(target)
            .is_some_and(|r| r.contains_key(watcher))
        {
            return Ok(false);
        }
        let c = CursorState {
            at,
            provenance,
            updated_at: now,
            scope: scope.map(str::to_owned),
            written: Some(true),
        };
        self.write(watcher, target, c);
        Ok(true)
    }

    fn material_update(
        &mut self,
        target: &Arc<str>,
        sequence: i64,
        except: Option<&str>,
        skip: &[&str],
        now: i64,
    ) -> Result<Vec<Pending>> {
        let t: &str = target;
        let Some(rows) = self.state.cursors.get_mut(t) else {
            return Ok(Vec::new());
        };
        let mut moved = Vec::new();
        for (w, c) in rows.iter_mut() {
            if Some(w.as_str()) == except
                || skip.contains(&w.as_str())
                || w == t
                || !keys::is_watchable(w)
                || !Self::live(c, sequence - 1)
            {
                continue;
            }
            c.at = Positions {
                notified: rules::notified_after_material(c.at.last_seen, c.at.notified, sequence),
                material: sequence,
                ..c.at
            };
            c.updated_at = now;
            c.written = Some(c.written == Some(true));
            moved.push(Pending {
                watcher: w.clone(),
                target: Arc::clone(target),
                last_seen: c.at.last_seen,
                notified: c.at.notified,
                provenance: c.provenance,
                scope: c.scope.as_deref().map(Arc::from),
            });
        }
        Ok(moved)
    }

    fn is_watched(&mut self, target: &str) -> Result<bool> {
        let bound = self.bound(target);
        Ok(self.state.cursors.get(target).is_some_and(|rows| {
            rows.iter()
                .any(|(w, c)| w != target && Self::live(c, bound))
        }))
    }

    fn head(&mut self, _session_key: &str, _agent_id: &str) -> Result<Head> {
        // The group holds its heads' versions, not their watermarks.
        Err(outside_the_write_flow("head"))
    }

    fn set_positions(
        &mut self,
        _watcher: &str,
        _target: &str,
        _last_seen: i64,
        _notified: i64,
        _now: i64,
    ) -> Result<()> {
        Err(outside_the_write_flow("set_positions"))
    }

    fn touch_cursor(
        &mut self,
        _watcher: &str,
        _target: &str,
        _provenance: Provenance,
        _updated_at: i64,
    ) -> Result<()> {
        Err(outside_the_write_flow("touch_cursor"))
    }

    fn delete_cursor(&mut self, _watcher: &str, _target: &str) -> Result<bool> {
        Err(outside_the_write_flow("delete_cursor"))
    }

    fn delete_cursors_of(&mut self, _key: &str) -> Result<usize> {
        Err(outside_the_write_flow("delete_cursors_of"))
    }

    fn delete_cursors_on(&mut self, _key: &str) -> Result<usize> {
        Err(outside_the_write_flow("delete_cursors_on"))
    }

    fn delete_events(&mut self, _session_key: &str, _agent_id: &str) -> Result<()> {
        Err(outside_the_write_flow("delete_events"))
    }

    fn watchers_behind(&mut self) -> Result<Vec<String>> {
        Err(outside_the_write_flow("watchers_behind"))
    }

    fn pending_of(&mut self, _watcher: &str) -> Result<Vec<Pending>> {
        Err(outside_the_write_flow("pending_of"))
    }

    fn on_target(&mut self, _target: &str) -> Result<Vec<Pending>> {
        Err(outside_the_write_flow("on_target"))
    }

    fn refreeze(&mut self, _only: Option<&[String]>) -> Result<Vec<Pending>> {
        Err(outside_the_write_flow("refreeze"))
    }

    fn expire_cursors(&mut self, _cutoff: i64, _after: i64, _span: i64) -> Result<Expired> {
        Err(outside_the_write_flow("expire_cursors"))
    }

    fn savepoint(&mut self) -> Result<()> {
        self.saved = Some(self.state.clone());
        Ok(())
    }

    fn release_savepoint(&mut self) -> Result<()> {
        self.saved = None;
        Ok(())
    }

    fn rollback_to_savepoint(&mut self) -> Result<()> {
        if let Some(s) = self.saved.take() {
            self.state = s;
        }
        Ok(())
    }
}
