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
    /// The event kinds that notify; default the three notify kinds.
    pub notify_kinds: Option<Vec<String>>,
    /// A spawn's seed makes an existing cursor `explicit`; default false (kept).
    pub seed_resets_provenance: Option<bool>,
    /// Keep every notice entering the queue for `takeNotices` (the listener's outbox).
    pub notice_outbox: Option<bool>,
    /// A PostgreSQL store's schema; default `session_awareness`.
    pub schema: Option<String>,
    /// A PostgreSQL store's connect timeout (ms); default 10,000.
    pub connect_timeout_ms: Option<f64>,
    /// A PostgreSQL store's statement timeout (ms); default 30,000.
    pub statement_timeout_ms: Option<f64>,
    /// A PostgreSQL store's reconnect window (ms); default 30,000.
    pub reconnect_window_ms: Option<f64>,
    /// A PostgreSQL store's cap on the calls waiting for the server; default 10,000.
    pub max_waiting_calls: Option<f64>,
    /// A PostgreSQL store's host name (the host that scans the transcripts it adopts);
    /// default the machine's hostname.
    pub host_name: Option<String>,
    /// The most memory a SQLite store keeps for its reads (bytes); [0, 2^30], 0 is off.
    pub read_cache_bytes: Option<f64>,
}

/// A best-effort failure as the addon reports it: the stable code and the message.
#[napi(object, object_from_js = false)]
pub struct NativeError {
    /// The stable code (`ERR_DB`, `ERR_WAKE_CALLBACK`, …).
    pub code: String,
    /// The message, with its source chain.
    pub message: String,
    /// The background task that failed (`prune`, `poll`, …; see `core::Task`), when one did.
    pub task: Option<String>,
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

/// A notice as it entered the queue, for the host's notice listener.
#[napi(object, object_from_js = false)]
pub struct QueuedNotice {
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
    /// The cursor's watcher scope, if any.
    pub scope: Option<String>,
    /// The store wakes the watcher for it.
    pub wake: bool,
    /// An `ambient-group` cursor: the notice waits for the watcher's turn.
    pub queue_only: bool,
}

impl From<core::QueuedNotice> for QueuedNotice {
    fn from(q: core::QueuedNotice) -> Self {
        let n = q.notice;
        QueuedNotice {
            watcher_key: n.watcher_key,
            target_key: n.target_key,
            changes_since: n.changes_since,
            text: n.text,
            context_key: n.context_key,
            scope: n.scope,
            wake: q.wake,
            queue_only: q.queue_only,
        }
    }
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

/// One cursor row as stored, as `cursorRows` returns it.
#[napi(object, object_from_js = false)]
pub struct CursorRow {
    /// The watching session.
    pub watcher_key: String,
    /// The watched session.
    pub target_key: String,
    /// L: the acknowledged position.
    pub last_seen: i64,
    /// N: the frozen notified position.
    pub notified: i64,
    /// M: the latest material event.
    pub material: i64,
    /// The provenance, as stored.
    pub provenance: String,
    /// The watcher's scope, when the row has one.
    pub scope: Option<String>,
    /// Last write of the row (epoch ms).
    pub updated_at: i64,
}

impl From<core::CursorRow> for CursorRow {
    fn from(r: core::CursorRow) -> Self {
        CursorRow {
            watcher_key: r.watcher,
            target_key: r.target,
            last_seen: r.last_seen,
            notified: r.notified,
            material: r.material,
            provenance: r.provenance,
            scope: r.scope,
            updated_at: r.updated_at,
        }
    }
}

/// The fields of each row shape the core defines, in the JavaScript API's spelling, in order:
/// what the tests check the TypeScript types against.
#[napi(object, object_from_js = false)]
pub struct RowShapes {
    /// A cursor row (`cursorRows`).
    pub cursor_row: Vec<String>,
    /// A link row of OpenClaw's columns (`linkRow`, `watchedLinkRows`, `upsertLinkRow`).
    pub link_row: Vec<String>,
    /// A cursor as `inspectDatabase` shows it.
    pub inspected_cursor: Vec<String>,
}

/// The core's row shapes ([`RowShapes`]).
#[napi]
pub fn row_shapes() -> RowShapes {
    let own = |f: &[&str]| f.iter().map(|s| (*s).to_owned()).collect();
    RowShapes {
        cursor_row: own(core::CursorRow::FIELDS),
        link_row: own(session_awareness_core::upstream::LinkRow::FIELDS),
        inspected_cursor: own(&session_awareness_core::inspect::InspectedCursor::fields()),
    }
}
