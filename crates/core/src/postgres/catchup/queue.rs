//! The catch-up's two writes of its own: the queue brought in line with the pending cursor
//! rows it read (notices enter, notices consumed on another host leave), and this store's
//! leases when they are due.

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use super::{lease, State};
use crate::cursors::Pending;
use crate::delivery::{wakes_for, Wake};
use crate::error::Result;
use crate::metrics::Count;
use crate::postgres::cursors::Cached;

impl State {
    /// Queues the committed notices `pending` here and returns their wakes, noting the pairs
    /// for a catch-up whose read is in flight: its rows may predate the commit.
    pub(super) fn queue_here(&self, pending: &[Pending]) -> Vec<Wake> {
        if let Some(noted) = self.reading.lock().as_mut() {
            noted.extend(
                pending
                    .iter()
                    .map(|p| (p.watcher.clone(), p.target.to_string())),
            );
        }
        self.delivery.enqueue(pending)
    }

    /// Brings the queue in line with the pending rows read for `watchers` (see
    /// [`State::catch_up`]); returns the wakes to schedule. A pair this store queued while
    /// the rows were read ([`State::queue_here`]) does not leave.
    pub(super) fn apply(&self, watchers: &[String], rows: Vec<Pending>) -> Vec<Wake> {
        let served = self.served.lock();
        let mut q = self.delivery.queue();
        // Taken under the queue's lock: a record queueing after this point finds the read
        // over and enters after the update below.
        let queued_meanwhile = self.reading.lock().take().unwrap_or_default();
        let wanted: HashSet<&str> = watchers.iter().map(String::as_str).collect();
        let open: HashSet<(&str, &str)> = rows
            .iter()
            .map(|p| (p.watcher.as_str(), &*p.target))
            .collect();
        let mut emptied = Vec::new();
        for pair in q.pairs() {
            let (w, t) = (pair.0.as_str(), pair.1.as_str());
            if wanted.contains(w) && !open.contains(&(w, t)) && !queued_meanwhile.contains(&pair) {
                q.remove(w, t);
                emptied.push(pair.0);
            }
        }
        let mut wakes = Vec::new();
        let mut entered = 0;
        for p in &rows {
            if !served.all.contains(&p.watcher) {
                continue;
            }
            let wake = wakes_for(p);
            if q.enter(p, wake) {
                entered += 1;
                if wake {
                    wakes.push((p.watcher.clone(), p.target.to_string()));
                }
            }
        }
        drop(q);
        drop(served);
        if entered > 0 {
            self.delivery.metrics.add(Count::CatchUps, 1);
        }
        for w in emptied {
            self.delivery.withdraw_if_idle(&w);
        }
        wakes
    }

    /// Writes this store's leases when due: a watcher started or stopped being served, or a
    /// third of the lease length passed since the last write.
    /// Returns the watchers whose lease row it inserted rather than renewed.
    pub(super) async fn renew(&self, c: &mut Cached<'_>) -> Result<Vec<String>> {
        let now = crate::lease::now();
        let (serving, released) = {
            let mut s = self.served.lock();
            let due = s.lease_due
                || (!s.all.is_empty()
                    && now >= self.renewed_at.load(Ordering::Acquire) + self.lease_ms / 3);
            if !due {
                return Ok(Vec::new());
            }
            s.lease_due = false;
            (
                s.all.iter().cloned().collect::<Vec<_>>(),
                std::mem::take(&mut s.released),
            )
        };
        let written = lease::renew(
            c,
            &self.instance,
            &serving,
            &released,
            now + self.lease_ms,
            now - self.lease_ms,
        )
        .await;
        match written {
            Ok(anew) => {
                self.renewed_at.store(now, Ordering::Release);
                Ok(anew)
            }
            Err(e) => {
                let mut s = self.served.lock();
                s.lease_due = true;
                s.released.extend(released);
                Err(e)
            }
        }
    }
}
