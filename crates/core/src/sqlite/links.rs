//! The link table in SQLite (see [`crate::upstream::links`] for what its columns mean): OpenClaw's
//! shape and the store's own earlier generation, created and upgraded at open, and the
//! statements the monitor's [`LinkRows`] run.

use rusqlite::{params, Connection};

use crate::error::Result;
use crate::sqlite::tx::Tx;
use crate::upstream::links::{Link, LinkRows, EXTRA_COLUMNS};
use crate::upstream::LinkRow;

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
pub(crate) fn ensure_table(conn: &Connection) -> Result<()> {
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
fn columns(conn: &Connection) -> Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info('session_upstream_links')")?;
    let rows = stmt.query_map([], |r| r.get(0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The columns [`read`] takes, in its order.
macro_rules! columns {
    () => {
        "session_key, agent_id, catalog_id, host_id, thread_id, upstream_kind, \
         upstream_ref_json, last_marker_json, last_scanned_at, failure_count, own_messages_json"
    };
}

const GET: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM session_upstream_links WHERE session_key = ?1 ORDER BY agent_id LIMIT 2"
);

fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Link> {
    // NULL only in the store's earlier table, in a row an earlier version wrote after the
    // upgrade (the next open fills it): read as empty.
    let text = |i: usize| -> rusqlite::Result<String> {
        Ok(r.get::<_, Option<String>>(i)?.unwrap_or_default())
    };
    let row = LinkRow {
        session_key: r.get(0)?,
        agent_id: r.get(1)?,
        catalog_id: text(2)?,
        host_id: text(3)?,
        thread_id: text(4)?,
        upstream_kind: text(5)?,
        upstream_ref_json: r.get(6)?,
        last_marker_json: r.get(7)?,
        last_scanned_at: r.get(8)?,
        // The monitor does not use them.
        created_at: 0,
        updated_at: 0,
    };
    Ok(Link::from_row(row, r.get(9)?, r.get(10)?))
}

/// The links with a local transcript whose session is watched: a cursor the store could have
/// written targets it, and no other agent links the same key.
const WATCHED_LOCAL: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM session_upstream_links l \
     WHERE EXISTS (SELECT 1 FROM session_watch_cursors c WHERE c.target_session_key = l.session_key AND ",
    crate::sqlite::inert::live_cursor!(),
    crate::sqlite::inert::within_head!(),
    ") AND NOT EXISTS (SELECT 1 FROM session_upstream_links o \
     WHERE o.session_key = l.session_key AND o.agent_id <> l.agent_id) \
     ORDER BY session_key"
);

/// What a put sets on a conflict, after the columns of the generation's key.
macro_rules! put_set {
    () => {
        "catalog_id = excluded.catalog_id, \
         host_id = excluded.host_id, thread_id = excluded.thread_id, \
         upstream_kind = excluded.upstream_kind, upstream_ref_json = excluded.upstream_ref_json, \
         last_marker_json = excluded.last_marker_json, last_scanned_at = excluded.last_scanned_at, \
         failure_count = excluded.failure_count, own_messages_json = excluded.own_messages_json, \
         updated_at = excluded.updated_at"
    };
}

const PUT: &str = concat!(
    "INSERT INTO session_upstream_links (session_key, agent_id, catalog_id, \
     host_id, thread_id, upstream_kind, upstream_ref_json, last_marker_json, last_scanned_at, \
     failure_count, own_messages_json, created_at, updated_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12) \
     ON CONFLICT (session_key, agent_id) DO UPDATE SET ",
    put_set!()
);

// The store's earlier table: its primary key is the session key alone, and `source` is NOT NULL.
const PUT_EARLIER: &str = concat!(
    "INSERT INTO session_upstream_links (session_key, agent_id, catalog_id, \
     host_id, thread_id, upstream_kind, upstream_ref_json, last_marker_json, last_scanned_at, \
     failure_count, own_messages_json, created_at, updated_at, source) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?3) \
     ON CONFLICT (session_key) DO UPDATE SET agent_id = excluded.agent_id, source = excluded.source, ",
    put_set!()
);

impl LinkRows for Connection {
    fn link(&self, session_key: &str) -> Result<Option<Link>> {
        let mut stmt = self.prepare_cached(GET)?;
        let mut links = stmt
            .query_map([session_key], read)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(if links.len() == 1 { links.pop() } else { None })
    }

    fn watched_local_links(&self) -> Result<Vec<Link>> {
        let mut stmt = self.prepare_cached(WATCHED_LOCAL)?;
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

    fn put_link(&self, link: &Link, now: i64) -> Result<()> {
        let own = link.own_messages_json()?;
        let earlier = self
            .prepare_cached(
                "SELECT 1 FROM pragma_table_info('session_upstream_links') WHERE name = 'source'",
            )?
            .exists([])?;
        let sql = if earlier { PUT_EARLIER } else { PUT };
        self.prepare_cached(sql)?.execute(params![
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

    fn delete_link(&self, session_key: &str, agent_id: &str) -> Result<bool> {
        Ok(self
            .prepare_cached(
                "DELETE FROM session_upstream_links WHERE session_key = ?1 AND agent_id = ?2",
            )?
            .execute([session_key, agent_id])?
            == 1)
    }

    fn update_link(
        &self,
        session_key: &str,
        now: i64,
        change: &mut dyn FnMut(&mut Link),
    ) -> Result<()> {
        let tx = Tx::immediate(self)?;
        if let Some(mut link) = tx.link(session_key)? {
            change(&mut link);
            tx.put_link(&link, now)?;
        }
        tx.commit()
    }
}
