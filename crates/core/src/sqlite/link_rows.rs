//! The link table's rows in OpenClaw's own terms, in SQLite (see [`crate::upstream::LinkRow`]):
//! read, list the watched ones, upsert with OpenClaw's conflict rule, move the marker.

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension, Row};

use crate::error::Result;
use crate::sqlite::inert;
use crate::upstream::LinkRow;

/// OpenClaw's columns, in the order [`read`] takes them.
macro_rules! columns {
    () => {
        "session_key, agent_id, catalog_id, host_id, thread_id, upstream_kind, \
         upstream_ref_json, last_marker_json, last_scanned_at, created_at, updated_at"
    };
}

const GET: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM session_upstream_links WHERE session_key = ?1 AND agent_id = ?2"
);

const WATCHED: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM session_upstream_links l WHERE EXISTS \
     (SELECT 1 FROM session_watch_cursors c WHERE c.target_session_key = l.session_key) \
     ORDER BY catalog_id, session_key"
);

fn text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
        _ => None,
    }
}

fn read(r: &Row<'_>) -> rusqlite::Result<LinkRow> {
    Ok(LinkRow {
        session_key: text(r.get_ref(0)?).unwrap_or_default(),
        agent_id: text(r.get_ref(1)?).unwrap_or_default(),
        catalog_id: text(r.get_ref(2)?).unwrap_or_default(),
        host_id: text(r.get_ref(3)?).unwrap_or_default(),
        thread_id: text(r.get_ref(4)?).unwrap_or_default(),
        upstream_kind: text(r.get_ref(5)?).unwrap_or_default(),
        upstream_ref_json: text(r.get_ref(6)?),
        last_marker_json: text(r.get_ref(7)?),
        last_scanned_at: inert::integer(r.get_ref(8)?),
        created_at: inert::integer(r.get_ref(9)?).unwrap_or(0),
        updated_at: inert::integer(r.get_ref(10)?).unwrap_or(0),
    })
}

/// The row of one session and agent.
pub(crate) fn get(conn: &Connection, session_key: &str, agent_id: &str) -> Result<Option<LinkRow>> {
    Ok(conn
        .prepare_cached(GET)?
        .query_row([session_key, agent_id], read)
        .optional()?)
}

/// The rows whose session some cursor targets, by catalog, then session key.
pub(crate) fn watched(conn: &Connection) -> Result<Vec<LinkRow>> {
    let rows = conn
        .prepare_cached(WATCHED)?
        .query_map([], read)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

// OpenClaw's rule: a row whose source (thread, host, kind or reference) changed takes the new
// marker and forgets its last scan; otherwise the marker and the last scan stay.
macro_rules! upsert {
    () => {
        "INSERT INTO session_upstream_links (session_key, agent_id, catalog_id, \
         host_id, thread_id, upstream_kind, upstream_ref_json, last_marker_json, last_scanned_at, \
         created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NULL, ?9, ?9) \
         ON CONFLICT (session_key, agent_id) DO "
    };
}
const UPSERT_IF_ABSENT: &str = concat!(upsert!(), "NOTHING");
const UPSERT: &str = concat!(
    upsert!(),
    "UPDATE SET catalog_id = excluded.catalog_id, host_id = excluded.host_id, \
    thread_id = excluded.thread_id, upstream_kind = excluded.upstream_kind, \
    upstream_ref_json = excluded.upstream_ref_json, \
    last_marker_json = CASE WHEN (thread_id != excluded.thread_id OR host_id != excluded.host_id \
      OR upstream_kind != excluded.upstream_kind OR upstream_ref_json != excluded.upstream_ref_json) \
      THEN excluded.last_marker_json ELSE last_marker_json END, \
    last_scanned_at = CASE WHEN (thread_id != excluded.thread_id OR host_id != excluded.host_id \
      OR upstream_kind != excluded.upstream_kind OR upstream_ref_json != excluded.upstream_ref_json) \
      THEN NULL ELSE last_scanned_at END, \
    updated_at = excluded.updated_at"
);

/// Writes `row` with OpenClaw's conflict rule, or only when absent. True when a row was written.
pub(crate) fn upsert(conn: &Connection, row: &LinkRow, if_absent: bool, now: i64) -> Result<bool> {
    let sql = if if_absent { UPSERT_IF_ABSENT } else { UPSERT };
    let n = conn.prepare_cached(sql)?.execute(params![
        row.session_key,
        row.agent_id,
        row.catalog_id,
        row.host_id,
        row.thread_id,
        row.upstream_kind,
        row.upstream_ref_json,
        row.last_marker_json,
        now
    ])?;
    Ok(n == 1)
}

/// Sets a link's marker and last scan, only while its `updated_at` is `expected_updated_at`
/// when one is given. True when the row was written.
pub(crate) fn set_marker(
    conn: &Connection,
    session_key: &str,
    agent_id: &str,
    marker_json: &str,
    now: i64,
    expected_updated_at: Option<i64>,
) -> Result<bool> {
    let n = conn
        .prepare_cached(
            "UPDATE session_upstream_links SET last_marker_json = ?3, last_scanned_at = ?4, \
             updated_at = ?4 WHERE session_key = ?1 AND agent_id = ?2 \
             AND (?5 IS NULL OR updated_at = ?5)",
        )?
        .execute(params![
            session_key,
            agent_id,
            marker_json,
            now,
            expected_updated_at
        ])?;
    Ok(n == 1)
}
