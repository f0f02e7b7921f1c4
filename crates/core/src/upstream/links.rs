//! The `session_upstream_links` rows (§11): one per adopted session.

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Error, Result};

/// How many of the gateway's own user messages are kept per session for self-echo checks.
pub const OWN_MESSAGES_KEPT: usize = 10;

/// An adopted session's link to its upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The adopted session.
    pub session_key: String,
    /// Its agent.
    pub agent_id: String,
    /// The catalog it came from (`claude`, …).
    pub source: String,
    /// A local JSONL transcript, scanned by the monitor.
    pub transcript_path: Option<String>,
    /// A remote session id, checked by the host through `checkUpstream`.
    pub remote_id: Option<String>,
    /// Bytes of the transcript already classified (through the last complete line).
    pub scan_offset: i64,
    /// Consecutive failed checks.
    pub failure_count: i64,
    /// The last user messages the gateway itself sent, oldest first.
    pub own_messages: Vec<String>,
    /// The identity of the newest remote item seen by the last successful check.
    pub remote_cursor: Option<String>,
}

const COLUMNS: &str = "session_key, agent_id, source, transcript_path, remote_id, scan_offset, \
                       failure_count, own_messages_json, remote_cursor";

fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Link> {
    let own: String = r.get(7)?;
    Ok(Link {
        session_key: r.get(0)?,
        agent_id: r.get(1)?,
        source: r.get(2)?,
        transcript_path: r.get(3)?,
        remote_id: r.get(4)?,
        scan_offset: r.get(5)?,
        failure_count: r.get(6)?,
        own_messages: serde_json::from_str(&own).unwrap_or_default(),
        remote_cursor: r.get(8)?,
    })
}

/// Reads the link of `session_key`.
pub fn get(conn: &Connection, session_key: &str) -> Result<Option<Link>> {
    let sql = format!("SELECT {COLUMNS} FROM session_upstream_links WHERE session_key = ?1");
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([session_key], read)
        .optional()?)
}

/// The links with a local transcript whose session is watched (a cursor targets it). A row
/// the store would never write (§3: NULL where it writes a value, text that is not valid
/// UTF-8, a number where it writes text) is left out: one bad row never stops the scan of
/// the others.
pub fn watched_local(conn: &Connection) -> Result<Vec<Link>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM session_upstream_links l WHERE transcript_path IS NOT NULL \
         AND EXISTS (SELECT 1 FROM session_watch_cursors c WHERE c.target_session_key = l.session_key) \
         ORDER BY session_key"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query([])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        // The row is already read: an error here is one of its values, not of the database.
        if let Ok(link) = read(r) {
            out.push(link);
        }
    }
    Ok(out)
}

/// Inserts or replaces the link.
pub fn put(conn: &Connection, link: &Link, now: i64) -> Result<()> {
    let own =
        serde_json::to_string(&link.own_messages).map_err(|e| Error::invalid(e.to_string()))?;
    conn.prepare_cached(
        "INSERT INTO session_upstream_links (session_key, agent_id, source, transcript_path, remote_id, \
         scan_offset, failure_count, own_messages_json, remote_cursor, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10) \
         ON CONFLICT (session_key) DO UPDATE SET agent_id = excluded.agent_id, source = excluded.source, \
         transcript_path = excluded.transcript_path, remote_id = excluded.remote_id, \
         scan_offset = excluded.scan_offset, failure_count = excluded.failure_count, \
         own_messages_json = excluded.own_messages_json, remote_cursor = excluded.remote_cursor, \
         updated_at = excluded.updated_at",
    )?
    .execute(params![
        link.session_key,
        link.agent_id,
        link.source,
        link.transcript_path,
        link.remote_id,
        link.scan_offset,
        link.failure_count,
        own,
        link.remote_cursor,
        now
    ])?;
    Ok(())
}

/// Deletes the link. True if there was one.
pub fn delete(conn: &Connection, session_key: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached("DELETE FROM session_upstream_links WHERE session_key = ?1")?
        .execute([session_key])?
        == 1)
}
