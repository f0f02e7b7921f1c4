//! The façade's side of a PostgreSQL store: opening one on a URL, and telling the [`Store`]
//! methods which engine serves them. A store opened on a URL keeps the façade's in-memory
//! parts (the notice queue, the wakes, the metrics) and has no SQLite connection: every
//! method either calls the PostgreSQL engine ([`crate::postgres`]) or answers
//! `ERR_INVALID_ARG` "… is not on PostgreSQL yet".

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::hooks::Hooks;
use crate::options::Options;
use crate::postgres::PgStore;
use crate::store::Store;
use crate::upstream::link_store::LinkStore;
use crate::upstream::monitor::Monitor;

pub(crate) use crate::postgres::not_yet;

impl Store {
    /// Opens the PostgreSQL store at `url` (see [`Store::open`]).
    pub(super) fn open_remote(url: &str, opts: Options, hooks: Hooks) -> Result<Self> {
        opts.validate()?;
        // The façade's in-memory parts come from a private in-memory store whose connection
        // is then dropped: nothing of it is ever read or written.
        let local = Options {
            pg_schema: Default::default(),
            connect_timeout_ms: Options::default().connect_timeout_ms,
            statement_timeout_ms: Options::default().statement_timeout_ms,
            ..opts
        };
        let mut store = Self::open_file(":memory:", local, hooks)?;
        let delivery = Arc::clone(&store.inner.recorder.delivery);
        let engine = PgStore::open(url, &opts, delivery, store.inner.host.clone())?;
        let inner = Arc::get_mut(&mut store.inner)
            .ok_or_else(|| Error::invalid("the store was shared while it opened"))?;
        inner.opts = opts;
        let engine = Arc::new(engine);
        // The links are the engine's: the monitor of the in-memory store is replaced.
        let links: Arc<dyn LinkStore> = Arc::clone(&engine) as _;
        inner.monitor = Arc::new(Monitor::new(links, inner.host.clone()));
        inner.remote = Some(engine);
        drop(store.inner.recorder.db.take());
        Ok(store)
    }

    /// The PostgreSQL engine of a store opened on a URL.
    pub(super) fn remote(&self) -> Option<&PgStore> {
        self.inner.remote.as_deref()
    }

    /// True for a store opened on a `postgres://` URL: its synchronous JS methods that need
    /// the database answer `ERR_ASYNC_ONLY`, and the Promise API serves them.
    pub fn is_remote(&self) -> bool {
        self.inner.remote.is_some()
    }

    /// For the Promise API's queue: given how many calls wait in it, the failure a new call
    /// settles with at once, while a PostgreSQL store's connection is down and
    /// `maxWaitingCalls` calls wait already (docs/postgres.md#faults); `None` on a file.
    pub(crate) fn waiting_gate(&self) -> Option<crate::writer::Gate> {
        self.remote().map(PgStore::waiting_gate)
    }
}
