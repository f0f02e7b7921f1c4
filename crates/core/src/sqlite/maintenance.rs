//! Maintenance: retention (semantics.md#retention) run on request or, after an hour, in the background behind a
//! record, and the background WAL checkpointer the prune catches up between its batches.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::cursors;
use crate::delivery::Delivery;
use crate::error::{Error, Result};
use crate::hooks::{Host, Task};
use crate::metrics::Count;
use crate::options::Options;
use crate::prune::{self, PruneReport, SweepReport, AUTO_PRUNE_INTERVAL_MS};
use crate::rows::Expired;
use crate::runtime;
use crate::sqlite::checkpoint::Checkpointer;
use crate::sqlite::conn::Db;
use crate::sqlite::rows::SqliteRows;
use crate::sqlite::tx::Tx;

/// When the last prune ran, and a clock reading for one more run requested while one ran.
#[derive(Default)]
struct AutoPrune {
    last: Option<i64>,
    again: Option<i64>,
}

/// The prunes and checkpoints of one store.
pub(crate) struct Maintenance {
    db: Arc<Db>,
    delivery: Arc<Delivery>,
    host: Host,
    opts: Options,
    auto_prune: Mutex<AutoPrune>,
    pruning: AtomicBool,
    checkpointer: Option<Checkpointer>,
}

impl Maintenance {
    /// The maintenance of the store made of `db` and `delivery`.
    pub(crate) fn new(
        db: Arc<Db>,
        delivery: Arc<Delivery>,
        host: Host,
        opts: Options,
        checkpointer: Option<Checkpointer>,
    ) -> Self {
        Maintenance {
            db,
            delivery,
            host,
            opts,
            auto_prune: Mutex::new(AutoPrune::default()),
            pruning: AtomicBool::new(false),
            checkpointer,
        }
    }

    /// Prunes now (semantics.md#retention) and restarts the automatic-prune hour.
    pub(crate) fn prune(&self, now: i64) -> Result<PruneReport> {
        self.db.check_open()?;
        self.auto_prune.lock().last = Some(now);
        self.prune_batches(now, false)
    }

    /// The sweep's re-freeze (semantics.md#cursors) of the cursors of `only` (every watcher when `None`), its
    /// notices queued and wakes scheduled, then a prune.
    pub(crate) fn sweep(&self, only: Option<&[String]>, now: i64) -> Result<SweepReport> {
        let conn = self.db.lock()?;
        let tx = Tx::immediate(&conn)?;
        let pending = cursors::refreeze(&mut SqliteRows::new(&tx), only)?;
        tx.commit()?;
        let wakes = self.delivery.enqueue(&pending);
        drop(conn);
        self.delivery.wake_all(wakes);
        let prune = self.prune(now)?;
        // The prune may expire cursors just re-queued; their notices are not pending after it.
        let notices = {
            let q = self.delivery.queue();
            pending
                .iter()
                .filter(|p| q.contains(&p.watcher, &p.target))
                .count()
        };
        Ok(SweepReport {
            notices: notices as u64,
            prune,
        })
    }

    /// True while an automatic prune runs in the background.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn is_pruning(&self) -> bool {
        self.pruning.load(Ordering::Acquire)
    }

    /// Starts a prune in the background when the last one is more than an hour old (semantics.md#recording).
    pub(crate) fn maybe_prune_in_background(self: &Arc<Self>, now: i64) {
        {
            let mut state = self.auto_prune.lock();
            if state
                .last
                .is_some_and(|t| now - t <= AUTO_PRUNE_INTERVAL_MS)
            {
                return;
            }
            state.last = Some(now);
            if self.pruning.load(Ordering::Acquire) {
                // One is running: it runs again with this clock reading when it is done.
                state.again = Some(now);
                return;
            }
            self.pruning.store(true, Ordering::Release);
        }
        let this = Arc::clone(self);
        // Pruning a large backlog takes many batches: run them off the caller's thread, taking
        // the connection one batch at a time, so the JS thread never waits more than a batch.
        runtime::handle().spawn_blocking(move || {
            let mut now = now;
            loop {
                match this.prune_batches(now, true) {
                    // A shared file is reported by the caller's own calls, which it refuses.
                    Ok(_) | Err(Error::Closed | Error::FileShared(_)) => {}
                    Err(e) => this.host.report(e, Task::Prune),
                }
                let mut state = this.auto_prune.lock();
                match state.again.take() {
                    Some(next) if !this.db.is_closed() => now = next,
                    _ => {
                        this.pruning.store(false, Ordering::Release);
                        return;
                    }
                }
            }
        });
    }

    /// Prunes in batches. In the `background`, the WAL is checkpointed between batches and
    /// waiting callers go first.
    fn prune_batches(&self, now: i64, background: bool) -> Result<PruneReport> {
        let opts = self.opts;
        let age_cutoff = now.saturating_sub(opts.retention_ms);
        let mut report = PruneReport::default();
        loop {
            let conn = self.db.lock()?;
            let tx = Tx::immediate(&conn)?;
            let batch = if background {
                prune::BATCH
            } else {
                prune::SYNC_BATCH
            };
            let n = prune::events_batch(&*tx, age_cutoff, opts.max_events, batch)?;
            tx.commit()?;
            drop(conn);
            if background {
                self.db.yield_to_waiters();
            }
            report.events_deleted += n as u64;
            self.delivery.metrics.add(Count::PrunedEvents, n as u64);
            if let (true, Some(c)) = (background, &self.checkpointer) {
                if let Err(e) = c.catch_up() {
                    self.host.report(e, Task::Checkpoint);
                }
            }
            // A short batch may be the last of the age pass; the row cap still has to run,
            // so only an empty batch means done.
            if n == 0 {
                break;
            }
        }
        let mut after = 0;
        loop {
            let conn = self.db.lock()?;
            let tx = Tx::immediate(&conn)?;
            let Expired {
                pairs: expired,
                deleted,
                next,
            } = cursors::expire_chunk(
                &mut SqliteRows::new(&tx),
                age_cutoff,
                after,
                cursors::EXPIRE_CHUNK,
            )?;
            tx.commit()?;
            {
                let mut q = self.delivery.queue();
                for (w, t) in &expired {
                    q.remove(w, t);
                }
            }
            drop(conn);
            if background {
                self.db.yield_to_waiters();
            }
            report.cursors_deleted += deleted;
            self.delivery.metrics.add(Count::PrunedCursors, deleted);
            match next {
                Some(n) => after = n,
                None => break,
            }
        }
        Ok(report)
    }

    /// Frames in the WAL after the last commit (0 without a WAL).
    pub(crate) fn wal_frames(&self) -> u64 {
        self.checkpointer
            .as_ref()
            .map_or(0, |c| u64::try_from(c.frames()).unwrap_or(0))
    }

    /// Closes the checkpointer's connection (after its checkpoint in progress, if any).
    pub(crate) fn close(&self) {
        if let Some(c) = &self.checkpointer {
            c.close();
        }
    }
}
