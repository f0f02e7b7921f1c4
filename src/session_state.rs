//! `SessionState`: the JS class over the core [`Store`].

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use napi::bindgen_prelude::{Env, Function, FunctionRef, Unknown};
use napi::threadsafe_function::{
    ThreadsafeFunction, ThreadsafeFunctionCallMode, UnknownReturnValue,
};
use napi::{Result, Status};
use napi_derive::napi;
use session_awareness_core::{
    self as core, store::system_now, Error as CoreError, ErrorSink, Hooks, Options, Provenance,
    Store, VersionRef, WakeSink,
};

use crate::convert;
use crate::error::{coded, to_js, Code, IntoJs, JsResult};
use crate::js_out::{self, Builders, Js};
use crate::types::*;

type ErrorCallback = FunctionRef<napi::Error<Code>, UnknownReturnValue>;
type WakeTsfn =
    ThreadsafeFunction<WakeRequest, UnknownReturnValue, WakeRequest, Status, false, true>;
type ErrorTsfn = ThreadsafeFunction<
    (String, String),
    UnknownReturnValue,
    napi::Error<Code>,
    Status,
    false,
    true,
>;

/// Options of the `SessionState` constructor. Every field is optional.
#[napi(object, object_to_js = false)]
// Only its type is used: the constructor reads the object member by member (convert.rs).
#[allow(dead_code)]
pub struct SessionStateOptions {
    /// Events and cursors older than this are pruned. Default 30 days; an integer in [1, 9e12].
    pub retention_ms: Option<f64>,
    /// At most this many events are kept. Default 50,000; a positive safe integer.
    pub max_events: Option<f64>,
    /// How long a write waits for another process's lock. Default 30,000; [0, 2^31 - 1].
    pub busy_timeout_ms: Option<f64>,
    /// Called on the JS thread, after the call that made it due, to wake a main-like watcher.
    #[napi(ts_type = "(req: WakeRequest) => void")]
    pub wake: Option<FunctionRef<WakeRequest, UnknownReturnValue>>,
    /// How long a due wake waits to coalesce with others for the same watcher. Default 250; [0, 60000].
    pub wake_coalesce_ms: Option<f64>,
    /// Receives best-effort failures (a `record` that returned null, a throwing `wake`, a
    /// background prune). Default: one line on stderr.
    #[napi(ts_type = "(err: Error & { code: string }) => void")]
    pub on_error: Option<ErrorCallback>,
    /// The clock, in epoch ms. Default: the system clock. Tests use it to travel in time.
    #[napi(ts_type = "() => number")]
    pub clock: Option<FunctionRef<(), f64>>,
    /// `record` throws instead of reporting. For tests and development.
    pub strict: Option<bool>,
    /// How often, in ms, this process looks for notices opened by other processes sharing the
    /// database file: a poll of `PRAGMA data_version`, nearly free when nothing changed.
    /// Default 100; an integer in [0, 60000]; 0 turns cross-process delivery off.
    pub sync_interval_ms: Option<f64>,
    /// Watchers this process serves from the start: notices opened for them by other
    /// processes reach this process's `drain`/`peek` and `wake`. A watcher is also served
    /// once this process drains, peeks or acknowledges for it, watches for it, or names it in
    /// a record's `watchers`. Bare keys are ignored; an empty key is `ERR_INVALID_ARG`.
    pub serve_watchers: Option<Vec<String>>,
}

/// Best-effort failures reach the host here: synchronously when we are on the JS thread,
/// through a weak threadsafe function from background threads.
pub(crate) struct Reporter {
    on_error: Option<ErrorCallback>,
    background: Option<ErrorTsfn>,
}

fn stderr_line(code: &str, message: &str) {
    eprintln!("session-awareness: {code}: {message}");
}

impl Reporter {
    pub(crate) fn report_sync(&self, env: &Env, code: &str, message: String) {
        let Some(cb) = &self.on_error else {
            stderr_line(code, &message);
            return;
        };
        let err = coded(code, message.clone());
        // A throwing onError must not turn a best-effort report into a throw.
        let called = cb.borrow_back(env).and_then(|f| f.call(err));
        if called.is_err() {
            stderr_line(code, &message);
        }
    }
}

impl ErrorSink for Reporter {
    fn report(&self, error: CoreError) {
        let (code, message) = (error.code().to_owned(), to_js(error).reason.clone());
        match &self.background {
            Some(tsfn) => {
                let fallback = (code.clone(), message.clone());
                let status = tsfn.call_with_return_value(
                    (code, message),
                    ThreadsafeFunctionCallMode::NonBlocking,
                    move |r, _| {
                        if r.is_err() {
                            stderr_line(&fallback.0, &fallback.1);
                        }
                        Ok(())
                    },
                );
                let _ = status;
            }
            None => stderr_line(&code, &message),
        }
    }
}

/// Wakes go to the host's callback on the JS thread; a throw is reported, never fatal.
struct JsWake {
    tsfn: WakeTsfn,
    pub(crate) reporter: Arc<Reporter>,
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
                    reporter.report_sync(&env, "ERR_WAKE_CALLBACK", message);
                }
                Ok(())
            },
        );
    }
}

/// Session state awareness over one SQLite file: a durable signal log, watch cursors with one
/// coalesced stale-state notice per (watcher, target), and `changesSince` reconciliation.
#[napi]
pub struct SessionState {
    pub(crate) store: Store,
    pub(crate) reporter: Arc<Reporter>,
    clock: Option<FunctionRef<(), f64>>,
    // JS clock minus system clock at the last JS read, so background work follows clock travel.
    clock_offset: Arc<AtomicI64>,
    pub(crate) strict: bool,
    builders: Builders,
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

fn provenance(options: Option<Unknown<'_>>) -> JsResult<Provenance> {
    let p = match convert::options(options, "options").js()? {
        Some(o) => convert::opt_string(&o, "provenance").js()?,
        None => None,
    };
    p.map_or(Ok(Provenance::Explicit), |p| Provenance::parse(&p).js())
}

fn string(v: Unknown<'_>, name: &str) -> JsResult<String> {
    convert::string(v, name).js()
}

fn opt_string(v: Option<Unknown<'_>>, name: &str) -> JsResult<Option<String>> {
    convert::opt_string_arg(v, name).js()
}

/// The constructor's options as read from JS.
struct Parsed {
    retention_ms: Option<f64>,
    max_events: Option<f64>,
    busy_timeout_ms: Option<f64>,
    wake_coalesce_ms: Option<f64>,
    wake: Option<FunctionRef<WakeRequest, UnknownReturnValue>>,
    on_error: Option<ErrorCallback>,
    clock: Option<FunctionRef<(), f64>>,
    strict: Option<bool>,
    sync_interval_ms: Option<f64>,
    serve_watchers: Option<Vec<String>>,
}

fn parse_options(options: Option<Unknown<'_>>) -> JsResult<Parsed> {
    let o = convert::options(options, "options").js()?;
    let Some(o) = o else {
        return Ok(Parsed {
            retention_ms: None,
            max_events: None,
            busy_timeout_ms: None,
            wake_coalesce_ms: None,
            wake: None,
            on_error: None,
            clock: None,
            strict: None,
            sync_interval_ms: None,
            serve_watchers: None,
        });
    };
    Ok(Parsed {
        retention_ms: convert::opt_number(&o, "retentionMs").js()?,
        max_events: convert::opt_number(&o, "maxEvents").js()?,
        busy_timeout_ms: convert::opt_number(&o, "busyTimeoutMs").js()?,
        wake_coalesce_ms: convert::opt_number(&o, "wakeCoalesceMs").js()?,
        wake: convert::opt_function_ref(&o, "wake").js()?,
        on_error: convert::opt_function_ref(&o, "onError").js()?,
        clock: convert::opt_function_ref(&o, "clock").js()?,
        strict: convert::opt_bool(&o, "strict").js()?,
        sync_interval_ms: convert::opt_number(&o, "syncIntervalMs").js()?,
        serve_watchers: Some(convert::opt_string_array(&o, "serveWatchers").js()?),
    })
}

#[napi]
impl SessionState {
    /// Opens (creating if needed) the store at `path`: a SQLite file of its own (for a
    /// gateway, `<stateDir>/state/session-state.sqlite`). Other tables in it and its
    /// `user_version` are left alone. A new file is created with mode 0600 and a missing
    /// directory with mode 0700. Opening never prunes. Throws `ERR_INVALID_ARG` for a bad
    /// option, `ERR_DB` when the file cannot be opened as a database, and `ERR_FILE_SHARED`
    /// when another SQLite library of this process (`node:sqlite`, better-sqlite3) has the
    /// file open; a handle that appears later makes every call that touches the file fail
    /// with `ERR_FILE_SHARED` (`record`: null and `onError`) until the store is reopened.
    #[napi(
        constructor,
        ts_args_type = "path: string, options?: SessionStateOptions | undefined | null"
    )]
    pub fn new(env: Env, path: Unknown<'_>, options: Option<Unknown<'_>>) -> Result<Self, Code> {
        let path = string(path, "path")?;
        let o = parse_options(options)?;
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
            busy_timeout_ms: opt_u32(o.busy_timeout_ms, "busyTimeoutMs")?
                .unwrap_or(d.busy_timeout_ms),
            wake_coalesce_ms: opt_u32(o.wake_coalesce_ms, "wakeCoalesceMs")?
                .unwrap_or(d.wake_coalesce_ms),
            sync_interval_ms: opt_u32(o.sync_interval_ms, "syncIntervalMs")?
                .unwrap_or(d.sync_interval_ms),
        };
        opts.validate().js()?;
        let serve = o.serve_watchers.unwrap_or_default();
        for w in &serve {
            core::keys::SessionKey::parse(w).js()?;
        }
        let background = match &o.on_error {
            Some(cb) => Some(
                cb.borrow_back(&env)
                    .and_then(|f| {
                        f.build_threadsafe_function::<(String, String)>()
                            .callee_handled::<false>()
                            .weak::<true>()
                            .build_callback(|ctx| Ok(coded(&ctx.value.0, ctx.value.1)))
                    })
                    .js()?,
            ),
            None => None,
        };
        let reporter = Arc::new(Reporter {
            on_error: o.on_error,
            background,
        });
        let wake: Option<Arc<dyn WakeSink>> = match &o.wake {
            Some(cb) => {
                let f: Function<'_, WakeRequest, UnknownReturnValue> = cb.borrow_back(&env).js()?;
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
            errors: Some(Arc::clone(&reporter) as Arc<dyn ErrorSink>),
            clock: Some(Arc::new(move || {
                system_now() + offset.load(Ordering::Relaxed)
            })),
        };
        let store = Store::open(&path, opts, hooks).js()?;
        for w in &serve {
            store.serve(w).js()?;
        }
        let builders = Builders::new(&env).js()?;
        Ok(SessionState {
            builders,
            store,
            reporter,
            clock: o.clock,
            clock_offset,
            strict: o.strict.unwrap_or(false),
        })
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

    /// Records one event (§6) in one write transaction: insert, head, cursors; then queues the
    /// notices and schedules the wakes. Best-effort: never throws (unless `strict`); returns
    /// null when nothing was recorded, with exactly one `onError` call giving the reason
    /// (`ERR_INVALID_ARG`, `ERR_CLOSED`, `ERR_DB`). With `onlyIfWatched` and nobody watching it
    /// returns null silently. A repeated `dedupeKey` returns the first row and changes nothing.
    #[napi(
        ts_args_type = "input: RecordInput",
        ts_return_type = "StateEvent | null"
    )]
    pub fn record(&self, env: Env, input: Unknown<'_>) -> Result<Option<Js>, Code> {
        let result = self
            .now(&env)
            .and_then(|now| Ok((now, convert::record_input(input)?)))
            .and_then(|(now, input)| self.store.record(input, now));
        self.finish_record(&env, result)
    }

    /// The notice queue's two signal words ([`session_awareness_core::queue::QueueSignal`]) as
    /// an `Int32Array` over the addon's own memory, for the JS side of `drain`
    /// (`js_out::INSTALL_JS`); null where Node-API refuses external buffers, and `drain`
    /// then always calls the addon. Removed from the prototype like `recordFields`.
    #[napi(js_name = "drainSignal", skip_typescript)]
    pub fn drain_signal(&self, env: Env) -> Result<Option<Js>, Code> {
        js_out::signal_words(&env, self.store.queue_signal()).js()
    }

    /// `record` with its input's fields already read, in the order of
    /// `convert::RECORD_FIELDS`: the JS side of `record` (`js_out::INSTALL_JS`) calls it and
    /// removes it from the prototype, so it is not part of the API. Same contract as `record`;
    /// the event comes back packed into one string.
    #[napi(js_name = "recordFields", skip_typescript)]
    #[allow(clippy::too_many_arguments)]
    pub fn record_fields(
        &self,
        env: Env,
        session_key: Unknown<'_>,
        agent_id: Unknown<'_>,
        session_id: Unknown<'_>,
        kind: Unknown<'_>,
        actor_type: Unknown<'_>,
        actor_id: Unknown<'_>,
        run_id: Unknown<'_>,
        summary: Unknown<'_>,
        payload: Unknown<'_>,
        occurred_at: Unknown<'_>,
        dedupe_key: Unknown<'_>,
        watchers: Unknown<'_>,
        only_if_watched: Unknown<'_>,
    ) -> Result<Option<Js>, Code> {
        let values = [
            session_key,
            agent_id,
            session_id,
            kind,
            actor_type,
            actor_id,
            run_id,
            summary,
            payload,
            occurred_at,
            dedupe_key,
            watchers,
            only_if_watched,
        ]
        .map(|v| napi::JsValue::value(&v).value);
        let result = self
            .now(&env)
            .and_then(|now| Ok((now, convert::record_input_values(env.raw(), &values)?)))
            .and_then(|(now, input)| self.store.record(input, now));
        self.finish_record(&env, result)
    }

    /// The end of both `record` paths: the event packed for the JS side of `record`, or the
    /// failure thrown (`strict`) or reported.
    fn finish_record(
        &self,
        env: &Env,
        result: session_awareness_core::Result<Option<core::StateEvent>>,
    ) -> Result<Option<Js>, Code> {
        match result {
            Ok(event) => event
                .map(|e| self.builders.event_packed(env, &e))
                .transpose()
                .js(),
            Err(e) if self.strict => Err(to_js(e)),
            Err(e) => {
                let js = to_js(e);
                self.reporter
                    .report_sync(env, js.status.as_ref(), js.reason.clone());
                Ok(None)
            }
        }
    }

    /// Registers `watcherKey` as a watcher of `targetKey`, seeded at the target's current
    /// version (earlier history never notifies). An existing cursor is kept (an
    /// `ambient-group` one is promoted to `explicit`, never the reverse) and its expiry
    /// refreshed. Returns false for a bare watcher or target, or watcher == target.
    #[napi(
        ts_args_type = "watcherKey: string, targetKey: string, options?: WatchOptions | undefined | null"
    )]
    pub fn watch(
        &self,
        env: Env,
        watcher_key: Unknown<'_>,
        target_key: Unknown<'_>,
        options: Option<Unknown<'_>>,
    ) -> Result<bool, Code> {
        let watcher_key = string(watcher_key, "watcherKey")?;
        let target_key = string(target_key, "targetKey")?;
        let p = provenance(options)?;
        let now = self.now(&env).js()?;
        self.store.watch(&watcher_key, &target_key, p, now).js()
    }

    /// Removes the cursor and its pending notice. True if a cursor was removed.
    #[napi(ts_args_type = "watcherKey: string, targetKey: string")]
    pub fn unwatch(&self, watcher_key: Unknown<'_>, target_key: Unknown<'_>) -> Result<bool, Code> {
        let watcher_key = string(watcher_key, "watcherKey")?;
        let target_key = string(target_key, "targetKey")?;
        self.store.unwatch(&watcher_key, &target_key).js()
    }

    /// The session's state version: the largest sequence recorded for it, 0 when none.
    #[napi(ts_args_type = "sessionKey: string, agentId?: string | undefined | null")]
    pub fn state_version(
        &self,
        session_key: Unknown<'_>,
        agent_id: Option<Unknown<'_>>,
    ) -> Result<i64, Code> {
        let session_key = string(session_key, "sessionKey")?;
        let agent_id = opt_string(agent_id, "agentId")?;
        self.store
            .state_version(&session_key, agent_id.as_deref())
            .js()
    }

    /// The state versions of many sessions, in the order given; sessions at 0 are left out.
    #[napi(
        ts_args_type = "refs: Array<SessionRef>",
        ts_return_type = "Array<SessionVersion>"
    )]
    pub fn state_versions(&self, env: Env, refs: Unknown<'_>) -> Result<Js, Code> {
        let refs: Vec<VersionRef> = convert::session_refs(refs, "refs")
            .js()?
            .into_iter()
            .map(|(session_key, agent_id)| VersionRef {
                session_key,
                agent_id,
            })
            .collect();
        let rows = self.store.state_versions(&refs).js()?;
        self.builders.versions(&env, &rows).js()
    }

    /// The exact typed delta of a session after version `after` (a non-negative safe
    /// integer), ascending, at most `limit` (clamped to [1, 200]). `historyGap` is true when
    /// `after` predates retained history. Moves no cursor.
    #[napi(
        ts_args_type = "sessionKey: string, after: number, options?: ChangesSinceOptions | undefined | null",
        ts_return_type = "ChangesSince"
    )]
    pub fn changes_since(
        &self,
        env: Env,
        session_key: Unknown<'_>,
        after: Unknown<'_>,
        options: Option<Unknown<'_>>,
    ) -> Result<Js, Code> {
        let session_key = string(session_key, "sessionKey")?;
        let after = convert::number(after, "after").js()?;
        let (agent, limit) = match convert::options(options, "options").js()? {
            Some(o) => (
                convert::opt_string(&o, "agentId").js()?,
                convert::opt_number(&o, "limit").js()?,
            ),
            None => (None, None),
        };
        let changes = self
            .store
            .changes_since(&session_key, after, agent.as_deref(), limit)
            .js()?;
        self.builders.changes(&env, &changes).js()
    }

    /// The watcher's pending notices in queue order, acknowledged: the turn consumes them. If
    /// material events arrived since a notice was queued, exactly one fresh notice reopens
    /// with `changesSince` = the old notified position. With nothing pending it runs no SQL.
    #[napi(ts_args_type = "watcherKey: string", ts_return_type = "Array<Notice>")]
    pub fn drain(&self, env: Env, watcher_key: Unknown<'_>) -> Result<Js, Code> {
        let key = convert::Key::read(watcher_key, "watcherKey").js()?;
        let watcher_key = key.as_str();
        if !self.store.has_pending(watcher_key).js()? {
            return js_out::empty_array(&env).js();
        }
        let now = self.now(&env).js()?;
        let notices = self.store.drain(watcher_key, now).js()?;
        self.builders.notices(&env, watcher_key, &notices).js()
    }

    /// The watcher's pending notices in queue order, nothing acknowledged.
    #[napi(ts_args_type = "watcherKey: string", ts_return_type = "Array<Notice>")]
    pub fn peek(&self, env: Env, watcher_key: Unknown<'_>) -> Result<Js, Code> {
        let watcher_key = string(watcher_key, "watcherKey")?;
        let notices = self.store.peek(&watcher_key).js()?;
        self.builders.notices(&env, &watcher_key, &notices).js()
    }

    /// Acknowledges the watcher's pending notices on `targetKeys`, for hosts that route
    /// notices through their own queue. Returns how many pending notices were acknowledged
    /// (a repeated target counts once).
    #[napi(ts_args_type = "watcherKey: string, targetKeys: Array<string>")]
    pub fn acknowledge(
        &self,
        env: Env,
        watcher_key: Unknown<'_>,
        target_keys: Unknown<'_>,
    ) -> Result<i64, Code> {
        let watcher_key = string(watcher_key, "watcherKey")?;
        let target_keys = convert::string_array(target_keys, "targetKeys").js()?;
        let now = self.now(&env).js()?;
        Ok(self
            .store
            .acknowledge(&watcher_key, &target_keys, now)
            .js()? as i64)
    }

    /// Gateway start: re-freezes every cursor with unacknowledged material history whose
    /// watcher still exists and re-queues its notice (one already queued is neither
    /// duplicated nor woken again), then prunes.
    #[napi(ts_args_type = "options?: { watcherExists?: (watcherKey: string) => boolean }")]
    pub fn sweep(&self, env: Env, options: Option<Unknown<'_>>) -> Result<SweepReport, Code> {
        let exists = match convert::options(options, "options").js()? {
            Some(o) => convert::opt_function::<String, bool>(&o, "watcherExists").js()?,
            None => None,
        };
        let now = self.now(&env).js()?;
        let report = match exists {
            None => self.store.sweep(None, now),
            Some(f) => {
                let mut failure: Option<napi::Error> = None;
                let mut ask = |w: &str| match f.call(w.to_owned()) {
                    Ok(b) => b,
                    Err(e) => {
                        failure.get_or_insert(e);
                        false
                    }
                };
                let r = self.store.sweep(Some(&mut ask), now);
                if let Some(e) = failure {
                    return Err(coded(
                        "ERR_INVALID_ARG",
                        format!("watcherExists failed: {}", e.reason),
                    ));
                }
                r
            }
        }
        .js()?;
        Ok(SweepReport {
            notices: report.notices as i64,
            prune: report.prune.into(),
        })
    }

    /// Prunes now: events older than `retentionMs`, then all but the newest `maxEvents`
    /// (watermarks raised first, heads kept), and cursors not updated within `retentionMs`.
    #[napi]
    pub fn prune(&self, env: Env) -> Result<PruneReport, Code> {
        let now = self.now(&env).js()?;
        Ok(self.store.prune(now).js()?.into())
    }

    /// The watcher session was reset: its cursors and pending notices go; its history stays.
    #[napi(ts_args_type = "sessionKey: string")]
    pub fn reset_session(&self, session_key: Unknown<'_>) -> Result<(), Code> {
        let session_key = string(session_key, "sessionKey")?;
        self.store.reset_session(&session_key).js()
    }

    /// Deletes the session's events and head for the agent (default: the key's own, else
    /// `main`). For its own agent also every cursor where it is watcher or target, their
    /// pending notices, and its upstream link.
    #[napi(ts_args_type = "sessionKey: string, agentId?: string | undefined | null")]
    pub fn delete_session(
        &self,
        session_key: Unknown<'_>,
        agent_id: Option<Unknown<'_>>,
    ) -> Result<(), Code> {
        let session_key = string(session_key, "sessionKey")?;
        let agent_id = opt_string(agent_id, "agentId")?;
        self.store
            .delete_session(&session_key, agent_id.as_deref())
            .js()
    }

    /// True once `close()` has run. It does nothing else, which also makes it the cheapest
    /// call into the addon (the benchmarks compare `drain` with nothing pending against it).
    #[napi(getter)]
    pub fn is_closed(&self) -> bool {
        self.store.is_closed()
    }

    /// Closes the store, cancels scheduled wakes and stops the poll for other processes'
    /// notices. Idempotent; later calls throw
    /// `ERR_CLOSED` (`record`: null and `onError`).
    #[napi]
    pub fn close(&self) {
        self.store.close();
    }
}

/// Options of `sweep`.
#[napi(object, object_to_js = false)]
// Only its type is used: `sweep` reads the object member by member (convert.rs).
#[allow(dead_code)]
pub struct SweepOptions {
    /// Asked once per watcher with unacknowledged history; false skips it. Default: all exist.
    #[napi(ts_type = "(watcherKey: string) => boolean")]
    pub watcher_exists: Option<FunctionRef<String, bool>>,
}
