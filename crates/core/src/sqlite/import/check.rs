//! The import's first write transaction: the divergence check, the AUTOINCREMENT counter and
//! the pruned watermarks.

use rusqlite::{params, Connection, OptionalExtension};

use super::rows::{self, Cell};
use super::{each_row, head_key, Heads, ImportSummary, Plan};
use crate::error::{Error, Result};

/// The check and the first write transaction: classifies every source event against the
/// destination (refusing a diverged history, writing nothing), then raises the AUTOINCREMENT
/// counter and writes the pruned watermarks. Returns the destination's heads as they were,
/// and the sequences to insert.
///
/// The classification reads the whole source, so it runs in a read transaction of the
/// destination, without its write lock; the write transaction repeats it only when the
/// destination's log or heads moved in between.
pub(super) fn check(
    src: &Connection,
    dst: &Connection,
    plan: &Plan,
    summary: &mut ImportSummary,
) -> Result<(Heads, Vec<i64>)> {
    let read = in_tx(dst, false, || {
        Ok((fingerprint(dst)?, classify(src, dst, plan, summary)?))
    });
    let (seen, mut found) = read?;
    in_tx(dst, true, || {
        if fingerprint(dst)? != seen {
            found = classify(src, dst, plan, summary)?;
        }
        reserve(src, dst, plan)?;
        plan.verify()
    })?;
    Ok(found)
}

/// Runs `f` in a read (`immediate`: write) transaction, committed unless it fails.
fn in_tx<T>(dst: &Connection, immediate: bool, f: impl FnOnce() -> Result<T>) -> Result<T> {
    if immediate {
        dst.execute_batch("BEGIN IMMEDIATE")?;
    } else {
        dst.execute_batch("BEGIN")?;
    }
    let done = f();
    let ended = if done.is_ok() {
        dst.execute_batch("COMMIT")
    } else {
        dst.execute_batch("ROLLBACK")
    };
    let done = done?;
    ended?;
    Ok(done)
}

/// What the classification depends on: the destination's log (it only grows at the top and
/// shrinks by deletes) and its heads.
fn fingerprint(dst: &Connection) -> Result<[i64; 6]> {
    Ok(dst.query_row(
        "SELECT (SELECT coalesce(max(seq), 0) FROM sqlite_sequence                  WHERE name = 'session_state_events'),                 (SELECT count(*) FROM session_state_events),                 (SELECT coalesce(max(sequence), 0) FROM session_state_events),                 (SELECT count(*) FROM session_state_heads),                 (SELECT coalesce(sum(last_sequence), 0) FROM session_state_heads),                 (SELECT coalesce(sum(pruned_max_sequence), 0) FROM session_state_heads)",
        [],
        |r| Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?]),
    )?)
}

fn classify(
    src: &Connection,
    dst: &Connection,
    plan: &Plan,
    summary: &mut ImportSummary,
) -> Result<(Heads, Vec<i64>)> {
    let mut before = Heads::new();
    {
        let mut stmt = dst.prepare(
            "SELECT session_key, agent_id, last_sequence, pruned_max_sequence \
             FROM session_state_heads",
        )?;
        let mut it = stmt.query([])?;
        while let Some(r) = it.next()? {
            let c = rows::read_row(r, 4)?;
            if let (Cell::Text(k), Cell::Text(a), Cell::Int(l), Cell::Int(p)) =
                (&c[0], &c[1], &c[2], &c[3])
            {
                before.insert((k.clone(), a.clone()), (*l, *p));
            }
        }
    }
    let mut by_sequence = dst.prepare(
        "SELECT sequence, dedupe_key, session_key, session_id, agent_id, kind, \
         actor_type, actor_id, run_id, occurred_at, summary, payload_json \
         FROM session_state_events WHERE sequence = ?1",
    )?;
    let mut by_dedupe =
        dst.prepare("SELECT sequence FROM session_state_events WHERE dedupe_key = ?1")?;
    let mut insert = Vec::new();
    let s = &mut summary.events;
    s.skipped = 0;
    let mut present = 0;
    each_row(src, plan.events, &rows::EVENTS, &mut s.skipped, |e| {
        let seq = e[0].int().expect("checked by fits");
        let held = by_sequence
            .query_row([seq], |r| rows::read_row(r, 12))
            .optional()?;
        let owner = || {
            if e[1] == Cell::Null {
                return Ok(None);
            }
            let found = by_dedupe.query_row([&e[1]], |r| r.get::<_, i64>(0));
            Ok(found.optional()?)
        };
        if classify_event(seq, &e, held.as_deref(), &before, owner)? {
            insert.push(seq);
        } else {
            present += 1;
        }
        Ok(())
    })?;
    s.present = present;
    Ok((before, insert))
}

/// Classifies the source event `e` (at `seq`) against the destination, which holds `held` at
/// that sequence and had the heads `before`: true when it is to be inserted, false when the
/// destination has it already (the same row, or a sequence its session pruned). A diverged
/// history is `ERR_IMPORT_DIVERGED`: another event at the sequence, a session carried past it
/// without it, or its dedupe key held by the sequence `owner` answers (asked only then).
pub(crate) fn classify_event(
    seq: i64,
    e: &[Cell],
    held: Option<&[Cell]>,
    before: &Heads,
    owner: impl FnOnce() -> Result<Option<i64>>,
) -> Result<bool> {
    match held {
        Some(d) if d == e => return Ok(false),
        Some(_) => {
            return Err(Error::ImportDiverged(format!(
                "sequence {seq} holds another event in the destination"
            )))
        }
        None => {}
    }
    let (last, pruned) = before.get(&head_key(e)).copied().unwrap_or((0, 0));
    if seq <= pruned {
        return Ok(false);
    }
    if seq <= last {
        return Err(Error::ImportDiverged(format!(
            "the destination carries the session of sequence {seq} to version {last} without \
             that event"
        )));
    }
    if let Some(other) = owner()? {
        return Err(Error::ImportDiverged(format!(
            "the dedupe key of sequence {seq} belongs to sequence {other} in the destination"
        )));
    }
    Ok(true)
}

/// Raises the AUTOINCREMENT counter to the source's largest sequence and writes the pruned
/// watermarks.
fn reserve(src: &Connection, dst: &Connection, plan: &Plan) -> Result<()> {
    dst.execute(
        "INSERT INTO sqlite_sequence (name, seq) SELECT 'session_state_events', 0 \
         WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'session_state_events')",
        [],
    )?;
    dst.execute(
        "UPDATE sqlite_sequence SET seq = max(seq, ?1) WHERE name = 'session_state_events'",
        [plan.last_sequence],
    )?;
    // Watermarks first: the events they cover are gone from the source, so a read made while
    // the import runs reports the gap it will report afterwards.
    let mut head = dst.prepare(
        "INSERT INTO session_state_heads \
         (session_key, agent_id, last_sequence, pruned_max_sequence, updated_at) \
         VALUES (?1, ?2, ?3, ?3, ?4) ON CONFLICT (session_key, agent_id) DO UPDATE SET \
         last_sequence = max(last_sequence, excluded.last_sequence), \
         pruned_max_sequence = max(pruned_max_sequence, excluded.pruned_max_sequence)",
    )?;
    let mut ignored = 0;
    each_row(src, plan.heads, &rows::HEADS, &mut ignored, |h| {
        if h[3].int().is_some_and(|w| w > 0) {
            head.execute(params![h[0], h[1], h[3], h[4]])?;
        }
        Ok(())
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_moves_with_every_change_the_classification_reads() -> Result<()> {
        let dst = crate::sqlite::schema::open(":memory:", 1000)?;
        let mut last = fingerprint(&dst)?;
        assert_eq!(last, [0; 6]);
        for (sql, want) in [
            (
                "INSERT INTO session_state_events (sequence, session_key, agent_id, kind, \
                 actor_type, occurred_at, summary) VALUES (4, 'k', 'main', 'created', 'system', 1, 's')",
                [4, 1, 4, 0, 0, 0],
            ),
            (
                "INSERT INTO session_state_heads VALUES ('k', 'main', 4, 0, 1)",
                [4, 1, 4, 1, 4, 0],
            ),
            (
                "UPDATE session_state_heads SET pruned_max_sequence = 4",
                [4, 1, 4, 1, 4, 4],
            ),
            ("DELETE FROM session_state_events", [4, 0, 0, 1, 4, 4]),
            (
                "UPDATE session_state_heads SET last_sequence = 5",
                [4, 0, 0, 1, 5, 4],
            ),
        ] {
            dst.execute_batch(sql)?;
            let now = fingerprint(&dst)?;
            assert_ne!(now, last, "{sql}");
            assert_eq!(now, want, "{sql}");
            last = now;
        }
        Ok(())
    }
}
