//! The SQLite engine's `drain` and `acknowledge` (semantics.md#cursors): the storage-free
//! flows of `delivery.rs` in one write transaction, then the queue and the wakes.

use crate::cursors::Pending;
use crate::delivery::{acknowledge_rows, drain_rows};
use crate::error::Result;
use crate::metrics::Count;
use crate::queue::Notice;
use crate::sqlite::rows::SqliteRows;
use crate::sqlite::tx::Tx;

use super::SqliteEngine;

impl SqliteEngine {
    /// Hands out the watcher's queued notices, acknowledged (semantics.md#cursors): the
    /// cursor rows decide, in one write transaction, and notices that reopened meanwhile are
    /// queued again (the façade answers an empty drain from the queue without asking). On
    /// failure the notices taken stay queued. When nothing is left queued for the watcher,
    /// its scheduled wake is withdrawn.
    pub(super) fn drain(&self, watcher: &str, now: i64) -> Result<Vec<Notice>> {
        let conn = self.db().lock()?;
        let queued = self.delivery().queue().take(watcher);
        let outcome = (|| {
            let tx = Tx::immediate(&conn)?;
            let drained = drain_rows(&mut SqliteRows::new(&tx), watcher, &queued, now)?;
            tx.commit()?;
            Ok(drained)
        })();
        match outcome {
            Ok((out, reopened)) => {
                self.delivery()
                    .metrics
                    .add(Count::Delivered, out.len() as u64);
                self.delivery()
                    .metrics
                    .add(Count::OpenedReopen, reopened.len() as u64);
                let wakes = self.delivery().enqueue(&reopened);
                self.delivery().withdraw_if_idle(watcher);
                drop(conn);
                self.delivery().wake_all(wakes);
                Ok(out)
            }
            Err(e) => {
                let mut q = self.delivery().queue();
                for n in queued {
                    q.push(watcher, &n.target, n.changes_since, n.scope);
                }
                Err(e)
            }
        }
    }

    /// Acknowledges the watcher's pending notices on `targets` (distinct, checked) in one write
    /// transaction (semantics.md#cursors-acknowledge), only those of cursors bound to `scope`
    /// when it is given, and read up to `through` when it is given. Returns how many pending
    /// notices it acknowledged. When the watcher is left with nothing queued, its scheduled
    /// wake is withdrawn.
    pub(super) fn acknowledge(
        &self,
        watcher: &str,
        targets: &[&str],
        scope: Option<&str>,
        through: Option<i64>,
        now: i64,
    ) -> Result<u64> {
        let conn = self.db().lock()?;
        let tx = Tx::immediate(&conn)?;
        let acked = acknowledge_rows(
            &mut SqliteRows::new(&tx),
            watcher,
            targets,
            scope,
            through,
            now,
        )?;
        tx.commit()?;
        let count = acked.len() as u64;
        let reopened: Vec<Pending> = {
            let mut q = self.delivery().queue();
            for a in &acked {
                q.remove(watcher, &a.target);
            }
            acked
                .into_iter()
                .filter(|a| a.notified != a.last_seen)
                .collect()
        };
        self.delivery().metrics.add(Count::Acknowledged, count);
        self.delivery()
            .metrics
            .add(Count::OpenedReopen, reopened.len() as u64);
        let wakes = self.delivery().enqueue(&reopened);
        // Under the connection lock: a notice that enters meanwhile (a record, the poll) is
        // either seen queued here or schedules its wake after this.
        self.delivery().withdraw_if_idle(watcher);
        drop(conn);
        self.delivery().wake_all(wakes);
        Ok(count)
    }
}
