//! `SessionState`: the JS class over the core [`Store`].

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use std::collections::HashMap;

use napi::bindgen_prelude::{Env, Function, FunctionRef, Int32Array, Utf16String};
use napi::threadsafe_function::{
    ThreadsafeFunction, ThreadsafeFunctionCallMode, UnknownReturnValue,
};
use napi::{Result, Status};
use napi_derive::napi;
use session_awareness_core::{
    self as core, system_now, Error as CoreError, ErrorSink, EventKind, Hooks, HostName,
    NotifyKinds, Options, SchemaName, Store, WakeSink,
};

use crate::calls::{record_input, watch_options};
use crate::error::{coded, to_js, Code, IntoJs, JsResult, ERR_WAKE_CALLBACK};
use crate::packed::{self, PackedChanges, PackedEvent, PackedRows};
use crate::signal;
use crate::types::*;
use crate::versions;

type ErrorCallback = FunctionRef<NativeError, UnknownReturnValue>;
type WakeTsfn =
    ThreadsafeFunction<WakeRequest, UnknownReturnValue, WakeRequest, Status, false, true>;
type ErrorTsfn =
    ThreadsafeFunction<NativeError, UnknownReturnValue, NativeError, Status, false, true>;

/// Best-effort failures reach the host's `onError` (wrapped by the TypeScript layer, which
/// also writes the default stderr line): synchronously when we are on the JS thread, through
/// a weak threadsafe function from background threads.
pub(crate) struct Reporter {
    on_error: ErrorCallback,
    background: ErrorTsfn,
}

fn stderr_line(code: &str, message: &str) {
    eprintln!("session-awareness: {code}: {message}");
}

impl Reporter {
    pub(crate) fn report_sync(&self, env: &Env, code: &str, message: String, task: &str) {
        // A throwing onError must not turn a best-effort report into a throw.
        let called = self.on_error.borrow_back(env).and_then(|f| {
            f.call(NativeError {
                code: code.to_owned(),
                message: message.clone(),
                task: Some(task.to_owned()),
            })
        });
        if called.is_err() {
            stderr_line(code, &message);
        }
    }

    fn report_from(&self, error: CoreError, task: Option<core::Task>) {
        let (code, message) = (error.code().to_owned(), to_js(error).reason.clone());
        let fallback = (code.clone(), message.clone());
        let task = task.map(|t| t.name().to_owned());
        let _ = self.background.call_with_return_value(
            NativeError {
                code,
                message,
                task,
            },
            ThreadsafeFunctionCallMode::NonBlocking,
            move |r, _| {
                if r.is_err() {
                    stderr_line(&fallback.0, &fallback.1);
                }
                Ok(())
            },
        );
    }
}

impl ErrorSink for Reporter {
    fn report(&self, error: CoreError) {
        self.report_from(error, None);
    }

    fn report_task(&self, error: CoreError, task: core::Task) {
        self.report_from(error, Some(task));
    }
}

/// Wakes go to the host's callback on the JS thread; a throw is reported, never fatal.
struct JsWake {
    tsfn: WakeTsfn,
    reporter: Arc<Reporter>,
}

impl WakeSink for JsWake {
    fn wake(&self, r: core::WakeRequest) {
        let reporter = Arc::clone(&self.reporter);
        let request = WakeRequest {
            source: r.source.to_owned(),
            intent: r.intent.to_owned(),
            reason: r.reason,
            session_key: r.session_key,
        };
        // NonBlocking: a background thread must never wait on the JS thread.
        let _ = self.tsfn.call_with_return_value(
            request,
            ThreadsafeFunctionCallMode::NonBlocking,
            move |result, env| {
                if let Err(e) = result {
                    let message = format!("the wake callback threw: {}", e.reason);
                    reporter.report_sync(&env, ERR_WAKE_CALLBACK, message, "wake");
                }
                Ok(())
            },
        );
    }
}

/// The native store under the public `SessionState` of `lib/session-state.ts`, which checks
/// the arguments, builds the results from their packed form and owns the best-effort rules.
#[napi]
pub struct NativeSessionState {
    pub(crate) store: Store,
    clock: Option<FunctionRef<(), f64>>,
    // JS clock minus system clock at the last JS read, so background work follows clock travel.
    clock_offset: Arc<AtomicI64>,
    /// The writer thread of the Promise API, started by its first call.
    pub(crate) writer: crate::writer::Lane,
}

fn opt_int(v: Option<f64>, name: &str) -> JsResult<Option<i64>> {
    match v {
        None => Ok(None),
        Some(x) if x.is_finite() && x.fract() == 0.0 && x.abs() <= 9_007_199_254_740_991.0 => {
            Ok(Some(x as i64))
        }
        Some(_) => Err(coded(
            "ERR_INVALID_ARG",
            format!("{name} must be an integer"),
        )),
    }
}

fn opt_u32(v: Option<f64>, name: &str) -> JsResult<Option<u32>> {
    opt_int(v, name)?
        .map(|x| {
            u32::try_from(x)
                .map_err(|_| coded("ERR_INVALID_ARG", format!("{name} is out of range")))
        })
        .transpose()
}

/// The message of an `ERR_INVALID_ARG` without its `invalid argument: ` prefix.
fn inner_message(e: &CoreError) -> String {
    match e {
        CoreError::InvalidArg(m) => m.clone(),
        other => other.to_string(),
    }
}

fn store_options(o: &NativeOptions) -> JsResult<Options> {
    let d = Options::default();
    let opts = Options {
        retention_ms: opt_int(o.retention_ms, "retentionMs")?.unwrap_or(d.retention_ms),
        max_events: match opt_int(o.max_events, "maxEvents")? {
            Some(n) if n < 1 => {
                return Err(coded(
                    "ERR_INVALID_ARG",
                    "maxEvents must be a positive integer",
                ))
            }
            Some(n) => n as u64,
            None => d.max_events,
        },
        busy_timeout_ms: opt_u32(o.busy_timeout_ms, "busyTimeoutMs")?.unwrap_or(d.busy_timeout_ms),
        wake_coalesce_ms: opt_u32(o.wake_coalesce_ms, "wakeCoalesceMs")?
            .unwrap_or(d.wake_coalesce_ms),
        sync_interval_ms: opt_u32(o.sync_interval_ms, "syncIntervalMs")?
            .unwrap_or(d.sync_interval_ms),
        notify_kinds: match &o.notify_kinds {
            None => d.notify_kinds,
            Some(names) => {
                let kinds = names
                    .iter()
                    .enumerate()
                    .map(|(i, k)| {
                        EventKind::parse(k).map_err(|e| {
                            CoreError::invalid(format!("notifyKinds[{i}]: {}", inner_message(&e)))
                        })
                    })
                    .collect::<core::Result<Vec<_>>>()
                    .js()?;
                NotifyKinds::of(&kinds).js()?
            }
        },
        seed_resets_provenance: o.seed_resets_provenance.unwrap_or(false),
        notice_outbox: o.notice_outbox.unwrap_or(false),
        pg_schema: match &o.schema {
            None => d.pg_schema,
            Some(name) => SchemaName::parse(name).js()?,
        },
        connect_timeout_ms: opt_u32(o.connect_timeout_ms, "connectTimeoutMs")?
            .unwrap_or(d.connect_timeout_ms),
        statement_timeout_ms: opt_u32(o.statement_timeout_ms, "statementTimeoutMs")?
            .unwrap_or(d.statement_timeout_ms),
        reconnect_window_ms: opt_u32(o.reconnect_window_ms, "reconnectWindowMs")?
            .unwrap_or(d.reconnect_window_ms),
        max_waiting_calls: opt_u32(o.max_waiting_calls, "maxWaitingCalls")?
            .unwrap_or(d.max_waiting_calls),
        host_name: match &o.host_name {
            None => d.host_name,
            Some(name) => HostName::parse(name).js()?,
        },
        read_cache_bytes: match opt_int(o.read_cache_bytes, "readCacheBytes")? {
            Some(n) if n < 0 => {
                return Err(coded(
                    "ERR_INVALID_ARG",
                    "readCacheBytes must be an integer in [0, 2^30]",
                ))
            }
            Some(n) => n as u64,
            None => d.read_cache_bytes,
        },
    };
    opts.validate().js()?;
    Ok(opts)
}

/// What opening a store needs from the JS thread (the options checked, the host's callbacks
/// as threadsafe functions), so the open itself can run on another thread.
pub(crate) struct Prepared {
    opts: Options,
    serve: Vec<String>,
    hooks: Hooks,
    clock: Option<FunctionRef<(), f64>>,
    clock_offset: Arc<AtomicI64>,
}

impl Prepared {
    /// Checks the options and builds the hooks. Runs on the JS thread.
    pub(crate) fn new(env: &Env, options: NativeOptions) -> Result<Self, Code> {
        let opts = store_options(&options)?;
        let serve = options.serve_watchers.unwrap_or_default();
        for (i, w) in serve.iter().enumerate() {
            core::keys::check_entry(w, "serveWatchers", i).js()?;
        }
        let background = options
            .on_error
            .borrow_back(env)
            .and_then(|f| {
                f.build_threadsafe_function::<NativeError>()
                    .callee_handled::<false>()
                    .weak::<true>()
                    .build()
            })
            .js()?;
        let reporter = Arc::new(Reporter {
            on_error: options.on_error,
            background,
        });
        let wake: Option<Arc<dyn WakeSink>> = match &options.wake {
            Some(cb) => {
                let f: Function<'_, WakeRequest, UnknownReturnValue> = cb.borrow_back(env).js()?;
                let tsfn: WakeTsfn = f
                    .build_threadsafe_function::<WakeRequest>()
                    .callee_handled::<false>()
                    .weak::<true>()
                    .build()
                    .js()?;
                Some(Arc::new(JsWake {
                    tsfn,
                    reporter: Arc::clone(&reporter),
                }))
            }
            None => None,
        };
        let clock_offset = Arc::new(AtomicI64::new(0));
        let offset = Arc::clone(&clock_offset);
        let hooks = Hooks {
            wake,
            errors: Some(reporter as Arc<dyn ErrorSink>),
            clock: Some(Arc::new(move || {
                system_now() + offset.load(Ordering::Relaxed)
            })),
        };
        Ok(Prepared {
            opts,
            serve,
            hooks,
            clock: options.clock,
            clock_offset,
        })
    }

    /// Opens the store and serves the watchers named up front. Runs on any thread.
    pub(crate) fn open(&self, path: &str) -> core::Result<Store> {
        let store = Store::open(path, self.opts, self.hooks.clone())?;
        for w in &self.serve {
            store.serve(w)?;
        }
        Ok(store)
    }

    /// The native store over an opened `store`. Runs on the JS thread.
    pub(crate) fn finish(self, store: Store) -> NativeSessionState {
        NativeSessionState {
            store,
            clock: self.clock,
            clock_offset: self.clock_offset,
            writer: crate::writer::Lane::default(),
        }
    }
}

#[napi]
impl NativeSessionState {
    /// Opens (creating if needed) the store at `path`. Throws `ERR_INVALID_ARG` for a bad
    /// option, `ERR_DB` when the file cannot be opened as a database and `ERR_NOT_SQLITE` for
    /// a file that is not SQLite; the message names the file.
    #[napi(constructor)]
    pub fn new(env: Env, path: String, options: NativeOptions) -> Result<Self, Code> {
        let prepared = Prepared::new(&env, options)?;
        let store = prepared.open(&path).js()?;
        Ok(prepared.finish(store))
    }

    pub(crate) fn now(&self, env: &Env) -> core::Result<i64> {
        let Some(clock) = &self.clock else {
            return Ok(system_now());
        };
        let v = clock
            .borrow_back(env)
            .and_then(|f| f.call(()))
            .map_err(|e| CoreError::invalid(format!("clock failed: {}", e.reason)))?;
        if !v.is_finite() {
            return Err(CoreError::invalid("clock must return a finite number"));
        }
        let now = v.floor() as i64;
        self.clock_offset
            .store(now - system_now(), Ordering::Relaxed);
        Ok(now)
    }

    /// Records one event (semantics.md#recording) in one write transaction and returns it packed, or null when
    /// `onlyIfWatched` found nobody watching. The payload is its JSON text. Throws every
    /// failure: the TypeScript layer reports it.
    #[napi(ts_return_type = "string | PackedRows | null")]
    pub fn record(
        &self,
        env: Env,
        text: Utf16String,
        occurred_at: Option<f64>,
        only_if_watched: bool,
        watchers: Option<Vec<String>>,
        watcher_scopes: Option<HashMap<String, String>>,
    ) -> Result<Option<PackedEvent>, Code> {
        let input = record_input(
            &text,
            occurred_at,
            only_if_watched,
            watchers,
            watcher_scopes,
        )?;
        let now = self.now(&env).js()?;
        Ok(self
            .store
            .record(input, now)
            .js()?
            .as_ref()
            .map(packed::event))
    }

    /// The notice queue's three signal words as an `Int32Array` over the addon's own memory,
    /// for the empty-drain answer and the listener's outbox check of the TypeScript layer;
    /// null where the runtime refuses external buffers (every drain then calls the addon).
    #[napi]
    pub fn drain_signal(&self, env: Env) -> Result<Option<Int32Array>, Code> {
        signal::signal_words(&env, self.store.queue_signal()).js()
    }

    /// Registers `watcherKey` as a watcher of `targetKey` (`provenance` default `explicit`),
    /// bound to `scope` when given; `refresh: false` keeps an existing cursor's `updated_at`.
    #[napi]
    pub fn watch(
        &self,
        env: Env,
        watcher_key: String,
        target_key: String,
        provenance: Option<String>,
        scope: Option<String>,
        refresh: Option<bool>,
    ) -> Result<bool, Code> {
        let o = watch_options(provenance, scope, refresh)?;
        let now = self.now(&env).js()?;
        self.store
            .watch_with(&watcher_key, &target_key, &o, now)
            .js()
    }

    /// The notices that entered the queue since the last call, in order (the listener's
    /// outbox; empty unless the store was opened with `noticeOutbox`).
    #[napi]
    pub fn take_notices(&self) -> Vec<QueuedNotice> {
        self.store
            .take_entered_notices()
            .into_iter()
            .map(QueuedNotice::from)
            .collect()
    }

    /// Removes the cursor and its pending notice. True if a cursor was removed.
    #[napi]
    pub fn unwatch(&self, watcher_key: String, target_key: String) -> Result<bool, Code> {
        self.store.unwatch(&watcher_key, &target_key).js()
    }

    /// The cursor rows of a watcher and/or a target as stored (all when both are absent).
    #[napi]
    pub fn cursor_rows(
        &self,
        watcher_key: Option<String>,
        target_key: Option<String>,
    ) -> Result<Vec<CursorRow>, Code> {
        let rows = self
            .store
            .cursor_rows(watcher_key.as_deref(), target_key.as_deref())
            .js()?;
        Ok(rows.into_iter().map(CursorRow::from).collect())
    }

    /// The session's state version, 0 when none.
    #[napi]
    pub fn state_version(
        &self,
        session_key: String,
        agent_id: Option<String>,
    ) -> Result<i64, Code> {
        self.store
            .state_version(&session_key, agent_id.as_deref())
            .js()
    }

    /// The state versions of many sessions, packed; sessions at 0 are left out. `refs` is
    /// the refs string of `src/versions.rs`.
    #[napi]
    pub fn state_versions(&self, refs: Utf16String) -> Result<PackedRows, Code> {
        let refs = versions::refs(&refs).js()?;
        let found = self.store.state_versions_of(&refs.pairs()).js()?;
        Ok(versions::rows(&refs, &found))
    }

    /// The events of a session after version `after`, packed.
    #[napi]
    pub fn changes_since(
        &self,
        session_key: String,
        after: f64,
        agent_id: Option<String>,
        limit: Option<f64>,
    ) -> Result<PackedChanges, Code> {
        self.store
            .changes_since_with(&session_key, after, agent_id.as_deref(), limit, |c| {
                packed::changes(&c)
            })
            .js()
    }

    /// The watcher's pending notices, acknowledged, packed; null (and no SQL) when nothing is
    /// pending.
    #[napi]
    pub fn drain(&self, env: Env, watcher_key: String) -> Result<Option<PackedRows>, Code> {
        if !self.store.has_pending(&watcher_key).js()? {
            return Ok(None);
        }
        let now = self.now(&env).js()?;
        let notices = self.store.drain(&watcher_key, now).js()?;
        Ok(Some(packed::notices(&notices)))
    }

    /// A wake for `watcherKey` reached the JS thread: true when the watcher still has queued
    /// notices (the wake goes to the host), false when they were withdrawn meanwhile.
    #[napi]
    pub fn wake_due(&self, watcher_key: String) -> bool {
        self.store.wake_due(&watcher_key)
    }

    /// The watcher's pending notices, nothing acknowledged, packed.
    #[napi]
    pub fn peek(&self, watcher_key: String) -> Result<PackedRows, Code> {
        Ok(packed::notices(&self.store.peek(&watcher_key).js()?))
    }

    /// Acknowledges the watcher's pending notices on `targetKeys`, only those of cursors
    /// bound to `scope` when given, read up to `through` when given; returns how many.
    #[napi]
    pub fn acknowledge(
        &self,
        env: Env,
        watcher_key: String,
        target_keys: Vec<String>,
        scope: Option<String>,
        through: Option<f64>,
    ) -> Result<i64, Code> {
        let now = self.now(&env).js()?;
        Ok(self
            .store
            .acknowledge_through(&watcher_key, &target_keys, scope.as_deref(), through, now)
            .js()? as i64)
    }

    /// Gateway start: re-queues the notices of cursors with unacknowledged material history
    /// whose watcher still exists (`watcherExists`, default all), then prunes.
    #[napi]
    pub fn sweep(
        &self,
        env: Env,
        watcher_exists: Option<Function<'_, String, bool>>,
    ) -> Result<SweepReport, Code> {
        let now = self.now(&env).js()?;
        let report = match watcher_exists {
            None => self.store.sweep(None, now),
            Some(f) => {
                // Every watcher is asked before anything is swept: a failing answer (a throw,
                // or anything but a boolean, which the TypeScript layer turns into a throw)
                // refuses the whole sweep, which then changes nothing.
                let mut only = Vec::new();
                for w in self.store.sweep_candidates().js()? {
                    match f.call(w.clone()) {
                        Ok(true) => only.push(w),
                        Ok(false) => {}
                        Err(e) => {
                            return Err(coded(
                                "ERR_INVALID_ARG",
                                format!("watcherExists failed: {}", e.reason),
                            ))
                        }
                    }
                }
                // The confirmed watchers go to the core as they are: each one's cursors are
                // read once, so the sweep costs what the callback's calls cost.
                self.store.sweep_of(Some(&only), now)
            }
        }
        .js()?;
        Ok(SweepReport {
            notices: report.notices as i64,
            prune: report.prune.into(),
        })
    }

    /// Prunes now.
    #[napi]
    pub fn prune(&self, env: Env) -> Result<PruneReport, Code> {
        let now = self.now(&env).js()?;
        Ok(self.store.prune(now).js()?.into())
    }

    /// The watcher session was reset: its cursors and pending notices go.
    #[napi]
    pub fn reset_session(&self, session_key: String) -> Result<(), Code> {
        self.store.reset_session(&session_key).js()
    }

    /// Deletes the session's events and head for the agent.
    #[napi]
    pub fn delete_session(
        &self,
        session_key: String,
        agent_id: Option<String>,
    ) -> Result<(), Code> {
        self.store
            .delete_session(&session_key, agent_id.as_deref())
            .js()
    }

    /// True once `close()` has run; the cheapest call into the addon.
    #[napi(getter)]
    pub fn is_closed(&self) -> bool {
        self.store.is_closed()
    }

    /// Closes the store once the Promise API's calls made before have run. Idempotent.
    #[napi]
    pub fn close(&self) {
        self.writer.finish();
        self.store.close();
    }
}
