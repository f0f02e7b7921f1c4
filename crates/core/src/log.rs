//! The durable signal log (semantics.md#storage, semantics.md#recording-dedupe, semantics.md#reading): events, per-session heads, and reading them.

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Error, Result};
use crate::read_event::{self, ChangeEvent};
use crate::sqlite::inert;
use crate::sqlite::rows::EVENT_COLUMNS;
use crate::sqlite::tx::Tx;

/// The largest `limit` of `changesSince`, and its default.
pub const MAX_CHANGES: u32 = 200;
/// The largest integer a JS number holds exactly.
pub const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// A session's head: its state version and pruned watermark.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Head {
    /// The state version (largest sequence ever recorded), 0 when none.
    pub last_sequence: i64,
    /// The largest sequence lost to pruning, 0 when none.
    pub pruned_max_sequence: i64,
}

/// Reads the head of `(session_key, agent_id)`; zeroes when there is none. A value that is
/// not an integer (a head the store never wrote, semantics.md#storage) reads as 0.
pub fn head(conn: &Connection, session_key: &str, agent_id: &str) -> Result<Head> {
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

/// The result of `changesSince` (semantics.md#reading).
#[derive(Debug, Clone, PartialEq)]
pub struct Changes {
    /// The session's state version.
    pub state_version: i64,
    /// Every stored event row with `sequence > after`, ascending (semantics.md#reading-foreign-events).
    pub events: Vec<ChangeEvent>,
    /// More events exist past `limit`.
    pub truncated: bool,
    /// The smallest retained sequence, else head + 1 when head > 0, else 0.
    pub earliest_available_sequence: i64,
    /// `after` predates retained history, or a row of the range could not be answered.
    pub history_gap: bool,
}

/// Validates `after` (a non-negative safe integer).
pub fn check_after(after: f64) -> Result<i64> {
    if after.is_finite() && after >= 0.0 && after.fract() == 0.0 && after <= MAX_SAFE_INTEGER {
        Ok(after as i64)
    } else {
        Err(Error::invalid("after must be a non-negative safe integer"))
    }
}

/// Floors and clamps a `limit` to `[1, 200]`; `None` is 200; non-finite is refused.
pub fn clamp_limit(limit: Option<f64>) -> Result<u32> {
    match limit {
        None => Ok(MAX_CHANGES),
        Some(l) if !l.is_finite() => Err(Error::invalid("limit must be a finite number")),
        Some(l) => Ok(l.floor().clamp(1.0, f64::from(MAX_CHANGES)) as u32),
    }
}

/// Reads the events of `(session_key, agent_id)` after `after` (semantics.md#reading), in one read transaction.
///
/// Every stored row of the session after `after` is answered, in sequence order: a row the
/// store would never write itself (semantics.md#storage-foreign-rows) comes back as a
/// [`ChangeEvent::Foreign`] and counts toward `limit` like any other. A row without an integer
/// sequence cannot be placed in the order: it is left out and the answer says `historyGap`.
pub fn changes_since(
    conn: &Connection,
    session_key: &str,
    agent_id: &str,
    after: i64,
    limit: u32,
) -> Result<Changes> {
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
    Ok(Changes {
        state_version: head.last_sequence,
        events,
        truncated,
        earliest_available_sequence: earliest.unwrap_or(if head.last_sequence > 0 {
            head.last_sequence + 1
        } else {
            0
        }),
        history_gap: after < head.pruned_max_sequence || unanswerable,
    })
}

/// Deletes the events and head of `(session_key, agent_id)`.
pub fn delete_session(conn: &Connection, session_key: &str, agent_id: &str) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_and_limit_rules() {
        assert_eq!(check_after(0.0).unwrap(), 0);
        assert_eq!(
            check_after(MAX_SAFE_INTEGER).unwrap(),
            9_007_199_254_740_991
        );
        for bad in [-1.0, 0.5, f64::NAN, f64::INFINITY, MAX_SAFE_INTEGER + 2.0] {
            assert_eq!(
                check_after(bad).unwrap_err().code(),
                "ERR_INVALID_ARG",
                "{bad}"
            );
        }
        assert_eq!(clamp_limit(None).unwrap(), 200);
        assert_eq!(clamp_limit(Some(0.0)).unwrap(), 1);
        assert_eq!(clamp_limit(Some(-5.0)).unwrap(), 1);
        assert_eq!(clamp_limit(Some(2.9)).unwrap(), 2);
        assert_eq!(clamp_limit(Some(1e9)).unwrap(), 200);
        assert_eq!(
            clamp_limit(Some(f64::NAN)).unwrap_err().code(),
            "ERR_INVALID_ARG"
        );
        assert_eq!(
            clamp_limit(Some(f64::NEG_INFINITY)).unwrap_err().code(),
            "ERR_INVALID_ARG"
        );
    }
}
