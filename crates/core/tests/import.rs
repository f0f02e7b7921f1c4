//! Importing an OpenClaw state database into the store's own file: every generation of
//! OpenClaw's tables and the file OpenClaw 2026.9.6 wrote arrive exactly, the store then works
//! on them, a second run adds only what is new, and a diverged destination is refused
//! untouched.

mod common;
mod import_fixture;
mod schema_facts;

use std::path::Path;

use common::*;
use import_fixture::*;
use rusqlite::types::Value;
use rusqlite::Connection;
use session_awareness_core::import::{import, ImportOptions};
use session_awareness_core::{Hooks, Options, RecordInput, Store};

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
            all.events.iter().map(|e| e.sequence()).collect::<Vec<_>>(),
            [2, 5, 6]
        );
        assert_eq!((all.state_version, all.history_gap), (6, true));
        let after = store.changes_since(CHILD, 1.0, None, None).unwrap();
        assert_eq!((after.events.len(), after.history_gap), (3, false));
        assert_eq!(after.earliest_available_sequence, 2);
        let global = store.changes_since("global", 0.0, None, None).unwrap();
        assert_eq!(
            global
                .events
                .iter()
                .map(|e| e.sequence())
                .collect::<Vec<_>>(),
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
    // The links table has one shape in both files: the links arrive column for column, and
    // the store's two added columns start empty, as on a link OpenClaw wrote.
    const LINKS: &str = "SELECT session_key, agent_id, catalog_id, host_id, thread_id, \
         upstream_kind, upstream_ref_json, last_marker_json, last_scanned_at, created_at, \
         updated_at FROM session_upstream_links ORDER BY session_key, agent_id";
    let links = rows(&dst, LINKS);
    assert_eq!(links.len(), 2);
    assert_eq!(links, rows(&src, LINKS));
    assert_eq!(
        links.iter().map(|l| l[2].clone()).collect::<Vec<_>>(),
        [text("claude"), text("claude")]
    );
    assert_eq!(
        rows(
            &dst,
            "SELECT failure_count, own_messages_json FROM session_upstream_links"
        ),
        vec![vec![Value::Null, Value::Null]; 2]
    );
    drop(src);
    drop(dst);
    let store = Store::open(dest.to_str().unwrap(), Options::default(), Hooks::default()).unwrap();
    let now = 1796050458368 + HOUR;
    let child = "agent:main:subagent:fixture-child";
    let delta = store.changes_since(child, 3.0, None, None).unwrap();
    assert_eq!(
        delta
            .events
            .iter()
            .map(|e| e.sequence())
            .collect::<Vec<_>>(),
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
