//! The SQLite store's rules for raw rows, applied to rows another store read: an event row
//! answered as `changesSince` answers it ([`read`], which reads a SQLite row),
//! and a cursor row judged live as the inspection judges it ([`inert::live`]). The
//! PostgreSQL store's inspection uses them, so both stores' reports agree row for row.

use rusqlite::params;
use rusqlite::types::ValueRef;

use crate::error::Result;
use crate::read_event;
use crate::sqlite::inert;
use crate::sqlite::inspect::{EventRow, InspectedCursor};
use crate::sqlite::read_event::read;

/// The cursor is one the store acts on (the rule of the SQLite report, [`inert::live`]), with
/// positions within its target's head.
pub(crate) fn live(inspected: &InspectedCursor) -> bool {
    let c = &inspected.row;
    let keys = [
        ValueRef::Text(c.watcher.as_bytes()),
        ValueRef::Text(c.target.as_bytes()),
    ];
    let positions = [c.last_seen, c.notified, c.material].map(ValueRef::Integer);
    inert::live(
        keys,
        positions,
        ValueRef::Text(c.provenance.as_bytes()),
        ValueRef::Integer(c.updated_at),
        inspected.target_version,
    )
}

/// The rows as a read answers them, through the one reader of event rows
/// ([`read`]), which reads a SQLite row: each is passed through a private
/// in-memory connection as the parameters of one `SELECT`, so a PostgreSQL store's rows get
/// exactly the answer a file's would.
pub(crate) fn answer(rows: Vec<EventRow>, head: i64) -> Result<Vec<read_event::ChangeEvent>> {
    let conn = rusqlite::Connection::open_in_memory()?;
    let mut stmt = conn.prepare("SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11")?;
    let mut out = Vec::with_capacity(rows.len());
    for e in rows {
        let read = stmt.query_row(
            params![
                e.sequence,
                e.session_key,
                e.agent_id,
                e.kind,
                e.actor_type,
                e.actor_id,
                e.run_id,
                e.session_id,
                e.occurred_at,
                e.summary,
                e.payload_json
            ],
            |r| read(r, head),
        )?;
        // Every PostgreSQL row has an integer sequence, so every row has an answer.
        out.extend(read);
    }
    Ok(out)
}
