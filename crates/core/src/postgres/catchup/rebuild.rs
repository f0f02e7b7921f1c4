//! What the store holds in memory, rebuilt from the rows each time its listener connects
//! again (docs/postgres.md#async). After a failover to an asynchronous standby the new
//! primary may lack what the old one committed: heads, cursor positions and leases can be
//! behind what this store saw, and a notice held here may name a position the rows no longer
//! have. So the first turn of a new listener connection brings the queue in line with the
//! pending cursor rows of every watcher it holds a notice for, served here or not, and
//! writes this store's leases at once. It is one read (two when notices of watchers this
//! store does not serve are queued), off the record path, and runs on every reconnect: a
//! failover is not told apart from a restart, since the answer would be the same.

use std::collections::{HashMap, HashSet};

use super::State;
use crate::cursors::Pending;
use crate::delivery::{wakes_for, Wake};
use crate::error::Result;
use crate::postgres::cursors::{self, Cached};
use crate::postgres::listen::Hint;

impl State {
    /// The first turn on a new listener connection: the leases written (they may be lost),
    /// every served watcher caught up, then the notices held for watchers this store does
    /// not serve (queued here because no live host served them) brought in line with the rows.
    pub(super) async fn rebuild(&self, c: &mut Cached<'_>) -> Result<()> {
        self.served.lock().lease_due = true;
        self.turn(c, &Hint::All).await?;
        self.rebuild_unserved(c).await
    }

    /// A notice held for an unserved watcher leaves when the rows have its cursor no longer
    /// pending (unless this store queued it again while the rows were read), and takes the
    /// rows' position when they have it pending at another one.
    async fn rebuild_unserved(&self, c: &mut Cached<'_>) -> Result<()> {
        let _g = self.sync_lock.lock().await;
        let held: Vec<(String, String)> = {
            let served = self.served.lock();
            let pairs = self.delivery.queue().pairs();
            pairs
                .into_iter()
                .filter(|(w, _)| !served.all.contains(w))
                .collect()
        };
        if held.is_empty() {
            return Ok(());
        }
        let mut watchers: Vec<String> = held.iter().map(|(w, _)| w.clone()).collect();
        watchers.sort_unstable();
        watchers.dedup();
        // As in a catch-up: a pair this store queues while the rows are read stays.
        *self.reading.lock() = Some(HashSet::new());
        let rows = match cursors::pending_of(c, &watchers).await {
            Ok(rows) => rows,
            Err(e) => {
                self.reading.lock().take();
                return Err(e);
            }
        };
        let open: HashMap<(&str, &str), &Pending> = rows
            .iter()
            .map(|p| ((p.watcher.as_str(), &*p.target), p))
            .collect();
        let mut emptied = Vec::new();
        let mut wakes: Vec<Wake> = Vec::new();
        {
            let mut q = self.delivery.queue();
            let queued_meanwhile = self.reading.lock().take().unwrap_or_default();
            for pair @ (w, t) in &held {
                match open.get(&(w.as_str(), t.as_str())) {
                    None if queued_meanwhile.contains(pair) => {}
                    None => {
                        q.remove(w, t);
                        emptied.push(w.clone());
                    }
                    Some(p) => {
                        let wake = wakes_for(p);
                        if q.enter(p, wake) && wake {
                            wakes.push((w.clone(), t.clone()));
                        }
                    }
                }
            }
        }
        for w in emptied {
            self.delivery.withdraw_if_idle(&w);
        }
        self.delivery.wake_all(wakes);
        Ok(())
    }
}
