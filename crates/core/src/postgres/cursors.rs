//! The cursor rows on PostgreSQL (semantics.md#cursors): the statements behind `watch`,
//! `unwatch`, the acknowledges of `drain` and `acknowledge`, the sweep's re-freeze, reset and
//! delete. Every rule is decided in [`crate::rules`]: these statements read the positions,
//! ask the rule, and write what it returns, conditionally on the positions they read, so a
//! row another host moved meanwhile is never overwritten.
//!
//! Every function takes the schema name (checked at open: a plain identifier, no quoting
//! needed) and any client or transaction.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_postgres::{Client, Row, Statement};

use crate::cursors::{Pending, Provenance, WatchOptions};
use crate::error::{DbFailure, Error, Result};
use crate::options::SchemaName;
use crate::rules::Positions;

/// A PostgreSQL failure as the store's `ERR_DB`: the server's own message (which never holds
/// the connection's password), or the client's for a lost connection.
pub(crate) fn db(e: tokio_postgres::Error) -> Error {
    let kind = match e.code().map(|c| c.code()) {
        Some("40001" | "40P01" | "55P03" | "57014") => DbFailure::Busy,
        Some("53100") => DbFailure::Full,
        Some("25006") => DbFailure::ReadOnly,
        Some("XX001" | "XX002") => DbFailure::Corrupt,
        _ => DbFailure::Other,
    };
    let message = match e.as_db_error() {
        Some(d) => format!("{}: {}", d.code().code(), d.message()),
        None => e.to_string(),
    };
    Error::db(kind, message)
}

/// True for a failure that a retry of the whole transaction may pass: a deadlock or a
/// serialization failure between hosts.
pub(crate) fn is_retryable(e: &Error) -> bool {
    matches!(e, Error::Db { kind: DbFailure::Busy, message } if message.starts_with("40"))
}

/// One cursor row as read for a decision: its positions and what a notice of it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row3 {
    /// The target.
    pub target: String,
    /// L, N, M.
    pub at: Positions,
    /// Where it came from.
    pub provenance: Provenance,
    /// The watcher scope it is bound to.
    pub scope: Option<String>,
}

fn provenance(s: &str) -> Provenance {
    if s == "ambient-group" {
        Provenance::AmbientGroup
    } else {
        Provenance::Explicit
    }
}

fn row3(r: &Row) -> Row3 {
    Row3 {
        target: r.get(0),
        at: Positions {
            last_seen: r.get(1),
            notified: r.get(2),
            material: r.get(3),
        },
        provenance: provenance(r.get(4)),
        scope: r.get(5),
    }
}

/// The pending cursor of `watcher` that `row` is, at positions `at`.
pub(crate) fn pending(watcher: &str, row: &Row3, at: Positions) -> Pending {
    Pending {
        watcher: watcher.to_owned(),
        target: Arc::from(row.target.as_str()),
        last_seen: at.last_seen,
        notified: at.notified,
        provenance: row.provenance,
        scope: row.scope.as_deref().map(Arc::from),
    }
}

/// A connection's client and its statement cache: the cursor calls' statements (templates
/// naming the schema `__SCHEMA__`) prepared once per connection.
pub(crate) struct Cached<'a> {
    /// The client.
    pub(crate) client: &'a Client,
    statements: &'a mut HashMap<&'static str, Statement>,
    schema: SchemaName,
}

impl<'a> Cached<'a> {
    /// The client `client` with its connection's cache, for the tables in `schema`.
    pub(crate) fn new(
        client: &'a Client,
        statements: &'a mut HashMap<&'static str, Statement>,
        schema: SchemaName,
    ) -> Self {
        Cached {
            client,
            statements,
            schema,
        }
    }

    /// The schema of the tables.
    pub(crate) fn schema(&self) -> SchemaName {
        self.schema
    }

    /// `template` prepared on this connection, once.
    pub(crate) async fn prepare(&mut self, template: &'static str) -> Result<Statement> {
        if let Some(st) = self.statements.get(template) {
            return Ok(st.clone());
        }
        let sql = template.replace("__SCHEMA__", self.schema.as_str());
        let st = self.client.prepare(&sql).await.map_err(db)?;
        self.statements.insert(template, st.clone());
        Ok(st)
    }
}

const LOCK_ROWS: &str = "SELECT target_session_key, last_seen_sequence, notified_sequence, \
     material_sequence, provenance, watcher_store_path FROM __SCHEMA__.session_watch_cursors \
     WHERE watcher_session_key = $1 AND target_session_key = ANY($2) \
     ORDER BY target_session_key FOR UPDATE";
const WRITE_MOVES: &str =
    "UPDATE __SCHEMA__.session_watch_cursors AS c SET last_seen_sequence = v.l, \
     notified_sequence = v.n, updated_at = $2 \
     FROM unnest($3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], \
     $8::bigint[]) AS v(t, ol, o_n, om, l, n) \
     WHERE c.watcher_session_key = $1 AND c.target_session_key = v.t \
     AND c.last_seen_sequence = v.ol AND c.notified_sequence = v.o_n \
     AND c.material_sequence = v.om RETURNING c.target_session_key";

/// The cursors of `watcher` on `targets`, locked for this transaction, in target order (one
/// fixed order, so two hosts acknowledging the same pairs cannot deadlock).
pub(crate) async fn lock_rows(
    c: &mut Cached<'_>,
    watcher: &str,
    targets: &[String],
) -> Result<Vec<Row3>> {
    let st = c.prepare(LOCK_ROWS).await?;
    let rows = c
        .client
        .query(&st, &[&watcher, &targets])
        .await
        .map_err(db)?;
    Ok(rows.iter().map(row3).collect())
}

/// One decided move of a cursor: from the positions read to the rule's answer.
pub(crate) struct Move {
    /// The target.
    pub target: String,
    /// The positions read (the update's condition).
    pub from: Positions,
    /// The positions the rule returned.
    pub to: Positions,
}

/// Writes `moves` of `watcher`'s cursors, each only where the row still holds the positions it
/// was read at. Returns the targets written.
pub(crate) async fn write_moves(
    c: &mut Cached<'_>,
    watcher: &str,
    moves: &[Move],
    now: i64,
) -> Result<Vec<String>> {
    if moves.is_empty() {
        return Ok(Vec::new());
    }
    let col = |f: fn(&Move) -> i64| moves.iter().map(f).collect::<Vec<i64>>();
    let targets: Vec<&str> = moves.iter().map(|m| m.target.as_str()).collect();
    let st = c.prepare(WRITE_MOVES).await?;
    let rows = c
        .client
        .query(
            &st,
            &[
                &watcher,
                &now,
                &targets,
                &col(|m| m.from.last_seen),
                &col(|m| m.from.notified),
                &col(|m| m.from.material),
                &col(|m| m.to.last_seen),
                &col(|m| m.to.notified),
            ],
        )
        .await
        .map_err(db)?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

const HEAD_FOR_SHARE: &str = "SELECT last_sequence FROM __SCHEMA__.session_state_heads \
     WHERE session_key = $1 AND agent_id = $2 FOR SHARE";
const WATCH_REFRESH: &str = "UPDATE __SCHEMA__.session_watch_cursors SET \
     updated_at = CASE WHEN $5 THEN $3 ELSE updated_at END, \
     provenance = CASE WHEN $4 = 'explicit' THEN 'explicit' ELSE provenance END \
     WHERE watcher_session_key = $1 AND target_session_key = $2 \
     AND ($6::text IS NULL OR watcher_store_path IS NOT DISTINCT FROM $6::text)";
const WATCH_SEED: &str = "INSERT INTO __SCHEMA__.session_watch_cursors AS c (watcher_session_key, \
     target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, \
     updated_at, watcher_store_path) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
     ON CONFLICT (watcher_session_key, target_session_key) DO UPDATE SET \
     last_seen_sequence = excluded.last_seen_sequence, \
     notified_sequence = excluded.notified_sequence, \
     material_sequence = excluded.material_sequence, provenance = excluded.provenance, \
     updated_at = excluded.updated_at, \
     watcher_store_path = coalesce(excluded.watcher_store_path, c.watcher_store_path)";
const UNWATCH: &str = "DELETE FROM __SCHEMA__.session_watch_cursors \
     WHERE watcher_session_key = $1 AND target_session_key = $2";

/// The target's head (0 when it has none), its row locked against a record for this
/// transaction, so a `watch` seeds at a head no record is moving past.
pub(crate) async fn head_for_share(c: &mut Cached<'_>, target: &str, agent: &str) -> Result<i64> {
    let st = c.prepare(HEAD_FOR_SHARE).await?;
    let row = c
        .client
        .query_opt(&st, &[&target, &agent])
        .await
        .map_err(db)?;
    Ok(row.map_or(0, |r| r.get(0)))
}

/// `watch` (semantics.md#cursors-seed, semantics.md#cursors-scope): an existing cursor of the
/// same scope (or any, without one) has its `updated_at` refreshed (unless `o.refresh` is off)
/// and is promoted to `explicit`; otherwise the pair is seeded at `head`
/// ([`Positions::seeded`]). Returns true when it seeded.
pub(crate) async fn watch(
    c: &mut Cached<'_>,
    watcher: &str,
    target: &str,
    head: i64,
    o: &WatchOptions,
    now: i64,
) -> Result<bool> {
    let scope = o.scope.as_deref();
    let p = o.provenance.as_str();
    let st = c.prepare(WATCH_REFRESH).await?;
    let n = c
        .client
        .execute(&st, &[&watcher, &target, &now, &p, &o.refresh, &scope])
        .await
        .map_err(db)?;
    if n == 1 {
        return Ok(false);
    }
    let at = Positions::seeded(head);
    let st = c.prepare(WATCH_SEED).await?;
    c.client
        .execute(
            &st,
            &[
                &watcher,
                &target,
                &at.last_seen,
                &at.notified,
                &at.material,
                &p,
                &now,
                &scope,
            ],
        )
        .await
        .map_err(db)?;
    Ok(true)
}

/// Deletes one cursor (`unwatch`). True if it existed.
pub(crate) async fn delete(c: &mut Cached<'_>, watcher: &str, target: &str) -> Result<bool> {
    let st = c.prepare(UNWATCH).await?;
    Ok(c.client
        .execute(&st, &[&watcher, &target])
        .await
        .map_err(db)?
        == 1)
}

const DELETE_AS_WATCHER: &str =
    "DELETE FROM __SCHEMA__.session_watch_cursors WHERE watcher_session_key = $1";
const DELETE_AS_EITHER: &str = "DELETE FROM __SCHEMA__.session_watch_cursors \
     WHERE watcher_session_key = $1 OR target_session_key = $1";
const PENDING_OF: &str = "SELECT target_session_key, last_seen_sequence, notified_sequence, \
     material_sequence, provenance, watcher_store_path, watcher_session_key \
     FROM __SCHEMA__.session_watch_cursors \
     WHERE watcher_session_key = ANY($1) AND notified_sequence <> last_seen_sequence \
     ORDER BY notified_sequence, watcher_session_key, target_session_key";
const WATCHERS_BEHIND: &str = "SELECT DISTINCT watcher_session_key \
     FROM __SCHEMA__.session_watch_cursors WHERE material_sequence > last_seen_sequence ORDER BY 1";
const REFREEZE_ALL: &str = "SELECT target_session_key, last_seen_sequence, notified_sequence, \
     material_sequence, provenance, watcher_store_path, watcher_session_key \
     FROM __SCHEMA__.session_watch_cursors WHERE material_sequence > last_seen_sequence \
     ORDER BY watcher_session_key, target_session_key FOR UPDATE";
const REFREEZE_OF: &str = "SELECT target_session_key, last_seen_sequence, notified_sequence, \
     material_sequence, provenance, watcher_store_path, watcher_session_key \
     FROM __SCHEMA__.session_watch_cursors \
     WHERE material_sequence > last_seen_sequence AND watcher_session_key = ANY($1) \
     ORDER BY watcher_session_key, target_session_key FOR UPDATE";
const REFREEZE_WRITE: &str = "UPDATE __SCHEMA__.session_watch_cursors AS c \
     SET notified_sequence = v.n \
     FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS v(w, t, n, o) \
     WHERE c.watcher_session_key = v.w AND c.target_session_key = v.t \
     AND c.notified_sequence = v.o";
const DELETE_EVENTS: &str =
    "DELETE FROM __SCHEMA__.session_state_events WHERE session_key = $1 AND agent_id = $2";
const DELETE_HEAD: &str =
    "DELETE FROM __SCHEMA__.session_state_heads WHERE session_key = $1 AND agent_id = $2";
const DELETE_LINK: &str =
    "DELETE FROM __SCHEMA__.session_upstream_links WHERE session_key = $1 AND agent_id = $2";

/// Deletes the cursors where `key` is the watcher (`resetSession`), and with `as_target` also
/// those where it is the target (`deleteSession`).
pub(crate) async fn delete_of(c: &mut Cached<'_>, key: &str, as_target: bool) -> Result<u64> {
    let st = match as_target {
        true => c.prepare(DELETE_AS_EITHER).await?,
        false => c.prepare(DELETE_AS_WATCHER).await?,
    };
    c.client.execute(&st, &[&key]).await.map_err(db)
}

/// The pending cursors (N ≠ L) of `watchers`, in ascending order of N, then watcher, then
/// target: the order in which notices that enter together enter the queue.
pub(crate) async fn pending_of(c: &mut Cached<'_>, watchers: &[String]) -> Result<Vec<Pending>> {
    if watchers.is_empty() {
        return Ok(Vec::new());
    }
    let st = c.prepare(PENDING_OF).await?;
    let rows = c.client.query(&st, &[&watchers]).await.map_err(db)?;
    Ok(rows
        .iter()
        .map(|r| {
            let row = row3(r);
            pending(r.get(6), &row, row.at)
        })
        .collect())
}

/// The watchers with material history past their acknowledged position (sweep candidates).
pub(crate) async fn watchers_behind(c: &mut Cached<'_>) -> Result<Vec<String>> {
    let st = c.prepare(WATCHERS_BEHIND).await?;
    let rows = c.client.query(&st, &[]).await.map_err(db)?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The sweep's re-freeze (semantics.md#cursors-sweep) of every cursor with M > L, of every
/// watcher or of `only`: [`Positions::refrozen`] decides, and only the rows whose N moves are
/// written. Returns the pending cursors in ascending order of the re-frozen N, then watcher,
/// then target. Runs inside the caller's transaction (the rows are locked in key order).
pub(crate) async fn refreeze(c: &mut Cached<'_>, only: Option<&[String]>) -> Result<Vec<Pending>> {
    let rows = match only {
        None => {
            let st = c.prepare(REFREEZE_ALL).await?;
            c.client.query(&st, &[]).await
        }
        Some(ws) => {
            let st = c.prepare(REFREEZE_OF).await?;
            c.client.query(&st, &[&ws]).await
        }
    }
    .map_err(db)?;
    let mut out = Vec::with_capacity(rows.len());
    let (mut ws, mut ts, mut ns, mut old) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in &rows {
        let row = row3(r);
        let watcher: String = r.get(6);
        if watcher == row.target {
            continue;
        }
        let to = row.at.refrozen();
        if to != row.at {
            ws.push(watcher.clone());
            ts.push(row.target.clone());
            ns.push(to.notified);
            old.push(row.at.notified);
        }
        out.push(pending(&watcher, &row, to));
    }
    if !ws.is_empty() {
        let st = c.prepare(REFREEZE_WRITE).await?;
        c.client
            .execute(&st, &[&ws, &ts, &ns, &old])
            .await
            .map_err(db)?;
    }
    out.sort_by(|a, b| {
        (a.notified, &a.watcher, &a.target).cmp(&(b.notified, &b.watcher, &b.target))
    });
    Ok(out)
}

/// Deletes the session's events and head for `agent`, its upstream link, and with `own` every
/// cursor where the key is watcher or target (`deleteSession`, semantics.md#lifecycle). Runs
/// inside the caller's transaction.
pub(crate) async fn delete_session(
    c: &mut Cached<'_>,
    key: &str,
    agent: &str,
    own: bool,
) -> Result<()> {
    let st = c.prepare(DELETE_EVENTS).await?;
    c.client.execute(&st, &[&key, &agent]).await.map_err(db)?;
    let st = c.prepare(DELETE_HEAD).await?;
    c.client.execute(&st, &[&key, &agent]).await.map_err(db)?;
    let st = c.prepare(DELETE_LINK).await?;
    c.client.execute(&st, &[&key, &agent]).await.map_err(db)?;
    if own {
        delete_of(c, key, true).await?;
    }
    Ok(())
}
