//! The SQLite store's reads of the signal log (semantics.md#reading): a session's head and
//! `changesSince` in one read transaction, and a session's delete.

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::Result;
use crate::log::{Changes, Head};
use crate::sqlite::inert;
use crate::sqlite::read_event;
use crate::sqlite::tx::Tx;
use crate::tail::Bounds;

/// The columns of an event row, in the order [`inert::event_of`] reads them.
pub(crate) const EVENT_COLUMNS: &str = "sequence, session_key, agent_id, kind, actor_type, \
     actor_id, run_id, session_id, occurred_at, summary, payload_json";

/// Reads the head of `(session_key, agent_id)`; zeroes when there is none. A value that is
/// not an integer (a head the store never wrote, semantics.md#storage) reads as 0.
pub(crate) fn head(conn: &Connection, session_key: &str, agent_id: &str) -> Result<Head> {
    Ok(conn
        .prepare_cached(
            "SELECT last_sequence, pruned_max_sequence FROM session_state_heads \
             WHERE session_key = ?1 AND agent_id = ?2",
        )?
        .query_row([session_key, agent_id], |r| {
            Ok(Head {
                last_sequence: inert::integer(r.get_ref(0)?).unwrap_or(0),
                pruned_max_sequence: inert::integer(r.get_ref(1)?).unwrap_or(0),
            })
        })
        .optional()?
        .unwrap_or_default())
}

/// Reads the events of `(session_key, agent_id)` after `after` (semantics.md#reading), in one read transaction.
///
/// Every stored row of the session after `after` is answered, in sequence order: a row the
/// store would never write itself (semantics.md#storage-foreign-rows) comes back as a
/// [`ChangeEvent::Foreign`] and counts toward `limit` like any other. A row without an integer
/// sequence cannot be placed in the order: it is left out and the answer says `historyGap`.
pub(crate) fn changes_since(
    conn: &Connection,
    session_key: &str,
    agent_id: &str,
    after: i64,
    limit: u32,
) -> Result<Changes> {
    Ok(read_changes(conn, session_key, agent_id, after, limit)?.0)
}

/// [`changes_since`], with what the session's head and rows said beside the events (for the
/// tail, `crate::tail`): `None` when a row of the range could not be answered.
pub(crate) fn read_changes(
    conn: &Connection,
    session_key: &str,
    agent_id: &str,
    after: i64,
    limit: u32,
) -> Result<(Changes, Option<Bounds>)> {
    let tx = Tx::read(conn)?;
    let head = head(&tx, session_key, agent_id)?;
    let sql = format!(
        "SELECT {EVENT_COLUMNS} FROM session_state_events \
         WHERE session_key = ?1 AND agent_id = ?2 AND sequence > ?3 \
         ORDER BY sequence"
    );
    let mut stmt = tx.prepare_cached(&sql)?;
    let mut rows = stmt.query(params![session_key, agent_id, after])?;
    let mut events = Vec::new();
    let mut unanswerable = false;
    // Rows are stepped only until one past the limit is found.
    while events.len() <= limit as usize {
        let Some(r) = rows.next()? else { break };
        match read_event::read(r, head.last_sequence)? {
            Some(e) => events.push(e),
            None => unanswerable = true,
        }
    }
    drop(rows);
    drop(stmt);
    let truncated = events.len() > limit as usize;
    events.truncate(limit as usize);
    let earliest: Option<i64> = tx
        .prepare_cached(
            "SELECT min(sequence) FROM session_state_events WHERE session_key = ?1 AND agent_id = ?2",
        )?
        // SQLite orders integers before text: the minimum is an integer whenever one is stored.
        .query_row(params![session_key, agent_id], |r| Ok(inert::integer(r.get_ref(0)?)))?;
    tx.commit()?;
    let bounds = (!unanswerable).then_some(Bounds {
        pruned_max: head.pruned_max_sequence,
        earliest,
    });
    let changes = Changes {
        state_version: head.last_sequence,
        events,
        truncated,
        earliest_available_sequence: earliest.unwrap_or(if head.last_sequence > 0 {
            head.last_sequence + 1
        } else {
            0
        }),
        history_gap: after < head.pruned_max_sequence || unanswerable,
    };
    Ok((changes, bounds))
}

/// Deletes the events and head of `(session_key, agent_id)`.
pub(crate) fn delete_session(conn: &Connection, session_key: &str, agent_id: &str) -> Result<()> {
    conn.prepare_cached(
        "DELETE FROM session_state_events WHERE session_key = ?1 AND agent_id = ?2",
    )?
    .execute([session_key, agent_id])?;
    conn.prepare_cached(
        "DELETE FROM session_state_heads WHERE session_key = ?1 AND agent_id = ?2",
    )?
    .execute([session_key, agent_id])?;
    Ok(())
}
