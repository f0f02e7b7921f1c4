//! The SQLite statements of the cursor flows behind [`crate::rows::Rows`] (watch, acknowledge,
//! unwatch, the deletes, the sweep's re-freeze, expiry), called by [`super::rows::SqliteRows`]
//! inside the caller's transaction. Inert rows (semantics.md#storage) are filtered here.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection};

use crate::error::{Error, Result};
use crate::keys::{self, SessionKey};
use crate::rows::{Expired, Pending, Provenance};
use crate::rules::Positions;
use crate::sqlite::inert::{self, live_cursor, within_head};

/// The stored provenance, when it is one the store knows.
pub(crate) fn provenance_col(s: String) -> rusqlite::Result<Provenance> {
    Provenance::parse(&s).map_err(|_| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Text,
            "unknown provenance".into(),
        )
    })
}

/// The scope column read from a row: text, else none (NULL, or a value another writer left).
pub(crate) fn scope_col(v: rusqlite::types::ValueRef<'_>) -> Option<Arc<str>> {
    inert::text(v).map(Arc::from)
}

/// Watchers with material history past their acknowledged position (sweep candidates).
pub(crate) fn watchers_behind(conn: &Connection) -> Result<Vec<String>> {
    // The rows are checked here, as the sweep's re-freeze checks them, with each target's head
    // read once: in SQL the head was read again for every row, which made this read cost
    // several times the sweep it precedes.
    const BEHIND: &str = "SELECT watcher_session_key, target_session_key, last_seen_sequence, \
         notified_sequence, material_sequence, provenance, updated_at \
         FROM session_watch_cursors WHERE material_sequence > last_seen_sequence";
    let mut heads: HashMap<Box<[u8]>, Option<i64>, foldhash::fast::RandomState> =
        HashMap::default();
    let mut found = std::collections::BTreeSet::new();
    let mut last: Option<Box<[u8]>> = None;
    let mut select = conn.prepare_cached(BEHIND)?;
    let mut rows = select.query([])?;
    while let Some(r) = rows.next()? {
        let (watcher, target) = (r.get_ref(0)?, r.get_ref(1)?);
        let (ValueRef::Text(w), ValueRef::Text(t)) = (watcher, target) else {
            continue;
        };
        if w == t || last.as_deref() == Some(w) {
            continue;
        }
        let head = match heads.get(t) {
            Some(head) => *head,
            None => {
                let head = match inert::text(target) {
                    Some(key) if keys::is_watchable(key) => {
                        Some(match SessionKey::classify(key).agent() {
                            Some(agent) => super::log::head(conn, key, agent)?.last_sequence,
                            None => 0,
                        })
                    }
                    _ => None,
                };
                heads.insert(t.into(), head);
                head
            }
        };
        let Some(head) = head else { continue };
        let positions = [r.get_ref(2)?, r.get_ref(3)?, r.get_ref(4)?];
        if !inert::live_fields(positions, r.get_ref(5)?, r.get_ref(6)?, head) {
            continue;
        }
        if let Some(key) = inert::text(watcher).filter(|k| keys::is_watchable(k)) {
            found.insert(key.to_owned());
            last = Some(w.into());
        }
    }
    Ok(found.into_iter().collect())
}

/// A target key as a sweep found it: its shared string and head, or `None` when no cursor on
/// it is live (not UTF-8 text, or not agent-qualified).
type LiveTarget = Option<(Arc<str>, i64)>;

/// Sweep (semantics.md#cursors): re-freezes N = M on every live cursor with M > L, for all watchers or for
/// `only`. Returns the pending cursors, in no particular order. Inert rows (semantics.md#storage) are neither
/// written nor returned.
///
/// The rows are checked here, not in SQL, with each target's head read once: a sweep over
/// 100,000 cursors costs one pass over them. Only the cursors whose N moves are written: a
/// gateway that restarts with many notices already frozen re-queues them without rewriting
/// the table.
pub(crate) fn refreeze(conn: &Connection, only: Option<&[String]>) -> Result<Vec<Pending>> {
    // Up to this many watchers, each one's rows are read through the key's index; past it,
    // all rows once.
    const WATCHER_QUERIES: usize = 64;
    const COLUMNS: &str = "SELECT rowid, watcher_session_key, target_session_key, \
         last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at, \
         watcher_store_path FROM session_watch_cursors WHERE material_sequence > last_seen_sequence";
    // The cursors of one target share one string, as they do when a record queues them; the
    // target's checks and head are read once per target, keyed by its stored bytes (`None`:
    // no cursor of it is live). Each watcher's check is kept the same way: rows come in rowid
    // order, a record's watchers one after the other, so the same few watchers alternate.
    let mut targets: HashMap<Box<[u8]>, LiveTarget, foldhash::fast::RandomState> =
        HashMap::default();
    let mut watchers: HashMap<Box<[u8]>, bool, foldhash::fast::RandomState> = HashMap::default();
    let mut out = Vec::new();
    let mut moved = Vec::new();
    let mut visit = |r: &rusqlite::Row<'_>| -> Result<()> {
        let (watcher, target) = (r.get_ref(1)?, r.get_ref(2)?);
        let (ValueRef::Text(w), ValueRef::Text(t)) = (watcher, target) else {
            return Ok(());
        };
        if w == t {
            return Ok(());
        }
        let known = match targets.get(t) {
            Some(known) => known.clone(),
            None => {
                let known = match inert::text(target) {
                    Some(key) if keys::is_watchable(key) => {
                        let head = match SessionKey::classify(key).agent() {
                            Some(agent) => super::log::head(conn, key, agent)?.last_sequence,
                            None => 0,
                        };
                        Some((Arc::from(key), head))
                    }
                    _ => None,
                };
                targets.insert(t.into(), known.clone());
                known
            }
        };
        let Some((shared, head)) = known else {
            return Ok(());
        };
        let positions = [r.get_ref(3)?, r.get_ref(4)?, r.get_ref(5)?];
        let provenance = r.get_ref(6)?;
        if !inert::live_fields(positions, provenance, r.get_ref(7)?, head) {
            return Ok(());
        }
        let watchable = match watchers.get(w) {
            Some(ok) => *ok,
            None => {
                let ok = inert::watchable(watcher);
                watchers.insert(w.into(), ok);
                ok
            }
        };
        if !watchable {
            return Ok(());
        }
        let Some(watcher) = inert::text(watcher).map(str::to_owned) else {
            return Ok(());
        };
        // Integers: `live_fields` checked them.
        let [last_seen, notified, material] = positions.map(|p| inert::integer(p).unwrap_or(0));
        let at = Positions {
            last_seen,
            notified,
            material,
        };
        let refrozen = at.refrozen();
        if refrozen != at {
            moved.push(r.get::<_, i64>(0)?);
        }
        out.push(Pending {
            watcher,
            target: shared,
            last_seen,
            notified: refrozen.notified,
            provenance: match provenance {
                ValueRef::Text(b"ambient-group") => Provenance::AmbientGroup,
                _ => Provenance::Explicit,
            },
            scope: scope_col(r.get_ref(8)?),
        });
        Ok(())
    };
    match only {
        None => {
            let mut select = conn.prepare_cached(COLUMNS)?;
            let mut rows = select.query([])?;
            while let Some(r) = rows.next()? {
                visit(r)?;
            }
        }
        Some(watchers) if watchers.len() > WATCHER_QUERIES => {
            // Many watchers: one pass over the rows, each watcher looked up in a set, costs
            // less than a query per watcher.
            let set: HashSet<&[u8], foldhash::fast::RandomState> =
                watchers.iter().map(|w| w.as_bytes()).collect();
            let mut select = conn.prepare_cached(COLUMNS)?;
            let mut rows = select.query([])?;
            while let Some(r) = rows.next()? {
                if matches!(r.get_ref(1)?, ValueRef::Text(w) if set.contains(w)) {
                    visit(r)?;
                }
            }
        }
        Some(watchers) => {
            let mut select =
                conn.prepare_cached(&format!("{COLUMNS} AND watcher_session_key = ?1"))?;
            for w in watchers {
                let mut rows = select.query([w])?;
                while let Some(r) = rows.next()? {
                    visit(r)?;
                }
            }
        }
    }
    if !moved.is_empty() {
        // One statement for every row that moves, however many.
        let rowids = serde_json::to_string(&moved).map_err(|e| Error::invalid(e.to_string()))?;
        conn.prepare_cached(
            "UPDATE session_watch_cursors SET notified_sequence = material_sequence \
             WHERE rowid IN (SELECT value FROM json_each(?1))",
        )?
        .execute([rowids])?;
    }
    Ok(out)
}

/// A [`Pending`] of `watcher` on `target` from a row whose columns 1 to 4 are L, N,
/// provenance and `watcher_store_path` (column 0 is the cursor's other key).
fn pending_row(
    r: &rusqlite::Row<'_>,
    watcher: String,
    target: Arc<str>,
) -> rusqlite::Result<Pending> {
    Ok(Pending {
        watcher,
        target,
        last_seen: r.get(1)?,
        notified: r.get(2)?,
        provenance: provenance_col(r.get(3)?)?,
        scope: scope_col(r.get_ref(4)?),
    })
}

/// The watcher's live pending cursors (N != L), in ascending order of N.
pub(crate) fn pending_of(conn: &Connection, watcher: &str) -> Result<Vec<Pending>> {
    let mut stmt = conn.prepare_cached(concat!(
        "SELECT target_session_key, last_seen_sequence, notified_sequence, provenance, \
         watcher_store_path FROM session_watch_cursors WHERE watcher_session_key = ?1 \
         AND notified_sequence != last_seen_sequence AND ",
        live_cursor!(),
        within_head!(),
        " ORDER BY notified_sequence, target_session_key"
    ))?;
    let rows = stmt.query_map([watcher], |r| {
        pending_row(r, watcher.to_owned(), Arc::from(r.get::<_, String>(0)?))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Every live cursor on `target`, pending or not (`notified != last_seen` tells), by watcher.
pub(crate) fn on_target(conn: &Connection, target: &str) -> Result<Vec<Pending>> {
    let mut stmt = conn.prepare_cached(concat!(
        "SELECT watcher_session_key, last_seen_sequence, notified_sequence, provenance, \
         watcher_store_path FROM session_watch_cursors WHERE target_session_key = ?1 AND ",
        live_cursor!(),
        within_head!(),
        " ORDER BY watcher_session_key"
    ))?;
    let shared: Arc<str> = Arc::from(target);
    let rows = stmt.query_map([target], |r| pending_row(r, r.get(0)?, Arc::clone(&shared)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Deletes one cursor (`unwatch`). Returns true if it existed. An inert row of the pair (semantics.md#storage)
/// is no cursor: it is left for retention, and gives false.
pub(crate) fn delete(conn: &Connection, watcher: &str, target: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached(concat!(
            "DELETE FROM session_watch_cursors WHERE watcher_session_key = ?1 \
             AND target_session_key = ?2 AND ",
            live_cursor!(),
            within_head!()
        ))?
        .execute([watcher, target])?
        == 1)
}

/// Deletes the cursors where `key` is the watcher.
pub(crate) fn delete_watcher(conn: &Connection, key: &str) -> Result<usize> {
    Ok(conn
        .prepare_cached("DELETE FROM session_watch_cursors WHERE watcher_session_key = ?1")?
        .execute([key])?)
}

/// Deletes the cursors where `key` is the target.
pub(crate) fn delete_target(conn: &Connection, key: &str) -> Result<usize> {
    Ok(conn
        .prepare_cached("DELETE FROM session_watch_cursors WHERE target_session_key = ?1")?
        .execute([key])?)
}

/// Deletes the cursors not updated since `cutoff` (semantics.md#retention) among the rows with a rowid in
/// `(after, after + span]`; a row without a numeric `updated_at` counts as never updated.
/// Returns the (watcher, target) pairs deleted whose keys are valid UTF-8 text (only those
/// can have a queued notice), how many rows it deleted in all, and the `after` of the next
/// chunk while rows remain past this one.
pub(crate) fn expire_chunk(
    conn: &Connection,
    cutoff: i64,
    after: i64,
    span: i64,
) -> Result<Expired> {
    let end = after.saturating_add(span);
    let mut stmt = conn.prepare_cached(
        "DELETE FROM session_watch_cursors WHERE rowid > ?2 AND rowid <= ?3 \
         AND (updated_at < ?1 OR typeof(updated_at) NOT IN ('integer', 'real')) \
         RETURNING watcher_session_key, target_session_key",
    )?;
    let mut expired = Vec::new();
    let mut deleted = 0;
    let mut rows = stmt.query(params![cutoff, after, end])?;
    while let Some(r) = rows.next()? {
        deleted += 1;
        let pair = (inert::text(r.get_ref(0)?), inert::text(r.get_ref(1)?));
        if let (Some(w), Some(t)) = pair {
            expired.push((w.to_owned(), t.to_owned()));
        }
    }
    drop(rows);
    let more = conn
        .prepare_cached("SELECT 1 FROM session_watch_cursors WHERE rowid > ?1 LIMIT 1")?
        .exists([end])?;
    Ok(Expired {
        pairs: expired,
        deleted,
        next: more.then_some(end),
    })
}

/// A re-watch's write: provenance and `updated_at`.
pub(crate) fn touch(
    conn: &Connection,
    watcher: &str,
    target: &str,
    provenance: Provenance,
    updated_at: i64,
) -> Result<()> {
    conn.prepare_cached(
        "UPDATE session_watch_cursors SET provenance = ?3, updated_at = ?4 \
         WHERE watcher_session_key = ?1 AND target_session_key = ?2",
    )?
    .execute(params![watcher, target, provenance.as_str(), updated_at])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::schema;

    #[test]
    fn expiry_walks_the_table_in_chunks() -> Result<()> {
        let conn = schema::open(":memory:", 0)?;
        for i in 0..25 {
            // Odd rows are stale (updated at 1), even rows fresh (updated at 100).
            conn.execute(
                "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, \
                 last_seen_sequence, notified_sequence, material_sequence, provenance, \
                 updated_at) VALUES (?1, 't', 0, 0, 0, 'explicit', ?2)",
                params![
                    format!("agent:w{i:02}:main"),
                    if i % 2 == 1 { 1 } else { 100 }
                ],
            )?;
        }
        let mut after = 0;
        let mut chunks = 0;
        let mut expired = Vec::new();
        loop {
            let Expired {
                pairs: gone, next, ..
            } = expire_chunk(&conn, 50, after, 10)?;
            expired.extend(gone.into_iter().map(|(w, _)| w));
            chunks += 1;
            match next {
                Some(n) => after = n,
                None => break,
            }
        }
        assert_eq!(chunks, 3);
        expired.sort();
        let odd: Vec<String> = (0..25)
            .filter(|i| i % 2 == 1)
            .map(|i| format!("agent:w{i:02}:main"))
            .collect();
        assert_eq!(expired, odd);
        let left: i64 = conn.query_row("SELECT count(*) FROM session_watch_cursors", [], |r| {
            r.get(0)
        })?;
        assert_eq!(left, 13);
        Ok(())
    }
}
