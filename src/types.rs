//! The plain objects crossing the boundary, generated into the internal `index.d.ts`. The
//! public shapes are written once, in `lib/types.ts`; these are the typed arguments and the
//! few results that are not packed (`packed.rs`).

use napi::bindgen_prelude::FunctionRef;
use napi::threadsafe_function::UnknownReturnValue;
use napi_derive::napi;
use session_awareness_core as core;

/// The options of the native store, checked and completed by the TypeScript layer.
#[napi(object, object_to_js = false)]
pub struct NativeOptions {
    /// Events and cursors older than this are pruned; an integer in [1, 9e12].
    pub retention_ms: Option<f64>,
    /// At most this many events are kept; a positive safe integer.
    pub max_events: Option<f64>,
    /// How long a write waits for another process's lock; [0, 2^31 - 1].
    pub busy_timeout_ms: Option<f64>,
    /// Called on the JS thread to wake a main-like watcher.
    #[napi(ts_type = "(req: WakeRequest) => void")]
    pub wake: Option<FunctionRef<WakeRequest, UnknownReturnValue>>,
    /// How long a due wake waits to coalesce with others; [0, 60000].
    pub wake_coalesce_ms: Option<f64>,
    /// Receives every best-effort failure.
    #[napi(ts_type = "(err: NativeError) => void")]
    pub on_error: FunctionRef<NativeError, UnknownReturnValue>,
    /// The clock, in epoch ms; default the system clock.
    #[napi(ts_type = "() => number")]
    pub clock: Option<FunctionRef<(), f64>>,
    /// How often other processes' notices are looked for; [0, 60000], 0 is off.
    pub sync_interval_ms: Option<f64>,
    /// Watchers served from the start.
    pub serve_watchers: Option<Vec<String>>,
}

/// A best-effort failure as the addon reports it: the stable code and the message.
#[napi(object, object_from_js = false)]
pub struct NativeError {
    /// The stable code (`ERR_DB`, `ERR_WAKE_CALLBACK`, …).
    pub code: String,
    /// The message, with its source chain.
    pub message: String,
}

/// What a prune removed.
#[napi(object, object_from_js = false)]
pub struct PruneReport {
    /// Events deleted.
    pub events_deleted: i64,
    /// Cursors expired.
    pub cursors_deleted: i64,
}

impl From<core::PruneReport> for PruneReport {
    fn from(r: core::PruneReport) -> Self {
        PruneReport {
            events_deleted: r.events_deleted as i64,
            cursors_deleted: r.cursors_deleted as i64,
        }
    }
}

/// The result of `sweep`.
#[napi(object, object_from_js = false)]
pub struct SweepReport {
    /// Cursors whose notice is pending after the sweep.
    pub notices: i64,
    /// The prune that followed.
    pub prune: PruneReport,
}

/// The request passed to the `wake` callback.
#[napi(object, object_from_js = false)]
pub struct WakeRequest {
    /// Always `session-state`.
    #[napi(ts_type = "'session-state'")]
    pub source: String,
    /// Always `immediate`.
    #[napi(ts_type = "'immediate'")]
    pub intent: String,
    /// `session-state:<target>`: the target whose notice made the wake due.
    pub reason: String,
    /// The watcher session to wake.
    pub session_key: String,
}

/// A pending notice, as `inspectDatabase` reports it.
#[napi(object, object_from_js = false)]
pub struct Notice {
    /// The watcher session.
    pub watcher_key: String,
    /// The session that changed.
    pub target_key: String,
    /// The version to reconcile from.
    pub changes_since: i64,
    /// The notice text.
    pub text: String,
    /// The notice's context key.
    pub context_key: String,
}

impl From<core::Notice> for Notice {
    fn from(n: core::Notice) -> Self {
        Notice {
            watcher_key: n.watcher_key,
            target_key: n.target_key,
            changes_since: n.changes_since,
            text: n.text,
            context_key: n.context_key,
        }
    }
}
