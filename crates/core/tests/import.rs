//! Importing an OpenClaw state database into the store's own file: every generation of
//! OpenClaw's tables and the file OpenClaw 2026.9.6 wrote arrive exactly, the store then works
//! on them, a second run adds only what is new, a diverged destination is refused untouched,
//! the source is never changed, and one snapshot is read while the source keeps being written.

mod common;
mod schema_facts;

use std::path::{Path, PathBuf};

use common::*;
use rusqlite::types::Value;
use rusqlite::{params, Connection};
use schema_facts::fixture_sql;
use session_awareness_core::import::{
    import, ImportOptions, ImportSummary, Progress, TableSummary,
};
use session_awareness_core::{Hooks, Options, RecordInput, Store};

/// An ambient group watched by the main session.
const GROUP: &str = "agent:main:telegram:group:ops";
/// The watcher store path OpenClaw's newer writers give cursors.
const STORE: &str = "/state/agents/main/agent/openclaw-agent.sqlite";
/// The generations: fixture file, has `provenance`, has `watcher_store_path`.
const GENERATIONS: [(&str, bool, bool); 5] = [
    ("1-loose.sql", false, false),
    ("2-strict.sql", false, false),
    ("3-provenance.sql", true, false),
    ("4-store-path-appended.sql", true, true),
    ("5-openclaw-2026.9.6.sql", true, true),
];
/// The real file OpenClaw 2026.9.6 wrote.
const REAL: &str = "tests/fixtures/openclaw-2026.9.6.sqlite";

fn sentinel(w: &str) -> String {
    let hex: String = w.bytes().map(|b| format!("{b:02x}")).collect();
    format!("ambient-group-watch:{hex}")
}

/// A source file of one generation, filled as that generation's writer fills it: events
/// 1..=7 of which 1 was pruned (watermark 1 on CHILD) and 7 deleted with its session; a
/// pending cursor and an ambient one (a sentinel row before `provenance`).
fn build(dir: &Path, (file, provenance, store_path): (&str, bool, bool)) -> PathBuf {
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
fn rows(conn: &Connection, sql: &str) -> Vec<Vec<Value>> {
    let mut stmt = conn.prepare(sql).unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

const EVENTS: &str = "SELECT sequence, dedupe_key, session_key, session_id, agent_id, kind, \
     actor_type, actor_id, run_id, occurred_at, summary, payload_json \
     FROM session_state_events ORDER BY sequence";
const HEADS: &str = "SELECT session_key, agent_id, last_sequence, pruned_max_sequence, \
     updated_at FROM session_state_heads ORDER BY session_key, agent_id";
const CURSORS: &str = "SELECT watcher_session_key, watcher_store_path, target_session_key, \
     last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at \
     FROM session_watch_cursors ORDER BY watcher_session_key, target_session_key";
const COUNTER: &str = "SELECT seq FROM sqlite_sequence WHERE name = 'session_state_events'";

fn open(path: &Path) -> Connection {
    Connection::open(path).unwrap()
}

fn run(source: &Path, dest: &Path) -> ImportSummary {
    import(
        source.to_str().unwrap(),
        dest.to_str().unwrap(),
        ImportOptions::default(),
        &mut |_| {},
    )
    .unwrap()
}

fn t(read: u64, inserted: u64, updated: u64, present: u64, skipped: u64) -> TableSummary {
    TableSummary {
        read,
        inserted,
        updated,
        present,
        skipped,
    }
}

fn int(v: i64) -> Value {
    Value::Integer(v)
}
fn text(s: &str) -> Value {
    Value::Text(s.into())
}

/// The cursors a fresh destination holds after importing a file built by [`build`].
fn expected_cursors(store_path: bool) -> Vec<Vec<Value>> {
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

#[test]
fn every_generation_arrives_exactly_and_the_store_works_on_it() {
    for g in GENERATIONS {
        let dir = tempfile::tempdir().unwrap();
        let source = build(dir.path(), g);
        let dest = dir.path().join("state/session-state.sqlite");
        let summary = run(&source, &dest);
        let sentinels = u64::from(!g.1);
        assert_eq!(summary.events, t(5, 5, 0, 0, 0), "{}", g.0);
        assert_eq!(summary.heads, t(3, 3, 0, 0, 0), "{}", g.0);
        assert_eq!(
            summary.cursors,
            t(2 + sentinels, 2, 0, 0, sentinels),
            "{}",
            g.0
        );
        assert_eq!(summary.upstream_links, t(0, 0, 0, 0, 0), "{}", g.0);
        assert_eq!(summary.source_last_sequence, 7);

        let (src, dst) = (open(&source), open(&dest));
        assert_eq!(rows(&dst, EVENTS), rows(&src, EVENTS), "{}", g.0);
        assert_eq!(
            rows(&dst, EVENTS)
                .iter()
                .map(|r| r[0].clone())
                .collect::<Vec<_>>(),
            [2, 3, 4, 5, 6].map(int).to_vec()
        );
        assert_eq!(rows(&dst, HEADS), rows(&src, HEADS), "{}", g.0);
        assert_eq!(rows(&dst, CURSORS), expected_cursors(g.2), "{}", g.0);
        assert_eq!(rows(&dst, COUNTER), vec![vec![int(7)]]);
        drop(dst);

        let store =
            Store::open(dest.to_str().unwrap(), Options::default(), Hooks::default()).unwrap();
        let now = T0 + HOUR;
        let all = store.changes_since(CHILD, 0.0, None, None).unwrap();
        assert_eq!(
            all.events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
            [2, 5, 6]
        );
        assert_eq!((all.state_version, all.history_gap), (6, true));
        let after = store.changes_since(CHILD, 1.0, None, None).unwrap();
        assert_eq!((after.events.len(), after.history_gap), (3, false));
        assert_eq!(after.earliest_available_sequence, 2);
        let global = store.changes_since("global", 0.0, None, None).unwrap();
        assert_eq!(
            global.events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
            [4]
        );
        store.sweep(None, now).unwrap();
        let notices = store.drain(MAIN, now).unwrap();
        let got: Vec<(&str, i64, &str)> = notices
            .iter()
            .map(|n| (n.target_key.as_str(), n.changes_since, n.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (GROUP, 0, "Session \"agent:main:telegram:group:ops\" changed (other actor). Reconcile before acting: session_status sessionKey \"agent:main:telegram:group:ops\" changesSince 0."),
                (CHILD, 2, "Session \"agent:main:subagent:child\" changed (other actor). Reconcile before acting: session_status sessionKey \"agent:main:subagent:child\" changesSince 2."),
            ],
            "{}",
            g.0
        );
        let next = store
            .record(
                RecordInput {
                    session_key: CHILD.into(),
                    kind: "goal_changed".into(),
                    actor_type: "human".into(),
                    summary: "after the import".into(),
                    ..Default::default()
                },
                now,
            )
            .unwrap()
            .unwrap();
        assert_eq!(next.sequence, 8, "{}", g.0);
        store.close();
    }
}

/// The source's file bytes, modification time, and the names in its folder.
fn fingerprint(path: &Path) -> (Vec<u8>, std::time::SystemTime, Vec<String>) {
    let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    (
        std::fs::read(path).unwrap(),
        std::fs::metadata(path).unwrap().modified().unwrap(),
        names,
    )
}

#[test]
fn the_file_openclaw_wrote_arrives_exactly_and_is_not_changed() {
    let dir = tempfile::tempdir().unwrap();
    let source_dir = dir.path().join("openclaw");
    std::fs::create_dir(&source_dir).unwrap();
    let source = source_dir.join("openclaw.sqlite");
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join(REAL), &source).unwrap();
    let before = fingerprint(&source);
    let dest = dir.path().join("session-state.sqlite");
    let summary = run(&source, &dest);
    assert_eq!(fingerprint(&source), before);
    assert!(!summary.source_wal);
    assert_eq!(summary.events, t(13, 13, 0, 0, 0));
    assert_eq!(summary.heads, t(6, 6, 0, 0, 0));
    assert_eq!(summary.cursors, t(6, 6, 0, 0, 0));
    assert_eq!(summary.upstream_links, t(2, 2, 0, 0, 0));

    let src =
        Connection::open_with_flags(&source, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let dst = open(&dest);
    assert_eq!(rows(&dst, EVENTS), rows(&src, EVENTS));
    assert_eq!(rows(&dst, HEADS), rows(&src, HEADS));
    assert_eq!(rows(&dst, CURSORS), rows(&src, CURSORS));
    assert_eq!(rows(&dst, COUNTER), vec![vec![int(13)]]);
    drop(src);
    let links = rows(
        &dst,
        "SELECT session_key, agent_id, source, transcript_path, remote_id, scan_offset, \
         failure_count, own_messages_json, remote_cursor, created_at, updated_at \
         FROM session_upstream_links ORDER BY session_key",
    );
    assert_eq!(
        links,
        vec![
            vec![
                text("agent:main:claude:fixture-local"), text("main"), text("claude"),
                text("/home/fixture/.claude/projects/-srv-demo/6f1c2a9e-0b7d-4e55-9a51-3c2d1e0f4a10.jsonl"),
                Value::Null, int(4096), int(0), text("[]"), Value::Null,
                int(1796050458195), int(1796050458366),
            ],
            vec![
                text("agent:main:claude:fixture-remote"), text("main"), text("claude"),
                Value::Null, text("8a3b4c5d-6e7f-4081-92a3-b4c5d6e7f809"), int(0), int(0),
                text("[]"), text("uuid:c0ffee00-0000-4000-8000-000000000003"),
                int(1796050458283), int(1796050458283),
            ],
        ]
    );
    drop(dst);
    let store = Store::open(dest.to_str().unwrap(), Options::default(), Hooks::default()).unwrap();
    let now = 1796050458368 + HOUR;
    let child = "agent:main:subagent:fixture-child";
    let delta = store.changes_since(child, 3.0, None, None).unwrap();
    assert_eq!(
        delta.events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        [4, 5, 6, 8]
    );
    assert_eq!(delta.state_version, 8);
    store.sweep(None, now).unwrap();
    let notices = store.drain(MAIN, now).unwrap();
    let got: Vec<(&str, i64)> = notices
        .iter()
        .map(|n| (n.target_key.as_str(), n.changes_since))
        .collect();
    assert_eq!(
        got,
        [
            (child, 3),
            ("agent:main:telegram:group:-100200300", 0),
            ("agent:main:claude:fixture-local", 11)
        ]
    );
    store.close();
}

#[test]
fn a_second_run_adds_only_what_is_new() {
    let dir = tempfile::tempdir().unwrap();
    let source = build(dir.path(), GENERATIONS[4]);
    let dest = dir.path().join("session-state.sqlite");
    run(&source, &dest);
    let again = run(&source, &dest);
    assert_eq!(again.events, t(5, 0, 0, 5, 0));
    assert_eq!(again.heads, t(3, 0, 0, 3, 0));
    assert_eq!(again.cursors, t(2, 0, 0, 2, 0));

    // The source moves on: one event, its head, a watermark, a new cursor, and a changed one
    // (the destination's own cursor row is kept).
    open(&source)
        .execute_batch(&format!(
            "INSERT INTO session_state_events (session_key, agent_id, kind, actor_type, \
               occurred_at, summary) VALUES ('{GROUP}', 'main', 'compacted', 'system', {at}, 'c');
             UPDATE session_state_heads SET last_sequence = 8, pruned_max_sequence = 3, \
               updated_at = {at} WHERE session_key = '{GROUP}';
             INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, \
               last_seen_sequence, notified_sequence, material_sequence, updated_at) \
               VALUES ('{OPS}', '{GROUP}', 8, 8, 8, {at});
             UPDATE session_watch_cursors SET last_seen_sequence = 6, notified_sequence = 6 \
               WHERE target_session_key = '{CHILD}';",
            at = T0 + 8 * MINUTE
        ))
        .unwrap();
    let third = run(&source, &dest);
    assert_eq!(third.events, t(6, 1, 0, 5, 0));
    assert_eq!(third.heads, t(3, 0, 1, 2, 0));
    assert_eq!(third.cursors, t(3, 1, 0, 2, 0));
    let dst = open(&dest);
    assert_eq!(rows(&dst, EVENTS), rows(&open(&source), EVENTS));
    assert_eq!(rows(&dst, HEADS), rows(&open(&source), HEADS));
    assert_eq!(
        rows(
            &dst,
            "SELECT last_seen_sequence, notified_sequence FROM session_watch_cursors \
                    WHERE target_session_key = 'agent:main:subagent:child'"
        ),
        vec![vec![int(2), int(5)]]
    );
    assert_eq!(rows(&dst, COUNTER), vec![vec![int(8)]]);
}

/// Runs an import expected to be refused as diverged and checks the destination's bytes.
fn refused(source: &Path, dest: &Path) {
    let before = std::fs::read(dest).unwrap();
    let err = import(
        source.to_str().unwrap(),
        dest.to_str().unwrap(),
        ImportOptions::default(),
        &mut |_| panic!("no progress on a refused import"),
    )
    .unwrap_err();
    assert_eq!(err.code(), "ERR_IMPORT_DIVERGED");
    assert_eq!(std::fs::read(dest).unwrap(), before);
}

#[test]
fn a_diverged_destination_is_refused_and_left_byte_identical() {
    // Another event at a sequence the source has.
    let dir = tempfile::tempdir().unwrap();
    let source = build(dir.path(), GENERATIONS[4]);
    let dest = dir.path().join("session-state.sqlite");
    run(&source, &dest);
    open(&dest)
        .execute_batch("UPDATE session_state_events SET summary = 'edited' WHERE sequence = 5")
        .unwrap();
    refused(&source, &dest);

    // The destination recorded its own event on CHILD (sequence 9) before the source's 8.
    let dir = tempfile::tempdir().unwrap();
    let source = build(dir.path(), GENERATIONS[4]);
    let dest = dir.path().join("session-state.sqlite");
    run(&source, &dest);
    open(&dest)
        .execute_batch(&format!(
            "INSERT INTO session_state_events (sequence, session_key, agent_id, kind, \
               actor_type, occurred_at, summary) \
               VALUES (9, '{CHILD}', 'main', 'goal_changed', 'human', {T0}, 'own');
             UPDATE session_state_heads SET last_sequence = 9 WHERE session_key = '{CHILD}';"
        ))
        .unwrap();
    open(&source)
        .execute_batch(&format!(
            "INSERT INTO session_state_events (session_key, agent_id, kind, actor_type, \
               occurred_at, summary) VALUES ('{CHILD}', 'main', 'compacted', 'system', {T0}, 'c');"
        ))
        .unwrap();
    refused(&source, &dest);

    // A dedupe key the destination gave to another sequence.
    let dir = tempfile::tempdir().unwrap();
    let source = build(dir.path(), GENERATIONS[4]);
    let dest = dir.path().join("session-state.sqlite");
    let store = Store::open(dest.to_str().unwrap(), Options::default(), Hooks::default()).unwrap();
    store
        .record(
            RecordInput {
                session_key: OPS.into(),
                kind: "compacted".into(),
                actor_type: "system".into(),
                summary: "own".into(),
                dedupe_key: Some("hdm-5".into()),
                ..Default::default()
            },
            T0,
        )
        .unwrap()
        .unwrap();
    store.close();
    refused(&source, &dest);
}

#[test]
fn one_snapshot_while_a_gateway_keeps_writing_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let source = build(dir.path(), GENERATIONS[4]);
    let writer = open(&source);
    writer
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
        .unwrap();
    let snapshot = (
        rows(&writer, EVENTS),
        rows(&writer, HEADS),
        rows(&writer, CURSORS),
    );
    let dest = dir.path().join("session-state.sqlite");
    let mut calls = Vec::new();
    let summary = import(
        source.to_str().unwrap(),
        dest.to_str().unwrap(),
        ImportOptions {
            batch_rows: 2,
            ..Default::default()
        },
        &mut |p: Progress| {
            if calls.is_empty() {
                // The gateway records, prunes and watches between two batches.
                writer
                    .execute_batch(&format!(
                        "INSERT INTO session_state_events (session_key, agent_id, kind, \
                           actor_type, occurred_at, summary) \
                           VALUES ('{CHILD}', 'main', 'compacted', 'system', {T0}, 'late');
                         UPDATE session_state_heads SET last_sequence = 8 \
                           WHERE session_key = '{CHILD}';
                         DELETE FROM session_state_events WHERE sequence = 6;
                         INSERT INTO session_watch_cursors (watcher_session_key, \
                           target_session_key, updated_at) VALUES ('{OPS}', '{CHILD}', {T0});"
                    ))
                    .unwrap();
            }
            calls.push((p.table, p.done, p.total));
        },
    )
    .unwrap();
    assert!(summary.source_wal);
    assert_eq!(
        calls,
        [
            ("session_state_events", 2, 5),
            ("session_state_events", 4, 5),
            ("session_state_events", 5, 5),
            ("session_state_heads", 2, 3),
            ("session_state_heads", 3, 3),
            ("session_watch_cursors", 2, 2),
        ]
    );
    let dst = open(&dest);
    assert_eq!(
        (rows(&dst, EVENTS), rows(&dst, HEADS), rows(&dst, CURSORS)),
        snapshot
    );
    drop(dst);
    // The next run brings what the gateway wrote since; the event the source dropped stays.
    let next = run(&source, &dest);
    assert_eq!(next.events, t(5, 1, 0, 4, 0));
    assert_eq!(next.cursors, t(3, 1, 0, 2, 0));
    let seqs: Vec<Value> = rows(&open(&dest), EVENTS)
        .iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(seqs, [2, 3, 4, 5, 6, 8].map(int).to_vec());
}

#[test]
fn rows_the_store_cannot_hold_are_skipped_and_inert_ones_copied_as_stored() {
    let dir = tempfile::tempdir().unwrap();
    let source = build(dir.path(), GENERATIONS[0]);
    // The first generation is not STRICT: a text time, a fractional L, a text version; and a
    // summary that is not UTF-8 and a bare-keyed cursor, which the store can hold.
    open(&source)
        .execute_batch(&format!(
            "INSERT INTO session_state_events (sequence, session_key, agent_id, kind, \
               actor_type, occurred_at, summary) VALUES (8, '{CHILD}', 'main', 'compacted', \
               'system', 'soon', 'x');
             INSERT INTO session_state_events (sequence, session_key, agent_id, kind, \
               actor_type, occurred_at, summary) VALUES (9, '{CHILD}', 'main', 'compacted', \
               'system', {T0}, CAST(X'FF41' AS TEXT));
             INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, \
               last_seen_sequence, updated_at) VALUES ('{OPS}', '{CHILD}', 1.5, {T0});
             INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, \
               updated_at) VALUES ('main', '{CHILD}', {T0});
             INSERT INTO session_state_heads (session_key, agent_id, last_sequence, \
               updated_at) VALUES ('{OPS}', 'ops', 'seven', {T0});"
        ))
        .unwrap();
    let dest = dir.path().join("session-state.sqlite");
    let summary = run(&source, &dest);
    assert_eq!(summary.events, t(7, 6, 0, 0, 1));
    assert_eq!(summary.heads, t(4, 3, 0, 0, 1));
    assert_eq!(summary.cursors, t(5, 3, 0, 0, 2));
    let dst = open(&dest);
    assert_eq!(
        rows(
            &dst,
            "SELECT hex(summary), typeof(summary) FROM session_state_events WHERE sequence = 9"
        ),
        vec![vec![text("FF41"), text("text")]]
    );
    assert_eq!(
        rows(&dst, "SELECT last_sequence FROM session_state_heads WHERE session_key = 'agent:main:subagent:child'"),
        vec![vec![int(9)]]
    );
    assert_eq!(
        rows(
            &dst,
            "SELECT count(*) FROM session_watch_cursors WHERE watcher_session_key = 'main'"
        ),
        vec![vec![int(1)]]
    );
}

#[test]
fn bad_paths_are_refused_with_their_codes() {
    let dir = tempfile::tempdir().unwrap();
    let source = build(dir.path(), GENERATIONS[4]);
    let go = |s: &Path, d: &Path| {
        import(
            s.to_str().unwrap(),
            d.to_str().unwrap(),
            ImportOptions::default(),
            &mut |_| {},
        )
        .unwrap_err()
        .code()
    };
    assert_eq!(go(&source, &source), "ERR_INVALID_ARG");
    let dest = dir.path().join("dest.sqlite");
    assert_eq!(go(&dir.path().join("missing.sqlite"), &dest), "ERR_DB");
    assert!(!dest.exists());
    let text_file = dir.path().join("notes.txt");
    std::fs::write(&text_file, "not a database").unwrap();
    assert_eq!(go(&text_file, &dest), "ERR_NOT_SQLITE");
    assert!(!dest.exists());
    // A table of the schema's name that no generation wrote.
    let foreign = dir.path().join("foreign.sqlite");
    open(&foreign)
        .execute_batch(
            "CREATE TABLE session_state_events (sequence INTEGER PRIMARY KEY, body TEXT)",
        )
        .unwrap();
    assert_eq!(go(&foreign, &dest), "ERR_FOREIGN_SCHEMA");
    assert!(!dest.exists());
}

#[test]
fn a_file_without_the_tables_imports_nothing_and_still_makes_the_store_file() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("openclaw.sqlite");
    open(&source)
        .execute_batch("CREATE TABLE host_table (x)")
        .unwrap();
    let dest = dir.path().join("state/session-state.sqlite");
    let summary = run(&source, &dest);
    assert_eq!(summary, ImportSummary::default());
    assert_eq!(rows(&open(&dest), EVENTS), Vec::<Vec<Value>>::new());
    assert_eq!(rows(&open(&dest), COUNTER), vec![vec![int(0)]]);
}

/// Inserts one event on GROUP into the source through a connection of its own (the file
/// has no WAL, so the write goes into the main file).
fn write_source(source: &Path) {
    open(source)
        .execute_batch(&format!(
            "INSERT INTO session_state_events (session_key, agent_id, kind, actor_type, \
               occurred_at, summary) VALUES ('{GROUP}', 'main', 'compacted', 'system', {T0}, 'w');
             UPDATE session_state_heads SET last_sequence = \
               (SELECT max(sequence) FROM session_state_events) WHERE session_key = '{GROUP}';"
        ))
        .unwrap();
}

#[test]
fn a_source_read_without_a_wal_and_written_meanwhile_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let source = build(dir.path(), GENERATIONS[4]);
    let dest = dir.path().join("session-state.sqlite");
    let mut calls = Vec::new();
    let summary = import(
        source.to_str().unwrap(),
        dest.to_str().unwrap(),
        ImportOptions {
            batch_rows: 2,
            ..Default::default()
        },
        &mut |p: Progress| {
            if calls.is_empty() {
                write_source(&source);
            }
            calls.push((p.table, p.done, p.total));
        },
    )
    .unwrap();
    assert!(!summary.source_wal);
    assert_eq!(
        calls,
        [
            ("session_state_events", 2, 5),
            ("session_state_events", 2, 6),
            ("session_state_events", 4, 6),
            ("session_state_events", 6, 6),
            ("session_state_heads", 2, 3),
            ("session_state_heads", 3, 3),
            ("session_watch_cursors", 2, 2),
        ]
    );
    // The batch committed before the write stays and is found present by the second read.
    assert_eq!(summary.events, t(6, 4, 0, 2, 0));
    assert_eq!(summary.heads, t(3, 1, 2, 0, 0));
    let (src, dst) = (open(&source), open(&dest));
    assert_eq!(rows(&dst, EVENTS), rows(&src, EVENTS));
    assert_eq!(rows(&dst, HEADS), rows(&src, HEADS));
    assert_eq!(rows(&dst, COUNTER), vec![vec![int(8)]]);
}

#[test]
fn a_source_that_keeps_changing_is_given_up_after_three_reads() {
    let dir = tempfile::tempdir().unwrap();
    let source = build(dir.path(), GENERATIONS[4]);
    let dest = dir.path().join("session-state.sqlite");
    let mut writes = 0;
    let err = import(
        source.to_str().unwrap(),
        dest.to_str().unwrap(),
        ImportOptions {
            batch_rows: 2,
            ..Default::default()
        },
        &mut |_| {
            write_source(&source);
            writes += 1;
        },
    )
    .unwrap_err();
    assert_eq!(err.code(), "ERR_DB");
    assert_eq!(writes, 3);
    // Each read committed its first batch (sequences 2 and 3) before the write that overtook
    // it; what stays is the source's, row for row.
    let (src, dst) = (open(&source), open(&dest));
    assert_eq!(rows(&dst, EVENTS), rows(&src, EVENTS)[..2].to_vec());
}
