//! The write path of a record (semantics.md#recording): the event, its session's head and the cursors it moves,
//! in one write transaction, then the notices it opened queued and their wakes scheduled.

use std::sync::Arc;

use crate::cursors::{self, Pending};
use crate::delivery::{Delivery, Wake};
use crate::error::Result;
use crate::event::{self, EventKind, NotifyKinds, RecordInput, StateEvent, ValidEvent};
use crate::keys;
use crate::metrics::{Count, Hist};
use crate::rows::{Inserted, Rows};
use crate::sqlite::conn::{ConnGuard, Db};
use crate::sqlite::maintenance::Maintenance;
use crate::sqlite::rows::SqliteRows;
use crate::sqlite::sync::SyncState;
use crate::sqlite::tx::Tx;

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
        also: impl FnOnce(&mut SqliteRows<'_>) -> Result<()>,
    ) -> Result<Option<StateEvent>> {
        self.db.check_open()?;
        let v = event::validate(input, now)?;
        for w in &v.watchers {
            self.mark_served(w);
        }
        let target = v.event.session_key.as_str();
        let conn = self.db.lock()?;
        if v.only_if_watched && v.watchers.is_empty() {
            // A read outside the write lock: a watch racing with this record simply lands
            // after it.
            let watched = cursors::is_watched(&mut SqliteRows::new(&conn), target)?;
            if !watched {
                return Ok(None);
            }
        }
        let begun = std::time::Instant::now();
        let before = self.db.changes();
        let tx = Tx::immediate(&conn)?;
        let mut rows = SqliteRows::new(&tx);
        let written = self.write(&mut rows, v, now)?;
        also(&mut rows)?;
        tx.commit()?;
        self.delivery.metrics.since(Hist::Commit, begun);
        let fresh = written.fresh.then_some(&written.event);
        self.db
            .read_cache()
            .written(before, self.db.changes(), fresh.into_iter());
        let wakes = self.enqueue(&conn, &written);
        drop(conn);
        self.delivery.wake_all(wakes);
        if written.fresh {
            self.maintenance.maybe_prune_in_background(now);
        }
        Ok(Some(written.event))
    }

    /// The writes of one event inside the caller's transaction ([`write`] with this store's
    /// options).
    pub(crate) fn write<R: Rows + ?Sized>(
        &self,
        rows: &mut R,
        v: ValidEvent,
        now: i64,
    ) -> Result<Written> {
        write(rows, self.rules(), v, now)
    }

    /// The options the write path decides by.
    pub(crate) fn rules(&self) -> WriteRules {
        WriteRules {
            notify_kinds: self.notify_kinds,
            seed_resets_provenance: self.seed_resets_provenance,
        }
    }

    /// Brings the queue in line with a committed [`Written`]: reseeded cursors lose their
    /// notice, opened ones are queued, except those of watchers that this process does not
    /// serve and another live process does (semantics.md#processes). Returns the wakes to
    /// schedule once every lock is released. Caller holds the connection lock, `conn`.
    pub(crate) fn enqueue(&self, conn: &ConnGuard<'_>, w: &Written) -> Vec<Wake> {
        let elsewhere = match &self.sync {
            Some(s) => s.served_elsewhere(conn, &w.pending),
            None => Vec::new(),
        };
        self.enqueue_except(w, &elsewhere)
    }

    /// [`Recorder::enqueue`] with the watchers served by another live process given
    /// (`elsewhere`, as the store found them): their notices are not queued here.
    pub(crate) fn enqueue_except(&self, w: &Written, elsewhere: &[String]) -> Vec<Wake> {
        if w.fresh {
            let m = &self.delivery.metrics;
            m.recorded(w.event.kind);
            let e = &w.event;
            self.delivery
                .follows
                .committed(&e.agent_id, &e.session_key, e.sequence);
            // A cursor that had nothing pending opened at this event's sequence.
            let new = w.pending.iter().filter(|p| p.notified == w.event.sequence);
            m.add(Count::OpenedNew, new.count() as u64);
        }
        if !w.reseeded.is_empty() {
            let mut q = self.delivery.queue();
            for watcher in &w.reseeded {
                q.remove(watcher, &w.event.session_key);
            }
        }
        if elsewhere.is_empty() {
            return self.delivery.enqueue(&w.pending);
        }
        let here: Vec<Pending> = w
            .pending
            .iter()
            .filter(|p| !elsewhere.contains(&p.watcher))
            .cloned()
            .collect();
        self.delivery.enqueue(&here)
    }
}

/// One event written inside a transaction that has not committed yet.
pub(crate) struct Written {
    /// The event as recorded, or the first row with its dedupe key.
    pub(crate) event: StateEvent,
    /// False for a repeated dedupe key: nothing was written.
    pub(crate) fresh: bool,
    /// The notices the write opened.
    pub(crate) pending: Vec<Pending>,
    /// The watchers whose cursor a `child_spawned` reseeded.
    pub(crate) reseeded: Vec<String>,
}

/// The store options the write path decides by.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WriteRules {
    /// The kinds whose events are material (semantics.md#api-options, `notifyKinds`).
    pub(crate) notify_kinds: NotifyKinds,
    /// See [`crate::Options::seed_resets_provenance`].
    pub(crate) seed_resets_provenance: bool,
}

/// The writes of one event inside the caller's open transaction on `rows`: the event (or the
/// first row with its dedupe key), its head and the cursors it moves (semantics.md#recording).
/// Every decision is made here and in `cursors.rs`/`rules.rs`; `rows` only reads and writes.
/// Nothing reaches the queue here: [`Recorder::enqueue`] does that once the transaction has
/// committed.
pub(crate) fn write<R: Rows + ?Sized>(
    rows: &mut R,
    rules: WriteRules,
    v: ValidEvent,
    now: i64,
) -> Result<Written> {
    let target = v.event.session_key.as_str();
    let watchable = keys::is_watchable(target);
    let sequence = match rows.insert_event(&v)? {
        Inserted::New(seq) => seq,
        Inserted::Duplicate(first) => {
            return Ok(Written {
                event: first,
                fresh: false,
                pending: Vec::new(),
                reseeded: Vec::new(),
            })
        }
    };
    rows.bump_head(target, &v.event.agent_id, sequence, now)?;
    let mut pending = Vec::new();
    let mut reseeded = Vec::new();
    if watchable {
        let scopes = &v.watcher_scopes;
        if v.event.kind == EventKind::ChildSpawned {
            let reset = rules.seed_resets_provenance;
            for w in &v.watchers {
                let scope = scopes.get(w).map(String::as_str);
                if cursors::seed(rows, w, target, sequence, scope, reset, now)? {
                    reseeded.push(w.clone());
                }
            }
        } else if rules.notify_kinds.contains(v.event.kind) {
            let actor = v.event.actor_id.as_deref();
            let shared: Arc<str> = Arc::from(target);
            // A cursor bound to another scope than the one given for its watcher is left
            // alone (semantics.md#cursors-scope).
            let mut skip = Vec::new();
            for (w, scope) in scopes {
                if Some(w.as_str()) != actor {
                    let c = cursors::live(rows, w, target)?;
                    if c.is_some_and(|c| c.scope.as_deref() != Some(scope.as_str())) {
                        skip.push(w.as_str());
                    }
                }
            }
            pending = cursors::material_update(rows, &shared, sequence, actor, &skip, now)?;
            for w in v.watchers.iter().filter(|w| Some(w.as_str()) != actor) {
                let scope = scopes.get(w).map(String::as_str);
                pending.extend(cursors::material_insert(
                    rows, w, &shared, sequence, scope, now,
                )?);
            }
        }
    }
    let mut event = v.event;
    event.sequence = sequence;
    Ok(Written {
        event,
        fresh: true,
        pending,
        reseeded,
    })
}
