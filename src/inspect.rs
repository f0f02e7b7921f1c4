//! Read-only inspection of a database file: what the `session-awareness` command-line tool
//! prints, as plain objects.

use napi::Result;
use napi_derive::napi;
use session_awareness_core::inspect as core;
use session_awareness_core::pg_inspect as pg;

use crate::error::{coded, to_js, Code, IntoJs};
use crate::packed::{self, PackedRows};
use crate::types::Notice;

/// One stored event, every column as stored: `kind` and `actorType` are an `EventKind` and an
/// `ActorType` for rows this version wrote, and kept verbatim otherwise.
#[napi(object, object_from_js = false)]
pub struct InspectedEvent {
    /// The global sequence.
    pub sequence: i64,
    /// The session.
    pub session_key: String,
    /// The agent.
    pub agent_id: String,
    /// The kind, as stored.
    #[napi(ts_type = "string")]
    pub kind: String,
    /// The actor type, as stored.
    #[napi(ts_type = "string")]
    pub actor_type: String,
    /// The causing session or person.
    pub actor_id: Option<String>,
    /// The run that produced it.
    pub run_id: Option<String>,
    /// The session id (transcript).
    pub session_id: Option<String>,
    /// When it happened (epoch ms).
    pub occurred_at: i64,
    /// The one-line summary.
    pub summary: String,
    /// The payload, as the API's events carry it (`StateEvent.payload`): the stored JSON
    /// object, parsed.
    #[napi(ts_type = "Record<string, unknown>")]
    pub payload: Option<serde_json::Value>,
    /// The stored payload text when it is not a JSON object (a row this version would
    /// refuse), shown as stored; absent otherwise.
    pub payload_text: Option<String>,
}

impl From<core::EventRow> for InspectedEvent {
    fn from(e: core::EventRow) -> Self {
        let (payload, payload_text) = match e.payload_json {
            None => (None, None),
            Some(text) => match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(v @ serde_json::Value::Object(_)) => (Some(v), None),
                _ => (None, Some(text)),
            },
        };
        InspectedEvent {
            sequence: e.sequence,
            session_key: e.session_key,
            agent_id: e.agent_id,
            kind: e.kind,
            actor_type: e.actor_type,
            actor_id: e.actor_id,
            run_id: e.run_id,
            session_id: e.session_id,
            occurred_at: e.occurred_at,
            summary: e.summary,
            payload,
            payload_text,
        }
    }
}

/// One session head, with what is retained of its log.
#[napi(object, object_from_js = false)]
pub struct InspectedSession {
    /// The session.
    pub session_key: String,
    /// The agent.
    pub agent_id: String,
    /// The state version: the largest sequence recorded for the session.
    pub state_version: i64,
    /// The pruned watermark: `changesSince(after)` with `after` below it has `historyGap`.
    pub pruned_max_sequence: i64,
    /// When the head last moved (epoch ms).
    pub updated_at: i64,
    /// Events of the session still in the log.
    pub retained_events: i64,
    /// The smallest retained sequence, when an event is retained.
    pub earliest_retained_sequence: Option<i64>,
}

/// One watch cursor, with the target's version and the watcher's lag.
#[napi(object, object_from_js = false)]
pub struct InspectedCursor {
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
    #[napi(ts_type = "string")]
    pub provenance: String,
    /// Last seed, material update, acknowledge or re-watch (epoch ms).
    pub updated_at: i64,
    /// The target's state version.
    pub target_version: i64,
    /// Retained events of the target after L: what the watcher has not acknowledged.
    pub lag: i64,
    /// True when N != L: a notice is pending.
    pub pending: bool,
}

/// Row counts of the four tables (0 for a missing table).
#[napi(object, object_from_js = false)]
pub struct RowCounts {
    /// `session_state_events`.
    pub events: i64,
    /// `session_state_heads`: one per (session, agent).
    pub heads: i64,
    /// `session_watch_cursors`.
    pub cursors: i64,
    /// `session_upstream_links`.
    pub upstream_links: i64,
}

/// The read-only report of one database file.
#[napi(object, object_from_js = false)]
pub struct DatabaseInspection {
    /// The path as given.
    pub path: String,
    /// The size of the main file in bytes.
    pub file_bytes: i64,
    /// True when a `-wal` file existed and was read through (a gateway has the file open);
    /// otherwise the main file was read as an immutable snapshot.
    pub wal: bool,
    /// Tables of the schema the file lacks (all four for a database this package never
    /// opened).
    pub missing_tables: Vec<String>,
    /// Row counts.
    pub counts: RowCounts,
    /// The largest sequence ever given (the global sequence's high-water mark), 0 if none.
    pub last_sequence: i64,
    /// The oldest retained event, by `occurredAt` then sequence: the next one to be pruned.
    pub oldest_event: Option<InspectedEvent>,
    /// Every session head, by key then agent.
    pub sessions: Vec<InspectedSession>,
    /// Every cursor, by watcher then target.
    pub cursors: Vec<InspectedCursor>,
    /// The notices the cursor rows leave pending, in the order a gateway-start `sweep`
    /// queues them (ascending N).
    pub pending_notices: Vec<Notice>,
}

impl From<core::Inspection> for DatabaseInspection {
    fn from(r: core::Inspection) -> Self {
        DatabaseInspection {
            path: r.path,
            file_bytes: i64::try_from(r.file_bytes).unwrap_or(i64::MAX),
            wal: r.wal,
            missing_tables: r.missing_tables,
            counts: RowCounts {
                events: r.counts.events,
                heads: r.counts.heads,
                cursors: r.counts.cursors,
                upstream_links: r.counts.upstream_links,
            },
            last_sequence: r.last_sequence,
            oldest_event: r.oldest_event.map(Into::into),
            sessions: r
                .sessions
                .into_iter()
                .map(|s| InspectedSession {
                    session_key: s.session_key,
                    agent_id: s.agent_id,
                    state_version: s.state_version,
                    pruned_max_sequence: s.pruned_max_sequence,
                    updated_at: s.updated_at,
                    retained_events: s.retained_events,
                    earliest_retained_sequence: s.earliest_retained_sequence,
                })
                .collect(),
            cursors: r
                .cursors
                .into_iter()
                .map(|c| InspectedCursor {
                    watcher_key: c.row.watcher,
                    target_key: c.row.target,
                    last_seen: c.row.last_seen,
                    notified: c.row.notified,
                    material: c.row.material,
                    provenance: c.row.provenance,
                    updated_at: c.row.updated_at,
                    target_version: c.target_version,
                    lag: c.lag,
                    pending: c.pending,
                })
                .collect(),
            pending_notices: r.pending_notices.into_iter().map(Into::into).collect(),
        }
    }
}

/// Options of `readEvents`.
#[napi(object, object_to_js = false)]
pub struct ReadEventsOptions {
    /// Only events with a greater sequence: a non-negative safe integer; default 0 (all).
    pub since: Option<f64>,
    /// The agent of the session; defaults to the key's own, else `main`.
    pub agent_id: Option<String>,
    /// A PostgreSQL store's schema (a URL only); default `session_awareness`.
    pub schema: Option<String>,
}

/// Options of `inspectDatabase`.
#[napi(object, object_to_js = false)]
pub struct InspectOptions {
    /// A PostgreSQL store's schema (a URL only); default `session_awareness`.
    pub schema: Option<String>,
}

/// The schema to read on a URL; refused on a file, as the store refuses it.
fn schema_of(path: &str, schema: Option<String>) -> Result<Option<String>, Code> {
    session_awareness_core::Store::check_location(path).map_err(to_js)?;
    match (pg::is_url(path), schema) {
        (true, s) => Ok(Some(s.unwrap_or_else(|| DEFAULT_SCHEMA.to_owned()))),
        (false, None) => Ok(None),
        (false, Some(_)) => Err(coded(
            "ERR_INVALID_ARG",
            "invalid argument: schema is an option of a PostgreSQL store (a postgres:// URL), not of a file",
        )),
    }
}

/// The schema of a PostgreSQL store when none is named.
const DEFAULT_SCHEMA: &str = "session_awareness";

/// A session's stored events after a version, read-only and unbounded; the events are
/// packed as `changesSince`'s are (`lib/inspect.ts` builds them).
#[napi(object, object_from_js = false)]
pub struct NativeSessionEvents {
    /// The session.
    pub session_key: String,
    /// The agent the events were read for.
    pub agent_id: String,
    /// The state version (0 when the session has no head).
    pub state_version: i64,
    /// The pruned watermark.
    pub pruned_max_sequence: i64,
    /// True when `since` predates retained history (`since < prunedMaxSequence`), or a stored
    /// row could not be answered.
    pub history_gap: bool,
    /// Every stored event row with `sequence > since`, ascending.
    pub rows: PackedRows,
}

/// Reads a report of the database at `path` without changing it. Never creates the file.
/// Throws `ERR_DB` for a missing or unreadable file and `ERR_NOT_SQLITE` for one that is not a
/// SQLite database. On a `postgres://` URL it reads the store's schema in one read-only
/// snapshot and waits for the server (up to the connect and statement timeouts).
#[napi]
pub fn inspect_database(
    path: String,
    options: Option<InspectOptions>,
) -> Result<DatabaseInspection, Code> {
    match schema_of(&path, options.and_then(|o| o.schema))? {
        Some(schema) => pg::inspect(&path, &schema).map(Into::into).js(),
        None => core::inspect(&path).map(Into::into).js(),
    }
}

/// Reads a session's events after `options.since`, ascending, without changing the file.
#[napi]
pub fn read_events(
    path: String,
    session_key: String,
    options: Option<ReadEventsOptions>,
) -> Result<NativeSessionEvents, Code> {
    let (since, agent_id, schema) =
        options.map_or((None, None, None), |o| (o.since, o.agent_id, o.schema));
    let since = since.unwrap_or(0.0);
    let r = match schema_of(&path, schema)? {
        Some(schema) => pg::read_events(&path, &schema, &session_key, agent_id.as_deref(), since),
        None => core::read_events(&path, &session_key, agent_id.as_deref(), since),
    }
    .js()?;
    Ok(NativeSessionEvents {
        rows: packed::events(&r.events),
        session_key: r.session_key,
        agent_id: r.agent_id,
        state_version: r.state_version,
        pruned_max_sequence: r.pruned_max_sequence,
        history_gap: r.history_gap,
    })
}
