//! Reading cursor rows as stored, for hosts that answer questions about watches (who watches a
//! session, which targets a watcher follows by ambient group) without their own SQL.

use rusqlite::types::ValueRef;
use rusqlite::Connection;

use crate::error::Result;
use crate::shapes::CursorRow;
use crate::sqlite::inert;

fn text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
        _ => None,
    }
}

/// The cursor rows of `watcher` and/or `target` (every row when both are `None`), ordered by
/// watcher, then target.
pub(crate) fn read(
    conn: &Connection,
    watcher: Option<&str>,
    target: Option<&str>,
) -> Result<Vec<CursorRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, \
         material_sequence, provenance, watcher_store_path, updated_at \
         FROM session_watch_cursors \
         WHERE (?1 IS NULL OR watcher_session_key = ?1) AND (?2 IS NULL OR target_session_key = ?2) \
         ORDER BY watcher_session_key, target_session_key",
    )?;
    let rows = stmt
        .query_map([watcher, target], |r| {
            Ok(CursorRow {
                watcher: text(r.get_ref(0)?).unwrap_or_default(),
                target: text(r.get_ref(1)?).unwrap_or_default(),
                last_seen: inert::integer(r.get_ref(2)?).unwrap_or(0),
                notified: inert::integer(r.get_ref(3)?).unwrap_or(0),
                material: inert::integer(r.get_ref(4)?).unwrap_or(0),
                provenance: text(r.get_ref(5)?).unwrap_or_default(),
                scope: text(r.get_ref(6)?),
                updated_at: inert::integer(r.get_ref(7)?).unwrap_or(0),
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}
