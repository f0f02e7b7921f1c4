//! The link table's rows in OpenClaw's own terms, for a host that keeps OpenClaw's upstream
//! link API (its catalog writes and reads them): read, list the watched ones, upsert with
//! OpenClaw's conflict rule, move the marker, delete. The monitor's own view is `links`.

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension, Row};

use crate::error::Result;
use crate::sqlite::inert;
use crate::store::Store;

/// One row of `session_upstream_links`, OpenClaw's columns as stored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkRow {
    /// The linked session.
    pub session_key: String,
    /// Its agent.
    pub agent_id: String,
    /// The catalog (`claude`).
    pub catalog_id: String,
    /// Where the upstream session lives (`gateway:local`, `node:<id>`).
    pub host_id: String,
    /// The upstream session id.
    pub thread_id: String,
    /// The upstream's kind (`claude-cli`).
    pub upstream_kind: String,
    /// The upstream reference, JSON text as stored.
    pub upstream_ref_json: Option<String>,
    /// The scan marker, JSON text as stored.
    pub last_marker_json: Option<String>,
    /// The last scan (epoch ms).
    pub last_scanned_at: Option<i64>,
    /// When the row was first written (epoch ms).
    pub created_at: i64,
    /// When it was last written (epoch ms).
    pub updated_at: i64,
}

const COLUMNS: &str = "session_key, agent_id, catalog_id, host_id, thread_id, upstream_kind, \
    upstream_ref_json, last_marker_json, last_scanned_at, created_at, updated_at";

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
fn get(conn: &Connection, session_key: &str, agent_id: &str) -> Result<Option<LinkRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM session_upstream_links WHERE session_key = ?1 AND agent_id = ?2"
    );
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([session_key, agent_id], read)
        .optional()?)
}

/// The rows whose session some cursor targets, by catalog, then session key.
fn watched(conn: &Connection) -> Result<Vec<LinkRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM session_upstream_links l WHERE EXISTS \
         (SELECT 1 FROM session_watch_cursors c WHERE c.target_session_key = l.session_key) \
         ORDER BY catalog_id, session_key"
    );
    let rows = conn
        .prepare_cached(&sql)?
        .query_map([], read)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

// OpenClaw's rule: a row whose source (thread, host, kind or reference) changed takes the new
// marker and forgets its last scan; otherwise the marker and the last scan stay.
const UPSERT: &str = "INSERT INTO session_upstream_links (session_key, agent_id, catalog_id, \
    host_id, thread_id, upstream_kind, upstream_ref_json, last_marker_json, last_scanned_at, \
    created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NULL, ?9, ?9) \
    ON CONFLICT (session_key, agent_id) DO ";
const UPDATE: &str = "UPDATE SET catalog_id = excluded.catalog_id, host_id = excluded.host_id, \
    thread_id = excluded.thread_id, upstream_kind = excluded.upstream_kind, \
    upstream_ref_json = excluded.upstream_ref_json, \
    last_marker_json = CASE WHEN (thread_id != excluded.thread_id OR host_id != excluded.host_id \
      OR upstream_kind != excluded.upstream_kind OR upstream_ref_json != excluded.upstream_ref_json) \
      THEN excluded.last_marker_json ELSE last_marker_json END, \
    last_scanned_at = CASE WHEN (thread_id != excluded.thread_id OR host_id != excluded.host_id \
      OR upstream_kind != excluded.upstream_kind OR upstream_ref_json != excluded.upstream_ref_json) \
      THEN NULL ELSE last_scanned_at END, \
    updated_at = excluded.updated_at";

fn upsert(conn: &Connection, row: &LinkRow, if_absent: bool, now: i64) -> Result<bool> {
    let sql = format!("{UPSERT}{}", if if_absent { "NOTHING" } else { UPDATE });
    let n = conn.prepare_cached(&sql)?.execute(params![
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

fn set_marker(
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

impl Store {
    /// The link row of a session and agent, as stored.
    pub fn link_row(&self, session_key: &str, agent_id: &str) -> Result<Option<LinkRow>> {
        self.check_open()?;
        self.with_conn(|conn| get(conn, session_key, agent_id))
    }

    /// The link rows of watched sessions (some cursor targets them), by catalog, then key.
    pub fn watched_link_rows(&self) -> Result<Vec<LinkRow>> {
        self.check_open()?;
        self.with_conn(|conn| watched(conn))
    }

    /// Writes a link row with OpenClaw's conflict rule (a changed source takes the new marker
    /// and forgets its last scan); with `if_absent`, an existing row is left alone. True when
    /// a row was written.
    pub fn upsert_link_row(&self, row: &LinkRow, if_absent: bool, now: i64) -> Result<bool> {
        self.check_open()?;
        self.with_conn(|conn| upsert(conn, row, if_absent, now))
    }

    /// Sets a link's marker and last scan to `now`, only while its `updated_at` is
    /// `expected_updated_at` when one is given. True when the row was written.
    pub fn set_link_marker(
        &self,
        session_key: &str,
        agent_id: &str,
        marker_json: &str,
        now: i64,
        expected_updated_at: Option<i64>,
    ) -> Result<bool> {
        self.check_open()?;
        self.with_conn(|conn| {
            set_marker(
                conn,
                session_key,
                agent_id,
                marker_json,
                now,
                expected_updated_at,
            )
        })
    }

    /// Deletes the link row of a session and agent. True if there was one.
    pub fn delete_link_row(&self, session_key: &str, agent_id: &str) -> Result<bool> {
        self.check_open()?;
        self.with_conn(|conn| super::links::delete(conn, session_key, agent_id))
    }
}
