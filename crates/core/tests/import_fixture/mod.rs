//! The import tests' source files and row readers: a file of each OpenClaw generation,
//! filled as that generation's writer fills it, and every row of a table as SQLite returns it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rusqlite::types::Value;
use rusqlite::{params, Connection};
use session_awareness_core::import::{import, ImportOptions, ImportSummary, TableSummary};

use crate::common::*;
use crate::schema_facts::fixture_sql;

/// An ambient group watched by the main session.
pub const GROUP: &str = "agent:main:telegram:group:ops";
/// The watcher store path OpenClaw's newer writers give cursors.
pub const STORE: &str = "/state/agents/main/agent/openclaw-agent.sqlite";
/// The generations: fixture file, has `provenance`, has `watcher_store_path`.
pub const GENERATIONS: [(&str, bool, bool); 5] = [
    ("1-loose.sql", false, false),
    ("2-strict.sql", false, false),
    ("3-provenance.sql", true, false),
    ("4-store-path-appended.sql", true, true),
    ("5-openclaw-2026.9.6.sql", true, true),
];
/// The real file OpenClaw 2026.9.6 wrote.
pub const REAL: &str = "tests/fixtures/openclaw-2026.9.6.sqlite";

pub fn sentinel(w: &str) -> String {
    let hex: String = w.bytes().map(|b| format!("{b:02x}")).collect();
    format!("ambient-group-watch:{hex}")
}

/// A source file of one generation, filled as that generation's writer fills it: events
/// 1..=7 of which 1 was pruned (watermark 1 on CHILD) and 7 deleted with its session; a
/// pending cursor and an ambient one (a sentinel row before `provenance`).
pub fn build(dir: &Path, (file, provenance, store_path): (&str, bool, bool)) -> PathBuf {
    let path = dir.join("openclaw.sqlite");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(&fixture_sql(file)).unwrap();
    conn.execute_batch("CREATE TABLE host_table (x); PRAGMA user_version = 18;")
        .unwrap();
    let event = |key: &str, agent: &str, kind: &str, at: i64, dedupe: Option<&str>| {
        conn.execute(
            "INSERT INTO session_state_events (dedupe_key, session_key, session_id, agent_id, \
             kind, actor_type, actor_id, run_id, occurred_at, summary, payload_json) \
             VALUES (?1, ?2, 'sid', ?3, ?4, 'human', 'tg:1', NULL, ?5, ?4 || ' via test', \
             '{\"n\":1}')",
            params![dedupe, key, agent, kind, at],
        )
        .unwrap();
    };
    event(CHILD, "main", "child_spawned", T0, Some("spawn-1"));
    event(CHILD, "main", "goal_changed", T0 + MINUTE, None);
    event(GROUP, "main", "human_direct_message", T0 + 2 * MINUTE, None);
    event("global", "main", "compacted", T0 + 3 * MINUTE, None);
    event(
        CHILD,
        "main",
        "human_direct_message",
        T0 + 4 * MINUTE,
        Some("hdm-5"),
    );
    event(CHILD, "main", "human_direct_message", T0 + 5 * MINUTE, None);
    event(OPS, "ops", "created", T0 + 6 * MINUTE, None);
    conn.execute_batch("DELETE FROM session_state_events WHERE sequence IN (1, 7);")
        .unwrap();
    let head = "INSERT INTO session_state_heads (session_key, agent_id, last_sequence, \
                pruned_max_sequence, updated_at) VALUES (?1, 'main', ?2, ?3, ?4)";
    conn.execute(head, params![CHILD, 6, 1, T0 + 5 * MINUTE])
        .unwrap();
    conn.execute(head, params![GROUP, 3, 0, T0 + 2 * MINUTE])
        .unwrap();
    conn.execute(head, params!["global", 4, 0, T0 + 3 * MINUTE])
        .unwrap();
    let cursor = |w: &str, t: &str, lnm: (i64, i64, i64), prov: &str, at: i64| {
        let (l, n, m) = lnm;
        let (cols, vals) = match (provenance, store_path) {
            (_, true) => (
                ", provenance, watcher_store_path",
                format!(", '{prov}', '{STORE}'"),
            ),
            (true, false) => (", provenance", format!(", '{prov}'")),
            _ => ("", String::new()),
        };
        conn.execute(
            &format!(
                "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, \
                 last_seen_sequence, notified_sequence, material_sequence, updated_at{cols}) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6{vals})"
            ),
            params![w, t, l, n, m, at],
        )
        .unwrap();
    };
    cursor(MAIN, CHILD, (2, 5, 6), "explicit", T0 + 5 * MINUTE);
    if provenance {
        cursor(MAIN, GROUP, (0, 3, 3), "ambient-group", T0 + 7 * MINUTE);
    } else {
        cursor(MAIN, GROUP, (0, 3, 3), "", T0 + 2 * MINUTE);
        cursor(&sentinel(MAIN), GROUP, (3, 3, 3), "", T0 + 7 * MINUTE);
    }
    conn.execute_batch(
        "INSERT INTO sqlite_sequence (name, seq) SELECT 'session_state_events', 7 \
         WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'session_state_events');
         UPDATE sqlite_sequence SET seq = 7 WHERE name = 'session_state_events';",
    )
    .unwrap();
    path
}

/// Every row of `sql`, each value as SQLite returns it.
pub fn rows(conn: &Connection, sql: &str) -> Vec<Vec<Value>> {
    let mut stmt = conn.prepare(sql).unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

pub const EVENTS: &str = "SELECT sequence, dedupe_key, session_key, session_id, agent_id, kind, \
     actor_type, actor_id, run_id, occurred_at, summary, payload_json \
     FROM session_state_events ORDER BY sequence";
pub const HEADS: &str = "SELECT session_key, agent_id, last_sequence, pruned_max_sequence, \
     updated_at FROM session_state_heads ORDER BY session_key, agent_id";
pub const CURSORS: &str = "SELECT watcher_session_key, watcher_store_path, target_session_key, \
     last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at \
     FROM session_watch_cursors ORDER BY watcher_session_key, target_session_key";
pub const COUNTER: &str = "SELECT seq FROM sqlite_sequence WHERE name = 'session_state_events'";

pub fn open(path: &Path) -> Connection {
    Connection::open(path).unwrap()
}

pub fn run(source: &Path, dest: &Path) -> ImportSummary {
    import(
        source.to_str().unwrap(),
        dest.to_str().unwrap(),
        ImportOptions::default(),
        &mut |_| {},
    )
    .unwrap()
}

pub fn t(read: u64, inserted: u64, updated: u64, present: u64, skipped: u64) -> TableSummary {
    TableSummary {
        read,
        inserted,
        updated,
        present,
        skipped,
    }
}

pub fn int(v: i64) -> Value {
    Value::Integer(v)
}
pub fn text(s: &str) -> Value {
    Value::Text(s.into())
}

/// The cursors a fresh destination holds after importing a file built by [`build`].
pub fn expected_cursors(store_path: bool) -> Vec<Vec<Value>> {
    let path = if store_path { text(STORE) } else { Value::Null };
    vec![
        vec![
            text(MAIN),
            path.clone(),
            text(CHILD),
            int(2),
            int(5),
            int(6),
            text("explicit"),
            int(T0 + 5 * MINUTE),
        ],
        vec![
            text(MAIN),
            path,
            text(GROUP),
            int(0),
            int(3),
            int(3),
            text("ambient-group"),
            int(T0 + 7 * MINUTE),
        ],
    ]
}
