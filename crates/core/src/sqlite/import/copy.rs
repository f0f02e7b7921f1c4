//! The import's batched copies: events (raising heads as they go), heads, cursors, links.

use std::collections::HashMap;

use rusqlite::{params, CachedStatement, Connection, OptionalExtension};

use super::rows::{self, Cell};
use super::{each_row, head_key, kinds, Heads, ImportSummary, Plan, Progress, TableSummary};
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
    if let Some(sql) = plan.events {
        let kinds = kinds(&rows::EVENTS);
        let mut stmt = src.prepare(sql)?;
        let names: Vec<String> = stmt.column_names().map(str::to_owned).collect();
        let at = rows::layout("session_state_events", &rows::EVENTS, &names)?;
        let mut it = stmt.query([])?;
        while let Some(r) = it.next()? {
            let e = rows::read_laid_out(r, &rows::EVENTS, &at)?;
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
    let mut held = dst.prepare_cached(
        "SELECT sequence, dedupe_key, session_key, session_id, agent_id, kind, \
         actor_type, actor_id, run_id, occurred_at, summary, payload_json \
         FROM session_state_events WHERE sequence = ?1",
    )?;
    let mut raise = dst.prepare_cached(
        "INSERT INTO session_state_heads \
         (session_key, agent_id, last_sequence, pruned_max_sequence, updated_at) \
         VALUES (?1, ?2, ?3, 0, ?4) ON CONFLICT (session_key, agent_id) DO UPDATE SET \
         last_sequence = max(last_sequence, excluded.last_sequence)",
    )?;
    let mut heads: HashMap<(Vec<u8>, Vec<u8>), (i64, i64)> = HashMap::new();
    let mut inserted = 0;
    for e in batch {
        let n = insert.execute(params![
            e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7], e[8], e[9], e[10], e[11]
        ])?;
        if n == 1 {
            inserted += 1;
        } else {
            let seq = e[0].int().unwrap_or(0);
            let same = held
                .query_row([seq], |r| rows::read_row(r, 12))
                .optional()?;
            check_taken(seq, e, same.as_deref())?;
        }
        raise_head(&mut heads, e);
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
    each_row(src, plan.heads, &rows::HEADS, &mut s.skipped, |h| {
        all.push(h);
        Ok(())
    })?;
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
                up.execute(params![h[0], h[1], h[2], h[3], h[4]])?;
            }
            Ok(())
        })?;
        heads_written(s, before, chunk, &mut done, progress);
    }
    Ok(())
}

/// An event of a batch that did not insert: another writer took its sequence or its dedupe
/// key since the check. Refused (`ERR_IMPORT_DIVERGED`) unless the destination holds the same
/// row at `seq` (`same`).
pub(crate) fn check_taken(seq: i64, e: &[Cell], same: Option<&[Cell]>) -> Result<()> {
    if same != Some(e) {
        return Err(Error::ImportDiverged(format!(
            "sequence {seq} was written in the destination during the import"
        )));
    }
    Ok(())
}

/// Raises the head its batch gives the session of the event `e`: the largest sequence and
/// the largest `occurred_at`.
pub(crate) fn raise_head(heads: &mut Heads, e: &[Cell]) {
    let (seq, at) = (e[0].int().unwrap_or(0), e[9].int().unwrap_or(0));
    let entry = heads.entry(head_key(e)).or_insert((seq, at));
    *entry = (entry.0.max(seq), entry.1.max(at));
}

/// Counts each head row of `chunk`, written, against the destination's heads `before`: new
/// (inserted), already as high (present) or raised (updated); then adds the chunk to `done`
/// and reports the progress (of `s.read` rows).
pub(crate) fn heads_written<H: AsRef<[Cell]>>(
    s: &mut TableSummary,
    before: &Heads,
    chunk: &[H],
    done: &mut u64,
    progress: &mut dyn FnMut(Progress),
) {
    for h in chunk {
        let h = h.as_ref();
        let (l, p) = (h[2].int().unwrap_or(0), h[3].int().unwrap_or(0));
        match before.get(&head_row_key(h)) {
            None => s.inserted += 1,
            Some(&(dl, dp)) if dl >= l && dp >= p => s.present += 1,
            Some(_) => s.updated += 1,
        }
    }
    *done += chunk.len() as u64;
    progress(Progress {
        table: "session_state_heads",
        done: *done,
        total: s.read,
    });
}

/// A head row's `(session_key, agent_id)`.
pub(crate) fn head_row_key(h: &[Cell]) -> (Vec<u8>, Vec<u8>) {
    let text = |c: &Cell| match c {
        Cell::Text(t) => t.clone(),
        _ => Vec::new(),
    };
    (text(&h[0]), text(&h[1]))
}

/// Inserts the cursors the destination lacks, keeping its own. In a file from before
/// `provenance`, an ambient-group sentinel row (watcher `ambient-group-watch:` + hex of the
/// real watcher) makes its cursor `ambient-group` with the later `updated_at` of the two, as
/// OpenClaw's migration does, and is itself skipped.
pub(super) fn copy_cursors(
    src: &Connection,
    dst: &Connection,
    plan: &Plan,
    batch: usize,
    summary: &mut ImportSummary,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    let s = &mut summary.cursors;
    let all = cursor_rows(src, plan, s)?;
    copy_inserts(
        dst,
        plan,
        "session_watch_cursors",
        INSERT_CURSOR,
        |st, c| st.execute(params![c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
        &all,
        batch,
        s,
        progress,
    )
}

/// The source's cursor rows that the store's table can hold (the others counted in `s` as
/// skipped, `s.read` set to the source's count), the ambient-group sentinel rows of a file from
/// before `provenance` folded into their cursors ([`fold_sentinels`]).
pub(crate) fn cursor_rows(
    src: &Connection,
    plan: &Plan,
    s: &mut TableSummary,
) -> Result<Vec<Vec<Cell>>> {
    let mut all = Vec::new();
    s.read = plan.totals[2];
    each_row(src, plan.cursors, &rows::CURSORS, &mut s.skipped, |c| {
        all.push(c);
        Ok(())
    })?;
    if plan.sentinels {
        fold_sentinels(&mut all, s);
    }
    Ok(all)
}

/// Folds the ambient-group sentinel rows of a file from before `provenance` into their
/// cursors (see [`copy_cursors`]) and counts them as skipped.
pub(crate) fn fold_sentinels(all: &mut Vec<Vec<Cell>>, s: &mut TableSummary) {
    let mut ambient: HashMap<(Vec<u8>, Vec<u8>), i64> = HashMap::new();
    all.retain(|c| match (&c[0], &c[2], &c[7]) {
        (Cell::Text(w), Cell::Text(t), Cell::Int(at)) if w.starts_with(SENTINEL) => {
            let key = (w[SENTINEL.len()..].to_vec(), t.clone());
            let seen = ambient.entry(key).or_insert(*at);
            *seen = (*seen).max(*at);
            false
        }
        _ => true,
    });
    s.skipped += s.read - s.skipped - all.len() as u64;
    for c in all.iter_mut() {
        let (Cell::Text(w), Cell::Text(t)) = (&c[0], &c[2]) else {
            continue;
        };
        let hex: Vec<u8> = w
            .iter()
            .flat_map(|b| format!("{b:02x}").into_bytes())
            .collect();
        if let Some(at) = ambient.get(&(hex, t.clone())) {
            c[6] = Cell::Text(b"ambient-group".to_vec());
            c[7] = Cell::Int(c[7].int().unwrap_or(0).max(*at));
        }
    }
}

/// The watcher-key prefix of OpenClaw's ambient-group sentinel rows.
const SENTINEL: &[u8] = b"ambient-group-watch:";

const INSERT_CURSOR: &str = "INSERT INTO session_watch_cursors (watcher_session_key, \
     watcher_store_path, target_session_key, last_seen_sequence, notified_sequence, \
     material_sequence, provenance, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
     ON CONFLICT DO NOTHING";

const INSERT_LINK: &str = "INSERT INTO session_upstream_links (session_key, agent_id, \
     catalog_id, host_id, thread_id, upstream_kind, upstream_ref_json, last_marker_json, \
     last_scanned_at, created_at, updated_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) ON CONFLICT DO NOTHING";

/// Inserts the links the destination lacks, column for column; a source whose
/// link table lacks them has its link rows counted as skipped.
pub(super) fn copy_links(
    src: &Connection,
    dst: &Connection,
    plan: &Plan,
    batch: usize,
    summary: &mut ImportSummary,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    let s = &mut summary.upstream_links;
    s.read = plan.totals[3];
    let mut all = Vec::new();
    match plan.links {
        None => s.skipped = s.read,
        Some(sql) => {
            let mut stmt = src.prepare(sql)?;
            let mut it = stmt.query([])?;
            while let Some(r) = it.next()? {
                let l = rows::read_row(r, rows::LINKS.len())?;
                if rows::fits(&l, rows::LINKS) {
                    all.push(l);
                } else {
                    s.skipped += 1;
                }
            }
        }
    }
    copy_inserts(
        dst,
        plan,
        "session_upstream_links",
        INSERT_LINK,
        |st, l| {
            st.execute(params![
                l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7], l[8], l[9], l[10]
            ])
        },
        &all,
        batch,
        s,
        progress,
    )
}

/// Inserts `all` with `sql` (which ignores rows already present) through `bind`, `batch`
/// per transaction.
#[allow(clippy::too_many_arguments)]
fn copy_inserts(
    dst: &Connection,
    plan: &Plan,
    table: &'static str,
    sql: &str,
    bind: fn(&mut CachedStatement<'_>, &[Cell]) -> rusqlite::Result<usize>,
    all: &[Vec<Cell>],
    batch: usize,
    s: &mut TableSummary,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    insert_chunks(all, batch, s, table, progress, |chunk| {
        write(dst, plan, || {
            let mut stmt = dst.prepare_cached(sql)?;
            let mut n = 0;
            for row in chunk {
                n += bind(&mut stmt, row)? as u64;
            }
            Ok(n)
        })
    })
}

/// Writes `all` in chunks of `batch` rows through `write_chunk`, which returns how many of
/// its rows it inserted (the others were present); counts them in `s` and reports the
/// progress of `table` after each chunk.
pub(crate) fn insert_chunks(
    all: &[Vec<Cell>],
    batch: usize,
    s: &mut TableSummary,
    table: &'static str,
    progress: &mut dyn FnMut(Progress),
    mut write_chunk: impl FnMut(&[Vec<Cell>]) -> Result<u64>,
) -> Result<()> {
    let total = s.read;
    let mut done = s.skipped;
    for chunk in all.chunks(batch) {
        let inserted = write_chunk(chunk)?;
        s.inserted += inserted;
        s.present += chunk.len() as u64 - inserted;
        done += chunk.len() as u64;
        progress(Progress { table, done, total });
    }
    Ok(())
}
