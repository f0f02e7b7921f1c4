//! PostgreSQL's own parts of the store (docs/postgres.md): the connection and its TLS, the
//! schema, and the engine the façade ([`crate::Store`]) calls for a store opened on a
//! `postgres://` URL. Calls block the calling thread (the Promise API's writer thread) on the
//! core runtime, where the client's connection runs; the notice queue and the wakes are the
//! same in-memory [`Delivery`] as SQLite's.

use std::future::Future;
use std::sync::Arc;

use crate::delivery::Delivery;
use crate::error::{DbFailure, Error, Result};
use crate::options::Options;

mod backend;
mod batch;
pub(crate) mod calls;
pub(crate) mod catchup;
pub(crate) mod conn;
pub(crate) mod cursors;
pub(crate) mod delivery;
mod engine;
pub(crate) mod floor;
pub(crate) mod follow;
pub mod import;
mod in_doubt;
pub mod inspect;
pub(crate) mod lease;
mod links;
pub(crate) mod listen;
pub(crate) mod outage;
mod overlay;
pub(crate) mod percent;
pub(crate) mod pooler;
pub(crate) mod prune;
mod reads;
mod record;
pub(crate) mod rows;
pub(crate) mod schema;
pub(crate) mod settings;
pub(crate) mod tail;
pub(crate) mod tls;

use std::sync::atomic::{AtomicBool, Ordering};

use conn::{Pg, SessionGuard, Target};

use crate::record::WriteRules;

/// The PostgreSQL engine of one store.
pub(crate) struct PgStore {
    pg: Arc<Pg>,
    delivery: Arc<Delivery>,
    rules: WriteRules,
    closed: AtomicBool,
    /// The served watchers, their leases and the cross-host catch-up (`catchup.rs`).
    notices: catchup::Notices,
    opts: Options,
    /// The automatic prune's hour (`prune.rs`).
    auto_prune: Arc<prune::Auto>,
}

impl PgStore {
    /// Connects to `url` and creates what is missing of the tables in the options' schema.
    /// With `syncIntervalMs` > 0 its listener task starts (`catchup.rs`); `host` hears of
    /// the task's failures.
    pub(crate) fn open(
        url: &str,
        opts: &Options,
        delivery: Arc<Delivery>,
        host: crate::hooks::Host,
    ) -> Result<Self> {
        let target = Target::parse(url, opts)?;
        let outage = outage::Outage::new(opts.reconnect_window_ms, opts.max_waiting_calls);
        let pg = Arc::new(Pg::new(target, opts.pg_schema, outage));
        let notices = catchup::Notices::new(
            opts.pg_schema,
            opts.sync_interval_ms,
            Arc::clone(&delivery),
            host,
        );
        let store = PgStore {
            pg,
            delivery,
            rules: record::rules_of(opts),
            closed: AtomicBool::new(false),
            notices,
            opts: *opts,
            auto_prune: Arc::default(),
        };
        let pg = Arc::clone(&store.pg);
        // A transaction-mode pooler is refused before anything is written (pooler.rs).
        block_on(async move {
            pooler::check(&pg).await?;
            schema::apply(&pg).await
        })??;
        let pg = Arc::clone(&store.pg);
        store.notices.spawn(Arc::new(move || {
            let pg = Arc::clone(&pg);
            Box::pin(async move { pg.target().connect_listener().await })
        }));
        Ok(store)
    }

    /// The gate of the Promise API's queue while the connection is down: past
    /// `maxWaitingCalls` waiting calls, a new one settles at once with `ERR_DB`.
    pub(crate) fn waiting_gate(&self) -> crate::engine::Gate {
        let pg = Arc::clone(&self.pg);
        Arc::new(move |queued| {
            let o = &pg.faults().outage;
            (o.is_down() && queued >= o.cap()).then(|| {
                Error::db(
                    DbFailure::Connection,
                    format!(
                        "the PostgreSQL server is unreachable and {queued} calls wait for it \
                         already (maxWaitingCalls)"
                    ),
                )
            })
        })
    }

    /// `ERR_CLOSED` once [`PgStore::close`] ran.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Runs `f` with the connected session on a thread outside the runtime (the calling one,
    /// or one of its own when called on a runtime thread), where `f` blocks on each step. A
    /// connection found lost afterwards is dropped, so the next call connects again.
    pub(crate) fn with_session<T: Send>(
        &self,
        f: impl FnOnce(&mut SessionGuard<'_>) -> Result<T> + Send,
    ) -> Result<T> {
        let run = || {
            let mut guard = rows::block(self.pg.lock())?;
            let (client, _, in_tx) = guard.session()?.parts();
            if *in_tx {
                // A write that unwound mid-transaction left it open: a read must not join it.
                rows::block(client.batch_execute("ROLLBACK"))
                    .map_err(|e| self.pg.target().error(&e))?;
                *in_tx = false;
            }
            let r = f(&mut guard);
            if r.is_err() {
                guard.forget_if_closed();
            }
            r
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return run();
        }
        std::thread::scope(|s| {
            s.spawn(run)
                .join()
                .map_err(|_| Error::db(DbFailure::Other, "a PostgreSQL call panicked"))?
        })
    }

    /// Closes the connection (a call in flight finishes first).
    /// The listener stops first, and this store's leases are dropped, so the other hosts
    /// take over its watchers at once.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let pg = Arc::clone(&self.pg);
        let notices = &self.notices;
        // Nothing to report: a connection that cannot be closed cleanly is dropped anyway.
        let _ = block_on(async move {
            notices.stop_within(CLOSE_GRACE).await;
            if !notices.has_leases() {
            } else if let Ok(mut g) = pg.lock().await {
                if let Ok(c) = g.client() {
                    notices.release(&*c).await;
                }
            }
            pg.disconnect().await
        });
    }
}

/// How long a close waits for a turn of the background task under way (its lease write).
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs `fut` to completion on the core runtime from a thread outside it (the writer thread).
/// Called on one of the runtime's own threads, it runs on a thread of its own instead, since
/// blocking a runtime thread on the runtime would stall or panic.
pub(crate) fn block_on<F>(fut: F) -> Result<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let handle = crate::runtime::handle();
    if tokio::runtime::Handle::try_current().is_err() {
        return Ok(handle.block_on(fut));
    }
    std::thread::scope(|s| {
        s.spawn(|| handle.block_on(fut))
            .join()
            .map_err(|_| Error::db(DbFailure::Other, "a PostgreSQL call panicked"))
    })
}
