//! Importing an OpenClaw state database or a store file into a PostgreSQL store
//! (`session-awareness import <file> <postgres URL>`), with the rules of the file import
//! ([`crate::import`]): the source is only read, in one snapshot, by the same readers; the
//! sequences are kept; a second run adds only what is new; a diverged history is refused with
//! `ERR_IMPORT_DIVERGED` before anything is written.
//!
//! The destination's tables are created in the schema first, as a store's open creates them.
//! Then, in this order, each step in transactions of at most `batch_rows` rows: the identity
//! is raised past the source's largest sequence (so a gateway recording meanwhile numbers
//! after every imported event) and the pruned watermarks are written, in the transaction that
//! checks the source against the destination; the events in ascending sequence, each batch
//! raising its sessions' heads (locked in sorted order, as a group commit locks them); the
//! heads, raised to the source's; the cursors and the upstream links the destination lacks.
//! Imports into one schema take turns (an advisory lock held by the check).
//!
//! A row PostgreSQL's `text` cannot hold (text that is not valid UTF-8, or holds a NUL) is
//! skipped and counted, as a row the store's SQLite tables cannot hold is.

use std::collections::HashMap;
use std::sync::Arc;

use postgres_types::ToSql;
use tokio_postgres::Client;

use crate::error::{Error, Result};
use crate::options::{Options, SchemaName};
use crate::postgres::block_on;
use crate::postgres::conn::{Pg, Target};
use crate::sqlite::import::check::classify_event;
use crate::sqlite::import::copy::{
    check_taken, head_row_key, heads_written, insert_chunks, raise_head,
};
use crate::sqlite::import::rows::{self, Cell, Kind};
use crate::sqlite::import::source::{read_all, Source, CURSOR_KINDS};
use crate::sqlite::import::{kinds, Heads, ATTEMPTS};
use crate::sqlite::import::{ImportOptions, ImportSummary, Progress, TableSummary};

/// Imports the session-state rows of the SQLite database at `source` (an OpenClaw state
/// database or a store file) into the PostgreSQL store at `url`, its tables in `schema`,
/// calling `progress` after every committed batch.
///
/// # Errors
/// `ERR_IMPORT_DIVERGED` when the two histories disagree (nothing is written);
/// `ERR_INVALID_ARG` for a bad URL or schema; `ERR_NOT_SQLITE` / `ERR_DB` when the source
/// cannot be read; `ERR_FOREIGN_SCHEMA` when a source table is not one of OpenClaw's
/// generations; `ERR_DB` when the server cannot be reached or refuses a write.
pub fn import(
    source: &str,
    url: &str,
    schema: &str,
    opts: ImportOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<ImportSummary> {
    let options = Options {
        pg_schema: SchemaName::parse(schema)?,
        ..Options::default()
    };
    // The import waits for no outage: run it again.
    let outage = crate::postgres::outage::Outage::new(0, 1);
    let pg = Arc::new(Pg::new(
        Target::parse(url, &options)?,
        options.pg_schema,
        outage,
    ));
    let mut attempt = 1;
    loop {
        match attempt_import(source, &pg, opts, progress) {
            // A snapshot read without a WAL was overtaken by a writer: read again.
            Err(Error::SourceChanged(_)) if attempt < ATTEMPTS => attempt += 1,
            done => return done,
        }
    }
}

fn attempt_import(
    source: &str,
    pg: &Arc<Pg>,
    opts: ImportOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<ImportSummary> {
    let batch = opts.batch_rows.max(1);
    let mut summary = ImportSummary::default();
    let rows = Arc::new(read_all(source, &mut summary)?);
    summary.source_last_sequence = rows.last_sequence;
    let applied = Arc::clone(pg);
    block_on(async move { crate::postgres::schema::apply(&applied).await })??;
    let checked = Arc::clone(&rows);
    let (insert, present, before) = run(pg, move |c, pg| {
        Box::pin(async move { check(c, pg, &checked).await })
    })?;
    summary.events.present = present;
    copy_events(pg, &rows, &insert, batch, &mut summary, progress)?;
    copy_heads(pg, &rows, &before, batch, &mut summary, progress)?;
    let total = rows.totals[2];
    summary.cursors.read = total;
    copy_rows(
        pg,
        INSERT_CURSOR,
        &rows.cursors,
        CURSOR_KINDS,
        batch,
        &mut summary.cursors,
        "session_watch_cursors",
        progress,
    )?;
    summary.upstream_links.read = rows.totals[3];
    copy_rows(
        pg,
        INSERT_LINK,
        &rows.links,
        &rows::LINKS,
        batch,
        &mut summary.upstream_links,
        "session_upstream_links",
        progress,
    )?;
    claim_local_links(pg)?;
    Ok(summary)
}

const UNCLAIMED: &str = "SELECT session_key, agent_id, upstream_ref_json \
     FROM __SCHEMA__.session_upstream_links WHERE scan_host IS NULL AND upstream_ref_json IS NOT NULL";
const CLAIM: &str = "UPDATE __SCHEMA__.session_upstream_links SET scan_host = $3 \
     WHERE session_key = $1 AND agent_id = $2 AND scan_host IS NULL";

/// Names this machine (its hostname, a store's default `hostName`) as the host that scans
/// the imported links to a local transcript: the SQLite file, and so its transcripts, are here
/// (docs/postgres.md#differences). A remote link has no scanning host.
fn claim_local_links(pg: &Arc<Pg>) -> Result<()> {
    let host = crate::options::HostName::machine();
    run(pg, move |c, pg| {
        Box::pin(async move {
            let err = |e: tokio_postgres::Error| pg.target().error(&e);
            let sql = UNCLAIMED.replace("__SCHEMA__", pg.schema().as_str());
            let found = c.query(&sql, &[]).await.map_err(err)?;
            let sql = CLAIM.replace("__SCHEMA__", pg.schema().as_str());
            let claim = c.prepare(&sql).await.map_err(err)?;
            for r in &found {
                let (key, agent, upstream_ref): (String, String, String) = (
                    r.try_get(0).map_err(err)?,
                    r.try_get(1).map_err(err)?,
                    r.try_get(2).map_err(err)?,
                );
                let local = serde_json::from_str::<serde_json::Value>(&upstream_ref)
                    .ok()
                    .is_some_and(|v| v.get("filePath").is_some_and(|p| p.is_string()));
                if local {
                    c.execute(&claim, &[&key, &agent, &host.as_str()])
                        .await
                        .map_err(err)?;
                }
            }
            Ok(())
        })
    })
}

/// A source value as a statement parameter of a column of `kind`.
type Param = Box<dyn ToSql + Sync + Send>;

fn param(c: &Cell, kind: Kind) -> Param {
    match (kind, c) {
        (Kind::Int | Kind::OptInt, c) => Box::new(c.int()),
        (_, Cell::Text(t)) => Box::new(Some(String::from_utf8_lossy(t).into_owned())),
        _ => Box::new(None::<String>),
    }
}

fn params(row: &[Cell], kinds: &[Kind]) -> Vec<Param> {
    row.iter().zip(kinds).map(|(c, k)| param(c, *k)).collect()
}

fn refs(vals: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    vals.iter()
        .map(|v| v.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

/// A PostgreSQL row of `n` columns as cells, for comparing with the source's.
fn cells(r: &tokio_postgres::Row, kinds: &[Kind]) -> Vec<Cell> {
    kinds
        .iter()
        .enumerate()
        .map(|(i, k)| match k {
            Kind::Int | Kind::OptInt => r.get::<_, Option<i64>>(i).map_or(Cell::Null, Cell::Int),
            _ => r
                .get::<_, Option<String>>(i)
                .map_or(Cell::Null, |s| Cell::Text(s.into_bytes())),
        })
        .collect()
}

type Step<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T>> + Send + 'a>>;

/// Runs `f` in one transaction of `pg`, committed unless it fails.
fn run<T: Send>(
    pg: &Arc<Pg>,
    f: impl for<'a> FnOnce(&'a Client, &'a Pg) -> Step<'a, T> + Send,
) -> Result<T> {
    let pg = Arc::clone(pg);
    block_on(async move {
        let mut s = pg.lock().await?;
        let err = |e: tokio_postgres::Error| pg.target().error(&e);
        let c = s.client()?;
        c.batch_execute("BEGIN").await.map_err(err)?;
        match f(c, &pg).await {
            Ok(v) => {
                c.batch_execute("COMMIT").await.map_err(err)?;
                Ok(v)
            }
            Err(e) => {
                let _ = c.batch_execute("ROLLBACK").await;
                Err(e)
            }
        }
    })?
}

const EVENT_COLUMNS: &str = "sequence, dedupe_key, session_key, session_id, agent_id, kind, \
     actor_type, actor_id, run_id, occurred_at, summary, payload_json";

/// The check and the first write transaction (see the module docs): classifies every source
/// event against the destination, refusing a diverged history, then raises the identity and
/// writes the pruned watermarks. Returns the sequences to insert, how many events the
/// destination holds already, and its heads as they were.
async fn check(c: &Client, pg: &Pg, src: &Source) -> Result<(Vec<i64>, u64, Heads)> {
    let err = |e: tokio_postgres::Error| pg.target().error(&e);
    let s: SchemaName = pg.schema();
    c.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('session-awareness import ' || $1, 0))",
        &[&s.as_str()],
    )
    .await
    .map_err(err)?;
    let mut before = Heads::new();
    for r in c
        .query(&format!("SELECT session_key, agent_id, last_sequence, pruned_max_sequence FROM {s}.session_state_heads"), &[])
        .await
        .map_err(err)?
    {
        let (k, a): (String, String) = (r.get(0), r.get(1));
        before.insert((k.into_bytes(), a.into_bytes()), (r.get(2), r.get(3)));
    }
    let seqs: Vec<i64> = src.events.iter().filter_map(|e| e[0].int()).collect();
    let kinds = kinds(&rows::EVENTS);
    let mut held: HashMap<i64, Vec<Cell>> = HashMap::new();
    for chunk in seqs.chunks(10_000) {
        let chunk = chunk.to_vec();
        for r in c
            .query(
                &format!(
                    "SELECT {EVENT_COLUMNS} FROM {s}.session_state_events WHERE sequence = ANY($1)"
                ),
                &[&chunk],
            )
            .await
            .map_err(err)?
        {
            held.insert(r.get(0), cells(&r, &kinds));
        }
    }
    let keys: Vec<String> = src
        .events
        .iter()
        .filter_map(|e| match &e[1] {
            Cell::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
            _ => None,
        })
        .collect();
    let mut dedupe: HashMap<Vec<u8>, i64> = HashMap::new();
    for chunk in keys.chunks(10_000) {
        let chunk = chunk.to_vec();
        for r in c
            .query(&format!("SELECT dedupe_key, sequence FROM {s}.session_state_events WHERE dedupe_key = ANY($1)"), &[&chunk])
            .await
            .map_err(err)?
        {
            dedupe.insert(r.get::<_, String>(0).into_bytes(), r.get(1));
        }
    }
    let mut insert = Vec::new();
    let mut present = 0;
    for e in &src.events {
        let seq = e[0].int().unwrap_or(0);
        let owner = || {
            let Cell::Text(k) = &e[1] else {
                return Ok(None);
            };
            Ok(dedupe.get(k).copied())
        };
        if classify_event(seq, e, held.get(&seq).map(Vec::as_slice), &before, owner)? {
            insert.push(seq);
        } else {
            present += 1;
        }
    }
    // The identity past the source's largest sequence, never back.
    c.execute(
        &format!(
            "SELECT setval(q, greatest($1::bigint, coalesce(pg_sequence_last_value(q), 0)), true) \
             FROM (SELECT pg_get_serial_sequence('{s}.session_state_events', 'sequence')::regclass AS q) AS t \
             WHERE $1::bigint > 0"
        ),
        &[&src.last_sequence],
    )
    .await
    .map_err(err)?;
    // Watermarks first: the events they cover are gone from the source.
    let mut marks: Vec<&Vec<Cell>> = src
        .heads
        .iter()
        .filter(|h| h[3].int().is_some_and(|w| w > 0))
        .collect();
    marks.sort_by_key(|h| head_row_key(h));
    let up = c
        .prepare(&format!(
            "INSERT INTO {s}.session_state_heads (session_key, agent_id, last_sequence, pruned_max_sequence, updated_at) \
             VALUES ($1, $2, $3, $3, $4) ON CONFLICT (session_key, agent_id) DO UPDATE SET \
             last_sequence = greatest({s}.session_state_heads.last_sequence, excluded.last_sequence), \
             pruned_max_sequence = greatest({s}.session_state_heads.pruned_max_sequence, excluded.pruned_max_sequence)"
        ))
        .await
        .map_err(err)?;
    for h in marks {
        let v = params(
            &[h[0].clone(), h[1].clone(), h[3].clone(), h[4].clone()],
            &[Kind::Text, Kind::Text, Kind::Int, Kind::Int],
        );
        c.execute(&up, &refs(&v)).await.map_err(err)?;
    }
    Ok((insert, present, before))
}

/// Copies the events to insert in ascending sequence, `batch` source rows per transaction,
/// each batch raising its sessions' heads.
fn copy_events(
    pg: &Arc<Pg>,
    src: &Source,
    insert: &[i64],
    batch: usize,
    summary: &mut ImportSummary,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    let total = src.totals[0];
    summary.events.read = total;
    let wanted: std::collections::HashSet<i64> = insert.iter().copied().collect();
    let mut done = summary.events.skipped;
    let all: Vec<&Vec<Cell>> = src.events.iter().collect();
    for chunk in all.chunks(batch) {
        let rows: Vec<Vec<Cell>> = chunk
            .iter()
            .filter(|e| e[0].int().is_some_and(|s| wanted.contains(&s)))
            .map(|e| (*e).clone())
            .collect();
        if !rows.is_empty() {
            summary.events.inserted += run(pg, |c, pg| Box::pin(write_events(c, pg, rows)))?;
        }
        done += chunk.len() as u64;
        progress(Progress {
            table: "session_state_events",
            done,
            total,
        });
    }
    if all.is_empty() {
        progress(Progress {
            table: "session_state_events",
            done,
            total,
        });
    }
    Ok(())
}

async fn write_events(c: &Client, pg: &Pg, batch: Vec<Vec<Cell>>) -> Result<u64> {
    let err = |e: tokio_postgres::Error| pg.target().error(&e);
    let s: SchemaName = pg.schema();
    let insert = c
        .prepare(&format!(
            "INSERT INTO {s}.session_state_events ({EVENT_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING"
        ))
        .await
        .map_err(err)?;
    let held = c
        .prepare(&format!(
            "SELECT {EVENT_COLUMNS} FROM {s}.session_state_events WHERE sequence = $1"
        ))
        .await
        .map_err(err)?;
    let kinds = kinds(&rows::EVENTS);
    let mut heads: HashMap<(Vec<u8>, Vec<u8>), (i64, i64)> = HashMap::new();
    let mut inserted = 0;
    for e in &batch {
        let v = params(e, &kinds);
        if c.execute(&insert, &refs(&v)).await.map_err(err)? == 1 {
            inserted += 1;
        } else {
            let seq = e[0].int().unwrap_or(0);
            let same = c
                .query_opt(&held, &[&seq])
                .await
                .map_err(err)?
                .map(|r| cells(&r, &kinds));
            check_taken(seq, e, same.as_deref())?;
        }
        raise_head(&mut heads, e);
    }
    let raise = c
        .prepare(&format!(
            "INSERT INTO {s}.session_state_heads (session_key, agent_id, last_sequence, pruned_max_sequence, updated_at) \
             VALUES ($1, $2, $3, 0, $4) ON CONFLICT (session_key, agent_id) DO UPDATE SET \
             last_sequence = greatest({s}.session_state_heads.last_sequence, excluded.last_sequence)"
        ))
        .await
        .map_err(err)?;
    // Sorted, as a group commit locks heads: two writers never wait for each other in a cycle.
    let mut heads: Vec<_> = heads.into_iter().collect();
    heads.sort();
    for ((k, a), (seq, at)) in heads {
        let v = params(
            &[Cell::Text(k), Cell::Text(a), Cell::Int(seq), Cell::Int(at)],
            &[Kind::Text, Kind::Text, Kind::Int, Kind::Int],
        );
        c.execute(&raise, &refs(&v)).await.map_err(err)?;
    }
    Ok(inserted)
}

/// Raises the destination's heads to the source's (never lowers them).
fn copy_heads(
    pg: &Arc<Pg>,
    src: &Source,
    before: &Heads,
    batch: usize,
    summary: &mut ImportSummary,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    let total = src.totals[1];
    let s = &mut summary.heads;
    s.read = total;
    let mut done = s.skipped;
    let mut all: Vec<&Vec<Cell>> = src.heads.iter().collect();
    // Sorted by key, as a group commit locks heads.
    all.sort_by_key(|h| head_row_key(h));
    for chunk in all.chunks(batch) {
        let rows: Vec<Vec<Cell>> = chunk.iter().map(|h| (*h).clone()).collect();
        run(pg, |c, pg| Box::pin(write_heads(c, pg, rows)))?;
        heads_written(s, before, chunk, &mut done, progress);
    }
    Ok(())
}

async fn write_heads(c: &Client, pg: &Pg, rows: Vec<Vec<Cell>>) -> Result<()> {
    let err = |e: tokio_postgres::Error| pg.target().error(&e);
    let s: SchemaName = pg.schema();
    let up = c
        .prepare(&format!(
            "INSERT INTO {s}.session_state_heads (session_key, agent_id, last_sequence, pruned_max_sequence, updated_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (session_key, agent_id) DO UPDATE SET \
             last_sequence = greatest({s}.session_state_heads.last_sequence, excluded.last_sequence), \
             pruned_max_sequence = greatest({s}.session_state_heads.pruned_max_sequence, excluded.pruned_max_sequence), \
             updated_at = greatest({s}.session_state_heads.updated_at, excluded.updated_at)"
        ))
        .await
        .map_err(err)?;
    let kinds = kinds(&rows::HEADS);
    for h in &rows {
        let v = params(h, &kinds);
        c.execute(&up, &refs(&v)).await.map_err(err)?;
    }
    Ok(())
}

const INSERT_CURSOR: &str = "INSERT INTO __SCHEMA__.session_watch_cursors (watcher_session_key, \
     watcher_store_path, target_session_key, last_seen_sequence, notified_sequence, \
     material_sequence, provenance, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
     ON CONFLICT DO NOTHING";

const INSERT_LINK: &str = "INSERT INTO __SCHEMA__.session_upstream_links (session_key, agent_id, \
     catalog_id, host_id, thread_id, upstream_kind, upstream_ref_json, last_marker_json, \
     last_scanned_at, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT DO NOTHING";

/// Inserts `all` with `sql` (which leaves rows already present), `batch` per transaction.
#[allow(clippy::too_many_arguments)]
fn copy_rows(
    pg: &Arc<Pg>,
    template: &'static str,
    all: &[Vec<Cell>],
    kinds: &[Kind],
    batch: usize,
    s: &mut TableSummary,
    table: &'static str,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    debug_assert!(all.iter().all(|r| r.len() == kinds.len()));
    insert_chunks(all, batch, s, table, progress, |chunk| {
        let rows: Vec<Vec<Cell>> = chunk.to_vec();
        let kinds = kinds.to_vec();
        run(pg, move |c, pg| {
            Box::pin(async move {
                let sql = template.replace("__SCHEMA__", pg.schema().as_str());
                let st = c.prepare(&sql).await.map_err(|e| pg.target().error(&e))?;
                let mut n = 0;
                for r in &rows {
                    let v = params(r, &kinds);
                    n += c
                        .execute(&st, &refs(&v))
                        .await
                        .map_err(|e| pg.target().error(&e))?;
                }
                Ok(n)
            })
        })
    })
}
