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
    /// Brings the queue in line with the pending rows read for `watchers` (see
    /// [`State::catch_up`]); returns the wakes to schedule. Only pairs in `before` (queued
    /// before the rows were read) may leave.
    pub(super) fn apply(
        &self,
        watchers: &[String],
        rows: Vec<Pending>,
        before: &[(String, String)],
    ) -> Vec<Wake> {
        let served = self.served.lock();
        let mut q = self.delivery.queue();
        let wanted: HashSet<&str> = watchers.iter().map(String::as_str).collect();
        let open: HashSet<(&str, &str)> = rows
            .iter()
            .map(|p| (p.watcher.as_str(), &*p.target))
            .collect();
        let earlier: HashSet<(&str, &str)> = before
            .iter()
            .map(|(w, t)| (w.as_str(), t.as_str()))
            .collect();
        let mut emptied = Vec::new();
        for (w, t) in q.pairs() {
            let pair = (w.as_str(), t.as_str());
            if wanted.contains(w.as_str()) && earlier.contains(&pair) && !open.contains(&pair) {
                q.remove(&w, &t);
                emptied.push(w);
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
    pub(super) async fn renew(&self, c: &mut Cached<'_>) -> Result<()> {
        let now = crate::lease::now();
        let (serving, released) = {
            let mut s = self.served.lock();
            let due = s.lease_due
                || (!s.all.is_empty()
                    && now >= self.renewed_at.load(Ordering::Acquire) + self.lease_ms / 3);
            if !due {
                return Ok(());
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
        if let Err(e) = written {
            let mut s = self.served.lock();
            s.lease_due = true;
            s.released.extend(released);
            return Err(e);
        }
        self.renewed_at.store(now, Ordering::Release);
        Ok(())
    }
}
