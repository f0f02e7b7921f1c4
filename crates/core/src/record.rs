//! The write path of a record (semantics.md#recording), shared by both engines: the event, its
//! session's head and the cursors it moves, written over [`Rows`] inside the engine's write
//! transaction ([`write`]), then, once it committed, the notices it opened queued and their
//! wakes returned ([`queue_written`]). Each engine runs them in its own transactions
//! (`sqlite/recorder.rs`, `postgres/record.rs`).

use std::sync::Arc;

use crate::cursors::{self, Pending};
use crate::delivery::{Delivery, Wake};
use crate::error::Result;
use crate::event::{EventKind, NotifyKinds, StateEvent, ValidEvent};
use crate::keys;
use crate::metrics::Count;
use crate::rows::{Inserted, Rows};

/// Brings `delivery` in line with a committed [`Written`] (the storage-free step after a
/// write's commit): [`count_written`], then the notices it opened are queued, except those of
/// the watchers in `elsewhere` (served by another live process, as the store found them:
/// semantics.md#processes). Returns the wakes to schedule once every lock is released.
pub(crate) fn queue_written(delivery: &Delivery, w: &Written, elsewhere: &[String]) -> Vec<Wake> {
    count_written(delivery, w);
    if elsewhere.is_empty() {
        return delivery.enqueue(&w.pending);
    }
    let here: Vec<Pending> = w
        .pending
        .iter()
        .filter(|p| !elsewhere.contains(&p.watcher))
        .cloned()
        .collect();
    delivery.enqueue(&here)
}

/// What every engine does after a write's commit before it queues the notices (which the
/// engines queue by rules of their own): the event and the notices it opened are counted, a
/// followed session is touched, and reseeded cursors lose their queued notice.
pub(crate) fn count_written(delivery: &Delivery, w: &Written) {
    if w.fresh {
        let m = &delivery.metrics;
        m.recorded(w.event.kind);
        let e = &w.event;
        delivery
            .follows
            .committed(&e.agent_id, &e.session_key, e.sequence);
        // A cursor that had nothing pending opened at this event's sequence.
        let new = w.pending.iter().filter(|p| p.notified == w.event.sequence);
        m.add(Count::OpenedNew, new.count() as u64);
    }
    if !w.reseeded.is_empty() {
        let mut q = delivery.queue();
        for watcher in &w.reseeded {
            q.remove(watcher, &w.event.session_key);
        }
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
/// Nothing reaches the queue here: [`queue_written`] does that once the transaction has
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
