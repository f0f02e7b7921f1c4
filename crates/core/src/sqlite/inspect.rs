//! Read-only inspection of a database file, for the `session-awareness` command-line tool:
//! sessions with their state version and pruned watermark, cursors with L/N/M and lag, the
//! pending notices the cursor rows imply, row counts, and a session's raw events.
//!
//! The file is never changed. It must exist (it is never created) and be a SQLite database.
//! When a `-wal` file sits beside it (a gateway has it open, or crashed), it is read through
//! that WAL like any reader; otherwise every change is already in the main file, which is
//! then read as an immutable snapshot so that SQLite creates no `-wal` or `-shm` file.
//! Rows this version would refuse (an unknown kind or provenance) are shown as stored; a
//! value no row the store writes holds (semantics.md#storage) never fails the report: text that is not valid
//! UTF-8 is shown with U+FFFD in place of each bad sequence, a blob as `x'<hex>'`, NULL as
//! empty text (or absent, for an optional field) or 0, a non-integer number truncated.

use std::io::Read;
use std::path::Path;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Row};

use crate::error::{Error, Result};
use crate::keys;
use crate::log::check_after;
use crate::queue::Notice;
use crate::read_event::ChangeEvent;
use crate::shapes::CursorRow;
use crate::sqlite::inert::{lossy_integer, lossy_opt_text, lossy_text};
use crate::sqlite::read_event;

mod cursors;
use cursors::cursors;

/// The tables of the schema (semantics.md#storage), in the order the report names them.
pub const TABLES: [&str; 4] = [
    "session_state_events",
    "session_state_heads",
    "session_watch_cursors",
    "session_upstream_links",
];

/// The first 16 bytes of every SQLite database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// How long a read waits for a writer that holds the file (rollback-journal databases only;
/// WAL readers never wait).
const READ_BUSY_TIMEOUT_MS: u64 = 5_000;

/// One stored event, field for field, with `kind` and `actor_type` as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    /// The global sequence.
    pub sequence: i64,
    /// The session.
    pub session_key: String,
    /// The agent.
    pub agent_id: String,
    /// The kind, as stored.
    pub kind: String,
    /// The actor type, as stored.
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
    /// The payload's compact JSON text, as stored.
    pub payload_json: Option<String>,
}

/// One row of `session_state_heads`, with what is retained of the session's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    /// The session.
    pub session_key: String,
    /// The agent.
    pub agent_id: String,
    /// The state version (the head's `last_sequence`).
    pub state_version: i64,
    /// The pruned watermark: `changesSince(after)` with `after` below it reports a gap.
    pub pruned_max_sequence: i64,
    /// When the head last moved (epoch ms).
    pub updated_at: i64,
    /// Events of the session still in the log.
    pub retained_events: i64,
    /// The smallest retained sequence, if any event is retained.
    pub earliest_retained_sequence: Option<i64>,
}

/// One row of `session_watch_cursors` as stored (the row `cursor_rows` returns), with the
/// target's version and the watcher's lag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InspectedCursor {
    /// The row as stored.
    pub row: CursorRow,
    /// The target's state version (under the target key's own agent).
    pub target_version: i64,
    /// Retained events of the target after L: what the watcher has not acknowledged yet.
    pub lag: i64,
    /// N != L on a cursor the store could have written: a notice is pending. An inert row
    /// (semantics.md#storage: a bare, empty or self pair, an unknown provenance, a value the store never
    /// writes, a position above the target's version) never has one.
    pub pending: bool,
}

impl InspectedCursor {
    /// The fields `inspectDatabase` shows of each cursor, in the JavaScript API's spelling:
    /// the row's ([`CursorRow::FIELDS`]) but its scope, then the three figures.
    pub fn fields() -> Vec<&'static str> {
        let row = CursorRow::FIELDS.iter().filter(|f| **f != "scope");
        row.copied()
            .chain(["targetVersion", "lag", "pending"])
            .collect()
    }
}

/// How many rows each table holds (0 for a missing table).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
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

/// The whole read-only report of one database file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// The path as given.
    pub path: String,
    /// The size of the main file in bytes.
    pub file_bytes: u64,
    /// A `-wal` file existed and was read through.
    pub wal: bool,
    /// Tables of the schema that the file does not have (all four for a foreign database).
    pub missing_tables: Vec<String>,
    /// Row counts.
    pub counts: RowCounts,
    /// The global sequence's high-water mark: the largest sequence ever given, 0 if none.
    pub last_sequence: i64,
    /// The oldest retained event (by `occurred_at`, then sequence): the next to be pruned.
    pub oldest_event: Option<EventRow>,
    /// Every head, by session key then agent.
    pub sessions: Vec<SessionRow>,
    /// Every cursor, by watcher then target.
    pub cursors: Vec<InspectedCursor>,
    /// The notices the cursor rows leave pending, in the order a gateway-start sweep
    /// re-queues them (ascending N).
    pub pending_notices: Vec<Notice>,
}

/// A session's events after a version, read-only and unbounded (the inspection counterpart
/// of `changes_since`).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvents {
    /// The session.
    pub session_key: String,
    /// The agent the events were read for.
    pub agent_id: String,
    /// The state version (0 when the session has no head).
    pub state_version: i64,
    /// The pruned watermark.
    pub pruned_max_sequence: i64,
    /// `since` predates retained history (`since < pruned_max_sequence`), or a stored row
    /// could not be answered (semantics.md#reading-foreign-events).
    pub history_gap: bool,
    /// Every stored event row with `sequence > since`, ascending, each as `changesSince`
    /// answers it (a foreign row in its safe form).
    pub events: Vec<ChangeEvent>,
}

impl Inspection {
    /// The report with its [`Inspection::pending_notices`] filled in from its cursors: one
    /// notice for each pending cursor, by ascending N, then watcher, then target.
    pub(crate) fn with_pending_notices(self) -> Self {
        let mut pending: Vec<&CursorRow> = self
            .cursors
            .iter()
            .filter(|c| c.pending)
            .map(|c| &c.row)
            .collect();
        pending.sort_by(|a, b| {
            (a.notified, &a.watcher, &a.target).cmp(&(b.notified, &b.watcher, &b.target))
        });
        let pending_notices = pending
            .into_iter()
            .map(|c| Notice::new(&c.watcher, &c.target, c.last_seen, None))
            .collect();
        Self {
            pending_notices,
            ..self
        }
    }
}

/// The tables of [`TABLES`] that `has` says are missing, in that order.
pub(crate) fn missing_tables(has: impl Fn(&str) -> bool) -> Vec<String> {
    TABLES
        .iter()
        .filter(|t| !has(t))
        .map(|t| (*t).to_owned())
        .collect()
}

/// Checks the arguments of a `read_events`: a non-empty key, the agent (defaulting to the
/// key's own, else `main`) and `since`. Returns the agent and `since`.
pub(crate) fn session_args(
    session_key: &str,
    agent_id: Option<&str>,
    since: f64,
) -> Result<(String, i64)> {
    if session_key.is_empty() {
        return Err(Error::invalid("sessionKey must be a non-empty string"));
    }
    let agent = keys::resolve_agent(session_key, agent_id)?;
    Ok((agent, check_after(since)?))
}

/// Inspects the database at `path` without changing it.
///
/// # Errors
/// `ERR_DB` when the file is missing (it is not created) or cannot be read,
/// `ERR_NOT_SQLITE` when it is not a regular file holding a SQLite database.
///
/// # Example
/// ```
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("state.sqlite");
/// # let path = path.to_str().unwrap();
/// use session_awareness_core::{inspect, Hooks, Options, Store};
/// Store::open(path, Options::default(), Hooks::default())?.close();
/// let report = inspect::inspect(path)?;
/// assert_eq!(report.counts.events, 0);
/// assert!(report.missing_tables.is_empty());
/// assert_eq!(inspect::inspect("/no/such/file.sqlite").unwrap_err().code(), "ERR_DB");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn inspect(path: &str) -> Result<Inspection> {
    let (conn, file_bytes, wal) = open_read_only(path)?;
    let on_err = |e| db_error(path, e);
    let tx = conn.unchecked_transaction().map_err(on_err)?;
    let present = present_tables(&tx).map_err(on_err)?;
    let has = |t: &str| present.iter().any(|p| p == t);
    let count = |table: &str, sql: &str| -> rusqlite::Result<i64> {
        if has(table) {
            tx.query_row(sql, [], |r| r.get(0))
        } else {
            Ok(0)
        }
    };
    let counts = RowCounts {
        events: count(TABLES[0], COUNT_EVENTS).map_err(on_err)?,
        heads: count(TABLES[1], COUNT_HEADS).map_err(on_err)?,
        cursors: count(TABLES[2], COUNT_CURSORS).map_err(on_err)?,
        upstream_links: count(TABLES[3], COUNT_LINKS).map_err(on_err)?,
    };
    let report = Inspection {
        path: path.to_owned(),
        file_bytes,
        wal,
        missing_tables: missing_tables(has),
        counts,
        last_sequence: last_sequence(&tx, has("sqlite_sequence")).map_err(on_err)?,
        oldest_event: if has(TABLES[0]) {
            oldest_event(&tx).map_err(on_err)?
        } else {
            None
        },
        sessions: if has(TABLES[1]) {
            let query = if has(TABLES[0]) {
                SESSIONS
            } else {
                SESSIONS_WITHOUT_EVENTS
            };
            sessions(&tx, query).map_err(on_err)?
        } else {
            Vec::new()
        },
        cursors: if has(TABLES[2]) {
            cursors(&tx, has(TABLES[0]), has(TABLES[1])).map_err(on_err)?
        } else {
            Vec::new()
        },
        pending_notices: Vec::new(),
    };
    tx.finish().map_err(on_err)?;
    Ok(report.with_pending_notices())
}

/// Reads the events of `(session_key, agent_id)` with `sequence > since`, ascending, without
/// changing the file. `agent_id` defaults to the key's own, else `main`.
///
/// # Errors
/// `ERR_INVALID_ARG` for an empty key, a bad agent or a `since` that is not a non-negative
/// safe integer; otherwise as [`inspect`].
pub fn read_events(
    path: &str,
    session_key: &str,
    agent_id: Option<&str>,
    since: f64,
) -> Result<SessionEvents> {
    let (agent, since) = session_args(session_key, agent_id, since)?;
    let (conn, _, _) = open_read_only(path)?;
    let on_err = |e| db_error(path, e);
    let tx = conn.unchecked_transaction().map_err(on_err)?;
    let present = present_tables(&tx).map_err(on_err)?;
    let has = |t: &str| present.iter().any(|p| p == t);
    let (state_version, pruned_max_sequence) = if has(TABLES[1]) {
        tx.query_row(
            "SELECT last_sequence, pruned_max_sequence FROM session_state_heads \
             WHERE session_key = ?1 AND agent_id = ?2",
            params![session_key, agent],
            |r| Ok((lossy_integer(r.get_ref(0)?), lossy_integer(r.get_ref(1)?))),
        )
        .optional()
        .map_err(on_err)?
        .unwrap_or((0, 0))
    } else {
        (0, 0)
    };
    let mut unanswerable = false;
    let mut events = Vec::new();
    if has(TABLES[0]) {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM session_state_events \
             WHERE session_key = ?1 AND agent_id = ?2 AND sequence > ?3 ORDER BY sequence"
        );
        let mut stmt = tx.prepare(&sql).map_err(on_err)?;
        let mut rows = stmt
            .query(params![session_key, agent, since])
            .map_err(on_err)?;
        while let Some(r) = rows.next().map_err(on_err)? {
            match read_event::read(r, state_version).map_err(on_err)? {
                Some(e) => events.push(e),
                None => unanswerable = true,
            }
        }
    }
    tx.finish().map_err(on_err)?;
    Ok(SessionEvents {
        session_key: session_key.to_owned(),
        agent_id: agent,
        state_version,
        pruned_max_sequence,
        history_gap: since < pruned_max_sequence || unanswerable,
        events,
    })
}

/// Opens `path` read-only as described in the module docs: refuses a missing file, anything
/// but a regular file, and a file without the SQLite header. Returns the connection, the
/// file size and whether a `-wal` file was present.
pub(crate) fn open_read_only(path: &str) -> Result<(Connection, u64, bool)> {
    if path.is_empty() {
        return Err(Error::invalid("path must be a non-empty string"));
    }
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("{path}: {e}"))))?;
    if !meta.is_file() {
        return Err(Error::NotSqlite(format!("{path} is not a regular file")));
    }
    // Another library of this process on the file: the read-only connection's close would
    // drop that library's locks (and this one's would be invisible to it).
    let family = crate::sqlite::exclusive::Family::of(Path::new(path))?;
    let found = crate::sqlite::exclusive::check(&family)?;
    // SQLite treats an empty file as an empty database; anything else must carry the header.
    // Read through a handle of our own only when no store of this process has the file open:
    // closing it would drop that store's locks (a store's file passed the check at its open).
    let held = found.is_some_and(|s| s.ours);
    if meta.len() > 0 && !held {
        let mut head = [0u8; 16];
        let read = std::fs::File::open(path)
            .and_then(|f| f.take(16).read(&mut head))
            .map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("{path}: {e}"))))?;
        if read < 16 || &head != SQLITE_MAGIC {
            return Err(Error::NotSqlite(format!(
                "{path} is not a SQLite database (no SQLite header)"
            )));
        }
    }
    let wal = Path::new(&format!("{path}-wal")).exists();
    crate::sqlite::exclusive::install();
    let conn = Connection::open_with_flags(
        uri(path, !wal)?,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| db_error(path, e))?;
    conn.busy_timeout(std::time::Duration::from_millis(READ_BUSY_TIMEOUT_MS))
        .map_err(|e| db_error(path, e))?;
    conn.execute_batch("PRAGMA query_only = ON")
        .map_err(|e| db_error(path, e))?;
    crate::sqlite::inert::register(&conn).map_err(|e| db_error(path, e))?;
    Ok((conn, meta.len(), wal))
}

/// The `file:` URI of `path`, read-only, `immutable` when no WAL has to be read. URI
/// delimiters in the path are percent-encoded.
fn uri(path: &str, immutable: bool) -> Result<String> {
    let absolute = std::path::absolute(path)?;
    let mut text = absolute.to_string_lossy().replace('\\', "/");
    if !text.starts_with('/') {
        // A Windows drive path: SQLite wants `file:///C:/...`.
        text.insert(0, '/');
    }
    let mut out = String::from("file://");
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '?' => out.push_str("%3F"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    out.push_str(if immutable {
        "?mode=ro&immutable=1"
    } else {
        "?mode=ro"
    });
    Ok(out)
}

/// `SQLITE_NOTADB` means the header passed but the file is not a usable database.
pub(crate) fn db_error(path: &str, e: rusqlite::Error) -> Error {
    match e {
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::NotADatabase => {
            Error::NotSqlite(format!("{path} is not a SQLite database"))
        }
        e => Error::from(e),
    }
}

fn present_tables(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?
        .query_map([], |r| r.get(0))?
        .collect()
}

fn last_sequence(conn: &Connection, has_sequence_table: bool) -> rusqlite::Result<i64> {
    if !has_sequence_table {
        return Ok(0);
    }
    Ok(conn
        .query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = 'session_state_events'",
            [],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(0))
}

/// The columns of an [`EventRow`], in its order.
pub(crate) const EVENT_COLUMNS: &str =
    "sequence, session_key, agent_id, kind, actor_type, actor_id, \
     run_id, session_id, occurred_at, summary, payload_json";

fn event_row(r: &Row<'_>) -> rusqlite::Result<EventRow> {
    Ok(EventRow {
        sequence: r.get(0)?,
        session_key: lossy_text(r.get_ref(1)?),
        agent_id: lossy_text(r.get_ref(2)?),
        kind: lossy_text(r.get_ref(3)?),
        actor_type: lossy_text(r.get_ref(4)?),
        actor_id: lossy_opt_text(r.get_ref(5)?),
        run_id: lossy_opt_text(r.get_ref(6)?),
        session_id: lossy_opt_text(r.get_ref(7)?),
        occurred_at: lossy_integer(r.get_ref(8)?),
        summary: lossy_text(r.get_ref(9)?),
        payload_json: lossy_opt_text(r.get_ref(10)?),
    })
}

fn oldest_event(conn: &Connection) -> rusqlite::Result<Option<EventRow>> {
    conn.query_row(
        &format!(
            "SELECT {EVENT_COLUMNS} FROM session_state_events \
             ORDER BY occurred_at, sequence LIMIT 1"
        ),
        [],
        event_row,
    )
    .optional()
}

const COUNT_EVENTS: &str = "SELECT count(*) FROM session_state_events";
const COUNT_HEADS: &str = "SELECT count(*) FROM session_state_heads";
const COUNT_CURSORS: &str = "SELECT count(*) FROM session_watch_cursors";
const COUNT_LINKS: &str = "SELECT count(*) FROM session_upstream_links";

/// Every head with the count and the smallest sequence of its retained events.
const SESSIONS: &str = "SELECT h.session_key, h.agent_id, h.last_sequence, \
     h.pruned_max_sequence, h.updated_at, \
     (SELECT count(*) FROM session_state_events e \
       WHERE e.session_key = h.session_key AND e.agent_id = h.agent_id), \
     (SELECT min(sequence) FROM session_state_events e \
       WHERE e.session_key = h.session_key AND e.agent_id = h.agent_id) \
     FROM session_state_heads h ORDER BY h.session_key, h.agent_id";

/// [`SESSIONS`] for a file without the events table.
const SESSIONS_WITHOUT_EVENTS: &str = "SELECT session_key, agent_id, last_sequence, \
     pruned_max_sequence, updated_at, 0, NULL \
     FROM session_state_heads ORDER BY session_key, agent_id";

fn sessions(conn: &Connection, sql: &str) -> rusqlite::Result<Vec<SessionRow>> {
    conn.prepare(sql)?
        .query_map([], |r| {
            Ok(SessionRow {
                session_key: lossy_text(r.get_ref(0)?),
                agent_id: lossy_text(r.get_ref(1)?),
                state_version: lossy_integer(r.get_ref(2)?),
                pruned_max_sequence: lossy_integer(r.get_ref(3)?),
                updated_at: lossy_integer(r.get_ref(4)?),
                retained_events: r.get(5)?,
                earliest_retained_sequence: r.get(6)?,
            })
        })?
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_escapes_delimiters_and_marks_immutable() -> Result<()> {
        assert_eq!(
            uri("/tmp/a b/x?y#z%.sqlite", true)?,
            "file:///tmp/a b/x%3Fy%23z%25.sqlite?mode=ro&immutable=1"
        );
        assert_eq!(uri("/s.sqlite", false)?, "file:///s.sqlite?mode=ro");
        Ok(())
    }

    #[test]
    fn not_a_database_maps_to_its_own_code() {
        let notadb = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_NOTADB),
            None,
        );
        assert_eq!(db_error("x", notadb).code(), "ERR_NOT_SQLITE");
        let busy = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
            None,
        );
        assert_eq!(db_error("x", busy).code(), "ERR_DB");
    }
}
