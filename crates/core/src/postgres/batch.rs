//! The PostgreSQL store's group commit in two round trips, whatever the group's size: in one
//! pipeline, `BEGIN`, the heads locked in their fixed order and the rows the group can read
//! (every cursor on its targets `FOR UPDATE`, the rows of its dedupe keys, one sequence per
//! event, drawn once the heads are held: the server runs a pipeline in order); then, once the shared write flow has run over those rows
//! in memory ([`Overlay`]), every write as one set-based statement per table, with the commit,
//! in one pipeline. A row the flow believed absent is inserted without `ON CONFLICT`, so a
//! racing host (a dedupe key or a cursor inserted meanwhile) makes the statement fail instead
//! of being overwritten; then, and whenever the server refuses a row, the group is rolled back
//! and written again event by event ([`crate::postgres::rows::PgRows`]), which gives each
//! event its own answer.

use std::collections::HashMap;

use futures_util::future::{join, join4, OptionFuture};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use crate::error::Result;
use crate::event::ValidEvent;
use crate::group::{self, WrittenItem};
use crate::options::SchemaName;
use crate::postgres::conn::Target;
use crate::postgres::overlay::{heads_of, CursorState, Overlay};
use crate::postgres::rows::{event_of, PgRows, BEGIN};
use crate::postgres::tail::{Prepared, Tail, Told};
use crate::record::WriteRules;
use crate::rows::Provenance;
use crate::rules::Positions;

/// Locks (creating when missing) the group's heads, in the order given (sorted), and answers
/// their last sequence; a head it had to create says so, so one left at 0 can go again.
pub(crate) const LOCK_HEADS: &str = "INSERT INTO __SCHEMA__.session_state_heads AS h (session_key, \
     agent_id, last_sequence, pruned_max_sequence, updated_at) \
     SELECT k, a, 0, 0, $3 FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(k, a, i) ORDER BY i \
     ON CONFLICT (session_key, agent_id) DO UPDATE SET last_sequence = h.last_sequence \
     RETURNING session_key, agent_id, (xmax = 0) AS created, last_sequence";
/// Removes the heads the group created and left without an event.
pub(crate) const DROP_EMPTY_HEADS: &str = "DELETE FROM __SCHEMA__.session_state_heads h \
     USING unnest($1::text[], $2::text[]) AS t(k, a) \
     WHERE h.session_key = t.k AND h.agent_id = t.a AND h.last_sequence = 0 \
     AND h.pruned_max_sequence = 0";
const FETCH_CURSORS: &str = "SELECT watcher_session_key, target_session_key, last_seen_sequence, \
     notified_sequence, material_sequence, provenance, updated_at, watcher_store_path \
     FROM __SCHEMA__.session_watch_cursors WHERE target_session_key = ANY($1::text[]) \
     ORDER BY target_session_key COLLATE \"C\", watcher_session_key COLLATE \"C\" FOR UPDATE";
const FETCH_DEDUPE: &str = "SELECT sequence, session_key, agent_id, kind, actor_type, actor_id, \
     run_id, session_id, occurred_at, summary, payload_json, dedupe_key \
     FROM __SCHEMA__.session_state_events WHERE dedupe_key = ANY($1::text[])";
const DRAW: &str =
    "SELECT nextval(pg_get_serial_sequence('__SCHEMA__.session_state_events', 'sequence')) \
     FROM generate_series(1, $1::int)";
const INSERT_EVENTS: &str = "INSERT INTO __SCHEMA__.session_state_events (sequence, dedupe_key, \
     session_key, session_id, agent_id, kind, actor_type, actor_id, run_id, occurred_at, summary, \
     payload_json) SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], \
     $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[], $11::text[], $12::text[])";
const INSERT_CURSORS: &str = "INSERT INTO __SCHEMA__.session_watch_cursors (watcher_session_key, \
     target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, \
     updated_at, watcher_store_path) SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], \
     $4::bigint[], $5::bigint[], $6::text[], $7::bigint[], $8::text[])";
const UPDATE_CURSORS: &str = "UPDATE __SCHEMA__.session_watch_cursors AS c SET \
     last_seen_sequence = u.l, notified_sequence = u.n, material_sequence = u.m, provenance = u.p, \
     updated_at = u.at, watcher_store_path = u.s \
     FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[], \
     $7::bigint[], $8::text[]) AS u(w, t, l, n, m, p, at, s) \
     WHERE c.watcher_session_key = u.w AND c.target_session_key = u.t";
const UPDATE_HEADS: &str = "UPDATE __SCHEMA__.session_state_heads AS h SET \
     last_sequence = greatest(h.last_sequence, u.s), updated_at = u.at \
     FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS u(k, a, s, at) \
     WHERE h.session_key = u.k AND h.agent_id = u.a";

// The same statements over one row, for a group of one session and target (a record at 1 in
// flight): with scalar parameters the server settles on a generic plan after a few runs, where
// an array parameter makes it plan every execution again (about 0.2 ms of a record's server
// time, measured; BENCHMARKS.md).
const LOCK_HEAD: &str = "INSERT INTO __SCHEMA__.session_state_heads AS h (session_key, agent_id, \
     last_sequence, pruned_max_sequence, updated_at) VALUES ($1, $2, 0, 0, $3) \
     ON CONFLICT (session_key, agent_id) DO UPDATE SET last_sequence = h.last_sequence \
     RETURNING session_key, agent_id, (xmax = 0) AS created, last_sequence";
const FETCH_CURSORS_OF: &str = "SELECT watcher_session_key, target_session_key, \
     last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at, \
     watcher_store_path FROM __SCHEMA__.session_watch_cursors WHERE target_session_key = $1 \
     ORDER BY watcher_session_key COLLATE \"C\" FOR UPDATE";
const FETCH_DEDUPE_OF: &str =
    "SELECT sequence, session_key, agent_id, kind, actor_type, actor_id, \
     run_id, session_id, occurred_at, summary, payload_json, dedupe_key \
     FROM __SCHEMA__.session_state_events WHERE dedupe_key = $1";
const INSERT_EVENT: &str = "INSERT INTO __SCHEMA__.session_state_events (sequence, dedupe_key, \
     session_key, session_id, agent_id, kind, actor_type, actor_id, run_id, occurred_at, summary, \
     payload_json) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";
const INSERT_CURSOR: &str = "INSERT INTO __SCHEMA__.session_watch_cursors (watcher_session_key, \
     target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, \
     updated_at, watcher_store_path) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
const UPDATE_CURSOR: &str = "UPDATE __SCHEMA__.session_watch_cursors SET \
     last_seen_sequence = $3, notified_sequence = $4, material_sequence = $5, provenance = $6, \
     updated_at = $7, watcher_store_path = $8 \
     WHERE watcher_session_key = $1 AND target_session_key = $2";
const UPDATE_HEAD: &str = "UPDATE __SCHEMA__.session_state_heads AS h SET \
     last_sequence = greatest(h.last_sequence, $3), updated_at = $4 \
     WHERE h.session_key = $1 AND h.agent_id = $2";

const COMMIT: &str = "COMMIT";

/// A column of a set-based write: the array, or its one value for the one-row statement.
fn col<T: ToSql + Sync + Send + 'static>(values: Vec<T>, one: bool) -> Box<dyn ToSql + Sync + Send>
where
    Vec<T>: ToSql,
{
    match <[T; 1]>::try_from(values) {
        Ok([value]) if one => Box::new(value),
        Ok(array) => Box::new(Vec::from(array)),
        Err(values) => Box::new(values),
    }
}

/// The first stand-in sequence of a dry run: above any the store will draw.
const STAND_IN: i64 = 1 << 60;

/// What a group's commit sends right after its `COMMIT`, given what the group wrote: the
/// hint and the lease read of the notices it opened ([`Tail`]), or nothing.
pub(crate) type TailOf<'a> = &'a dyn Fn(&[WrittenItem]) -> Option<Tail>;

/// What a group's transaction carries besides its events: a link write that commits with the
/// event of a group of one (`record_with`), and what to send right after the commit.
#[derive(Clone, Copy)]
pub(crate) struct Extra<'a> {
    /// Run before `COMMIT` when the group's one event was written or found by its dedupe key.
    pub(crate) also: crate::postgres::rows::Also<'a>,
    /// The hint and lease read of the notices the group opened.
    pub(crate) tail_of: Option<TailOf<'a>>,
}

/// Sends `COMMIT`, then `tail` in the same pipeline (the server runs them in order, so the
/// tail runs after the commit, outside the data transaction), on `rows` after its held
/// writes. When the commit fails the hint has gone out all the same, which is harmless: the
/// catch-up it asks for finds nothing new. `tail` is the tail and its two statements.
pub(crate) fn commit_with(
    rows: &mut PgRows<'_>,
    client: &Client,
    sql: &'static str,
    tail: Option<(Tail, Prepared)>,
) -> Result<Option<Told>> {
    rows.send(async {
        let commit = client.batch_execute(sql);
        match tail {
            Some((t, prepared)) => {
                let (c, told) = join(commit, t.send(client, prepared)).await;
                c.map(|()| Some(told))
            }
            None => commit.await.map(|()| None),
        }
    })
}

/// Why the fast path gave up.
pub(crate) enum Fallback {
    /// The server refused a statement, or a host raced: the transaction is rolled back and
    /// the group can be written event by event.
    Again(crate::error::Error),
    /// Before anything was sent, or the connection is gone: the group fails with this.
    Fail(crate::error::Error),
    /// `COMMIT` was sent and the connection lost before its answer: the group may have
    /// committed with these results (`in_doubt.rs`).
    Doubt(Vec<WrittenItem>, crate::error::Error),
}

/// [`commit_with`] for a group that wrote `written`: a connection lost on the way leaves the
/// group in doubt, any other failure is the server's refusal.
pub(crate) fn commit_or_doubt(
    rows: &mut PgRows<'_>,
    client: &Client,
    tail: Option<(Tail, Prepared)>,
    written: Vec<WrittenItem>,
) -> std::result::Result<(Vec<WrittenItem>, Option<Told>), Fallback> {
    match commit_with(rows, client, COMMIT, tail) {
        Ok(told) => Ok((written, told)),
        Err(e) if crate::postgres::outage::waits_for(&e) => Err(Fallback::Doubt(written, e)),
        Err(e) => Err(Fallback::Again(e)),
    }
}

/// Writes the group in two round trips (three when `onlyIfWatched` may skip) and commits,
/// with what `tail_of` asks sent right after the commit; or says why not.
pub(crate) fn write(
    client: &Client,
    statements: &mut HashMap<&'static str, Statement>,
    schema: SchemaName,
    target: &Target,
    rules: WriteRules,
    valid: Vec<(usize, ValidEvent, i64)>,
    Extra { also, tail_of }: Extra<'_>,
) -> std::result::Result<(Vec<WrittenItem>, Option<Told>), Fallback> {
    let mut rows = PgRows::new(client, statements, schema, target, false);
    let prepared = tail_of.map(|_| Prepared::on_rows(&mut rows));
    let heads = heads_of(valid.iter().map(|(_, v, _)| v));
    let (keys, agents): (Vec<String>, Vec<String>) = heads.into_iter().unzip();
    let now = valid.iter().map(|(_, _, now)| *now).max().unwrap_or(0);
    let mut targets: Vec<&str> = valid
        .iter()
        .map(|(_, v, _)| v.event.session_key.as_str())
        .collect();
    targets.sort_unstable();
    targets.dedup();
    let dedupe_keys: Vec<&str> = valid
        .iter()
        .filter_map(|(_, v, _)| v.dedupe_key.as_deref())
        .collect();
    // A record that `onlyIfWatched` may skip draws no sequence (sequences are the SQLite
    // store's exactly): such a group draws its numbers once the flow has shown how many of its
    // events insert, in a round trip of their own.
    let gated = valid
        .iter()
        .any(|(_, v, _)| v.only_if_watched && v.watchers.is_empty());
    let n = if gated { 0 } else { valid.len() as i32 };
    let one = keys.len() == 1 && targets.len() == 1;
    let lock = match one {
        true => rows.prepared(LOCK_HEAD),
        false => rows.prepared(LOCK_HEADS),
    };
    let fetch_cursors = match one {
        true => rows.prepared(FETCH_CURSORS_OF),
        false => rows.prepared(FETCH_CURSORS),
    };
    let fetch_dedupe = match dedupe_keys.len() {
        1 => rows.prepared(FETCH_DEDUPE_OF),
        _ => rows.prepared(FETCH_DEDUPE),
    };
    let draw = rows.prepared(DRAW);
    let (lock, fetch_cursors, fetch_dedupe, draw) =
        (|| Ok((lock?, fetch_cursors?, fetch_dedupe?, draw?)))().map_err(Fallback::Fail)?;
    let lock_params: [&(dyn ToSql + Sync); 3] = match one {
        true => [&keys[0], &agents[0], &now],
        false => [&keys, &agents, &now],
    };
    let cursor_params: [&(dyn ToSql + Sync); 1] = match one {
        true => [&targets[0]],
        false => [&targets],
    };
    let draw_params: [&(dyn ToSql + Sync); 1] = [&n];
    let dedupe_params: [&(dyn ToSql + Sync); 1] = match dedupe_keys.len() {
        1 => [&dedupe_keys[0]],
        _ => [&dedupe_keys],
    };
    let again = |e| Fallback::Again(e);
    let err = |e: tokio_postgres::Error| target.error(&e);

    // 1. BEGIN, the heads, what the group can read and its sequences, in one pipeline: the
    // server runs them in order, so the sequences are drawn once the heads are held.
    rows.hold_simple(BEGIN);
    let (locked, cursors, dedupe, drawn) = rows
        .send(async {
            Ok(join4(
                client.query(&lock, &lock_params),
                client.query(&fetch_cursors, &cursor_params),
                // Nothing to look up: no statement.
                OptionFuture::from(
                    (!dedupe_keys.is_empty()).then(|| client.query(&fetch_dedupe, &dedupe_params)),
                ),
                OptionFuture::from((n > 0).then(|| client.query(&draw, &draw_params))),
            )
            .await)
        })
        .map_err(again)?;
    let locked = locked.map_err(err).map_err(again)?;
    let cursors = cursors.map_err(err).map_err(again)?;
    let dedupe = dedupe
        .unwrap_or(Ok(Vec::new()))
        .map_err(err)
        .map_err(again)?;
    let drawn = drawn
        .unwrap_or(Ok(Vec::new()))
        .map_err(err)
        .map_err(again)?;
    let mut created = false;
    let mut head_rows = Vec::with_capacity(locked.len());
    for r in &locked {
        let row = || -> std::result::Result<_, tokio_postgres::Error> {
            Ok((
                (r.try_get::<_, String>(0)?, r.try_get::<_, String>(1)?),
                r.try_get::<_, bool>(2)?,
                r.try_get::<_, i64>(3)?,
            ))
        };
        let (k, c, last) = row().map_err(err).map_err(again)?;
        created |= c;
        head_rows.push((k, last));
    }
    let read = || -> std::result::Result<Overlay, tokio_postgres::Error> {
        let mut cs = Vec::with_capacity(cursors.len());
        for r in &cursors {
            // The schema's check admits only the two known provenances.
            let p: String = r.try_get(5)?;
            let provenance = Provenance::parse(&p).unwrap_or(Provenance::Explicit);
            cs.push((
                r.try_get::<_, String>(0)?,
                r.try_get::<_, String>(1)?,
                CursorState {
                    at: Positions {
                        last_seen: r.try_get(2)?,
                        notified: r.try_get(3)?,
                        material: r.try_get(4)?,
                    },
                    provenance,
                    updated_at: r.try_get(6)?,
                    scope: r.try_get(7)?,
                    written: None,
                },
            ));
        }
        let mut by_key = HashMap::new();
        for r in &dedupe {
            by_key.insert(r.try_get::<_, String>(11)?, event_of(r)?);
        }
        let mut seqs = drawn
            .iter()
            .map(|r| r.try_get::<_, i64>(0))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        seqs.sort_unstable();
        Ok(Overlay::new(head_rows, cs, by_key, seqs))
    };
    let mut overlay = read().map_err(err).map_err(again)?;
    if gated {
        // The flow over a copy with stand-ins above every sequence there is (the heads are
        // held): it decides alike at any numbers in that order, so it counts the inserts.
        let mut dry = overlay.clone();
        dry.set_sequences((0..valid.len() as i64).map(|i| STAND_IN + i).collect());
        group::write_each(&mut dry, rules, valid.clone());
        let k = (valid.len() - dry.sequences_left()) as i32;
        if k > 0 {
            let drawn = rows.send(client.query(&draw, &[&k])).map_err(again)?;
            let mut seqs = drawn
                .iter()
                .map(|r| r.try_get::<_, i64>(0))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(err)
                .map_err(again)?;
            seqs.sort_unstable();
            overlay.set_sequences(seqs);
        }
    }

    // 2. The flow in memory, then every write and the commit in one pipeline.
    let written = group::write_each(&mut overlay, rules, valid);
    let tail = tail_of.and_then(|f| f(&written)).zip(prepared);
    let w = overlay.into_writes();
    let hold = |rows: &mut PgRows<'_>| -> Result<()> {
        if !w.events.is_empty() {
            let e = &w.events;
            let one = e.len() == 1;
            rows.hold(
                if one { INSERT_EVENT } else { INSERT_EVENTS },
                vec![
                    col(e.iter().map(|(_, e)| e.sequence).collect::<Vec<_>>(), one),
                    col(e.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(), one),
                    col(
                        e.iter()
                            .map(|(_, e)| e.session_key.clone())
                            .collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        e.iter()
                            .map(|(_, e)| e.session_id.clone())
                            .collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        e.iter()
                            .map(|(_, e)| e.agent_id.clone())
                            .collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        e.iter().map(|(_, e)| e.kind.as_str()).collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        e.iter()
                            .map(|(_, e)| e.actor_type.as_str())
                            .collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        e.iter()
                            .map(|(_, e)| e.actor_id.clone())
                            .collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        e.iter().map(|(_, e)| e.run_id.clone()).collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        e.iter().map(|(_, e)| e.occurred_at).collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        e.iter().map(|(_, e)| e.summary.clone()).collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        e.iter()
                            .map(|(_, e)| e.payload_json.clone())
                            .collect::<Vec<_>>(),
                        one,
                    ),
                ],
            )?;
        }
        for (new, template) in [(true, INSERT_CURSORS), (false, UPDATE_CURSORS)] {
            let cs: Vec<_> = w
                .cursors
                .iter()
                .filter(|(_, _, c)| c.written == Some(new))
                .collect();
            if cs.is_empty() {
                continue;
            }
            let one = cs.len() == 1;
            let template = match (one, new) {
                (true, true) => INSERT_CURSOR,
                (true, false) => UPDATE_CURSOR,
                _ => template,
            };
            rows.hold(
                template,
                vec![
                    col(
                        cs.iter().map(|(w, _, _)| w.clone()).collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        cs.iter().map(|(_, t, _)| t.clone()).collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        cs.iter()
                            .map(|(_, _, c)| c.at.last_seen)
                            .collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        cs.iter().map(|(_, _, c)| c.at.notified).collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        cs.iter().map(|(_, _, c)| c.at.material).collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        cs.iter()
                            .map(|(_, _, c)| c.provenance.as_str())
                            .collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        cs.iter().map(|(_, _, c)| c.updated_at).collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        cs.iter()
                            .map(|(_, _, c)| c.scope.clone())
                            .collect::<Vec<_>>(),
                        one,
                    ),
                ],
            )?;
        }
        if !w.heads.is_empty() {
            let h = &w.heads;
            let one = h.len() == 1;
            rows.hold(
                if one { UPDATE_HEAD } else { UPDATE_HEADS },
                vec![
                    col(
                        h.iter().map(|((k, _), _)| k.clone()).collect::<Vec<_>>(),
                        one,
                    ),
                    col(
                        h.iter().map(|((_, a), _)| a.clone()).collect::<Vec<_>>(),
                        one,
                    ),
                    col(h.iter().map(|(_, (s, _))| *s).collect::<Vec<_>>(), one),
                    col(h.iter().map(|(_, (_, at))| *at).collect::<Vec<_>>(), one),
                ],
            )?;
        }
        if created {
            rows.hold(
                DROP_EMPTY_HEADS,
                vec![Box::new(keys.clone()), Box::new(agents.clone())],
            )?;
        }
        Ok(())
    };
    hold(&mut rows).map_err(again)?;
    if let Some(also) = also.filter(|_| matches!(written[..], [(_, _, Ok(Some(_)))])) {
        also(&mut rows).map_err(again)?;
    }
    // After a failed statement the server answers COMMIT with a rollback: the failure is the
    // answer, and nothing of the group stays.
    commit_or_doubt(&mut rows, client, tail, written)
}
