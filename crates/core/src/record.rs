//! The write path of a record (semantics.md#recording): the event, its session's head and the cursors it moves,
//! in one write transaction, then the notices it opened queued and their wakes scheduled.

use std::sync::Arc;

use rusqlite::Connection;

use crate::conn::Db;
use crate::cursors;
use crate::delivery::Delivery;
use crate::error::Result;
use crate::event::{self, EventKind, NotifyKinds, RecordInput, StateEvent};
use crate::keys;
use crate::log::{self, Inserted};
use crate::maintenance::Maintenance;
use crate::sync::SyncState;
use crate::tx::Tx;

/// The parts of a store a write goes through. Cheap to clone: clones share everything.
#[derive(Clone)]
pub(crate) struct Recorder {
    /// The connection.
    pub(crate) db: Arc<Db>,
    /// The notice queue and the wakes.
    pub(crate) delivery: Arc<Delivery>,
    /// The prunes and checkpoints.
    pub(crate) maintenance: Arc<Maintenance>,
    /// Cross-process delivery, when on.
    pub(crate) sync: Option<Arc<SyncState>>,
    /// The kinds whose events are material (semantics.md#api-options, `notifyKinds`).
    pub(crate) notify_kinds: NotifyKinds,
    /// See [`crate::Options::seed_resets_provenance`].
    pub(crate) seed_resets_provenance: bool,
}

impl Recorder {
    /// Serves `watcher` across processes (semantics.md#processes), when cross-process delivery is on.
    pub(crate) fn mark_served(&self, watcher: &str) {
        if let Some(s) = &self.sync {
            s.serve(watcher);
        }
    }

    /// Records one event (semantics.md#recording), with `also` run in the same write transaction once the event is in
    /// (or found by its dedupe key): a failure of either leaves neither. `also` does not run
    /// when `onlyIfWatched` finds nobody watching.
    pub(crate) fn record_with(
        &self,
        input: RecordInput,
        now: i64,
        also: impl FnOnce(&Connection) -> Result<()>,
    ) -> Result<Option<StateEvent>> {
        self.db.check_open()?;
        let v = event::validate(input, now)?;
        for w in &v.watchers {
            self.mark_served(w);
        }
        let target = v.event.session_key.as_str();
        let watchable = keys::is_watchable(target);
        let conn = self.db.lock()?;
        if v.only_if_watched && v.watchers.is_empty() {
            // A read outside the write lock: a watch racing with this record simply lands
            // after it.
            let watched = watchable && cursors::is_watched(&conn, target)?;
            if !watched {
                return Ok(None);
            }
        }
        let tx = Tx::immediate(&conn)?;
        let sequence = match log::insert_event(&tx, &v)? {
            Inserted::New(seq) => seq,
            Inserted::Duplicate(first) => {
                also(&tx)?;
                tx.commit()?;
                return Ok(Some(first));
            }
        };
        log::bump_head(&tx, target, &v.event.agent_id, sequence, now)?;
        let mut pending = Vec::new();
        let mut reseeded = Vec::new();
        if watchable {
            let scopes = &v.watcher_scopes;
            if v.event.kind == EventKind::ChildSpawned {
                let reset = self.seed_resets_provenance;
                for w in &v.watchers {
                    let scope = scopes.get(w).map(String::as_str);
                    if cursors::seed(&tx, w, target, sequence, scope, reset, now)? {
                        reseeded.push(w.as_str());
                    }
                }
            } else if self.notify_kinds.contains(v.event.kind) {
                let actor = v.event.actor_id.as_deref();
                let shared: Arc<str> = Arc::from(target);
                // A cursor bound to another scope than the one given for its watcher is left
                // alone (semantics.md#cursors-scope).
                let mut skip = Vec::new();
                for (w, scope) in scopes {
                    if Some(w.as_str()) != actor {
                        let c = cursors::get(&tx, w, target)?;
                        if c.is_some_and(|c| c.scope.as_deref() != Some(scope.as_str())) {
                            skip.push(w.as_str());
                        }
                    }
                }
                pending = cursors::material_update(&tx, &shared, sequence, actor, &skip, now)?;
                for w in v.watchers.iter().filter(|w| Some(w.as_str()) != actor) {
                    let scope = scopes.get(w).map(String::as_str);
                    pending.extend(cursors::material_insert(
                        &tx, w, &shared, sequence, scope, now,
                    )?);
                }
            }
        }
        also(&tx)?;
        tx.commit()?;
        if !reseeded.is_empty() {
            let mut q = self.delivery.queue();
            for w in reseeded {
                q.remove(w, target);
            }
        }
        let wakes = self.delivery.enqueue(&pending);
        drop(conn);
        self.delivery.wake_all(wakes);
        self.maintenance.maybe_prune_in_background(now);
        let mut event = v.event;
        event.sequence = sequence;
        Ok(Some(event))
    }
}
