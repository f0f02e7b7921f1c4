//! Importing an OpenClaw state database into the store's own file: the session-state rows of
//! `<stateDir>/state/openclaw.sqlite` move into `<stateDir>/state/session-state.sqlite`
//! with their sequences, so the notices OpenClaw already sent and the versions watchers hold
//! stay valid.
//!
//! - **The source is only read**, as `inspect` reads a file: read-only, through its `-wal`
//!   when one exists (a gateway has it open), else as an immutable snapshot, so no `-wal` or
//!   `-shm` file is created. Every row comes from **one read transaction**: a gateway that
//!   keeps writing the source during the import does not tear it.
//! - **The destination** is opened, created or upgraded as the store opens a file, and written
//!   in `BEGIN IMMEDIATE` transactions of at most [`ImportOptions::batch_rows`] rows, so a
//!   gateway using it waits at most one batch.
//! - **Order**, so that `changesSince` and `historyGap` are exact at every commit: first the
//!   AUTOINCREMENT counter is raised to the source's largest sequence (a record made during the
//!   import numbers after every imported event) and the pruned watermarks are written; then the
//!   events in ascending sequence, each batch raising its sessions' heads to the largest
//!   sequence it wrote; then the heads themselves (raised, never lowered); then the cursors
//!   (their notices name events that are all there by then); then the upstream links.
//! - **Idempotent**: a second run adds only what is new. An event is identified by its
//!   sequence; a head is raised to the source's values; a cursor or link the destination
//!   already has is kept as it is (the destination's is the newer state).
//! - **Divergence** is refused with [`Error::ImportDiverged`] before anything is written: a
//!   sequence held by both with different content (or a dedupe key held by another
//!   sequence), or a source event the destination lacks although it carries that session past
//!   the event's sequence (its own history interleaves, and a watcher holding its version
//!   would never see the event). An event below the destination's pruned watermark of its
//!   session counts as present: the destination pruned it.
//! - **Rows the store's tables cannot hold** (NULL in a `NOT NULL` column, a value of another
//!   type in a table of the first, non-`STRICT` generation, a provenance outside the two) are
//!   skipped and counted, never fatal. Rows they can hold are copied as stored, inert ones
//!   (bare keys, text that is not UTF-8) included. In files without `provenance`, the
//!   ambient-group sentinel rows are folded into their cursor, as OpenClaw's own migration
//!   does, and counted as skipped.

pub(crate) mod check;
pub(crate) mod copy;
pub(crate) mod rows;
pub(crate) mod source;

use std::collections::HashMap;

use rusqlite::Connection;

use crate::error::{DbFailure, Error, Result};
use crate::sqlite::inspect::{db_error, open_read_only};
use rows::{Cell, Kind};

/// How the import runs.
#[derive(Debug, Clone, Copy)]
pub struct ImportOptions {
    /// Rows per destination transaction (and per progress report); at least 1.
    pub batch_rows: usize,
    /// How long a destination write waits for another process's lock (ms).
    pub busy_timeout_ms: u32,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            batch_rows: 5_000,
            busy_timeout_ms: 30_000,
        }
    }
}

/// A progress report: `done` of the `total` source rows of `table` have been handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// The table being copied.
    pub table: &'static str,
    /// Source rows handled so far (inserted, updated, present or skipped).
    pub done: u64,
    /// Source rows of the table.
    pub total: u64,
}

/// What happened to one table's source rows. `read = inserted + updated + present + skipped`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableSummary {
    /// Rows read from the source.
    pub read: u64,
    /// Rows written that the destination did not have.
    pub inserted: u64,
    /// Heads the destination had, raised to the source's values.
    pub updated: u64,
    /// Rows the destination already had (or, for events, had pruned); left as they are.
    pub present: u64,
    /// Rows the store's tables cannot hold, and ambient-group sentinel rows.
    pub skipped: u64,
}

/// The outcome of an import.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// `session_state_events`.
    pub events: TableSummary,
    /// `session_state_heads`.
    pub heads: TableSummary,
    /// `session_watch_cursors`.
    pub cursors: TableSummary,
    /// `session_upstream_links`.
    pub upstream_links: TableSummary,
    /// The source's largest sequence ever given (0 when it has none).
    pub source_last_sequence: i64,
    /// The source was read through its `-wal` file (it was open elsewhere).
    pub source_wal: bool,
}

/// A head's `(last_sequence, pruned_max_sequence)`, keyed by `(session_key, agent_id)`.
pub(crate) type Heads = HashMap<(Vec<u8>, Vec<u8>), (i64, i64)>;

/// Imports the session-state rows of the OpenClaw database at `source` into the store file
/// at `dest` (created when missing), calling `progress` after every committed batch.
///
/// # Errors
/// `ERR_IMPORT_DIVERGED` when the two histories disagree (nothing is written);
/// `ERR_INVALID_ARG` when both paths name one file; `ERR_NOT_SQLITE` / `ERR_DB` when the
/// source cannot be read; `ERR_FOREIGN_SCHEMA` when a table of either file is not one of
/// OpenClaw's generations; `ERR_DB` for a destination write that fails.
///
/// # Example
/// ```
/// # let dir = tempfile::tempdir()?;
/// # let source = dir.path().join("openclaw.sqlite");
/// # let dest = dir.path().join("session-state.sqlite");
/// use session_awareness_core::import::{import, ImportOptions};
/// rusqlite::Connection::open(&source)?.execute_batch("CREATE TABLE host (x)")?;
/// let summary = import(
///     source.to_str().unwrap(),
///     dest.to_str().unwrap(),
///     ImportOptions::default(),
///     &mut |_| {},
/// )?;
/// assert_eq!(summary.events.read, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn import(
    source: &str,
    dest: &str,
    opts: ImportOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<ImportSummary> {
    if same_file(source, dest) {
        return Err(Error::invalid(
            "the source and the destination are one file",
        ));
    }
    let mut attempt = 1;
    loop {
        match attempt_import(source, dest, opts, progress) {
            // A snapshot read without a WAL was overtaken by a writer: read again (the
            // batches already committed came from the unchanged file, and the next run
            // finds them present).
            Err(Error::SourceChanged(_)) if attempt < ATTEMPTS => attempt += 1,
            done => return done,
        }
    }
}

/// How many times an import reads the source again after a writer changed it under an
/// immutable read.
pub(crate) const ATTEMPTS: u32 = 3;

fn attempt_import(
    source: &str,
    dest: &str,
    opts: ImportOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<ImportSummary> {
    let batch = opts.batch_rows.max(1);
    // Taken before the file is opened, so any change after the open shows.
    let stamp = Stamp::take(source);
    let (src, _, wal) = open_read_only(source)?;
    let on_err = |e| db_error(source, e);
    // One read transaction for the whole import: every row comes from the same snapshot.
    src.execute_batch("BEGIN").map_err(on_err)?;
    let mut plan = Plan::read(&src).map_err(|e| relabel(source, e));
    if let Ok(plan) = &mut plan {
        // Without a WAL the file is read as immutable, with no lock: a writer that comes
        // along (a gateway starting) would tear the read, so every commit checks it first.
        plan.stamp = (!wal).then_some((source.to_owned(), stamp));
    }
    let plan = plan.map_err(|e| stamp.overtaken(source, e))?;
    let dst = crate::sqlite::schema::open(dest, opts.busy_timeout_ms)?;
    let mut summary = ImportSummary {
        source_last_sequence: plan.last_sequence,
        source_wal: wal,
        ..Default::default()
    };
    let run = |summary: &mut ImportSummary, progress: &mut dyn FnMut(Progress)| {
        let before = check::check(&src, &dst, &plan, summary)?;
        copy::copy_events(&src, &dst, &plan, &before, batch, summary, progress)?;
        copy::copy_heads(&src, &dst, &plan, &before, batch, summary, progress)?;
        copy::copy_cursors(&src, &dst, &plan, batch, summary, progress)?;
        copy::copy_links(&src, &dst, &plan, batch, summary, progress)?;
        src.execute_batch("COMMIT").map_err(on_err)
    };
    run(&mut summary, progress).map_err(|e| match &plan.stamp {
        Some(_) => stamp.overtaken(source, e),
        None => e,
    })?;
    Ok(summary)
}

/// The size and modification time of the source's main file.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp(Option<(u64, std::time::SystemTime)>);

impl Stamp {
    pub(crate) fn take(path: &str) -> Self {
        Stamp(
            std::fs::metadata(path)
                .ok()
                .and_then(|m| Some((m.len(), m.modified().ok()?))),
        )
    }

    /// Turns a failure of a read without a WAL into [`Error::SourceChanged`] when the file
    /// changed meanwhile (a torn read can fail in any way).
    pub(crate) fn overtaken(self, path: &str, e: Error) -> Error {
        if matches!(e, Error::SourceChanged(_)) || Stamp::take(path) == self {
            e
        } else {
            Error::SourceChanged(format!("{path} was written while it was read"))
        }
    }
}

/// Both paths name one existing file.
fn same_file(a: &str, b: &str) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// A source read error names the source file.
pub(crate) fn relabel(source: &str, e: Error) -> Error {
    match e {
        Error::Db {
            kind: DbFailure::NotADatabase,
            ..
        } => Error::NotSqlite(format!("{source} is not a SQLite database")),
        e => e,
    }
}

/// Every source row of a table, as stored; the columns are matched by name.
const EVENTS_SQL: &str = "SELECT * FROM session_state_events ORDER BY sequence";
const HEADS_SQL: &str = "SELECT * FROM session_state_heads";
const CURSORS_SQL: &str = "SELECT * FROM session_watch_cursors";
const COUNT_EVENTS: &str = "SELECT count(*) FROM session_state_events";
const COUNT_HEADS: &str = "SELECT count(*) FROM session_state_heads";
const COUNT_CURSORS: &str = "SELECT count(*) FROM session_watch_cursors";
const COUNT_LINKS: &str = "SELECT count(*) FROM session_upstream_links";

/// The source's tables as the import reads them: each `SELECT`, or `None` when the source
/// lacks the table.
pub(crate) struct Plan {
    /// The events in ascending sequence.
    pub(crate) events: Option<&'static str>,
    /// The heads.
    pub(crate) heads: Option<&'static str>,
    /// The cursors.
    pub(crate) cursors: Option<&'static str>,
    /// The cursors table has no `provenance` (sentinel rows fold into their cursor).
    pub(crate) sentinels: bool,
    /// The links mapped to the store's columns (a link table in OpenClaw's shape).
    pub(crate) links: Option<&'static str>,
    /// Rows per table in the snapshot.
    pub(crate) totals: [u64; 4],
    /// The source's largest sequence ever given.
    pub(crate) last_sequence: i64,
    /// The source's path and its stamp when it is read without a WAL.
    pub(crate) stamp: Option<(String, Stamp)>,
}

impl Plan {
    pub(crate) fn read(src: &Connection) -> Result<Self> {
        // A table lacking a column every generation had is refused here, before the
        // destination is opened.
        let table = |name: &str, cols: &[rows::Col], sql: &'static str| {
            let Some(names) = rows::source_columns(src, name)? else {
                return Ok::<_, Error>((None, Vec::new()));
            };
            rows::layout(name, cols, &names)?;
            Ok((Some(sql), names))
        };
        let (events, _) = table("session_state_events", &rows::EVENTS, EVENTS_SQL)?;
        let (heads, _) = table("session_state_heads", &rows::HEADS, HEADS_SQL)?;
        let (cursors, names) = table("session_watch_cursors", &rows::CURSORS, CURSORS_SQL)?;
        let sentinels = cursors.is_some() && !names.iter().any(|n| n == "provenance");
        let links = rows::source_columns(src, "session_upstream_links")?
            .filter(|names| {
                rows::LINK_SOURCE_COLUMNS
                    .iter()
                    .all(|c| names.iter().any(|n| n == c))
            })
            .map(|_| rows::LINKS_SQL);
        let link_table = rows::source_columns(src, "session_upstream_links")?.is_some();
        let totals = [
            count(src, events.is_some(), COUNT_EVENTS)?,
            count(src, heads.is_some(), COUNT_HEADS)?,
            count(src, cursors.is_some(), COUNT_CURSORS)?,
            count(src, link_table, COUNT_LINKS)?,
        ];
        let has_sequence: bool = src.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence')",
            [],
            |r| r.get(0),
        )?;
        let counter = if has_sequence {
            src.query_row(
                "SELECT max(seq) FROM sqlite_sequence WHERE name = 'session_state_events'",
                [],
                |r| r.get::<_, Option<i64>>(0),
            )?
        } else {
            None
        };
        let largest = if events.is_some() {
            src.query_row("SELECT max(sequence) FROM session_state_events", [], |r| {
                r.get::<_, Option<i64>>(0)
            })
            .unwrap_or(None)
        } else {
            None
        };
        Ok(Plan {
            events,
            heads,
            cursors,
            sentinels,
            links,
            totals,
            last_sequence: counter.unwrap_or(0).max(largest.unwrap_or(0)),
            stamp: None,
        })
    }

    /// Fails with [`Error::SourceChanged`] when a source read without a WAL has changed since
    /// it was opened; called before every destination commit.
    pub(crate) fn verify(&self) -> Result<()> {
        match &self.stamp {
            Some((path, stamp)) if Stamp::take(path) != *stamp => Err(Error::SourceChanged(
                format!("{path} was written while it was read"),
            )),
            _ => Ok(()),
        }
    }
}

/// The rows `sql` counts, or 0 when the table is missing.
fn count(src: &Connection, present: bool, sql: &str) -> Result<u64> {
    if !present {
        return Ok(0);
    }
    Ok(src.query_row(sql, [], |r| r.get::<_, i64>(0))? as u64)
}

/// Calls `f` with every row of `sql` (when the table exists), read as `cols`, that the
/// store's table can hold, and counts the others in `skipped`.
pub(crate) fn each_row(
    src: &Connection,
    sql: Option<&str>,
    cols: &[rows::Col],
    skipped: &mut u64,
    mut f: impl FnMut(Vec<Cell>) -> Result<()>,
) -> Result<()> {
    let Some(sql) = sql else { return Ok(()) };
    let mut stmt = src.prepare(sql)?;
    let names: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    let at = rows::layout("source", cols, &names)?;
    let kinds = kinds(cols);
    let mut it = stmt.query([])?;
    while let Some(r) = it.next()? {
        let cells = rows::read_laid_out(r, cols, &at)?;
        if rows::fits(&cells, kinds.iter().copied()) {
            f(cells)?;
        } else {
            *skipped += 1;
        }
    }
    Ok(())
}

pub(crate) fn kinds(cols: &[rows::Col]) -> Vec<Kind> {
    cols.iter().map(|c| c.kind).collect()
}

/// The event's head key.
pub(crate) fn head_key(e: &[Cell]) -> (Vec<u8>, Vec<u8>) {
    match (&e[2], &e[4]) {
        (Cell::Text(k), Cell::Text(a)) => (k.clone(), a.clone()),
        _ => unreachable!("checked by fits"),
    }
}
