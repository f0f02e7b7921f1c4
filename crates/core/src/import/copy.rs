//! The import's batched copies: events (raising heads as they go), heads, cursors, links.

use std::collections::HashMap;

use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use super::rows::{self, Cell, Kind};
use super::{
    each_row, head_key, kinds, Heads, ImportSummary, Plan, Progress, TableSummary, EVENT_SQL,
};
use crate::error::{Error, Result};

/// Runs `f` in one `BEGIN IMMEDIATE` transaction of the destination.
fn write<T>(dst: &Connection, plan: &Plan, f: impl FnOnce() -> Result<T>) -> Result<T> {
    dst.execute_batch("BEGIN IMMEDIATE")?;
    match f().and_then(|v| plan.verify().map(|()| v)) {
        Ok(v) => {
            dst.execute_batch("COMMIT")?;
            Ok(v)
        }
        Err(e) => {
            let _ = dst.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

/// Copies the events in ascending sequence, cut every `batch` source rows into one
/// transaction; each batch raises its sessions' heads to the largest sequence it wrote.
pub(super) fn copy_events(
    src: &Connection,
    dst: &Connection,
    plan: &Plan,
    (_, insert): &(Heads, Vec<i64>),
    batch: usize,
    summary: &mut ImportSummary,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    let total = plan.totals[0];
    let s = &mut summary.events;
    s.read = total;
    let mut next = insert.iter().copied().peekable();
    let mut pending: Vec<Vec<Cell>> = Vec::with_capacity(batch.min(insert.len()));
    let mut done = 0u64;
    let mut flush = |pending: &mut Vec<Vec<Cell>>, done: u64, s: &mut TableSummary| {
        if !pending.is_empty() {
            s.inserted += write(dst, plan, || write_events(dst, pending))?;
            pending.clear();
        }
        progress(Progress {
            table: "session_state_events",
            done,
            total,
        });
        Ok::<_, Error>(())
    };
    if let Some(sql) = plan.events.as_deref() {
        let kinds = kinds(&rows::EVENTS);
        let mut stmt = src.prepare(sql)?;
        let mut it = stmt.query([])?;
        while let Some(r) = it.next()? {
            let e = rows::read_row(r, kinds.len())?;
            // The check classified every row of this same snapshot, in this same order.
            if rows::fits(&e, kinds.iter().copied()) && next.peek() == e[0].int().as_ref() {
                next.next();
                pending.push(e);
            }
            done += 1;
            if done.is_multiple_of(batch as u64) {
                flush(&mut pending, done, s)?;
            }
        }
    }
    if !done.is_multiple_of(batch as u64) || done == 0 {
        flush(&mut pending, done, s)?;
    }
    Ok(())
}

/// Inserts one batch of events and raises their sessions' heads. Returns the rows inserted.
fn write_events(dst: &Connection, batch: &[Vec<Cell>]) -> Result<u64> {
    let mut insert = dst.prepare_cached(
        "INSERT INTO session_state_events (sequence, dedupe_key, session_key, session_id, \
         agent_id, kind, actor_type, actor_id, run_id, occurred_at, summary, payload_json) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT DO NOTHING",
    )?;
    let mut held = dst.prepare_cached(&format!("{EVENT_SQL} WHERE sequence = ?1"))?;
    let mut raise = dst.prepare_cached(
        "INSERT INTO session_state_heads \
         (session_key, agent_id, last_sequence, pruned_max_sequence, updated_at) \
         VALUES (?1, ?2, ?3, 0, ?4) ON CONFLICT (session_key, agent_id) DO UPDATE SET \
         last_sequence = max(last_sequence, excluded.last_sequence)",
    )?;
    let mut heads: HashMap<(Vec<u8>, Vec<u8>), (i64, i64)> = HashMap::new();
    let mut inserted = 0;
    for e in batch {
        if insert.execute(params_from_iter(e.iter()))? == 1 {
            inserted += 1;
        } else {
            // Another writer took the sequence or the dedupe key since the check.
            let seq = e[0].int().unwrap_or(0);
            let same = held
                .query_row([seq], |r| rows::read_row(r, 12))
                .optional()?;
            if same.as_ref() != Some(e) {
                return Err(Error::ImportDiverged(format!(
                    "sequence {seq} was written in the destination during the import"
                )));
            }
        }
        let (seq, at) = (e[0].int().unwrap_or(0), e[9].int().unwrap_or(0));
        let entry = heads.entry(head_key(e)).or_insert((seq, at));
        *entry = (entry.0.max(seq), entry.1.max(at));
    }
    for ((k, a), (seq, at)) in heads {
        raise.execute(params![Cell::Text(k), Cell::Text(a), seq, at])?;
    }
    Ok(inserted)
}

/// Raises the destination's heads to the source's (never lowers them).
pub(super) fn copy_heads(
    src: &Connection,
    dst: &Connection,
    plan: &Plan,
    (before, _): &(Heads, Vec<i64>),
    batch: usize,
    summary: &mut ImportSummary,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    let total = plan.totals[1];
    let mut all = Vec::new();
    let s = &mut summary.heads;
    s.read = total;
    each_row(
        src,
        plan.heads.as_deref(),
        &kinds(&rows::HEADS),
        &mut s.skipped,
        |h| {
            all.push(h);
            Ok(())
        },
    )?;
    let mut done = s.skipped;
    for chunk in all.chunks(batch) {
        write(dst, plan, || {
            let mut up = dst.prepare_cached(
                "INSERT INTO session_state_heads \
                 (session_key, agent_id, last_sequence, pruned_max_sequence, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (session_key, agent_id) DO UPDATE SET \
                 last_sequence = max(last_sequence, excluded.last_sequence), \
                 pruned_max_sequence = max(pruned_max_sequence, excluded.pruned_max_sequence), \
                 updated_at = max(updated_at, excluded.updated_at)",
            )?;
            for h in chunk {
                up.execute(params_from_iter(h.iter()))?;
            }
            Ok(())
        })?;
        for h in chunk {
            let (l, p) = (h[2].int().unwrap_or(0), h[3].int().unwrap_or(0));
            match before.get(&(text(&h[0]), text(&h[1]))) {
                None => s.inserted += 1,
                Some(&(dl, dp)) if dl >= l && dp >= p => s.present += 1,
                Some(_) => s.updated += 1,
            }
        }
        done += chunk.len() as u64;
        progress(Progress {
            table: "session_state_heads",
            done,
            total,
        });
    }
    Ok(())
}

fn text(c: &Cell) -> Vec<u8> {
    match c {
        Cell::Text(t) => t.clone(),
        _ => Vec::new(),
    }
}

/// Inserts the cursors the destination lacks, keeping its own.
pub(super) fn copy_cursors(
    src: &Connection,
    dst: &Connection,
    plan: &Plan,
    batch: usize,
    summary: &mut ImportSummary,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    let mut all = Vec::new();
    let s = &mut summary.cursors;
    s.read = plan.totals[2];
    let mut sentinels = 0;
    each_row(
        src,
        plan.cursors.as_deref(),
        &kinds(&rows::CURSORS),
        &mut s.skipped,
        |c| {
            let sentinel = matches!(&c[0], Cell::Text(w) if w.starts_with(b"ambient-group-watch:"));
            if plan.sentinels && sentinel {
                sentinels += 1;
            } else {
                all.push(c);
            }
            Ok(())
        },
    )?;
    s.skipped += sentinels;
    let sql = "INSERT INTO session_watch_cursors (watcher_session_key, watcher_store_path, \
         target_session_key, last_seen_sequence, notified_sequence, material_sequence, \
         provenance, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT DO NOTHING";
    copy_inserts(
        dst,
        plan,
        "session_watch_cursors",
        sql,
        &all,
        batch,
        s,
        plan.totals[2],
        progress,
    )
}

/// Inserts the links the destination lacks, mapped from OpenClaw's columns; a source without
/// them has its link rows counted as skipped.
pub(super) fn copy_links(
    src: &Connection,
    dst: &Connection,
    plan: &Plan,
    batch: usize,
    summary: &mut ImportSummary,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    let total = plan.totals[3];
    let s = &mut summary.upstream_links;
    s.read = total;
    if plan.links.is_none() {
        s.skipped = total;
    }
    let link_kinds: Vec<Kind> = rows::LINKS.iter().map(|(_, _, k)| *k).collect();
    let mut all = Vec::new();
    each_row(
        src,
        plan.links.as_deref(),
        &link_kinds,
        &mut s.skipped,
        |l| {
            all.push(l);
            Ok(())
        },
    )?;
    let names: Vec<&str> = rows::LINKS.iter().map(|(n, _, _)| *n).collect();
    let sql = format!(
        "INSERT INTO session_upstream_links ({}, failure_count, own_messages_json) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0, '[]') ON CONFLICT DO NOTHING",
        names.join(", ")
    );
    copy_inserts(
        dst,
        plan,
        "session_upstream_links",
        &sql,
        &all,
        batch,
        s,
        total,
        progress,
    )
}

/// Inserts `all` with `sql` (which ignores rows already present), `batch` per transaction.
#[allow(clippy::too_many_arguments)]
fn copy_inserts(
    dst: &Connection,
    plan: &Plan,
    table: &'static str,
    sql: &str,
    all: &[Vec<Cell>],
    batch: usize,
    s: &mut TableSummary,
    total: u64,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    let mut done = s.skipped;
    for chunk in all.chunks(batch) {
        let inserted = write(dst, plan, || {
            let mut stmt = dst.prepare_cached(sql)?;
            let mut n = 0;
            for row in chunk {
                n += stmt.execute(params_from_iter(row.iter()))? as u64;
            }
            Ok(n)
        })?;
        s.inserted += inserted;
        s.present += chunk.len() as u64 - inserted;
        done += chunk.len() as u64;
        progress(Progress { table, done, total });
    }
    Ok(())
}
