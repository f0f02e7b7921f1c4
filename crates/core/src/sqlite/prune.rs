//! SQLite's row operations of a prune (see [`crate::prune`] for the rules): each deleting
//! statement is preceded by one that raises the pruned watermarks over the same victims.

use rusqlite::{params, Connection};

use crate::error::Result;
use crate::prune::PruneRows;

impl PruneRows for Connection {
    fn aged(&self, age_cutoff: i64, limit: usize) -> Result<Vec<i64>> {
        Ok(self
            .prepare_cached(
                "SELECT sequence FROM session_state_events \
                 WHERE occurred_at < ?1 ORDER BY occurred_at, sequence LIMIT ?2",
            )?
            .query_map(params![age_cutoff, limit as i64], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?)
    }

    fn delete_aged(&self, age_cutoff: i64, limit: usize, victims: &[i64]) -> Result<()> {
        self.prepare_cached(RAISE_AGED)?
            .execute(params![age_cutoff, limit as i64])?;
        let mut del =
            self.prepare_cached("DELETE FROM session_state_events WHERE sequence = ?1")?;
        for seq in victims {
            del.execute([seq])?;
        }
        Ok(())
    }

    fn event_count(&self) -> Result<u64> {
        // On the smallest index.
        let count: i64 = self
            .prepare_cached("SELECT count(*) FROM session_state_events")?
            .query_row([], |r| r.get(0))?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    fn nth_sequence(&self, n: u64) -> Result<i64> {
        Ok(self
            .prepare_cached(
                "SELECT max(sequence) FROM (SELECT sequence FROM session_state_events \
                 ORDER BY sequence LIMIT ?1)",
            )?
            .query_row([n as i64], |r| r.get(0))?)
    }

    fn delete_through(&self, last: i64) -> Result<()> {
        self.prepare_cached(RAISE_UP_TO)?.execute([last])?;
        self.prepare_cached("DELETE FROM session_state_events WHERE sequence <= ?1")?
            .execute([last])?;
        Ok(())
    }
}

/// Raises each session's pruned watermark to the largest sequence it is about to lose, as
/// one statement over the victims (`{victims}`, a condition on `e.sequence`). Watermarks
/// first: a reader that sees the rows gone also sees the gap. Only a head the session
/// already has is raised, and only by a sequence within it (`<= last_sequence`): a prune
/// never creates a head, and a row above its session's head (one the store never wrote, semantics.md#storage)
/// was never part of the history a reader is told about.
macro_rules! raise {
    ($victims:literal) => {
        concat!(
            "UPDATE session_state_heads AS h \
             SET pruned_max_sequence = max(h.pruned_max_sequence, v.lost) \
             FROM (SELECT e.session_key AS k, e.agent_id AS a, max(e.sequence) AS lost \
                   FROM session_state_events e JOIN session_state_heads hh \
                   ON hh.session_key = e.session_key AND hh.agent_id = e.agent_id \
                   WHERE ",
            $victims,
            " AND typeof(hh.last_sequence) = 'integer' \
                   AND e.sequence <= hh.last_sequence GROUP BY 1, 2) AS v \
             WHERE h.session_key = v.k AND h.agent_id = v.a \
             AND typeof(h.pruned_max_sequence) = 'integer'"
        )
    };
}

/// The age pass's victims: the oldest `?2` events with `occurred_at < ?1`.
const RAISE_AGED: &str = raise!(
    "e.sequence IN (SELECT sequence FROM session_state_events \
     WHERE occurred_at < ?1 ORDER BY occurred_at, sequence LIMIT ?2)"
);

/// The cap pass's victims: every event up to sequence `?1`.
const RAISE_UP_TO: &str = raise!("e.sequence <= ?1");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prune::events_batch;
    use crate::sqlite::schema;

    /// `n` events: sequence i + 1 belongs to session `s{i % 3}` and occurred at `i`; each
    /// session's head is its last sequence.
    fn events(n: i64) -> Result<Connection> {
        let conn = schema::open(":memory:", 0)?;
        for i in 0..n {
            conn.execute(
                "INSERT INTO session_state_events (session_key, agent_id, kind, actor_type, \
                 occurred_at, summary) VALUES (?1, 'main', 'created', 'system', ?2, '')",
                params![format!("s{}", i % 3), i],
            )?;
            conn.execute(
                "INSERT INTO session_state_heads (session_key, agent_id, last_sequence, \
                 pruned_max_sequence, updated_at) VALUES (?1, 'main', ?2, 0, 1) \
                 ON CONFLICT DO UPDATE SET last_sequence = excluded.last_sequence",
                params![format!("s{}", i % 3), i + 1],
            )?;
        }
        Ok(conn)
    }

    fn kept(conn: &Connection) -> Result<Vec<i64>> {
        let mut stmt = conn.prepare("SELECT sequence FROM session_state_events ORDER BY 1")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn watermark(conn: &Connection, key: &str) -> Result<i64> {
        Ok(conn.query_row(
            "SELECT pruned_max_sequence FROM session_state_heads WHERE session_key = ?1",
            [key],
            |r| r.get(0),
        )?)
    }

    #[test]
    fn the_cap_deletes_the_oldest_rows_batch_by_batch() -> Result<()> {
        let conn = events(25)?;
        // Keep 10: sequences 1..=15 go, 4 at a time, then nothing more.
        let sizes: Vec<usize> = std::iter::from_fn(|| match events_batch(&conn, 0, 10, 4) {
            Ok(0) => None,
            other => Some(other.unwrap()),
        })
        .collect();
        assert_eq!(sizes, [4, 4, 4, 3]);
        assert_eq!(kept(&conn)?, (16..=25).collect::<Vec<_>>());
        // s0 held 1, 4, …, 13; s1 held 2, …, 14; s2 held 3, …, 15.
        assert_eq!(watermark(&conn, "s0")?, 13);
        assert_eq!(watermark(&conn, "s1")?, 14);
        assert_eq!(watermark(&conn, "s2")?, 15);
        Ok(())
    }

    #[test]
    fn age_goes_first_then_the_cap() -> Result<()> {
        let conn = events(20)?;
        // Older than 5: sequences 1..=5 (occurred 0..=4); then the cap of 12 takes 6..=8.
        assert_eq!(events_batch(&conn, 5, 12, 100)?, 5);
        assert_eq!(events_batch(&conn, 5, 12, 100)?, 3);
        assert_eq!(events_batch(&conn, 5, 12, 100)?, 0);
        assert_eq!(kept(&conn)?, (9..=20).collect::<Vec<_>>());
        assert_eq!(watermark(&conn, "s1")?, 8);
        Ok(())
    }
}
