//! The SQLite engine's write path: a record, or a group of them (semantics.md#promise-api),
//! in one write transaction on the store's connection, over the shared flows of
//! [`crate::record`] and [`crate::group`]; then the read cache brought up to date, the notices
//! queued (except those of watchers another live process serves), the wakes scheduled and the
//! automatic prune considered.

use std::sync::Arc;

use crate::cursors;
use crate::delivery::{Delivery, Wake};
use crate::error::Result;
use crate::event::{self, NotifyKinds, RecordInput, StateEvent, ValidEvent};
use crate::group::{self, GroupItem};
use crate::metrics::Hist;
use crate::record::{self, WriteRules, Written};
use crate::rows::Rows;
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

    /// The writes of one event inside the caller's transaction ([`record::write`] with this
    /// store's options).
    pub(crate) fn write<R: Rows + ?Sized>(
        &self,
        rows: &mut R,
        v: ValidEvent,
        now: i64,
    ) -> Result<Written> {
        record::write(rows, self.rules(), v, now)
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
        record::queue_written(&self.delivery, w, &elsewhere)
    }

    /// Records `items` in call order in one write transaction and returns one result per
    /// item, as [`Recorder::record_with`] (with nothing else in the transaction) would have
    /// returned it for that item alone after the ones before it.
    pub(crate) fn record_group(&self, items: Vec<GroupItem>) -> Vec<Result<Option<StateEvent>>> {
        let mut out: Vec<Result<Option<StateEvent>>> = Vec::with_capacity(items.len());
        let mut valid: Vec<(usize, ValidEvent, i64)> = Vec::with_capacity(items.len());
        for (i, (input, now)) in items.into_iter().enumerate() {
            match self
                .db
                .check_open()
                .and_then(|()| event::validate(input, now))
            {
                Ok(v) => {
                    for w in &v.watchers {
                        self.mark_served(w);
                    }
                    valid.push((i, v, now));
                    out.push(Ok(None));
                }
                Err(e) => out.push(Err(e)),
            }
        }
        if valid.is_empty() {
            return out;
        }
        let slots: Vec<usize> = valid.iter().map(|(i, _, _)| *i).collect();
        let conn = match self.db.lock() {
            Ok(c) => c,
            Err(e) => {
                for i in slots {
                    out[i] = Err(group::copy(&e));
                }
                return out;
            }
        };
        let begun = std::time::Instant::now();
        let size = valid.len() as u64;
        let written = (|| {
            let before = self.db.changes();
            let tx = Tx::immediate(&conn)?;
            // Without a savepoint per record first (a savepoint copies every page it changes
            // into the statement journal); only when a record fails is the group written
            // again, a savepoint per record, from the same state, so each record still gets
            // the answer it would have had alone.
            let written = match group::write_all(&mut SqliteRows::new(&tx), self.rules(), &valid) {
                Ok(written) => {
                    tx.commit()?;
                    written
                }
                Err(_) => {
                    tx.rollback()?;
                    let tx = Tx::immediate(&conn)?;
                    let written = group::write_each(&mut SqliteRows::new(&tx), self.rules(), valid);
                    tx.commit()?;
                    written
                }
            };
            self.delivery.metrics.since(Hist::Commit, begun);
            self.delivery.metrics.value(Hist::GroupSize, size);
            let fresh = written.iter().filter_map(|(_, _, r)| match r {
                Ok(Some(w)) if w.fresh => Some(&w.event),
                _ => None,
            });
            self.db
                .read_cache()
                .written(before, self.db.changes(), fresh);
            Ok(written)
        })();
        let written = match written {
            Ok(w) => w,
            Err(e) => {
                // BEGIN or COMMIT failed: nothing of the group is in, and each record fails
                // as it would have alone.
                for i in slots {
                    out[i] = Err(group::copy(&e));
                }
                return out;
            }
        };
        let mut wakes = Vec::new();
        let mut prune_at = None;
        for (i, now, r) in written {
            out[i] = match r {
                Ok(Some(w)) => {
                    wakes.extend(self.enqueue(&conn, &w));
                    if w.fresh {
                        prune_at = Some(now);
                    }
                    Ok(Some(w.event))
                }
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            };
        }
        drop(conn);
        self.delivery.wake_all(wakes);
        if let Some(now) = prune_at {
            self.maintenance.maybe_prune_in_background(now);
        }
        out
    }
}
