//! Importing while the source is written (one snapshot; a source read without a WAL and
//! overtaken by a writer is read again), rows the store's tables cannot hold, and bad paths.

mod common;
mod import_fixture;
mod schema_facts;

use std::path::Path;

use common::*;
use import_fixture::*;
use rusqlite::types::Value;
use session_awareness_core::import::{import, ImportOptions, ImportSummary, Progress};

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
