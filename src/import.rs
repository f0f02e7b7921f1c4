//! Importing an OpenClaw state database into the store's own file. Meant for a process of
//! its own (the `session-awareness import` command): the gateway keeps its `openclaw.sqlite`
//! open through another SQLite library, and two libraries in one process lose each other's
//! locks.

use napi::bindgen_prelude::{Function, Unknown};
use napi::Result;
use napi::ValueType;
use napi_derive::napi;
use session_awareness_core::import as core;
use session_awareness_core::pg_import as pg;

use crate::error::{coded, from_napi, to_js, Code, IntoJs, ERR_PROGRESS_CALLBACK};

/// Options of `importStateDatabase`.
#[napi(object, object_to_js = false)]
pub struct ImportDatabaseOptions<'a> {
    /// Source rows per destination transaction and per progress report; an integer of at
    /// least 1, default 5000.
    pub batch_rows: Option<f64>,
    /// How long a destination write waits for another process's lock (ms); default 30000.
    pub busy_timeout_ms: Option<f64>,
    /// Called after every committed batch. A throw does not stop the import: the callback is
    /// not called again, and the import then throws `ERR_PROGRESS_CALLBACK`.
    #[napi(ts_type = "(progress: ImportProgress) => void")]
    pub on_progress: Option<Unknown<'a>>,
    /// The schema of a PostgreSQL destination (a `postgres://` URL only); default
    /// `session_awareness`.
    pub schema: Option<String>,
}

/// One progress report: `done` of the `total` source rows of `table` have been handled.
#[napi(object)]
pub struct ImportProgress {
    /// `session_state_events`, `session_state_heads`, `session_watch_cursors` or
    /// `session_upstream_links`.
    pub table: String,
    /// Source rows handled so far.
    pub done: i64,
    /// Source rows of the table.
    pub total: i64,
}

/// What happened to one table's source rows: `read = inserted + updated + present + skipped`.
#[napi(object)]
pub struct ImportTableSummary {
    /// Rows read from the source.
    pub read: i64,
    /// Rows written that the destination did not have.
    pub inserted: i64,
    /// Heads the destination had, raised to the source's values.
    pub updated: i64,
    /// Rows the destination already had (events: or had pruned); left as they are.
    pub present: i64,
    /// Rows the store's tables cannot hold, and ambient-group sentinel rows of old files.
    pub skipped: i64,
}

impl From<core::TableSummary> for ImportTableSummary {
    fn from(t: core::TableSummary) -> Self {
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        ImportTableSummary {
            read: n(t.read),
            inserted: n(t.inserted),
            updated: n(t.updated),
            present: n(t.present),
            skipped: n(t.skipped),
        }
    }
}

/// The outcome of an import.
#[napi(object)]
pub struct ImportSummary {
    /// `session_state_events`.
    pub events: ImportTableSummary,
    /// `session_state_heads`.
    pub heads: ImportTableSummary,
    /// `session_watch_cursors`.
    pub cursors: ImportTableSummary,
    /// `session_upstream_links`.
    pub upstream_links: ImportTableSummary,
    /// The source's largest sequence ever given; the destination numbers after it.
    pub source_last_sequence: i64,
    /// The source was read through its `-wal` file (a gateway had it open).
    pub source_wal: bool,
}

/// Copies the session-state rows of the OpenClaw database at `source` (only read, in one
/// snapshot) into the store file at `dest` (created or upgraded as the store opens it), or
/// into the PostgreSQL store at a `postgres://` URL `dest` (its tables created in `schema`),
/// in batched transactions; a second run adds only what is new. Run it in a process that has no
/// other SQLite handle on either file. Throws `ERR_IMPORT_DIVERGED` when the destination's
/// history and the source's disagree (nothing is written), `ERR_INVALID_ARG` for bad
/// arguments or one file named twice, `ERR_NOT_SQLITE` / `ERR_DB` for a source that cannot be
/// read, `ERR_FOREIGN_SCHEMA` for tables no OpenClaw generation wrote.
#[napi]
pub fn import_state_database(
    source: String,
    dest: String,
    options: Option<ImportDatabaseOptions<'_>>,
) -> Result<ImportSummary, Code> {
    let mut opts = core::ImportOptions::default();
    let mut on_progress: Option<Function<'_, ImportProgress, ()>> = None;
    let mut schema = None;
    if let Some(o) = options {
        schema = o.schema;
        if let Some(n) = o.batch_rows {
            if !(n.is_finite() && n >= 1.0 && n.fract() == 0.0 && n <= 1e9) {
                return Err(coded(
                    "ERR_INVALID_ARG",
                    "batchRows must be an integer of at least 1",
                ));
            }
            opts.batch_rows = n as usize;
        }
        if let Some(n) = o.busy_timeout_ms {
            if !(n.is_finite() && (0.0..=f64::from(u32::MAX)).contains(&n)) {
                return Err(coded(
                    "ERR_INVALID_ARG",
                    "busyTimeoutMs must be a non-negative number",
                ));
            }
            opts.busy_timeout_ms = n as u32;
        }
        on_progress = match o.on_progress {
            None => None,
            Some(u) => match u.get_type().map_err(from_napi)? {
                ValueType::Undefined | ValueType::Null => None,
                ValueType::Function => {
                    #[allow(unsafe_code)]
                    // SAFETY: the value's type was checked to be a function just above.
                    Some(
                        unsafe { u.cast::<Function<'_, ImportProgress, ()>>() }
                            .map_err(from_napi)?,
                    )
                }
                _ => return Err(coded("ERR_INVALID_ARG", "onProgress must be a function")),
            },
        };
    }
    // A throwing callback is not called again, and is reported once the import has finished:
    // the batches it saw are committed, so stopping early would only leave less done.
    let mut failed: Option<napi::Error> = None;
    for location in [&source, &dest] {
        session_awareness_core::Store::check_location(location).map_err(to_js)?;
    }
    let remote = session_awareness_core::pg_inspect::is_url(&dest);
    if schema.is_some() && !remote {
        return Err(coded(
            "ERR_INVALID_ARG",
            "invalid argument: schema is an option of a PostgreSQL destination (a postgres:// URL), not of a file",
        ));
    }
    let mut report = |p: core::Progress| {
        if let (Some(f), None) = (&on_progress, &failed) {
            let arg = ImportProgress {
                table: p.table.to_owned(),
                done: i64::try_from(p.done).unwrap_or(i64::MAX),
                total: i64::try_from(p.total).unwrap_or(i64::MAX),
            };
            if let Err(e) = f.call(arg) {
                failed = Some(e);
            }
        }
    };
    let result = if remote {
        let schema = schema.as_deref().unwrap_or("session_awareness");
        pg::import(&source, &dest, schema, opts, &mut report)
    } else {
        core::import(&source, &dest, opts, &mut report)
    };
    let s = result.js()?;
    if let Some(e) = failed {
        return Err(coded(
            ERR_PROGRESS_CALLBACK,
            format!("onProgress threw (the import finished): {}", e.reason),
        ));
    }
    Ok(ImportSummary {
        events: s.events.into(),
        heads: s.heads.into(),
        cursors: s.cursors.into(),
        upstream_links: s.upstream_links.into(),
        source_last_sequence: s.source_last_sequence,
        source_wal: s.source_wal,
    })
}
