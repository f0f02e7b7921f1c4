//! Retention (§10): events older than `retentionMs`, then all but the newest `maxEvents`,
//! deleted in bounded batches; each batch raises the pruned watermarks before it deletes.

use std::collections::HashMap;

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::Result;

/// Rows deleted per write transaction. A batch of this size takes a few milliseconds, so no
/// other caller waits long for the connection while a large backlog is pruned.
pub const BATCH: usize = 1000;

/// What a prune removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Events deleted.
    pub events_deleted: u64,
    /// Cursors expired.
    pub cursors_deleted: u64,
}

impl std::ops::AddAssign for PruneReport {
    fn add_assign(&mut self, o: Self) {
        self.events_deleted += o.events_deleted;
        self.cursors_deleted += o.cursors_deleted;
    }
}

/// Deletes at most `limit` events that retention no longer keeps, oldest first: by age
/// (`occurred_at < age_cutoff`) while any remain, then by the row cap (`max_events`).
/// Runs inside the caller's write transaction. Returns the number deleted; 0 means done.
pub fn events_batch(
    conn: &Connection,
    age_cutoff: i64,
    max_events: u64,
    limit: usize,
) -> Result<usize> {
    let mut victims: Vec<(i64, String, String)> = conn
        .prepare_cached(
            "SELECT sequence, session_key, agent_id FROM session_state_events \
             WHERE occurred_at < ?1 ORDER BY occurred_at, sequence LIMIT ?2",
        )?
        .query_map(params![age_cutoff, limit as i64], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    if victims.is_empty() {
        // The newest `max_events` rows stay: everything below the max_events-th newest goes.
        let keep_from: Option<i64> = conn
            .prepare_cached("SELECT sequence FROM session_state_events ORDER BY sequence DESC LIMIT 1 OFFSET ?1")?
            .query_row([max_events.saturating_sub(1).min(i64::MAX as u64) as i64], |r| r.get(0))
            .optional()?;
        if let Some(keep_from) = keep_from {
            victims = conn
                .prepare_cached(
                    "SELECT sequence, session_key, agent_id FROM session_state_events \
                     WHERE sequence < ?1 ORDER BY sequence LIMIT ?2",
                )?
                .query_map(params![keep_from, limit as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?
                .collect::<rusqlite::Result<_>>()?;
        }
    }
    if victims.is_empty() {
        return Ok(0);
    }
    let mut lost: HashMap<(&str, &str), i64> = HashMap::new();
    for (seq, key, agent) in &victims {
        let m = lost.entry((key.as_str(), agent.as_str())).or_insert(*seq);
        *m = (*m).max(*seq);
    }
    // Watermarks first: a reader that sees the rows gone also sees the gap.
    let mut raise = conn.prepare_cached(
        "INSERT INTO session_state_heads (session_key, agent_id, last_sequence, pruned_max_sequence, updated_at) \
         VALUES (?1, ?2, ?3, ?3, 0) ON CONFLICT (session_key, agent_id) DO UPDATE SET \
         pruned_max_sequence = max(pruned_max_sequence, excluded.pruned_max_sequence), \
         last_sequence = max(last_sequence, excluded.pruned_max_sequence)",
    )?;
    for ((key, agent), seq) in &lost {
        raise.execute(params![key, agent, seq])?;
    }
    let mut del = conn.prepare_cached("DELETE FROM session_state_events WHERE sequence = ?1")?;
    for (seq, _, _) in &victims {
        del.execute([seq])?;
    }
    Ok(victims.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_add_up() {
        let mut r = PruneReport {
            events_deleted: 1,
            cursors_deleted: 2,
        };
        r += PruneReport {
            events_deleted: 3,
            cursors_deleted: 4,
        };
        assert_eq!(
            r,
            PruneReport {
                events_deleted: 4,
                cursors_deleted: 6
            }
        );
    }
}
