//! The `session_upstream_links` rows (semantics.md#upstream): one per adopted session, in OpenClaw's table.
//!
//! The table has OpenClaw's shape, on a fresh file and on one OpenClaw wrote, so a row moves
//! between the two exactly and OpenClaw keeps reading every row, including the store's:
//! primary key `(session_key, agent_id)`, `catalog_id`, `host_id`, `thread_id`,
//! `upstream_kind`, `upstream_ref_json`, `last_marker_json`, `last_scanned_at`, `created_at`,
//! `updated_at`. The store's own state goes where it means the same thing:
//!
//! | [`Link`] field    | column                                                            |
//! |-------------------|-------------------------------------------------------------------|
//! | `source`          | `catalog_id` (`claude`: the catalog the session came from)         |
//! | `host_id`         | `host_id` (`gateway:local` for a local transcript, `node:<id>`)     |
//! | `thread_id`       | `thread_id` (the upstream session id)                              |
//! | `transcript_path` | `upstream_ref_json` `{"filePath": …}`                             |
//! | `remote_id`       | `thread_id` of a link without a `filePath`                         |
//! | `scan_offset`     | `last_marker_json` `{"offset": n}`                                |
//! | `remote_cursor`   | `last_marker_json` `{"uuid": …}` (or `{"identity": …}`, below)    |
//!
//! Two columns OpenClaw does not have are added with `ALTER TABLE … ADD COLUMN` as a bare
//! type, the one form of extra column OpenClaw's schema check accepts (no `NOT NULL`, no
//! `DEFAULT`); NULL reads as the default: `failure_count INTEGER` (consecutive failed checks;
//! OpenClaw counts them in memory) and `own_messages_json TEXT` (the gateway's last user
//! messages, for self-echo checks). The ref is written back as it was read (the store never
//! edits one), and members of the marker the store does not use are kept.

use rusqlite::{params, Connection};
use serde_json::{json, Map, Value};

use crate::error::{Error, Result};

/// How many of the gateway's own user messages are kept per session for self-echo checks.
pub const OWN_MESSAGES_KEPT: usize = 10;

/// `host_id` of a link to a transcript on this machine (OpenClaw's value).
pub const LOCAL_HOST: &str = "gateway:local";
/// `host_id` of a remote link whose host did not name its node.
pub const REMOTE_HOST: &str = "remote";
/// `upstream_kind` of the store's links: the transcript rows it classifies are Claude Code's.
pub const UPSTREAM_KIND: &str = "claude-cli";

/// OpenClaw 2026.9.6's table and index, as its schema declares them (the index is created once
/// `catalog_id` is sure to exist).
const TABLE: &str = "
CREATE TABLE IF NOT EXISTS session_upstream_links (
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  catalog_id TEXT NOT NULL,
  host_id TEXT NOT NULL,
  thread_id TEXT NOT NULL,
  upstream_kind TEXT NOT NULL,
  upstream_ref_json TEXT,
  last_marker_json TEXT,
  last_scanned_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (session_key, agent_id)
) STRICT;
";
const INDEX: &str = "
CREATE INDEX IF NOT EXISTS idx_session_upstream_links_catalog_id
  ON session_upstream_links(catalog_id);
";

/// The store's columns beyond OpenClaw's, each a bare type (see the module doc).
pub const EXTRA_COLUMNS: [(&str, &str); 2] =
    [("failure_count", "INTEGER"), ("own_messages_json", "TEXT")];

/// OpenClaw's columns as bare types, added to the store's own earlier link table.
const OPENCLAW_COLUMNS: [(&str, &str); 7] = [
    ("catalog_id", "TEXT"),
    ("host_id", "TEXT"),
    ("thread_id", "TEXT"),
    ("upstream_kind", "TEXT"),
    ("upstream_ref_json", "TEXT"),
    ("last_marker_json", "TEXT"),
    ("last_scanned_at", "INTEGER"),
];

/// Fills OpenClaw's columns of the store's earlier link rows from the columns they replace.
const FILL_EARLIER: &str = "
UPDATE session_upstream_links SET
  catalog_id = source,
  host_id = CASE WHEN transcript_path IS NOT NULL THEN 'gateway:local' ELSE 'remote' END,
  thread_id = coalesce(remote_id, ''),
  upstream_kind = 'claude-cli',
  upstream_ref_json = CASE
    WHEN transcript_path IS NOT NULL THEN json_object('filePath', transcript_path)
    WHEN remote_id IS NOT NULL THEN json_object('threadId', remote_id) END,
  last_marker_json = CASE
    WHEN transcript_path IS NOT NULL THEN json_object('offset', scan_offset)
    WHEN remote_cursor = '' THEN json_object('uuid', json('null'))
    WHEN remote_cursor LIKE 'uuid:%' THEN json_object('uuid', substr(remote_cursor, 6))
    WHEN remote_cursor IS NOT NULL THEN json_object('identity', remote_cursor) END
WHERE catalog_id IS NULL
";

/// Creates the link table in OpenClaw's shape if it is missing and adds the store's columns
/// where they are missing. Runs inside the caller's schema transaction at open; changes
/// nothing on a file that already has them.
///
/// The store's own earlier table (primary key `session_key`; `source`, `transcript_path`,
/// `remote_id`, `scan_offset`, `remote_cursor`) is upgraded additively: OpenClaw's columns are
/// added as bare types and filled from the ones they replace, which stay (and `source`, NOT
/// NULL there, keeps being written).
pub fn ensure_table(conn: &Connection) -> Result<()> {
    conn.execute_batch(TABLE)?;
    let present = columns(conn)?;
    if !present.iter().any(|c| c == "catalog_id") {
        for (name, ty) in OPENCLAW_COLUMNS {
            conn.execute_batch(&format!(
                "ALTER TABLE session_upstream_links ADD COLUMN {name} {ty}"
            ))?;
        }
    }
    conn.execute_batch(INDEX)?;
    if present.iter().any(|c| c == "source") {
        conn.execute_batch(FILL_EARLIER)?;
    }
    for (name, ty) in EXTRA_COLUMNS {
        if !present.iter().any(|c| c == name) {
            conn.execute_batch(&format!(
                "ALTER TABLE session_upstream_links ADD COLUMN {name} {ty}"
            ))?;
        }
    }
    Ok(())
}

/// The column names of the link table, in order.
pub fn columns(conn: &Connection) -> Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info('session_upstream_links')")?;
    let rows = stmt.query_map([], |r| r.get(0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// An adopted session's link to its upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    /// The adopted session.
    pub session_key: String,
    /// Its agent.
    pub agent_id: String,
    /// The catalog it came from (`claude`, …): `catalog_id`.
    pub source: String,
    /// Where the upstream session lives: `gateway:local`, `node:<id>`, or `remote`.
    pub host_id: String,
    /// The upstream session id (a Claude Code session id), or empty when unknown.
    pub thread_id: String,
    /// The transcript format: `claude-cli` for the store's links.
    pub upstream_kind: String,
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
    /// The identity of the newest remote item seen by the last successful check: `uuid:<id>`,
    /// `fnv:<hash>` for an item without a uuid, empty for a check that saw no items.
    pub remote_cursor: Option<String>,
    /// When the upstream was last scanned or checked successfully (epoch ms).
    pub last_scanned_at: Option<i64>,
    /// `upstream_ref_json` as read (written back unchanged: the store never edits a ref).
    pub upstream_ref_json: Option<String>,
    /// `last_marker_json` as read, likewise.
    pub marker: Option<Value>,
}

impl Link {
    /// A new link as `adopt` makes it: `host_id` defaults to `gateway:local` for a transcript,
    /// `remote` otherwise; `thread_id` is the remote id, else the transcript's file stem (a
    /// Claude Code transcript is named after its session id).
    pub fn new(
        session_key: String,
        agent_id: String,
        source: String,
        host_id: Option<String>,
        transcript_path: Option<String>,
        remote_id: Option<String>,
    ) -> Link {
        let host_id = host_id.unwrap_or_else(|| {
            if transcript_path.is_some() {
                LOCAL_HOST.to_owned()
            } else {
                REMOTE_HOST.to_owned()
            }
        });
        let stem = transcript_path.as_deref().and_then(|p| {
            std::path::Path::new(p)
                .file_stem()
                .and_then(|s| s.to_str())
                .map(str::to_owned)
        });
        let thread_id = remote_id.clone().or(stem).unwrap_or_default();
        let upstream_ref_json = match (&transcript_path, &remote_id) {
            (Some(p), _) => Some(json!({ "filePath": p })),
            (None, Some(r)) => match host_id.strip_prefix("node:") {
                Some(node) => Some(json!({ "nodeId": node, "threadId": r })),
                None => Some(json!({ "threadId": r })),
            },
            (None, None) => None,
        }
        .map(|v| v.to_string());
        Link {
            session_key,
            agent_id,
            source,
            host_id,
            thread_id,
            upstream_kind: UPSTREAM_KIND.to_owned(),
            transcript_path,
            remote_id,
            scan_offset: 0,
            failure_count: 0,
            own_messages: Vec::new(),
            remote_cursor: None,
            last_scanned_at: None,
            upstream_ref_json,
            marker: None,
        }
    }

    /// `last_marker_json` for this link's state: the marker read, with the members the store
    /// owns set from `scan_offset` and `remote_cursor`.
    fn marker_json(&self) -> Option<String> {
        let mut m = match &self.marker {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        };
        if self.transcript_path.is_some() {
            m.remove("size");
            m.insert("offset".into(), json!(self.scan_offset));
        }
        match self.remote_cursor.as_deref() {
            None => {}
            Some("") => {
                m.remove("identity");
                m.insert("uuid".into(), Value::Null);
            }
            Some(c) => match c.strip_prefix("uuid:") {
                Some(uuid) => {
                    m.remove("identity");
                    m.insert("uuid".into(), json!(uuid));
                }
                None => {
                    m.remove("uuid");
                    m.insert("identity".into(), json!(c));
                }
            },
        }
        if m.is_empty() && !matches!(self.marker, Some(Value::Object(_))) {
            return self.marker.as_ref().map(Value::to_string);
        }
        Some(Value::Object(m).to_string())
    }
}

const COLUMNS: &str = "session_key, agent_id, catalog_id, host_id, thread_id, upstream_kind, \
                       upstream_ref_json, last_marker_json, last_scanned_at, failure_count, \
                       own_messages_json";

fn parse(text: Option<String>) -> Option<Value> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Link> {
    let upstream_ref_json: Option<String> = r.get(6)?;
    let upstream_ref = parse(upstream_ref_json.clone());
    let marker = parse(r.get(7)?);
    // NULL only in the store's earlier table, in a row an earlier version wrote after the
    // upgrade (the next open fills it).
    let thread_id = r.get::<_, Option<String>>(4)?.unwrap_or_default();
    let transcript_path = upstream_ref
        .as_ref()
        .and_then(|v| v.get("filePath"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let remote_id = (transcript_path.is_none() && !thread_id.is_empty()).then(|| thread_id.clone());
    let m = marker.as_ref();
    // As OpenClaw does, `size` stands in for a missing `offset`.
    let scan_offset = m
        .and_then(|m| m.get("offset").or_else(|| m.get("size")))
        .and_then(Value::as_i64)
        .unwrap_or(0)
        .max(0);
    let remote_cursor = match m.and_then(|m| m.get("uuid")) {
        Some(Value::String(u)) => Some(format!("uuid:{u}")),
        Some(Value::Null) => Some(String::new()),
        _ => m
            .and_then(|m| m.get("identity"))
            .and_then(Value::as_str)
            .map(str::to_owned),
    };
    let own: Option<String> = r.get(10)?;
    Ok(Link {
        session_key: r.get(0)?,
        agent_id: r.get(1)?,
        source: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
        host_id: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
        thread_id,
        upstream_kind: r.get::<_, Option<String>>(5)?.unwrap_or_default(),
        transcript_path,
        remote_id,
        scan_offset,
        failure_count: r.get::<_, Option<i64>>(9)?.unwrap_or(0),
        own_messages: own
            .and_then(|o| serde_json::from_str(&o).ok())
            .unwrap_or_default(),
        remote_cursor,
        last_scanned_at: r.get(8)?,
        upstream_ref_json,
        marker,
    })
}

/// Reads the link of `session_key`. A key that several agents link (OpenClaw's global session
/// scope shares bare keys) is ambiguous and reads as no link, as OpenClaw's monitor skips it.
pub fn get(conn: &Connection, session_key: &str) -> Result<Option<Link>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM session_upstream_links WHERE session_key = ?1 ORDER BY agent_id LIMIT 2"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut links = stmt
        .query_map([session_key], read)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(if links.len() == 1 { links.pop() } else { None })
}

/// The condition that a cursor of `watched_local`'s subquery is one the store could have written.
const LIVE_TARGET: &str = concat!(
    crate::sqlite::inert::live_cursor!(),
    crate::sqlite::inert::within_head!()
);

/// The links with a local transcript whose session is watched (a live cursor targets it),
/// each session key linked once. A row the store would never write (NULL where it writes a
/// value, text that is not valid UTF-8, a number where it writes text) is left out: one bad
/// row never stops the scan of the others.
pub fn watched_local(conn: &Connection) -> Result<Vec<Link>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM session_upstream_links l \
         WHERE EXISTS (SELECT 1 FROM session_watch_cursors c WHERE c.target_session_key = l.session_key \
                       AND {LIVE_TARGET}) \
         AND NOT EXISTS (SELECT 1 FROM session_upstream_links o \
                         WHERE o.session_key = l.session_key AND o.agent_id <> l.agent_id) \
         ORDER BY session_key"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query([])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        // The row is already read: an error here is one of its values, not of the database.
        if let Ok(link) = read(r) {
            if link.transcript_path.is_some() {
                out.push(link);
            }
        }
    }
    Ok(out)
}

const PUT: &str = "INSERT INTO session_upstream_links (session_key, agent_id, catalog_id, \
    host_id, thread_id, upstream_kind, upstream_ref_json, last_marker_json, last_scanned_at, \
    failure_count, own_messages_json, created_at, updated_at) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12) \
    ON CONFLICT (session_key, agent_id) DO UPDATE SET ";

// The store's earlier table: its primary key is the session key alone, and `source` is NOT NULL.
const PUT_EARLIER: &str = "INSERT INTO session_upstream_links (session_key, agent_id, catalog_id, \
    host_id, thread_id, upstream_kind, upstream_ref_json, last_marker_json, last_scanned_at, \
    failure_count, own_messages_json, created_at, updated_at, source) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?3) \
    ON CONFLICT (session_key) DO UPDATE SET agent_id = excluded.agent_id, source = excluded.source, ";

/// Inserts the link, replacing the row of the same session and agent.
pub fn put(conn: &Connection, link: &Link, now: i64) -> Result<()> {
    let own =
        serde_json::to_string(&link.own_messages).map_err(|e| Error::invalid(e.to_string()))?;
    let earlier = conn
        .prepare_cached(
            "SELECT 1 FROM pragma_table_info('session_upstream_links') WHERE name = 'source'",
        )?
        .exists([])?;
    let head = if earlier { PUT_EARLIER } else { PUT };
    conn.prepare_cached(&format!(
        "{head}catalog_id = excluded.catalog_id, \
         host_id = excluded.host_id, thread_id = excluded.thread_id, \
         upstream_kind = excluded.upstream_kind, upstream_ref_json = excluded.upstream_ref_json, \
         last_marker_json = excluded.last_marker_json, last_scanned_at = excluded.last_scanned_at, \
         failure_count = excluded.failure_count, own_messages_json = excluded.own_messages_json, \
         updated_at = excluded.updated_at"
    ))?
    .execute(params![
        link.session_key,
        link.agent_id,
        link.source,
        link.host_id,
        link.thread_id,
        link.upstream_kind,
        link.upstream_ref_json,
        link.marker_json(),
        link.last_scanned_at,
        link.failure_count,
        own,
        now
    ])?;
    Ok(())
}

/// Deletes the link of the session and agent. True if there was one.
pub fn delete(conn: &Connection, session_key: &str, agent_id: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "DELETE FROM session_upstream_links WHERE session_key = ?1 AND agent_id = ?2",
        )?
        .execute([session_key, agent_id])?
        == 1)
}
