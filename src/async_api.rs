//! The Promise API of the native store (semantics.md#promise-api). Each `*Async` method checks
//! what it can on the JS thread, reads the clock there, and queues a job for the store's
//! writer thread (`session_awareness_core::Writer`); it never touches the database. The writer
//! runs the jobs in call order, records taken together as one group commit, packs the
//! results on its own thread and hands each batch to the TypeScript layer in one call of a
//! weak threadsafe function, which settles the batch's promises in order.

use napi::bindgen_prelude::{
    AsyncTask, Either, Either3, Either7, Env, FnArgs, Function, Task, Utf16String,
};
use napi::threadsafe_function::{
    ThreadsafeFunction, ThreadsafeFunctionCallMode, UnknownReturnValue,
};
use napi::{Result, Status};
use napi_derive::napi;
use session_awareness_core::{self as core, Done, Error as CoreError, Job, Store, Writer};

use crate::calls::{adopt_input, record_input, remote_check, watch_options, UpstreamLink};
use crate::error::{to_js, Code, IntoJs};
use crate::packed;
use crate::session_state::{NativeSessionState, Prepared};
use crate::types::{CursorRow, NativeError, NativeOptions, PruneReport, SweepReport};
use crate::writer::{Out, Value};

/// One batch: the values in call order, and the failures (null where a job succeeded), or
/// null when none failed.
type Batch = (Vec<Value>, Option<Vec<Option<NativeError>>>);
type BatchTsfn = ThreadsafeFunction<Batch, UnknownReturnValue, FnArgs<Batch>, Status, false, true>;

/// A core failure as the TypeScript layer takes it.
fn native_error(e: CoreError) -> NativeError {
    let code = e.code().to_owned();
    NativeError {
        task: None,
        code,
        message: to_js(e).reason,
    }
}

/// The batch of results the writer took together, packed on the writer thread.
fn batch(done: Vec<Done<Out>>) -> Batch {
    let n = done.len();
    let mut values = Vec::with_capacity(n);
    let mut errors: Option<Vec<Option<NativeError>>> = None;
    for (i, d) in done.into_iter().enumerate() {
        let out = match d {
            Done::Recorded(r) => r.map(|e| Either7::A(e.as_ref().map(packed::event))),
            Done::Ran(r) => r,
            Done::Lost(e) => Err(e),
        };
        match out {
            Ok(v) => values.push(v),
            Err(e) => {
                values.push(Either7::A(None));
                errors.get_or_insert_with(|| (0..n).map(|_| None).collect())[i] =
                    Some(native_error(e));
            }
        }
    }
    (values, errors)
}

fn task(f: impl FnOnce(&Store) -> Out + Send + 'static) -> Job<Out> {
    Job::Task(Box::new(f))
}

#[napi]
impl NativeSessionState {
    /// Starts the writer thread, which hands every batch of results to `onBatch` on the JS
    /// thread. Does nothing when it already runs or the store is closed.
    #[napi(
        ts_args_type = "onBatch: (values: unknown[], errors: Array<NativeError | null> | null) => void"
    )]
    pub fn start_writer(
        &self,
        on_batch: Function<'_, FnArgs<Batch>, UnknownReturnValue>,
    ) -> Result<(), Code> {
        if self.writer.writer.get().is_some() || self.store.is_closed() {
            return Ok(());
        }
        let tsfn: BatchTsfn = on_batch
            .build_threadsafe_function::<Batch>()
            .callee_handled::<false>()
            .weak::<true>()
            .build_callback(|ctx| Ok(FnArgs::from(ctx.value)))
            .js()?;
        let sink = Box::new(move |done: Vec<Done<Out>>| {
            // NonBlocking: the writer never waits for the JS thread, which may be waiting for it.
            let _ = tsfn.call(batch(done), ThreadsafeFunctionCallMode::NonBlocking);
        });
        let writer = Writer::start(self.store.clone(), sink).js()?;
        // Only the JS thread starts writers, so the cell is still empty here.
        let _ = self.writer.writer.set(writer);
        Ok(())
    }

    /// Blocks until every job queued before has run: a synchronous call that follows runs
    /// after them.
    #[napi]
    pub fn settle(&self) {
        self.writer.settle();
    }

    /// Queues a record (see `record`).
    #[napi]
    pub fn record_async(
        &self,
        env: Env,
        text: Utf16String,
        occurred_at: Option<f64>,
        only_if_watched: bool,
        watchers: Option<Vec<String>>,
        watcher_scopes: Option<std::collections::HashMap<String, String>>,
    ) -> Result<(), Code> {
        let input = record_input(
            &text,
            occurred_at,
            only_if_watched,
            watchers,
            watcher_scopes,
        )?;
        let now = self.now(&env).js()?;
        self.writer.push(Job::Record(Box::new(input), now))
    }

    /// Queues a `watch`; its value is the flag.
    #[napi]
    pub fn watch_async(
        &self,
        env: Env,
        watcher_key: String,
        target_key: String,
        provenance: Option<String>,
        scope: Option<String>,
        refresh: Option<bool>,
    ) -> Result<(), Code> {
        let o = watch_options(provenance, scope, refresh)?;
        let now = self.now(&env).js()?;
        self.writer.push(task(move |s| {
            s.watch_with(&watcher_key, &target_key, &o, now)
                .map(Either7::B)
        }))
    }

    /// Queues an `unwatch`; its value is the flag.
    #[napi]
    pub fn unwatch_async(&self, watcher_key: String, target_key: String) -> Result<(), Code> {
        self.writer.push(task(move |s| {
            s.unwatch(&watcher_key, &target_key).map(Either7::B)
        }))
    }

    /// Queues an `acknowledge`; its value is the count.
    #[napi]
    pub fn acknowledge_async(
        &self,
        env: Env,
        watcher_key: String,
        target_keys: Vec<String>,
        scope: Option<String>,
        through: Option<f64>,
    ) -> Result<(), Code> {
        let now = self.now(&env).js()?;
        self.writer.push(task(move |s| {
            s.acknowledge_through(&watcher_key, &target_keys, scope.as_deref(), through, now)
                .map(|n| Either7::C(n as i64))
        }))
    }

    /// Queues a `drain`; its value is the packed notices.
    #[napi]
    pub fn drain_async(&self, env: Env, watcher_key: String) -> Result<(), Code> {
        let now = self.now(&env).js()?;
        self.writer.push(task(move |s| {
            s.drain(&watcher_key, now)
                .map(|n| Either7::D(packed::notices(&n)))
        }))
    }

    /// Queues the read of the watchers a sweep would ask `watcherExists` about; its value is
    /// their keys.
    #[napi]
    pub fn sweep_candidates_async(&self) -> Result<(), Code> {
        self.writer
            .push(task(|s| s.sweep_candidates().map(Either7::G)))
    }

    /// Queues a sweep of the watchers in `only` (every watcher when absent); its value is the
    /// report.
    #[napi]
    pub fn sweep_async(&self, env: Env, only: Option<Vec<String>>) -> Result<(), Code> {
        let now = self.now(&env).js()?;
        self.writer.push(task(move |s| {
            let report = s.sweep_of(only.as_deref(), now)?;
            Ok(Either7::F(Either3::A(SweepReport {
                notices: report.notices as i64,
                prune: report.prune.into(),
            })))
        }))
    }

    /// Queues a prune; its value is the report.
    #[napi]
    pub fn prune_async(&self, env: Env) -> Result<(), Code> {
        let now = self.now(&env).js()?;
        self.writer.push(task(move |s| {
            s.prune(now)
                .map(|r| Either7::F(Either3::B(PruneReport::from(r))))
        }))
    }

    /// Queues a `cursorRows` (see `cursorRows`); its value is the rows.
    #[napi]
    pub fn cursor_rows_async(
        &self,
        watcher_key: Option<String>,
        target_key: Option<String>,
    ) -> Result<(), Code> {
        self.writer.push(task(move |s| {
            let rows = s.cursor_rows(watcher_key.as_deref(), target_key.as_deref())?;
            Ok(Either7::F(Either3::C(
                rows.into_iter().map(CursorRow::from).collect(),
            )))
        }))
    }

    /// Queues a `resetSession`.
    #[napi]
    pub fn reset_session_async(&self, session_key: String) -> Result<(), Code> {
        self.writer.push(task(move |s| {
            s.reset_session(&session_key).map(|()| Either7::A(None))
        }))
    }

    /// Queues a `deleteSession`.
    #[napi]
    pub fn delete_session_async(
        &self,
        session_key: String,
        agent_id: Option<String>,
    ) -> Result<(), Code> {
        self.writer.push(task(move |s| {
            s.delete_session(&session_key, agent_id.as_deref())
                .map(|()| Either7::A(None))
        }))
    }

    /// Queues an `adopt`; its value is the event.
    #[napi]
    pub fn adopt_async(
        &self,
        env: Env,
        session_key: String,
        link: UpstreamLink,
    ) -> Result<(), Code> {
        let now = self.now(&env).js()?;
        let input = adopt_input(link);
        self.writer.push(task(move |s| {
            s.adopt(&session_key, input, now)
                .map(|e| Either7::A(e.as_ref().map(packed::event)))
        }))
    }

    /// Queues a `checkUpstream`; its value is the event.
    #[napi]
    pub fn check_upstream_async(
        &self,
        env: Env,
        session_key: String,
        found: String,
        items_json: Option<String>,
    ) -> Result<(), Code> {
        let now = self.now(&env).js()?;
        let check = remote_check(&found, items_json)?;
        self.writer.push(task(move |s| {
            s.check_upstream(&session_key, check, now)
                .map(|e| Either7::A(e.as_ref().map(packed::event)))
        }))
    }

    /// Queues a `noteOwnUserMessage`.
    #[napi]
    pub fn note_own_user_message_async(
        &self,
        env: Env,
        session_key: String,
        text: String,
    ) -> Result<(), Code> {
        let now = self.now(&env).js()?;
        self.writer.push(task(move |s| {
            s.note_own_user_message(&session_key, &text, now)
                .map(|()| Either7::A(None))
        }))
    }

    /// Queues a `scanUpstream`; its value is the events recorded, packed.
    #[napi]
    pub fn scan_upstream_async(&self, env: Env) -> Result<(), Code> {
        let now = self.now(&env).js()?;
        self.writer.push(task(move |s| {
            s.scan_upstream(now)
                .map(|events| Either7::D(packed::stored_events(&events)))
        }))
    }

    /// Queues a `changesSince`; its value is the packed delta.
    #[napi]
    pub fn changes_since_async(
        &self,
        session_key: String,
        after: f64,
        agent_id: Option<String>,
        limit: Option<f64>,
    ) -> Result<(), Code> {
        self.writer.push(task(move |s| {
            s.changes_since_with(&session_key, after, agent_id.as_deref(), limit, |c| {
                Either7::E(packed::changes(&c))
            })
        }))
    }

    /// Queues a `stateVersions`; its value is the packed rows.
    #[napi]
    pub fn state_versions_async(&self, refs: Utf16String) -> Result<(), Code> {
        let refs = crate::versions::refs(&refs).js()?;
        self.writer.push(task(move |s| {
            s.state_versions_of(&refs.pairs())
                .map(|found| Either7::D(crate::versions::rows(&refs, &found)))
        }))
    }

    /// Queues the close of the store behind every job queued before, and takes no more jobs.
    /// False when the writer had already stopped (the store is closed or closing): nothing
    /// was queued.
    #[napi]
    pub fn close_async(&self) -> bool {
        let Some(w) = self.writer.writer.get() else {
            return false;
        };
        let queued = w
            .push(task(|s| {
                s.close();
                Ok(Either7::A(None))
            }))
            .is_ok();
        w.stop();
        queued
    }
}

/// Opens a store on a libuv thread (`SessionState.open`): the options are checked and the
/// callbacks prepared on the JS thread first.
pub struct Opening {
    path: String,
    prepared: Option<Prepared>,
}

impl Task for Opening {
    type Output = core::Result<Store>;
    type JsValue = Either<NativeSessionState, NativeError>;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        match &self.prepared {
            Some(p) => Ok(p.open(&self.path)),
            None => Ok(Err(CoreError::Closed)),
        }
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
        Ok(match (output, self.prepared.take()) {
            (Ok(store), Some(p)) => Either::A(p.finish(store)),
            (Err(e), _) => Either::B(native_error(e)),
            (Ok(store), None) => {
                store.close();
                Either::B(native_error(CoreError::Closed))
            }
        })
    }
}

/// Opens (creating if needed) the store at `path` off the JS thread. Resolves to the native
/// store, or to the failure as a `NativeError` (the TypeScript layer rejects with it); throws
/// `ERR_INVALID_ARG` for a bad option at once.
#[napi(ts_return_type = "Promise<NativeSessionState | NativeError>")]
pub fn open_native_session_state(
    env: Env,
    path: String,
    options: NativeOptions,
) -> Result<AsyncTask<Opening>, Code> {
    let prepared = Prepared::new(&env, options)?;
    Ok(AsyncTask::new(Opening {
        path,
        prepared: Some(prepared),
    }))
}
