//! The rows an import moves: every value kept as SQLite stored it (text as its bytes, valid
//! UTF-8 or not), each table's columns with the type the store's `STRICT` table holds, and
//! the `SELECT` that reads them from any generation of OpenClaw's tables.

use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};
use rusqlite::{Connection, Row};

use crate::error::{Error, Result};

/// One stored value, exactly as SQLite holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A floating-point value.
    Real(f64),
    /// Text, as its stored bytes (not necessarily valid UTF-8).
    Text(Vec<u8>),
    /// A blob.
    Blob(Vec<u8>),
}

impl Cell {
    fn from_ref(v: ValueRef<'_>) -> Self {
        match v {
            ValueRef::Null => Cell::Null,
            ValueRef::Integer(i) => Cell::Int(i),
            ValueRef::Real(f) => Cell::Real(f),
            ValueRef::Text(t) => Cell::Text(t.to_vec()),
            ValueRef::Blob(b) => Cell::Blob(b.to_vec()),
        }
    }

    /// The integer, when the value is one.
    pub fn int(&self) -> Option<i64> {
        match self {
            Cell::Int(i) => Some(*i),
            _ => None,
        }
    }
}

impl ToSql for Cell {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        // Text is bound as its bytes, so a value that is not UTF-8 arrives unchanged.
        Ok(ToSqlOutput::Borrowed(match self {
            Cell::Null => ValueRef::Null,
            Cell::Int(i) => ValueRef::Integer(*i),
            Cell::Real(f) => ValueRef::Real(*f),
            Cell::Text(t) => ValueRef::Text(t),
            Cell::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

/// The type a column of the store's tables holds.
#[derive(Clone, Copy)]
pub enum Kind {
    /// `INTEGER NOT NULL`.
    Int,
    /// `TEXT NOT NULL`.
    Text,
    /// `TEXT` (nullable).
    OptText,
    /// `provenance`: `explicit` or `ambient-group`.
    Provenance,
}

/// One column: its name in the store's table, how it is read from the source (`None`: the
/// column itself), and the type the store holds.
pub struct Col {
    /// The column of the store's table.
    pub name: &'static str,
    /// The expression read from a source whose table lacks the column, or `None` when a table
    /// without it was never written by OpenClaw (the source is then foreign).
    pub missing: Option<&'static str>,
    /// The type the store's `STRICT` table holds.
    pub kind: Kind,
}

const fn col(name: &'static str, missing: Option<&'static str>, kind: Kind) -> Col {
    Col {
        name,
        missing,
        kind,
    }
}

/// `session_state_events`, in the store's column order; `sequence` first.
pub const EVENTS: [Col; 12] = [
    col("sequence", None, Kind::Int),
    col("dedupe_key", None, Kind::OptText),
    col("session_key", None, Kind::Text),
    col("session_id", Some("NULL"), Kind::OptText),
    col("agent_id", None, Kind::Text),
    col("kind", None, Kind::Text),
    col("actor_type", None, Kind::Text),
    col("actor_id", Some("NULL"), Kind::OptText),
    col("run_id", Some("NULL"), Kind::OptText),
    col("occurred_at", None, Kind::Int),
    col("summary", None, Kind::Text),
    col("payload_json", Some("NULL"), Kind::OptText),
];

/// `session_state_heads`.
pub const HEADS: [Col; 5] = [
    col("session_key", None, Kind::Text),
    col("agent_id", None, Kind::Text),
    col("last_sequence", None, Kind::Int),
    col("pruned_max_sequence", Some("0"), Kind::Int),
    col("updated_at", None, Kind::Int),
];

/// `updated_at` of a cursor of a file without `provenance`: the later of its own and its
/// ambient-group sentinel's, as OpenClaw's migration (and the store's upgrade) gives it.
const SENTINEL_UPDATED_AT: &str = "max(c.updated_at, coalesce((SELECT max(s.updated_at) \
     FROM session_watch_cursors s WHERE s.watcher_session_key = 'ambient-group-watch:' || \
     lower(hex(c.watcher_session_key)) AND s.target_session_key = c.target_session_key), \
     c.updated_at))";

/// `session_watch_cursors`.
pub const CURSORS: [Col; 8] = [
    col("watcher_session_key", None, Kind::Text),
    col("watcher_store_path", Some("NULL"), Kind::OptText),
    col("target_session_key", None, Kind::Text),
    col("last_seen_sequence", Some("0"), Kind::Int),
    col("notified_sequence", Some("0"), Kind::Int),
    col("material_sequence", Some("0"), Kind::Int),
    col(
        "provenance",
        Some(crate::inspect::UPGRADED_PROVENANCE),
        Kind::Provenance,
    ),
    col("updated_at", None, Kind::Int),
];

/// `session_upstream_links` as the store holds it, each column computed from OpenClaw's
/// columns (`session_key`, `agent_id`, `catalog_id`, `thread_id`, `upstream_ref_json`,
/// `last_marker_json`, `created_at`, `updated_at`): the inverse of the mapping the store
/// documents for OpenClaw's link shape. Members that are not JSON read as absent.
pub const LINKS: [(&str, &str, Kind); 9] = [
    ("session_key", "session_key", Kind::Text),
    ("agent_id", "agent_id", Kind::Text),
    ("source", "catalog_id", Kind::Text),
    (
        "transcript_path",
        "CASE WHEN json_valid(upstream_ref_json) \
         AND json_type(upstream_ref_json, '$.filePath') = 'text' \
         THEN json_extract(upstream_ref_json, '$.filePath') END",
        Kind::OptText,
    ),
    (
        "remote_id",
        "CASE WHEN json_valid(upstream_ref_json) \
         AND json_type(upstream_ref_json, '$.filePath') = 'text' THEN NULL \
         WHEN thread_id <> '' THEN thread_id END",
        Kind::OptText,
    ),
    (
        "scan_offset",
        "CASE WHEN json_valid(last_marker_json) \
         AND json_type(last_marker_json, '$.offset') = 'integer' \
         THEN json_extract(last_marker_json, '$.offset') ELSE 0 END",
        Kind::Int,
    ),
    (
        "remote_cursor",
        "CASE WHEN NOT json_valid(last_marker_json) THEN NULL \
         WHEN json_type(last_marker_json, '$.uuid') = 'null' THEN '' \
         WHEN json_type(last_marker_json, '$.uuid') = 'text' \
         THEN 'uuid:' || json_extract(last_marker_json, '$.uuid') \
         WHEN json_type(last_marker_json, '$.identity') = 'text' \
         THEN json_extract(last_marker_json, '$.identity') END",
        Kind::OptText,
    ),
    ("created_at", "created_at", Kind::Int),
    ("updated_at", "updated_at", Kind::Int),
];

/// OpenClaw's link columns the mapping reads.
pub const LINK_SOURCE_COLUMNS: [&str; 8] = [
    "session_key",
    "agent_id",
    "catalog_id",
    "thread_id",
    "upstream_ref_json",
    "last_marker_json",
    "created_at",
    "updated_at",
];

/// True when every value has the type the store's column holds; a row that fails is skipped.
pub fn fits(cells: &[Cell], kinds: impl IntoIterator<Item = Kind>) -> bool {
    cells.iter().zip(kinds).all(|(c, k)| match (k, c) {
        (Kind::Int, Cell::Int(_)) => true,
        (Kind::Text, Cell::Text(_)) => true,
        (Kind::OptText, Cell::Text(_) | Cell::Null) => true,
        (Kind::Provenance, Cell::Text(t)) => t == b"explicit" || t == b"ambient-group",
        _ => false,
    })
}

/// Reads a row of `n` values.
pub fn read_row(r: &Row<'_>, n: usize) -> rusqlite::Result<Vec<Cell>> {
    (0..n).map(|i| Ok(Cell::from_ref(r.get_ref(i)?))).collect()
}

/// The names of `table`'s columns in the source, or `None` when the table is missing.
pub fn source_columns(conn: &Connection, table: &str) -> Result<Option<Vec<String>>> {
    let names: Vec<String> = conn
        .prepare("SELECT lower(name) FROM pragma_table_xinfo(?1)")?
        .query_map([table], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok((!names.is_empty()).then_some(names))
}

/// The select list that reads `cols` from a source table with the columns `present`.
pub fn select_list(table: &str, cols: &[Col], present: &[String]) -> Result<String> {
    let mut out = Vec::with_capacity(cols.len());
    for c in cols {
        if present.iter().any(|p| p == c.name) {
            out.push(format!("c.{}", c.name));
        } else if let Some(expr) = c.missing {
            out.push(expr.to_owned());
        } else {
            return Err(Error::ForeignSchema(format!(
                "table {table} of the source has no column {}: no generation of this schema wrote it",
                c.name
            )));
        }
    }
    Ok(out.join(", "))
}

/// The `updated_at` expression for the cursors of a source without `provenance`.
pub fn cursor_updated_at(has_provenance: bool) -> &'static str {
    if has_provenance {
        "c.updated_at"
    } else {
        SENTINEL_UPDATED_AT
    }
}
