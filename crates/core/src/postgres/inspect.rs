//! Read-only inspection of a PostgreSQL store, for the command-line tool's `inspect` and
//! `events` on a `postgres://` URL: the same reports as a SQLite file's
//! ([`crate::inspect`]), read from the tables of the store's schema.
//!
//! Nothing is created, locked or written: every statement is a `SELECT`, run in one
//! `REPEATABLE READ READ ONLY` transaction (one snapshot for the whole report), so a role
//! with `USAGE` on the schema and `SELECT` on its tables suffices (docs/postgres.md#rights).
//! Which of the store's tables exist is read from the catalog, which every role may read; a
//! schema that does not exist reports every table missing. The report's `path` is the URL
//! with its password removed, `file_bytes` the tables' size on the server
//! (`pg_total_relation_size`) and `wal` false; `last_sequence` is the largest sequence the
//! tables show (the identity's own counter would need rights on its sequence).

use std::sync::Arc;

use tokio_postgres::Client;

use crate::error::Result;
use crate::keys;
use crate::options::{Options, SchemaName};
use crate::postgres::block_on;
use crate::postgres::conn::{redact, Pg, Target};
use crate::shapes::CursorRow;
use crate::sqlite::inspect::{
    missing_tables, session_args, EventRow, InspectedCursor, Inspection, RowCounts, SessionEvents,
    SessionRow, EVENT_COLUMNS, TABLES,
};
use crate::sqlite::reread;

/// True when `path_or_url` names a PostgreSQL database (`postgres://` or `postgresql://`)
/// rather than a file.
pub fn is_url(path_or_url: &str) -> bool {
    crate::postgres::conn::is_url(path_or_url)
}

/// A read-only connection to the store at `url`, its tables in `schema`.
fn connect(url: &str, schema: &str) -> Result<Arc<Pg>> {
    let opts = Options {
        pg_schema: SchemaName::parse(schema)?,
        ..Options::default()
    };
    let target = Target::parse(url, &opts)?;
    // A tool's read waits for no outage.
    let outage = crate::postgres::outage::Outage::new(0, 1);
    Ok(Arc::new(Pg::new(target, opts.pg_schema, outage)))
}

/// Opens one read-only snapshot on `c`: every later statement of the report reads it.
async fn begin(c: &Client, pg: &Pg) -> Result<()> {
    c.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await
        .map_err(|e| pg.target().error(&e))
}

/// Ends the snapshot; nothing was written, so there is nothing to keep or to report.
async fn end(c: &Client) {
    let _ = c.batch_execute("ROLLBACK").await;
}

/// Inspects the PostgreSQL store at `url` (its tables in `schema`) without changing it.
///
/// # Errors
/// `ERR_INVALID_ARG` for a bad URL or schema name; `ERR_DB` when the server cannot be
/// reached, refuses the login, or the role may not read the tables.
pub fn inspect(url: &str, schema: &str) -> Result<Inspection> {
    let pg = connect(url, schema)?;
    let shown = redact(url, None);
    let read = Arc::clone(&pg);
    let mut report = block_on(async move {
        let mut s = read.lock().await?;
        let c = s.client()?;
        begin(c, &read).await?;
        let out = read_report(c, &read).await;
        end(c).await;
        out
    })??;
    report.path = shown;
    Ok(report.with_pending_notices())
}

/// The one row `sql` answers (text the caller built of the schema's checked name).
async fn one_row(
    c: &Client,
    sql: &str,
) -> std::result::Result<tokio_postgres::Row, tokio_postgres::Error> {
    c.query_one(sql, &[]).await
}

/// The rows `sql` answers (text the caller built of the schema's checked name).
async fn all_rows(
    c: &Client,
    sql: &str,
) -> std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    c.query(sql, &[]).await
}

/// The tables of the store's schema that exist (read from the catalog, which every role may
/// read).
async fn present_tables(c: &Client, pg: &Pg) -> Result<Vec<String>> {
    let rows = c
        .query(
            "SELECT c.relname::text FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')",
            &[&pg.schema().as_str()],
        )
        .await
        .map_err(|e| pg.target().error(&e))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

async fn read_report(c: &Client, pg: &Pg) -> Result<Inspection> {
    let err = |e: tokio_postgres::Error| pg.target().error(&e);
    let s: SchemaName = pg.schema();
    let present = present_tables(c, pg).await?;
    let has = |t: &str| present.iter().any(|p| p == t);
    let mut counts = RowCounts::default();
    let mut file_bytes = 0u64;
    // One statement per table, each of the schema's checked name and the table's own.
    let counted = [
        format!("SELECT count(*), pg_total_relation_size('{s}.session_state_events') FROM {s}.session_state_events"),
        format!("SELECT count(*), pg_total_relation_size('{s}.session_state_heads') FROM {s}.session_state_heads"),
        format!("SELECT count(*), pg_total_relation_size('{s}.session_watch_cursors') FROM {s}.session_watch_cursors"),
        format!("SELECT count(*), pg_total_relation_size('{s}.session_upstream_links') FROM {s}.session_upstream_links"),
    ];
    for (i, table) in TABLES.iter().enumerate() {
        if !has(table) {
            continue;
        }
        let r = one_row(c, &counted[i]).await.map_err(err)?;
        let n: i64 = r.get(0);
        file_bytes += r.get::<_, i64>(1).max(0) as u64;
        match i {
            0 => counts.events = n,
            1 => counts.heads = n,
            2 => counts.cursors = n,
            _ => counts.upstream_links = n,
        }
    }
    let (events, heads, cursors) = (has(TABLES[0]), has(TABLES[1]), has(TABLES[2]));
    let mut last_sequence = 0;
    let mut oldest_event = None;
    if events {
        let max = format!("SELECT coalesce(max(sequence), 0) FROM {s}.session_state_events");
        last_sequence = one_row(c, &max).await.map_err(err)?.get(0);
        oldest_event = c
            .query_opt(
                &format!("SELECT {EVENT_COLUMNS} FROM {s}.session_state_events ORDER BY occurred_at, sequence LIMIT 1"),
                &[],
            )
            .await
            .map_err(err)?
            .map(|r| event_row(&r));
    }
    let mut sessions = Vec::new();
    if heads {
        let listed = if events {
            format!(
                "SELECT h.session_key, h.agent_id, h.last_sequence, h.pruned_max_sequence, \
                 h.updated_at, \
                 (SELECT count(*) FROM {s}.session_state_events e \
                 WHERE e.session_key = h.session_key AND e.agent_id = h.agent_id), \
                 (SELECT min(sequence) FROM {s}.session_state_events e \
                 WHERE e.session_key = h.session_key AND e.agent_id = h.agent_id) \
                 FROM {s}.session_state_heads h \
                 ORDER BY h.session_key COLLATE \"C\", h.agent_id COLLATE \"C\""
            )
        } else {
            format!(
                "SELECT h.session_key, h.agent_id, h.last_sequence, h.pruned_max_sequence, \
                 h.updated_at, 0::bigint, NULL::bigint FROM {s}.session_state_heads h \
                 ORDER BY h.session_key COLLATE \"C\", h.agent_id COLLATE \"C\""
            )
        };
        for r in all_rows(c, &listed).await.map_err(err)? {
            last_sequence = last_sequence.max(r.get(2)).max(r.get(3));
            sessions.push(SessionRow {
                session_key: r.get(0),
                agent_id: r.get(1),
                state_version: r.get(2),
                pruned_max_sequence: r.get(3),
                updated_at: r.get(4),
                retained_events: r.get(5),
                earliest_retained_sequence: r.get(6),
            });
        }
    }
    let mut rows = Vec::new();
    if cursors {
        for r in c
            .query(
                &format!(
                    "SELECT watcher_session_key, target_session_key, last_seen_sequence, \
                     notified_sequence, material_sequence, provenance, updated_at, \
                     watcher_store_path FROM {s}.session_watch_cursors \
                     ORDER BY watcher_session_key COLLATE \"C\", target_session_key COLLATE \"C\""
                ),
                &[],
            )
            .await
            .map_err(err)?
        {
            let mut row = InspectedCursor {
                row: CursorRow {
                    watcher: r.get(0),
                    target: r.get(1),
                    last_seen: r.get(2),
                    notified: r.get(3),
                    material: r.get(4),
                    provenance: r.get(5),
                    updated_at: r.get(6),
                    scope: r.get(7),
                },
                target_version: 0,
                lag: 0,
                pending: false,
            };
            // Cursors only exist on agent-qualified targets, whose events carry the key's agent.
            let agent =
                keys::resolve_agent(&row.row.target, None).unwrap_or_else(|_| "main".into());
            if heads {
                row.target_version = c
                    .query_opt(
                        &format!("SELECT last_sequence FROM {s}.session_state_heads WHERE session_key = $1 AND agent_id = $2"),
                        &[&row.row.target, &agent],
                    )
                    .await
                    .map_err(err)?
                    .map_or(0, |r| r.get(0));
            }
            if events {
                row.lag = c
                    .query_one(
                        &format!("SELECT count(*) FROM {s}.session_state_events WHERE session_key = $1 AND agent_id = $2 AND sequence > $3"),
                        &[&row.row.target, &agent, &row.row.last_seen],
                    )
                    .await
                    .map_err(err)?
                    .get(0);
            }
            row.pending = row.row.notified != row.row.last_seen && reread::live(&row);
            rows.push(row);
        }
    }
    Ok(Inspection {
        path: String::new(),
        file_bytes,
        wal: false,
        missing_tables: missing_tables(has),
        counts,
        last_sequence,
        oldest_event,
        sessions,
        cursors: rows,
        pending_notices: Vec::new(),
    })
}

fn event_row(r: &tokio_postgres::Row) -> EventRow {
    EventRow {
        sequence: r.get(0),
        session_key: r.get(1),
        agent_id: r.get(2),
        kind: r.get(3),
        actor_type: r.get(4),
        actor_id: r.get(5),
        run_id: r.get(6),
        session_id: r.get(7),
        occurred_at: r.get(8),
        summary: r.get(9),
        payload_json: r.get(10),
    }
}

/// Reads the events of `(session_key, agent_id)` with `sequence > since` from the store at
/// `url`, ascending, without changing it; each row is answered as `changesSince` answers it
/// (a row the store would not write, in its safe form).
///
/// # Errors
/// `ERR_INVALID_ARG` for an empty key, a bad agent or `since`; otherwise as [`inspect`].
pub fn read_events(
    url: &str,
    schema: &str,
    session_key: &str,
    agent_id: Option<&str>,
    since: f64,
) -> Result<SessionEvents> {
    let (agent, since) = session_args(session_key, agent_id, since)?;
    let pg = connect(url, schema)?;
    let (key, who) = (session_key.to_owned(), agent.clone());
    let (head, rows) = block_on(async move {
        let mut guard = pg.lock().await?;
        let c = guard.client()?;
        begin(c, &pg).await?;
        let out = read_session(c, &pg, &key, &who, since).await;
        end(c).await;
        out
    })??;
    let (state_version, pruned_max_sequence) = head;
    let events = reread::answer(rows, state_version)?;
    Ok(SessionEvents {
        session_key: session_key.to_owned(),
        agent_id: agent,
        state_version,
        pruned_max_sequence,
        history_gap: since < pruned_max_sequence,
        events,
    })
}

/// The session's head `(last_sequence, pruned_max_sequence)` and its event rows after `since`.
async fn read_session(
    c: &Client,
    pg: &Pg,
    key: &str,
    who: &str,
    since: i64,
) -> Result<((i64, i64), Vec<EventRow>)> {
    let err = |e: tokio_postgres::Error| pg.target().error(&e);
    let s: SchemaName = pg.schema();
    let present = present_tables(c, pg).await?;
    let has = |t: &str| present.iter().any(|p| p == t);
    let head: (i64, i64) = if has(TABLES[1]) {
        c.query_opt(
                &format!("SELECT last_sequence, pruned_max_sequence FROM {s}.session_state_heads WHERE session_key = $1 AND agent_id = $2"),
                &[&key, &who],
            )
            .await
            .map_err(err)?
            .map_or((0, 0), |r| (r.get(0), r.get(1)))
    } else {
        (0, 0)
    };
    let rows = if has(TABLES[0]) {
        c.query(
                &format!("SELECT {EVENT_COLUMNS} FROM {s}.session_state_events WHERE session_key = $1 AND agent_id = $2 AND sequence > $3 ORDER BY sequence"),
                &[&key, &who, &since],
            )
            .await
            .map_err(err)?
            .iter()
            .map(event_row)
            .collect()
    } else {
        Vec::new()
    };
    Ok((head, rows))
}
