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
    /// `INTEGER` (nullable).
    OptInt,
}

/// What a source whose table lacks a column reads for it (OpenClaw's default for the column).
#[derive(Clone, Copy)]
pub enum Missing {
    /// The column was in every generation: a table without it is foreign.
    Required,
    /// NULL.
    Null,
    /// 0.
    Zero,
    /// `explicit` (a file from before `provenance`; its sentinel rows are folded in later).
    Explicit,
}

/// One column of the store's table: its name, what a source without it reads, and the type
/// the store's `STRICT` table holds.
pub struct Col {
    /// The column's name.
    pub name: &'static str,
    /// What a source without the column reads.
    pub missing: Missing,
    /// The type the store holds.
    pub kind: Kind,
}

const fn col(name: &'static str, missing: Missing, kind: Kind) -> Col {
    Col {
        name,
        missing,
        kind,
    }
}

/// `session_state_events`, in the store's column order; `sequence` first.
pub const EVENTS: [Col; 12] = [
    col("sequence", Missing::Required, Kind::Int),
    col("dedupe_key", Missing::Required, Kind::OptText),
    col("session_key", Missing::Required, Kind::Text),
    col("session_id", Missing::Null, Kind::OptText),
    col("agent_id", Missing::Required, Kind::Text),
    col("kind", Missing::Required, Kind::Text),
    col("actor_type", Missing::Required, Kind::Text),
    col("actor_id", Missing::Null, Kind::OptText),
    col("run_id", Missing::Null, Kind::OptText),
    col("occurred_at", Missing::Required, Kind::Int),
    col("summary", Missing::Required, Kind::Text),
    col("payload_json", Missing::Null, Kind::OptText),
];

/// `session_state_heads`.
pub const HEADS: [Col; 5] = [
    col("session_key", Missing::Required, Kind::Text),
    col("agent_id", Missing::Required, Kind::Text),
    col("last_sequence", Missing::Required, Kind::Int),
    col("pruned_max_sequence", Missing::Zero, Kind::Int),
    col("updated_at", Missing::Required, Kind::Int),
];

/// `session_watch_cursors`.
pub const CURSORS: [Col; 8] = [
    col("watcher_session_key", Missing::Required, Kind::Text),
    col("watcher_store_path", Missing::Null, Kind::OptText),
    col("target_session_key", Missing::Required, Kind::Text),
    col("last_seen_sequence", Missing::Zero, Kind::Int),
    col("notified_sequence", Missing::Zero, Kind::Int),
    col("material_sequence", Missing::Zero, Kind::Int),
    col("provenance", Missing::Explicit, Kind::Provenance),
    col("updated_at", Missing::Required, Kind::Int),
];

/// The link columns, in the order [`LINKS_SQL`] reads them: OpenClaw's table and the store's
/// have the same shape, so a link is copied column for column (the store's two added columns,
/// the failure count and its own messages, start empty, as on a link OpenClaw wrote).
pub const LINKS: [Kind; 11] = [
    Kind::Text,    // session_key
    Kind::Text,    // agent_id
    Kind::Text,    // catalog_id
    Kind::Text,    // host_id
    Kind::Text,    // thread_id
    Kind::Text,    // upstream_kind
    Kind::OptText, // upstream_ref_json
    Kind::OptText, // last_marker_json
    Kind::OptInt,  // last_scanned_at
    Kind::Int,     // created_at
    Kind::Int,     // updated_at
];

/// Reads OpenClaw's link rows.
pub const LINKS_SQL: &str = "SELECT session_key, agent_id, catalog_id, host_id, thread_id, \
     upstream_kind, upstream_ref_json, last_marker_json, last_scanned_at, created_at, updated_at \
     FROM session_upstream_links";

/// OpenClaw's link columns [`LINKS_SQL`] reads.
pub const LINK_SOURCE_COLUMNS: [&str; 11] = [
    "session_key",
    "agent_id",
    "catalog_id",
    "host_id",
    "thread_id",
    "upstream_kind",
    "upstream_ref_json",
    "last_marker_json",
    "last_scanned_at",
    "created_at",
    "updated_at",
];

/// True when every value has the type the store's column holds; a row that fails is skipped.
pub fn fits(cells: &[Cell], kinds: impl IntoIterator<Item = Kind>) -> bool {
    cells.iter().zip(kinds).all(|(c, k)| match (k, c) {
        (Kind::Int, Cell::Int(_)) => true,
        (Kind::Text, Cell::Text(_)) => true,
        (Kind::OptText, Cell::Text(_) | Cell::Null) => true,
        (Kind::OptInt, Cell::Int(_) | Cell::Null) => true,
        (Kind::Provenance, Cell::Text(t)) => t == b"explicit" || t == b"ambient-group",
        _ => false,
    })
}

/// Reads a row of `n` values.
pub fn read_row(r: &Row<'_>, n: usize) -> rusqlite::Result<Vec<Cell>> {
    (0..n).map(|i| Ok(Cell::from_ref(r.get_ref(i)?))).collect()
}

/// Where each of `cols` sits in a row of a source table with the columns `names` (`None`:
/// the table lacks it). A missing column that every generation had makes the table foreign.
pub fn layout(table: &str, cols: &[Col], names: &[String]) -> Result<Vec<Option<usize>>> {
    cols.iter()
        .map(|c| {
            let at = names.iter().position(|n| n.eq_ignore_ascii_case(c.name));
            match (at, c.missing) {
                (None, Missing::Required) => Err(Error::ForeignSchema(format!(
                    "table {table} of the source has no column {}: no generation of this \
                     schema wrote it",
                    c.name
                ))),
                (at, _) => Ok(at),
            }
        })
        .collect()
}

/// Reads `cols` from a source row laid out as `at` (see [`layout`]).
pub fn read_laid_out(
    r: &Row<'_>,
    cols: &[Col],
    at: &[Option<usize>],
) -> rusqlite::Result<Vec<Cell>> {
    cols.iter()
        .zip(at)
        .map(|(c, at)| match (at, c.missing) {
            (Some(i), _) => Ok(Cell::from_ref(r.get_ref(*i)?)),
            (None, Missing::Zero) => Ok(Cell::Int(0)),
            (None, Missing::Explicit) => Ok(Cell::Text(b"explicit".to_vec())),
            (None, _) => Ok(Cell::Null),
        })
        .collect()
}

/// The names of `table`'s columns in the source, or `None` when the table is missing.
pub fn source_columns(conn: &Connection, table: &str) -> Result<Option<Vec<String>>> {
    let names: Vec<String> = conn
        .prepare("SELECT lower(name) FROM pragma_table_info(?1)")?
        .query_map([table], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok((!names.is_empty()).then_some(names))
}
