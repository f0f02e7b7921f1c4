//! The import's first write transaction: the divergence check, the AUTOINCREMENT counter and
//! the pruned watermarks.

use rusqlite::{params, Connection, OptionalExtension};

use super::rows::{self, Cell};
use super::{each_row, head_key, kinds, Heads, ImportSummary, Plan, EVENT_SQL};
use crate::error::{Error, Result};

/// The first write transaction: reads the destination's heads, refuses a diverged history
/// (writing nothing), raises the AUTOINCREMENT counter and writes the pruned watermarks.
/// Returns the destination's heads as they were, and the sequences to insert.
pub(super) fn check(
    src: &Connection,
    dst: &Connection,
    plan: &Plan,
    summary: &mut ImportSummary,
) -> Result<(Heads, Vec<i64>)> {
    dst.execute_batch("BEGIN IMMEDIATE")?;
    let done = check_in(src, dst, plan, summary).and_then(|v| plan.verify().map(|()| v));
    let end = if done.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let ended = dst.execute_batch(end);
    let done = done?;
    ended?;
    Ok(done)
}

fn check_in(
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
    let mut by_sequence = dst.prepare(&format!("{EVENT_SQL} WHERE sequence = ?1"))?;
    let mut by_dedupe =
        dst.prepare("SELECT sequence FROM session_state_events WHERE dedupe_key = ?1")?;
    let mut insert = Vec::new();
    let s = &mut summary.events;
    let mut present = 0;
    each_row(
        src,
        plan.events.as_deref(),
        &kinds(&rows::EVENTS),
        &mut s.skipped,
        |e| {
            let seq = e[0].int().expect("checked by fits");
            let held = by_sequence
                .query_row([seq], |r| rows::read_row(r, 12))
                .optional()?;
            match held {
                Some(d) if d == e => present += 1,
                Some(_) => {
                    return Err(Error::ImportDiverged(format!(
                        "sequence {seq} holds another event in the destination"
                    )))
                }
                None => {
                    let (last, pruned) = before.get(&head_key(&e)).copied().unwrap_or((0, 0));
                    if seq <= pruned {
                        present += 1;
                    } else if seq <= last {
                        return Err(Error::ImportDiverged(format!(
                            "the destination carries the session of sequence {seq} to version \
                             {last} without that event"
                        )));
                    } else {
                        if e[1] != Cell::Null {
                            if let Some(other) = by_dedupe
                                .query_row([&e[1]], |r| r.get::<_, i64>(0))
                                .optional()?
                            {
                                return Err(Error::ImportDiverged(format!(
                                    "the dedupe key of sequence {seq} belongs to sequence {other} \
                                     in the destination"
                                )));
                            }
                        }
                        insert.push(seq);
                    }
                }
            }
            Ok(())
        },
    )?;
    s.present = present;
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
    each_row(
        src,
        plan.heads.as_deref(),
        &kinds(&rows::HEADS),
        &mut ignored,
        |h| {
            if h[3].int().is_some_and(|w| w > 0) {
                head.execute(params![h[0], h[1], h[3], h[4]])?;
            }
            Ok(())
        },
    )?;
    Ok((before, insert))
}
