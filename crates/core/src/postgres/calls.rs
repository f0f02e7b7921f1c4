//! The cursor calls of a PostgreSQL store (semantics.md#cursors): `watch`, `unwatch`,
//! `drain`, `acknowledge`, `sweep`, `prune`, `resetSession` and `deleteSession`, each one
//! call of the façade ([`crate::Store`]) run on the core runtime over the store's client,
//! after the façade checked its arguments as on SQLite.

use super::catchup::Notices;
use super::{block_on, cursors, delivery, prune, PgStore};
use crate::cursors::WatchOptions;
use crate::error::Result;
use crate::prune::{PruneReport, SweepReport};
use crate::queue::Notice;

impl PgStore {
    /// The served watchers, the leases and the cross-host catch-up.
    pub(crate) fn notices(&self) -> &Notices {
        &self.notices
    }

    /// Queues the notices a committed record or group opened, under the lease rule, and
    /// sends the hint naming their watchers ([`Notices::after_commit`]). Returns the wakes.
    pub(crate) fn after_commit(
        &self,
        opened: &[crate::cursors::Pending],
    ) -> Vec<crate::delivery::Wake> {
        if opened.is_empty() {
            return Vec::new();
        }
        if !self.notices.is_on() {
            return self.delivery.enqueue(opened);
        }
        let done = block_on(async {
            match self.pg.lock().await {
                Ok(mut g) => match g.cached() {
                    Ok(mut c) => Some(self.notices.after_commit(&mut c, opened).await),
                    Err(_) => None,
                },
                Err(_) => None,
            }
        });
        match done {
            Ok(Some(wakes)) => wakes,
            // No connection for the leases: queued here, as if nobody else served them.
            _ => self.notices.queue_here(opened),
        }
    }

    /// `watch` of a checked, watchable pair whose target has agent `agent`: seeds at the
    /// target's head (locked against a record meanwhile) or refreshes. True when it seeded
    /// (the pair's queued notice is dropped).
    pub(crate) fn watch(
        &self,
        watcher: &str,
        target: &str,
        agent: &str,
        o: &WatchOptions,
        now: i64,
    ) -> Result<bool> {
        self.notices.serve(watcher);
        let seeded = block_on(async {
            let mut g = self.pg.lock().await?;
            let mut c = g.cached()?;
            c.client.batch_execute("BEGIN").await.map_err(cursors::db)?;
            let r = async {
                let head = cursors::head_for_share(&mut c, target, agent).await?;
                cursors::watch(&mut c, watcher, target, head, o, now).await
            }
            .await;
            let seeded = delivery::end(c.client, r).await?;
            if seeded {
                self.notices.consumed(&mut c, watcher).await;
            }
            Ok::<_, crate::error::Error>(seeded)
        })??;
        if seeded {
            self.delivery.queue().remove(watcher, target);
        }
        Ok(seeded)
    }

    /// `unwatch`: the cursor and its queued notice go. True when a cursor was removed.
    pub(crate) fn unwatch(&self, watcher: &str, target: &str) -> Result<bool> {
        let removed = block_on(async {
            let mut g = self.pg.lock().await?;
            let mut c = g.cached()?;
            let removed = cursors::delete(&mut c, watcher, target).await?;
            if removed {
                self.notices.consumed(&mut c, watcher).await;
            }
            Ok::<_, crate::error::Error>(removed)
        })??;
        self.delivery.queue().remove(watcher, target);
        Ok(removed)
    }

    /// `drain` ([`delivery::drain`]).
    pub(crate) fn drain(&self, watcher: &str, now: i64) -> Result<Vec<Notice>> {
        self.notices.serve(watcher);
        block_on(async {
            let mut g = self.pg.lock().await?;
            let mut c = g.cached()?;
            delivery::drain(&mut c, &self.notices, &self.delivery, watcher, now).await
        })?
    }

    /// `acknowledge` ([`delivery::acknowledge`]).
    pub(crate) fn acknowledge(
        &self,
        watcher: &str,
        targets: &[&str],
        scope: Option<&str>,
        through: Option<i64>,
        now: i64,
    ) -> Result<u64> {
        self.notices.serve(watcher);
        block_on(async {
            let mut g = self.pg.lock().await?;
            let mut c = g.cached()?;
            delivery::acknowledge(
                &mut c,
                &self.notices,
                &self.delivery,
                watcher,
                targets,
                scope,
                through,
                now,
            )
            .await
        })?
    }

    /// The watchers with unacknowledged material history (the sweep's candidates).
    pub(crate) fn sweep_candidates(&self) -> Result<Vec<String>> {
        block_on(async {
            let mut g = self.pg.lock().await?;
            let mut c = g.cached()?;
            cursors::watchers_behind(&mut c).await
        })?
    }

    /// The sweep (semantics.md#cursors-sweep) of `only` (every watcher when `None`), then a
    /// prune; `notices` counted after the prune.
    pub(crate) fn sweep(&self, only: Option<&[String]>, now: i64) -> Result<SweepReport> {
        let pending = block_on(async {
            let mut g = self.pg.lock().await?;
            let mut c = g.cached()?;
            delivery::refreeze(&mut c, &self.delivery, only).await
        })??;
        let prune = self.prune(now)?;
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

    /// Prunes now (semantics.md#retention), over the whole database, and restarts the
    /// automatic prune's hour.
    pub(crate) fn prune(&self, now: i64) -> Result<PruneReport> {
        self.auto_prune.ran(now);
        let (retention, max_events) = (self.opts.retention_ms, self.opts.max_events);
        block_on(async {
            let mut g = self.pg.lock().await?;
            let mut c = g.cached()?;
            prune::prune(&mut c, &self.delivery, retention, max_events, now).await
        })?
    }

    /// Starts a prune in the background when a fresh record at `now` finds the last one more
    /// than an hour old (semantics.md#recording-auto-prune). Its failures go to `onError`.
    pub(crate) fn maybe_prune_in_background(&self, now: i64) {
        if !self.auto_prune.due(now) {
            return;
        }
        let (pg, delivery, auto) = (
            std::sync::Arc::clone(&self.pg),
            std::sync::Arc::clone(&self.delivery),
            std::sync::Arc::clone(&self.auto_prune),
        );
        let state = std::sync::Arc::clone(self.notices.state());
        let (retention, max_events) = (self.opts.retention_ms, self.opts.max_events);
        crate::runtime::handle().spawn(async move {
            let mut now = now;
            loop {
                let run = async {
                    let mut g = pg.lock().await?;
                    let mut c = g.cached()?;
                    prune::prune(&mut c, &delivery, retention, max_events, now).await
                };
                if let Err(e) = run.await {
                    state.report(e, crate::hooks::Task::Prune);
                }
                match auto.next(state.is_closed()) {
                    Some(next) => now = next,
                    None => return,
                }
            }
        });
    }

    /// True while an automatic prune runs in the background.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn is_pruning(&self) -> bool {
        self.auto_prune.is_running()
    }

    /// `resetSession`: the cursors where the key is the watcher, their queued notices and its
    /// scheduled wake go; it stays served.
    pub(crate) fn reset_session(&self, key: &str) -> Result<()> {
        block_on(async {
            let mut g = self.pg.lock().await?;
            let mut c = g.cached()?;
            let n = cursors::delete_of(&mut c, key, false).await?;
            if n > 0 {
                self.notices.consumed(&mut c, key).await;
            }
            Ok::<_, crate::error::Error>(())
        })??;
        self.delivery.queue().remove_watcher(key);
        self.delivery.cancel(key);
        Ok(())
    }

    /// `deleteSession` of (key, agent); `own` when the agent is the key's own: then also its
    /// cursors as watcher or target, their notices and its wake, and it is served no more.
    pub(crate) fn delete_session(&self, key: &str, agent: &str, own: bool) -> Result<()> {
        block_on(async {
            let mut g = self.pg.lock().await?;
            let mut c = g.cached()?;
            c.client.batch_execute("BEGIN").await.map_err(cursors::db)?;
            let r = cursors::delete_session(&mut c, key, agent, own).await;
            delivery::end(c.client, r).await?;
            if own {
                self.notices.changed_all(&mut c).await;
            }
            Ok::<_, crate::error::Error>(())
        })??;
        if own {
            self.notices.unserve(key);
            self.delivery.queue().signal().unserved();
            let mut q = self.delivery.queue();
            q.remove_watcher(key);
            q.remove_target(key);
            drop(q);
            self.delivery.cancel(key);
        }
        Ok(())
    }
}
