//! The import's source read whole, for a destination that is not a SQLite file (a
//! PostgreSQL store, `crate::postgres::import`): every row the import copies, from one
//! snapshot of the source, through the readers of the file import.

use super::copy::cursor_rows;
use super::rows::{self, Cell, Kind};
use super::{each_row, kinds, relabel, Plan, Stamp};
use crate::error::Result;
use crate::sqlite::import::ImportSummary;
use crate::sqlite::inspect::{db_error, open_read_only};

/// Every source row the import copies, read in one snapshot.
pub(crate) struct Source {
    pub(crate) events: Vec<Vec<Cell>>,
    pub(crate) heads: Vec<Vec<Cell>>,
    pub(crate) cursors: Vec<Vec<Cell>>,
    pub(crate) links: Vec<Vec<Cell>>,
    pub(crate) last_sequence: i64,
    pub(crate) totals: [u64; 4],
}

/// Reads the source at `source` whole, in one snapshot (read again by the caller when a
/// writer overtook a read without a WAL: [`crate::error::Error::SourceChanged`]), filling
/// the skipped counts and `source_wal` of `summary`.
pub(crate) fn read_all(source: &str, summary: &mut ImportSummary) -> Result<Source> {
    let stamp = Stamp::take(source);
    let (src, _, wal) = open_read_only(source)?;
    summary.source_wal = wal;
    read_source(source, &src, wal, stamp, summary).map_err(|e| {
        if wal {
            e
        } else {
            stamp.overtaken(source, e)
        }
    })
}

/// Reads every row the import copies from the source's snapshot, counting the rows that
/// cannot be held as skipped.
fn read_source(
    source: &str,
    src: &rusqlite::Connection,
    wal: bool,
    stamp: Stamp,
    summary: &mut ImportSummary,
) -> Result<Source> {
    let on_err = |e| db_error(source, e);
    src.execute_batch("BEGIN").map_err(on_err)?;
    let mut plan = Plan::read(src).map_err(|e| relabel(source, e))?;
    plan.stamp = (!wal).then(|| (source.to_owned(), stamp));
    let keep = |cells: Vec<Cell>, kinds: &[Kind], to: &mut Vec<Vec<Cell>>, skipped: &mut u64| {
        if holdable(&cells, kinds) {
            to.push(cells);
        } else {
            *skipped += 1;
        }
    };
    // The rows of `sql`, read as `cols`, that the destination can hold, and how many not.
    let holdable_rows = |sql: Option<&str>, cols: &[rows::Col]| -> Result<(Vec<Vec<Cell>>, u64)> {
        let kinds = kinds(cols);
        let (mut out, mut unfit, mut unheld) = (Vec::new(), 0, 0);
        each_row(src, sql, cols, &mut unfit, |r| {
            keep(r, &kinds, &mut out, &mut unheld);
            Ok(())
        })?;
        Ok((out, unfit + unheld))
    };
    let (events, skipped) = holdable_rows(plan.events, &rows::EVENTS)?;
    summary.events.skipped = skipped;
    let (heads, skipped) = holdable_rows(plan.heads, &rows::HEADS)?;
    summary.heads.skipped = skipped;
    let mut links = Vec::new();
    let c = &mut summary.cursors;
    let cursors = cursor_rows(src, &plan, c)?;
    let mut kept = Vec::with_capacity(cursors.len());
    for r in cursors {
        keep(r, CURSOR_KINDS, &mut kept, &mut c.skipped);
    }
    let l = &mut summary.upstream_links;
    match plan.links {
        None => l.skipped = plan.totals[3],
        Some(sql) => {
            let mut stmt = src.prepare(sql)?;
            let mut it = stmt.query([])?;
            while let Some(r) = it.next()? {
                let row = rows::read_row(r, rows::LINKS.len())?;
                if rows::fits(&row, rows::LINKS) {
                    keep(row, &rows::LINKS, &mut links, &mut l.skipped);
                } else {
                    l.skipped += 1;
                }
            }
        }
    }
    src.execute_batch("COMMIT").map_err(on_err)?;
    // Every row is in memory now: unchanged since before the open, the read was not torn.
    plan.verify()?;
    Ok(Source {
        events,
        heads,
        cursors: kept,
        links,
        last_sequence: plan.last_sequence,
        totals: plan.totals,
    })
}

/// True when PostgreSQL's columns of `kinds` can hold every value: text as valid UTF-8
/// without NUL.
fn holdable(cells: &[Cell], kinds: &[Kind]) -> bool {
    cells.iter().zip(kinds).all(|(c, _)| match c {
        Cell::Text(t) => std::str::from_utf8(t).is_ok_and(|s| !s.contains('\0')),
        _ => true,
    })
}

/// The cursor columns' kinds, in [`rows::CURSORS`] order.
pub(crate) const CURSOR_KINDS: &[Kind] = &[
    Kind::Text,
    Kind::OptText,
    Kind::Text,
    Kind::Int,
    Kind::Int,
    Kind::Int,
    Kind::Provenance,
    Kind::Int,
];
