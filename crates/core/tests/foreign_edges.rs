//! semantics.md#storage: the paths that do remove or replace a row the store would never
//! write. The row cap deletes one that never ages out, the upstream scan skips link rows it
//! cannot read, and `watch` and a spawn edge replace an inert row of their pair.

mod common;
mod hostile;

use common::*;
use hostile::*;
use rusqlite::Connection;
use session_awareness_core::{Options, Provenance};

/// `state.sqlite` in `dir`, a loose-schema file holding the hostile row `name` of `set`.
fn built(dir: &tempfile::TempDir, set: &[Hostile], name: &str) -> std::path::PathBuf {
    let path = dir.path().join("state.sqlite");
    let h = set.iter().find(|h| h.name == name).unwrap();
    build(&path, true, h);
    path
}

#[test]
fn the_row_cap_deletes_rows_that_never_age_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = built(&dir, EVENTS, "text occurred_at");
    let fx = Fixture::open(
        path.to_str().unwrap(),
        Some(path.clone()),
        Options {
            max_events: 1,
            ..opts()
        },
    );
    // Sequences 1 (T, created) and 2 (hostile) go by the cap; the watermark of T rises to
    // 2, the largest sequence within its head that it lost; no head is created.
    let report = fx.store.prune(T0).unwrap();
    assert_eq!(report.events_deleted, 1);
    assert_eq!(fx.sequences(), [2]);
    assert_eq!(fx.head_row(T, "main"), Some((2, 1)));
    assert_eq!(fx.rec(T, "goal_changed", None, T0).sequence, 3);
    let report = fx.store.prune(T0).unwrap();
    assert_eq!(report.events_deleted, 1);
    assert_eq!(fx.sequences(), [3]);
    assert_eq!(fx.head_row(T, "main"), Some((3, 2)));
    fx.assert_no_error();
}

#[test]
fn the_upstream_scan_skips_link_rows_it_cannot_read() {
    use session_awareness_core::upstream::AdoptInput;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sqlite");
    let transcript = dir.path().join("session.jsonl");
    std::fs::write(&transcript, "").unwrap();
    let human = "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n";
    {
        let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
        let link = AdoptInput {
            source: "claude".into(),
            transcript_path: Some(transcript.to_str().unwrap().into()),
            ..Default::default()
        };
        assert_eq!(fx.store.adopt(T, link, T0).unwrap().unwrap().sequence, 1);
        assert!(fx.store.watch(W, T, Provenance::Explicit, T0).unwrap());
        fx.store.close();
    }
    let raw = Connection::open(&path).unwrap();
    // Two watched sessions whose links hold text that is not valid UTF-8.
    for (key, source, transcript_ref) in [
        (
            "agent:main:u",
            "'claude'",
            // {"filePath":"/tmp/x<0xff>"}
            "CAST(x'7b2266696c6550617468223a222f746d702f78ff227d' AS TEXT)",
        ),
        (
            "agent:main:v",
            "CAST(x'636cff' AS TEXT)",
            "'{\"filePath\":\"/tmp/none.jsonl\"}'",
        ),
    ] {
        raw.execute(
            &format!(
                "INSERT INTO session_upstream_links (session_key, agent_id, catalog_id, \
                 host_id, thread_id, upstream_kind, upstream_ref_json, created_at, updated_at) \
                 VALUES ('{key}', 'main', {source}, 'gateway:local', 'x', 'claude-cli', \
                 {transcript_ref}, ?1, ?1)"
            ),
            [T0],
        )
        .unwrap();
        raw.execute(
            "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES (?1, ?2, 0, 0, 0, 'explicit', ?3)",
            rusqlite::params![W, key, T0],
        )
        .unwrap();
    }
    let links_before = snapshot(&raw, "session_upstream_links");
    drop(raw);
    let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
    std::fs::write(&transcript, human).unwrap();
    let events = fx.store.scan_upstream(T0).unwrap();
    assert_eq!(
        events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        [2],
        "the readable link is still scanned"
    );
    assert_eq!(events[0].session_key, T);
    fx.assert_no_error();
    fx.store.close();
    let raw = Connection::open(&path).unwrap();
    let links_after = snapshot(&raw, "session_upstream_links");
    // The readable link moved its offset; the two unreadable ones are as written.
    assert_eq!(links_after[1..], links_before[1..]);
}

#[test]
fn watch_and_a_spawn_edge_replace_an_inert_row_of_their_pair() {
    let dir = tempfile::tempdir().unwrap();
    let path = built(&dir, CURSORS, "unknown provenance");
    let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
    // The pair is named explicitly: the row becomes a cursor seeded at T's head (1).
    assert!(fx
        .store
        .watch("agent:main:w2", T, Provenance::AmbientGroup, T0 + 5)
        .unwrap());
    let c = fx.cursor("agent:main:w2", T).unwrap();
    assert_eq!(
        (
            c.last_seen,
            c.notified,
            c.material,
            c.provenance,
            c.updated_at
        ),
        (1, 1, 1, Provenance::AmbientGroup, T0 + 5)
    );
    // An unknown provenance under a spawn edge becomes explicit.
    fx.conn()
        .execute(
            "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:w3', ?1, 0, 0, 0, 'bogus', ?2)",
            rusqlite::params![T, T0],
        )
        .unwrap();
    let mut spawn = input(T, "child_spawned");
    spawn.watchers = vec!["agent:main:w3".into()];
    let seq = fx.record(spawn, T0).sequence;
    let c = fx.cursor("agent:main:w3", T).unwrap();
    assert_eq!(
        (c.last_seen, c.notified, c.material, c.provenance),
        (seq, seq, seq, Provenance::Explicit)
    );
    fx.assert_no_error();
}
