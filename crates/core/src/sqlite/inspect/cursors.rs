//! The cursors of an inspection: every row as stored, with the provenance and scope the store
//! reads in a file of an earlier generation, the target's version and the watcher's lag.

use rusqlite::{params, Connection, OptionalExtension};

use super::InspectedCursor;
use crate::keys;
use crate::shapes::CursorRow;
use crate::sqlite::inert::{lossy_integer, lossy_opt_text, lossy_text};

/// Every cursor row, with `$scope` for the scope column (`watcher_store_path`, or `NULL` in a
/// file of a generation before it).
macro_rules! cursors {
    ($scope:literal) => {
        concat!(
            "SELECT watcher_session_key, target_session_key, last_seen_sequence, \
             notified_sequence, material_sequence, provenance, updated_at, coalesce((",
            crate::sqlite::inert::live_cursor!(),
            "9223372036854775807)), 0), ",
            $scope,
            " FROM session_watch_cursors ORDER BY watcher_session_key, target_session_key"
        )
    };
}

/// Every cursor row of a file without the provenance column, with the provenance the store's
/// upgrade gives it: `ambient-group` when an ambient-group sentinel row (OpenClaw's encoding
/// before the column) names it, else `explicit`.
macro_rules! cursors_before_provenance {
    ($scope:literal) => {
        concat!(
            "SELECT watcher_session_key, target_session_key, \
             last_seen_sequence, notified_sequence, material_sequence, \
             CASE WHEN EXISTS (SELECT 1 FROM session_watch_cursors s \
               WHERE s.watcher_session_key = 'ambient-group-watch:' || lower(hex(c.watcher_session_key)) \
               AND s.target_session_key = c.target_session_key) \
             THEN 'ambient-group' ELSE 'explicit' END, updated_at, \
             coalesce(session_state_live(watcher_session_key, target_session_key, last_seen_sequence, \
               notified_sequence, material_sequence, 'explicit', updated_at, 9223372036854775807), 0), ",
            $scope,
            " FROM session_watch_cursors c ORDER BY watcher_session_key, target_session_key"
        )
    };
}

const CURSORS: &str = cursors!("watcher_store_path");
const CURSORS_BEFORE_SCOPE: &str = cursors!("NULL");
const CURSORS_BEFORE_PROVENANCE: &str = cursors_before_provenance!("NULL");
const CURSORS_SCOPE_BEFORE_PROVENANCE: &str = cursors_before_provenance!("watcher_store_path");

pub(super) fn cursors(
    conn: &Connection,
    has_events: bool,
    has_heads: bool,
) -> rusqlite::Result<Vec<InspectedCursor>> {
    // A file of OpenClaw's first generations has no provenance column yet, nor the scope
    // column (the store appends them when it opens the file): show what the store will read there.
    let has = |column: &str| -> rusqlite::Result<bool> {
        conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_xinfo('session_watch_cursors') \
             WHERE name = ?1)",
            [column],
            |r| r.get(0),
        )
    };
    let mut live = Vec::new();
    let sql = match (has("provenance")?, has("watcher_store_path")?) {
        (true, true) => CURSORS,
        (true, false) => CURSORS_BEFORE_SCOPE,
        (false, false) => CURSORS_BEFORE_PROVENANCE,
        (false, true) => CURSORS_SCOPE_BEFORE_PROVENANCE,
    };
    let mut stmt = conn.prepare(sql)?;
    let mut rows: Vec<InspectedCursor> = stmt
        .query_map([], |r| {
            live.push(r.get::<_, bool>(7)?);
            let (last_seen, notified) =
                (lossy_integer(r.get_ref(2)?), lossy_integer(r.get_ref(3)?));
            Ok(InspectedCursor {
                row: CursorRow {
                    watcher: lossy_text(r.get_ref(0)?),
                    target: lossy_text(r.get_ref(1)?),
                    last_seen,
                    notified,
                    material: lossy_integer(r.get_ref(4)?),
                    provenance: lossy_text(r.get_ref(5)?),
                    scope: lossy_opt_text(r.get_ref(8)?),
                    updated_at: lossy_integer(r.get_ref(6)?),
                },
                target_version: 0,
                lag: 0,
                pending: notified != last_seen,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    for (c, live) in rows.iter_mut().zip(live) {
        // Cursors only exist on agent-qualified targets, whose events carry the key's agent.
        let agent = keys::resolve_agent(&c.row.target, None).unwrap_or_else(|_| "main".into());
        if has_heads {
            c.target_version = conn
                .query_row(
                    "SELECT last_sequence FROM session_state_heads \
                     WHERE session_key = ?1 AND agent_id = ?2",
                    params![c.row.target, agent],
                    |r| Ok(lossy_integer(r.get_ref(0)?)),
                )
                .optional()?
                .unwrap_or(0);
        }
        if has_events {
            c.lag = conn.query_row(
                "SELECT count(*) FROM session_state_events \
                 WHERE session_key = ?1 AND agent_id = ?2 AND sequence > ?3",
                params![c.row.target, agent, c.row.last_seen],
                |r| r.get(0),
            )?;
        }
        let (lo, hi) = (
            c.row.last_seen.min(c.row.notified).min(c.row.material),
            c.row.last_seen.max(c.row.notified).max(c.row.material),
        );
        c.pending = c.pending && live && lo >= 0 && hi <= c.target_version;
    }
    Ok(rows)
}
