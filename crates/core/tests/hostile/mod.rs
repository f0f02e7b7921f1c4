//! The hostile rows of semantics.md#storage, shared by the foreign-row tests: one row the
//! store would never write per entry, for the cursor and the event table, and the file each
//! is written into before the store opens.
#![allow(dead_code)]

use std::path::Path;

use rusqlite::Connection;
use session_awareness_core::Provenance;

use crate::common::*;

pub const W: &str = "agent:main:main";
pub const T: &str = "agent:main:t";
pub const RETENTION: i64 = 30 * 24 * 60 * 60 * 1000;

/// OpenClaw's older generations: the same tables, not STRICT, without NOT NULL.
pub const LOOSE_SCHEMA: &str = include_str!("../fixtures/loose-schema.sql");

/// One hostile row: the SQL that writes it (`?1` is T0), the table, and whether it needs the
/// non-STRICT tables.
pub struct Hostile {
    pub name: &'static str,
    pub table: &'static str,
    pub sql: &'static str,
    pub loose_only: bool,
    /// For an event row: it ages out on `occurred_at` (an integer there).
    pub ages: bool,
}

const fn cursor(name: &'static str, sql: &'static str, loose_only: bool) -> Hostile {
    Hostile {
        name,
        table: "session_watch_cursors",
        sql,
        loose_only,
        ages: false,
    }
}

const fn event(name: &'static str, sql: &'static str, loose_only: bool, ages: bool) -> Hostile {
    Hostile {
        name,
        table: "session_state_events",
        sql,
        loose_only,
        ages,
    }
}

/// Cursor rows on T (head 1) with a pending notice (L 0, N 1, M 1) and one defect each.
pub const CURSORS: &[Hostile] = &[
    cursor("bare watcher", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('global', 'agent:main:t', 0, 1, 1, 'explicit', ?1)", false),
    cursor("empty watcher", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('', 'agent:main:t', 0, 1, 1, 'explicit', ?1)", false),
    cursor("uppercase agent watcher", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:MAIN:x', 'agent:main:t', 0, 1, 1, 'explicit', ?1)", false),
    cursor("bare target", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:main', 'global', 0, 1, 1, 'explicit', ?1)", false),
    cursor("empty target", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:main', '', 0, 1, 1, 'explicit', ?1)", false),
    cursor("self cursor", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:t', 'agent:main:t', 0, 1, 1, 'explicit', ?1)", false),
    cursor("unknown provenance", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:w2', 'agent:main:t', 0, 1, 1, 'bogus', ?1)", true),
    cursor("invalid utf-8 watcher", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES (CAST(x'6167656e743a6d61696e3a77ff' AS TEXT), 'agent:main:t', 0, 1, 1, 'explicit', ?1)", false),
    cursor("invalid utf-8 target", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:main', CAST(x'6167656e743a6d61696e3a74ff' AS TEXT), 0, 1, 1, 'explicit', ?1)", false),
    cursor("lone surrogate watcher", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES (CAST(x'6167656e743a6d61696e3aeda080' AS TEXT), 'agent:main:t', 0, 1, 1, 'explicit', ?1)", false),
    cursor("invalid utf-8 provenance", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:w3', 'agent:main:t', 0, 1, 1, CAST(x'6578706c69636974ff' AS TEXT), ?1)", true),
    cursor("above the head", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:w4', 'agent:main:t', 0, 5, 5, 'explicit', ?1)", false),
    cursor("negative position", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:w5', 'agent:main:t', -1, 1, 1, 'explicit', ?1)", false),
    cursor("blob watcher", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES (x'6167656e743a6d61696e3a7736', 'agent:main:t', 0, 1, 1, 'explicit', ?1)", true),
    cursor("null watcher", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES (NULL, 'agent:main:t', 0, 1, 1, 'explicit', ?1)", true),
    cursor("null L", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:w7', 'agent:main:t', NULL, 1, 1, 'explicit', ?1)", true),
    cursor("text M", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:w8', 'agent:main:t', 0, 1, 'many', 'explicit', ?1)", true),
    cursor("null provenance", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:w9', 'agent:main:t', 0, 1, 1, NULL, ?1)", true),
    cursor("null updated_at", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:wa', 'agent:main:t', 0, 1, 1, 'explicit', NULL)", true),
];

/// Event rows at sequence 2 with one defect each; the head of their session is moved to 2
/// (as a writer that keeps heads would), except for the row above its session's head.
pub const EVENTS: &[Hostile] = &[
    event("unknown kind", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'bogus', 'human', NULL, NULL, ?1, 's', NULL)", false, true),
    event("unknown actor type", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'robot', NULL, NULL, ?1, 's', NULL)", false, true),
    event("invalid utf-8 summary", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, CAST(x'61ff62' AS TEXT), NULL)", false, true),
    event("invalid utf-8 kind", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', CAST(x'676f616cff' AS TEXT), 'human', NULL, NULL, ?1, 's', NULL)", false, true),
    event("invalid utf-8 actor id", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', CAST(x'ff' AS TEXT), NULL, ?1, 's', NULL)", false, true),
    event("invalid utf-8 run id", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, CAST(x'ff' AS TEXT), ?1, 's', NULL)", false, true),
    event("invalid utf-8 session id", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', CAST(x'ff' AS TEXT), 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', NULL)", false, true),
    event("invalid utf-8 payload", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', CAST(x'7b7dff' AS TEXT))", false, true),
    event("invalid utf-8 dedupe key", "INSERT INTO session_state_events VALUES (2, CAST(x'ff' AS TEXT), 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', NULL)", false, true),
    event("invalid utf-8 session key", "INSERT INTO session_state_events VALUES (2, NULL, CAST(x'6167656e743a6d61696e3a74ff' AS TEXT), NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', NULL)", false, true),
    event("lone surrogate session key", "INSERT INTO session_state_events VALUES (2, NULL, CAST(x'6167656e743a6d61696e3aeda080' AS TEXT), NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', NULL)", false, true),
    event("invalid utf-8 agent", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, CAST(x'6d61696eff' AS TEXT), 'goal_changed', 'human', NULL, NULL, ?1, 's', NULL)", false, true),
    event("huge summary", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, printf('%.*c', 100000, 'x'), NULL)", false, true),
    event("multi-line summary", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 'a' || char(10) || 'b', NULL)", false, true),
    event("huge payload", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', '{\"a\":\"' || printf('%.*c', 100000, 'x') || '\"}')", false, true),
    event("payload not json", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', '{not json')", false, true),
    event("payload not an object", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', '[1]')", false, true),
    event("above the head", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:ghost', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', NULL)", false, true),
    event("null kind", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', NULL, 'human', NULL, NULL, ?1, 's', NULL)", true, true),
    event("null summary", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, NULL, NULL)", true, true),
    event("null session key", "INSERT INTO session_state_events VALUES (2, NULL, NULL, NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', NULL)", true, true),
    event("null occurred_at", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, NULL, 's', NULL)", true, false),
    event("text occurred_at", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, 'yesterday', 's', NULL)", true, false),
    event("blob summary", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, x'ff00', NULL)", true, true),
];

/// Every column of every row of `table`, as (type, hex) pairs: the exact stored bytes.
pub fn snapshot(conn: &Connection, table: &str) -> Vec<Vec<(String, String)>> {
    let cols: Vec<String> = conn
        .prepare(&format!(
            "SELECT name FROM pragma_table_info('{table}') ORDER BY cid"
        ))
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let select: Vec<String> = cols
        .iter()
        .map(|c| format!("typeof({c}), hex({c})"))
        .collect();
    let sql = format!("SELECT {} FROM {table} ORDER BY rowid", select.join(", "));
    let mut stmt = conn.prepare(&sql).unwrap();
    let rows = stmt
        .query_map([], |r| {
            (0..cols.len())
                .map(|i| Ok((r.get(2 * i)?, r.get(2 * i + 1)?)))
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

pub fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Builds the file: the tables (STRICT by the store, or loose), a live cursor W -> T and
/// T's first event (sequence 1), then the hostile row, written with no store open.
pub fn build(path: &Path, loose: bool, h: &Hostile) {
    if loose {
        Connection::open(path)
            .unwrap()
            .execute_batch(LOOSE_SCHEMA)
            .unwrap();
    }
    {
        let fx = Fixture::open(path.to_str().unwrap(), Some(path.into()), opts());
        assert!(fx.store.watch(W, T, Provenance::Explicit, T0).unwrap());
        assert_eq!(fx.rec(T, "created", None, T0).sequence, 1);
        fx.settle();
        fx.store.close();
    }
    let conn = Connection::open(path).unwrap();
    if h.sql.contains("?1") {
        conn.execute(h.sql, [T0]).unwrap();
    } else {
        conn.execute(h.sql, []).unwrap();
    }
    if h.table == "session_state_events" && h.name != "above the head" {
        conn.execute(
            "INSERT INTO session_state_heads (session_key, agent_id, last_sequence, \
             pruned_max_sequence, updated_at) \
             SELECT session_key, agent_id, 2, 0, ?1 FROM session_state_events WHERE sequence = 2 \
             ON CONFLICT DO UPDATE SET last_sequence = 2",
            [T0],
        )
        .unwrap();
    }
}
