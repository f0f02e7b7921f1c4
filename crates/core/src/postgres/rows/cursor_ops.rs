//! The PostgreSQL statements of the cursor flows behind [`crate::rows::Rows`] (acknowledge,
//! unwatch, the deletes, the sweep's re-freeze, expiry, the reads of pending cursors), called
//! by [`super::PgRows`] inside the caller's transaction through its statement cache.
//! Inert rows (semantics.md#storage): the schema's types and checks keep most of them out; a
//! position outside `[0, head]` is filtered in SQL, a key that cannot watch in Rust.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::Result;
use crate::keys;
use crate::log::Head;
use crate::rows::{Expired, Pending, Provenance};
use crate::rules::Positions;

use super::PgRows;

/// A live cursor's positions: each in `[0, head]`, the head the target's own agent's (the
/// text between `agent:` and the next colon), 0 when there is none.
macro_rules! live {
    () => {
        "least(c.last_seen_sequence, c.notified_sequence, c.material_sequence) >= 0 \
         AND greatest(c.last_seen_sequence, c.notified_sequence, c.material_sequence) <= \
         coalesce((SELECT h.last_sequence FROM __SCHEMA__.session_state_heads h \
         WHERE h.session_key = c.target_session_key \
         AND h.agent_id = split_part(c.target_session_key, ':', 2)), 0)"
    };
}

const HEAD: &str = "SELECT last_sequence, pruned_max_sequence FROM __SCHEMA__.session_state_heads \
     WHERE session_key = $1 AND agent_id = $2";
const SET_POSITIONS: &str = "UPDATE __SCHEMA__.session_watch_cursors SET last_seen_sequence = $3, \
     notified_sequence = $4, updated_at = $5 \
     WHERE watcher_session_key = $1 AND target_session_key = $2";
const TOUCH: &str = "UPDATE __SCHEMA__.session_watch_cursors SET provenance = $3, updated_at = $4 \
     WHERE watcher_session_key = $1 AND target_session_key = $2";
const DELETE_ONE: &str = concat!(
    "DELETE FROM __SCHEMA__.session_watch_cursors c \
     WHERE c.watcher_session_key = $1 AND c.target_session_key = $2 AND ",
    live!()
);
const DELETE_OF: &str =
    "DELETE FROM __SCHEMA__.session_watch_cursors WHERE watcher_session_key = $1";
const DELETE_ON: &str =
    "DELETE FROM __SCHEMA__.session_watch_cursors WHERE target_session_key = $1";
const DELETE_EVENTS: &str =
    "DELETE FROM __SCHEMA__.session_state_events WHERE session_key = $1 AND agent_id = $2";
const DELETE_HEAD: &str =
    "DELETE FROM __SCHEMA__.session_state_heads WHERE session_key = $1 AND agent_id = $2";
const BEHIND: &str = concat!(
    "SELECT DISTINCT c.watcher_session_key, c.target_session_key \
     FROM __SCHEMA__.session_watch_cursors c \
     WHERE c.material_sequence > c.last_seen_sequence AND ",
    live!(),
    " ORDER BY 1, 2"
);
const PENDING_OF: &str = concat!(
    "SELECT c.target_session_key, c.last_seen_sequence, c.notified_sequence, c.provenance, \
     c.watcher_store_path FROM __SCHEMA__.session_watch_cursors c \
     WHERE c.watcher_session_key = $1 AND c.notified_sequence <> c.last_seen_sequence AND ",
    live!(),
    " ORDER BY c.notified_sequence, c.target_session_key"
);
const ON_TARGET: &str = concat!(
    "SELECT c.watcher_session_key, c.last_seen_sequence, c.notified_sequence, c.provenance, \
     c.watcher_store_path FROM __SCHEMA__.session_watch_cursors c \
     WHERE c.target_session_key = $1 AND ",
    live!(),
    " ORDER BY c.watcher_session_key"
);
// The cursors a sweep re-freezes, locked in key order (two hosts sweeping cannot deadlock).
const REFREEZE_READ: &str = concat!(
    "SELECT c.watcher_session_key, c.target_session_key, c.last_seen_sequence, \
     c.notified_sequence, c.material_sequence, c.provenance, c.watcher_store_path \
     FROM __SCHEMA__.session_watch_cursors c \
     WHERE c.material_sequence > c.last_seen_sequence \
     AND ($1::text[] IS NULL OR c.watcher_session_key = ANY($1::text[])) AND ",
    live!(),
    " ORDER BY c.watcher_session_key, c.target_session_key FOR UPDATE OF c"
);
const REFREEZE_WRITE: &str = "UPDATE __SCHEMA__.session_watch_cursors AS c \
     SET notified_sequence = v.n FROM unnest($1::text[], $2::text[], $3::bigint[]) AS v(w, t, n) \
     WHERE c.watcher_session_key = v.w AND c.target_session_key = v.t";
const EXPIRE: &str = "DELETE FROM __SCHEMA__.session_watch_cursors WHERE updated_at < $1 \
     RETURNING watcher_session_key, target_session_key";

type PgResult<T> = std::result::Result<T, tokio_postgres::Error>;

fn provenance(s: &str) -> Provenance {
    Provenance::parse(s).unwrap_or(Provenance::Explicit)
}

/// [`crate::rows::Rows::head`].
pub(super) fn head(rows: &mut PgRows<'_>, session_key: &str, agent_id: &str) -> Result<Head> {
    let st = rows.prepared(HEAD)?;
    let tx = rows.tx();
    let row = rows.send(tx.query_opt(&st, &[&session_key, &agent_id]))?;
    let Some(r) = row else {
        return Ok(Head::default());
    };
    let read = |r: &tokio_postgres::Row| -> PgResult<Head> {
        Ok(Head {
            last_sequence: r.try_get(0)?,
            pruned_max_sequence: r.try_get(1)?,
        })
    };
    read(&r).map_err(|e| rows.error(&e))
}

/// [`crate::rows::Rows::set_positions`].
pub(super) fn set_positions(
    rows: &mut PgRows<'_>,
    watcher: &str,
    target: &str,
    last_seen: i64,
    notified: i64,
    now: i64,
) -> Result<()> {
    let st = rows.prepared(SET_POSITIONS)?;
    let tx = rows.tx();
    rows.send(tx.execute(&st, &[&watcher, &target, &last_seen, &notified, &now]))?;
    Ok(())
}

/// [`crate::rows::Rows::touch_cursor`].
pub(super) fn touch(
    rows: &mut PgRows<'_>,
    watcher: &str,
    target: &str,
    p: Provenance,
    updated_at: i64,
) -> Result<()> {
    let st = rows.prepared(TOUCH)?;
    let tx = rows.tx();
    rows.send(tx.execute(&st, &[&watcher, &target, &p.as_str(), &updated_at]))?;
    Ok(())
}

/// [`crate::rows::Rows::delete_cursor`]: a row that is not live is left.
pub(super) fn delete_one(rows: &mut PgRows<'_>, watcher: &str, target: &str) -> Result<bool> {
    if watcher == target || !keys::is_watchable(watcher) || !keys::is_watchable(target) {
        return Ok(false);
    }
    let st = rows.prepared(DELETE_ONE)?;
    let tx = rows.tx();
    Ok(rows.send(tx.execute(&st, &[&watcher, &target]))? == 1)
}

/// [`crate::rows::Rows::delete_cursors_of`] (`on`: false) and
/// [`crate::rows::Rows::delete_cursors_on`] (`on`: true).
pub(super) fn delete_all(rows: &mut PgRows<'_>, key: &str, on: bool) -> Result<usize> {
    let st = rows.prepared(if on { DELETE_ON } else { DELETE_OF })?;
    let tx = rows.tx();
    let n = rows.send(tx.execute(&st, &[&key]))?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// [`crate::rows::Rows::delete_events`].
pub(super) fn delete_events(
    rows: &mut PgRows<'_>,
    session_key: &str,
    agent_id: &str,
) -> Result<()> {
    let events = rows.prepared(DELETE_EVENTS)?;
    let head = rows.prepared(DELETE_HEAD)?;
    let tx = rows.tx();
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&session_key, &agent_id];
    let both =
        futures_util::future::try_join(tx.execute(&events, &params), tx.execute(&head, &params));
    rows.send(both)?;
    Ok(())
}

/// [`crate::rows::Rows::watchers_behind`].
pub(super) fn watchers_behind(rows: &mut PgRows<'_>) -> Result<Vec<String>> {
    let st = rows.prepared(BEHIND)?;
    let tx = rows.tx();
    let found = rows.send(tx.query(&st, &[]))?;
    let mut out: Vec<String> = Vec::new();
    for r in &found {
        let (w, t): (String, String) = (r.get(0), r.get(1));
        if w == t || !keys::is_watchable(&w) || !keys::is_watchable(&t) {
            continue;
        }
        if out.last() != Some(&w) {
            out.push(w);
        }
    }
    Ok(out)
}

/// The pending of one row of [`PENDING_OF`] or [`ON_TARGET`]: the key column, L, N,
/// provenance, scope.
fn read_pending(
    r: &tokio_postgres::Row,
) -> PgResult<(String, i64, i64, Provenance, Option<String>)> {
    Ok((
        r.try_get(0)?,
        r.try_get(1)?,
        r.try_get(2)?,
        provenance(r.try_get(3)?),
        r.try_get(4)?,
    ))
}

/// [`crate::rows::Rows::pending_of`].
pub(super) fn pending_of(rows: &mut PgRows<'_>, watcher: &str) -> Result<Vec<Pending>> {
    if !keys::is_watchable(watcher) {
        return Ok(Vec::new());
    }
    let st = rows.prepared(PENDING_OF)?;
    let tx = rows.tx();
    let found = rows.send(tx.query(&st, &[&watcher]))?;
    let mut out = Vec::with_capacity(found.len());
    for r in &found {
        let (target, l, n, provenance, scope) = read_pending(r).map_err(|e| rows.error(&e))?;
        if target == watcher || !keys::is_watchable(&target) {
            continue;
        }
        out.push(Pending {
            watcher: watcher.to_owned(),
            target: Arc::from(target),
            last_seen: l,
            notified: n,
            provenance,
            scope: scope.map(Arc::from),
        });
    }
    Ok(out)
}

/// [`crate::rows::Rows::on_target`].
pub(super) fn on_target(rows: &mut PgRows<'_>, target: &str) -> Result<Vec<Pending>> {
    if !keys::is_watchable(target) {
        return Ok(Vec::new());
    }
    let st = rows.prepared(ON_TARGET)?;
    let tx = rows.tx();
    let found = rows.send(tx.query(&st, &[&target]))?;
    let shared: Arc<str> = Arc::from(target);
    let mut out = Vec::with_capacity(found.len());
    for r in &found {
        let (watcher, l, n, provenance, scope) = read_pending(r).map_err(|e| rows.error(&e))?;
        if watcher == target || !keys::is_watchable(&watcher) {
            continue;
        }
        out.push(Pending {
            watcher,
            target: Arc::clone(&shared),
            last_seen: l,
            notified: n,
            provenance,
            scope: scope.map(Arc::from),
        });
    }
    Ok(out)
}

/// [`crate::rows::Rows::refreeze`]: [`Positions::refrozen`] decides; only the rows whose N
/// moves are written, in one statement.
pub(super) fn refreeze(rows: &mut PgRows<'_>, only: Option<&[String]>) -> Result<Vec<Pending>> {
    let read = rows.prepared(REFREEZE_READ)?;
    let tx = rows.tx();
    let only: Option<Vec<&str>> = only.map(|ws| ws.iter().map(String::as_str).collect());
    let found = rows.send(tx.query(&read, &[&only]))?;
    let mut targets: HashMap<String, Arc<str>> = HashMap::new();
    let mut out = Vec::with_capacity(found.len());
    let (mut ws, mut ts, mut ns) = (Vec::new(), Vec::new(), Vec::new());
    for r in &found {
        let get = |r: &tokio_postgres::Row| -> PgResult<_> {
            Ok((
                r.try_get::<_, String>(0)?,
                r.try_get::<_, String>(1)?,
                Positions {
                    last_seen: r.try_get(2)?,
                    notified: r.try_get(3)?,
                    material: r.try_get(4)?,
                },
                provenance(r.try_get(5)?),
                r.try_get::<_, Option<String>>(6)?,
            ))
        };
        let (watcher, target, at, provenance, scope) = get(r).map_err(|e| rows.error(&e))?;
        if watcher == target || !keys::is_watchable(&watcher) || !keys::is_watchable(&target) {
            continue;
        }
        let to = at.refrozen();
        if to != at {
            ws.push(watcher.clone());
            ts.push(target.clone());
            ns.push(to.notified);
        }
        let shared = targets
            .entry(target)
            .or_insert_with_key(|t| Arc::from(t.as_str()));
        out.push(Pending {
            watcher,
            target: Arc::clone(shared),
            last_seen: at.last_seen,
            notified: to.notified,
            provenance,
            scope: scope.map(Arc::from),
        });
    }
    if !ws.is_empty() {
        let write = rows.prepared(REFREEZE_WRITE)?;
        rows.send(tx.execute(&write, &[&ws, &ts, &ns]))?;
    }
    Ok(out)
}

/// [`crate::rows::Rows::expire_cursors`]: every such row in one statement.
pub(super) fn expire(rows: &mut PgRows<'_>, cutoff: i64) -> Result<Expired> {
    let st = rows.prepared(EXPIRE)?;
    let tx = rows.tx();
    let found = rows.send(tx.query(&st, &[&cutoff]))?;
    Ok(Expired {
        deleted: found.len() as u64,
        pairs: found.iter().map(|r| (r.get(0), r.get(1))).collect(),
        next: None,
    })
}
