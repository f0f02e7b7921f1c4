//! The plain objects crossing the boundary, generated into `index.d.ts`.

use napi_derive::napi;
use serde_json::Value;
use session_awareness_core as core;

/// The kind of a state event. `human_direct_message`, `goal_changed` and `upstream_missing`
/// notify watchers; `child_spawned` seeds the producer-named watchers' cursors; the rest are
/// log only.
#[napi(string_enum)]
pub enum EventKind {
    #[napi(value = "human_direct_message")]
    HumanDirectMessage,
    #[napi(value = "goal_changed")]
    GoalChanged,
    #[napi(value = "upstream_missing")]
    UpstreamMissing,
    #[napi(value = "child_spawned")]
    ChildSpawned,
    #[napi(value = "run_completed")]
    RunCompleted,
    #[napi(value = "run_failed")]
    RunFailed,
    #[napi(value = "compacted")]
    Compacted,
    #[napi(value = "adopted")]
    Adopted,
    #[napi(value = "created")]
    Created,
}

impl From<core::EventKind> for EventKind {
    fn from(k: core::EventKind) -> Self {
        use core::EventKind as K;
        match k {
            K::HumanDirectMessage => EventKind::HumanDirectMessage,
            K::GoalChanged => EventKind::GoalChanged,
            K::UpstreamMissing => EventKind::UpstreamMissing,
            K::ChildSpawned => EventKind::ChildSpawned,
            K::RunCompleted => EventKind::RunCompleted,
            K::RunFailed => EventKind::RunFailed,
            K::Compacted => EventKind::Compacted,
            K::Adopted => EventKind::Adopted,
            K::Created => EventKind::Created,
        }
    }
}

/// Who caused an event.
#[napi(string_enum)]
pub enum ActorType {
    #[napi(value = "human")]
    Human,
    #[napi(value = "agent")]
    Agent,
    #[napi(value = "system")]
    System,
}

impl From<core::ActorType> for ActorType {
    fn from(a: core::ActorType) -> Self {
        match a {
            core::ActorType::Human => ActorType::Human,
            core::ActorType::Agent => ActorType::Agent,
            core::ActorType::System => ActorType::System,
        }
    }
}

/// Where a cursor came from: `explicit` watchers that are main-like are woken;
/// `ambient-group` cursors are queue-only.
#[napi(string_enum)]
pub enum Provenance {
    #[napi(value = "explicit")]
    Explicit,
    #[napi(value = "ambient-group")]
    AmbientGroup,
}

/// One event of the signal log. Absent optional fields are omitted, never null.
#[napi(object)]
pub struct StateEvent {
    /// The global sequence (unique, increasing, never reused).
    pub sequence: i64,
    /// The session it belongs to.
    pub session_key: String,
    /// The agent it belongs to.
    pub agent_id: String,
    /// What happened.
    pub kind: EventKind,
    /// Who caused it.
    pub actor_type: ActorType,
    /// The causing session or person.
    pub actor_id: Option<String>,
    /// The run that produced it.
    pub run_id: Option<String>,
    /// The session id of the session.
    pub session_id: Option<String>,
    /// When it happened (epoch ms).
    pub occurred_at: i64,
    /// One line of at most 240 characters.
    pub summary: String,
    /// Metadata, if any.
    #[napi(ts_type = "Record<string, unknown>")]
    pub payload: Option<Value>,
}

impl From<core::StateEvent> for StateEvent {
    fn from(e: core::StateEvent) -> Self {
        StateEvent {
            sequence: e.sequence,
            session_key: e.session_key,
            agent_id: e.agent_id,
            kind: e.kind.into(),
            actor_type: e.actor_type.into(),
            actor_id: e.actor_id,
            run_id: e.run_id,
            session_id: e.session_id,
            occurred_at: e.occurred_at,
            summary: e.summary,
            payload: e.payload_json.and_then(|j| serde_json::from_str(&j).ok()),
        }
    }
}

/// A pending stale-state notice for a watcher.
#[napi(object)]
pub struct Notice {
    /// The watcher session.
    pub watcher_key: String,
    /// The session that changed.
    pub target_key: String,
    /// The version to reconcile from: pass it to `changesSince`.
    pub changes_since: i64,
    /// The one-line, byte-stable notice text.
    pub text: String,
    /// `session-state:` + hex of the target key, for hosts that dedupe on a context key.
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

/// The events of one session after a version.
#[napi(object, object_from_js = false)]
// Only its type is used: `changesSince` (like `stateVersions`, `drain` and `peek`) builds
// its objects directly (see js_out.rs).
#[allow(dead_code)]
pub struct StateChanges {
    /// Events with `sequence > after`, ascending, at most `limit`.
    pub events: Vec<StateEvent>,
    /// True when more events exist past `limit`.
    pub truncated: bool,
    /// The smallest retained sequence of the session, else head + 1 when head > 0, else 0.
    pub earliest_available_sequence: i64,
    /// True when `after` predates retained history: refresh the whole session state instead.
    pub history_gap: bool,
}

/// The result of `changesSince`.
#[napi(object, object_from_js = false)]
// Only its type is used, as for `StateChanges`.
#[allow(dead_code)]
pub struct ChangesSince {
    /// The session's state version.
    pub state_version: i64,
    /// The delta.
    pub state_changes: StateChanges,
}

/// What a prune removed.
#[napi(object)]
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
#[napi(object)]
pub struct SweepReport {
    /// Cursors whose notice is pending after the sweep.
    pub notices: i64,
    /// The prune that followed.
    pub prune: PruneReport,
}

/// A session named for `stateVersions`.
#[napi(object, object_to_js = false)]
// Only its type is used: `stateVersions` reads the objects member by member (convert.rs).
#[allow(dead_code)]
pub struct SessionRef {
    /// The session key.
    pub session_key: String,
    /// The agent; defaults to the key's own, else `main`.
    pub agent_id: Option<String>,
}

/// One entry of `stateVersions`.
#[napi(object, object_from_js = false)]
// Only its type is used, as for `StateChanges`.
#[allow(dead_code)]
pub struct SessionVersion {
    /// The session key.
    pub session_key: String,
    /// The agent.
    pub agent_id: String,
    /// Its state version (always > 0 here).
    pub state_version: i64,
}

/// The request passed to the `wake` callback.
#[napi(object)]
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

/// Options of `changesSince`.
#[napi(object, object_to_js = false)]
// Only its type is used: the method reads the object member by member (convert.rs).
#[allow(dead_code)]
pub struct ChangesSinceOptions {
    /// The agent of the session; defaults to the key's own, else `main`.
    pub agent_id: Option<String>,
    /// At most this many events: floored and clamped to [1, 200]; default 200.
    pub limit: Option<f64>,
}

/// Options of `watch`.
#[napi(object, object_to_js = false)]
// Only its type is used: the method reads the object member by member (convert.rs).
#[allow(dead_code)]
pub struct WatchOptions {
    /// `explicit` (default) or `ambient-group`.
    #[napi(ts_type = "Provenance")]
    pub provenance: Option<String>,
}

/// What `record` stores (§5). Read field by field so that a malformed input is reported
/// through `onError` instead of thrown.
#[napi(object, object_to_js = false)]
// Only its type is used: `record` reads the object field by field so it never throws.
#[allow(dead_code)]
pub struct RecordInput {
    /// The session the event belongs to (non-empty).
    pub session_key: String,
    /// The agent; defaults to the key's own, else `main`. For a qualified key it must equal
    /// the key's agent.
    pub agent_id: Option<String>,
    /// The session id (transcript), if known.
    pub session_id: Option<String>,
    /// What happened.
    pub kind: EventKind,
    /// Who caused it.
    pub actor_type: ActorType,
    /// The causing session: a watcher equal to it is not notified (self-suppression).
    pub actor_id: Option<String>,
    /// The run that produced it.
    pub run_id: Option<String>,
    /// One line: CRLF, CR, LF, U+2028 and U+2029 each become one space; the first 240
    /// Unicode scalar values are kept; no trim.
    pub summary: String,
    /// Metadata only: a JSON object of at most 4096 UTF-8 bytes as compact JSON; null is absent.
    #[napi(ts_type = "Record<string, unknown> | null")]
    pub payload: Option<Value>,
    /// Epoch ms: floored and clamped to [now - 24h, now]; missing or non-finite is now.
    pub occurred_at: Option<f64>,
    /// A second record with the same key returns the first row and changes nothing; '' is absent.
    pub dedupe_key: Option<String>,
    /// Producer-named watchers (the spawning parent). Bare keys and the target itself are dropped.
    pub watchers: Option<Vec<String>>,
    /// Write nothing, and return null silently, when no cursor targets the session and no
    /// usable watcher is given.
    pub only_if_watched: Option<bool>,
}
