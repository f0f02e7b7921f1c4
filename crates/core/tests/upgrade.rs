//! semantics.md#storage, the edges of the additive upgrade: a fresh file has OpenClaw 2026.9.6's tables and
//! index names, indexes are never duplicated, a foreign table is refused untouched, two
//! processes may upgrade one file at once, and every real OpenClaw file in the fixtures
//! folder opens and works.

mod common;
mod schema_facts;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use common::*;
use rusqlite::Connection;
use schema_facts::*;
use session_awareness_core::{schema, Hooks, Options, Store};

/// A file in `dir` holding the statements of fixture `file` and then `extra`.
fn file_of(dir: &Path, file: &str, extra: &str) -> PathBuf {
    let path = dir.join("openclaw.sqlite");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(&fixture_sql(file)).unwrap();
    conn.execute_batch(extra).unwrap();
    path
}

/// The SQL of a `sqlite_master` object with its whitespace collapsed.
fn object_sql(conn: &Connection, name: &str) -> String {
    let sql: String = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE name = ?1",
            [name],
            |r| r.get(0),
        )
        .unwrap();
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn a_fresh_file_has_openclaw_2026_9_6_tables_and_index_names() {
    let fx = Fixture::file();
    let ours = fx.conn();
    let theirs = Connection::open_in_memory().unwrap();
    theirs
        .execute_batch(&fixture_sql("5-openclaw-2026.9.6.sql"))
        .unwrap();
    for table in SHARED {
        assert_eq!(
            column_facts(&ours, table),
            column_facts(&theirs, table),
            "{table}"
        );
        assert_eq!(
            object_sql(&ours, table),
            object_sql(&theirs, table),
            "{table}"
        );
    }
    let names = [
        "idx_session_state_events_session_sequence",
        "idx_session_state_events_time",
        "idx_session_watch_cursors_target",
    ];
    for index in names {
        assert_eq!(
            object_sql(&ours, index),
            object_sql(&theirs, index),
            "{index}"
        );
    }
    let keys = index_keys(&ours);
    let expected = [
        (names[0], "session_state_events(session_key, sequence DESC)"),
        (
            names[1],
            "session_state_events(occurred_at DESC, sequence DESC)",
        ),
        (names[2], "session_watch_cursors(target_session_key)"),
    ];
    for (name, cols) in expected {
        assert_eq!(keys.get(name).map(String::as_str), Some(cols), "{name}");
    }
    assert_eq!(duplicate_indexes(&ours), Vec::<String>::new());
}

/// The indexes an earlier version of the store created beside OpenClaw's.
const FORMER_INDEXES: &str = "
CREATE INDEX session_state_events_session_sequence
    ON session_state_events (session_key, sequence DESC);
CREATE INDEX session_state_events_occurred
    ON session_state_events (occurred_at DESC, sequence DESC);
CREATE INDEX session_watch_cursors_target ON session_watch_cursors (target_session_key);
";

#[test]
fn the_store_s_former_duplicates_of_openclaw_indexes_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_of(dir.path(), "5-openclaw-2026.9.6.sql", FORMER_INDEXES);
    assert_eq!(
        duplicate_indexes(&Connection::open(&path).unwrap()).len(),
        3
    );
    let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
    let names: Vec<String> = index_keys(&fx.conn())
        .into_keys()
        .filter(|n| !n.starts_with("sqlite_autoindex"))
        .collect();
    assert_eq!(
        names,
        [
            "idx_session_state_events_session_sequence",
            "idx_session_state_events_time",
            "idx_session_upstream_links_catalog_id",
            "idx_session_watch_cursors_target",
        ]
    );
    assert_eq!(duplicate_indexes(&fx.conn()), Vec::<String>::new());
}

#[test]
fn a_file_of_an_earlier_store_keeps_its_indexes_and_gains_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sqlite");
    Connection::open(&path)
        .unwrap()
        .execute_batch(&format!(
            "CREATE TABLE session_state_events (sequence INTEGER PRIMARY KEY AUTOINCREMENT,
                dedupe_key TEXT UNIQUE, session_key TEXT NOT NULL, session_id TEXT,
                agent_id TEXT NOT NULL, kind TEXT NOT NULL, actor_type TEXT NOT NULL,
                actor_id TEXT, run_id TEXT, occurred_at INTEGER NOT NULL, summary TEXT NOT NULL,
                payload_json TEXT) STRICT;
             CREATE TABLE session_watch_cursors (watcher_session_key TEXT NOT NULL,
                target_session_key TEXT NOT NULL, last_seen_sequence INTEGER NOT NULL,
                notified_sequence INTEGER NOT NULL, material_sequence INTEGER NOT NULL,
                provenance TEXT NOT NULL, updated_at INTEGER NOT NULL,
                PRIMARY KEY (watcher_session_key, target_session_key)) STRICT;
             {FORMER_INDEXES}"
        ))
        .unwrap();
    let before = index_keys(&Connection::open(&path).unwrap());
    let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
    let after = index_keys(&fx.conn());
    let shared: Vec<_> = after
        .iter()
        .filter(|(n, _)| !n.contains("upstream") && !n.contains("heads"))
        .collect();
    assert_eq!(shared, before.iter().collect::<Vec<_>>());
    assert_eq!(duplicate_indexes(&fx.conn()), Vec::<String>::new());
    // The store works on it: the appended store path column included.
    assert_eq!(fx.rec(CHILD, "created", None, T0).sequence, 1);
    assert_eq!(
        column_names(&fx.conn(), "session_watch_cursors")
            .last()
            .map(String::as_str),
        Some("watcher_store_path")
    );
}

#[test]
fn an_index_name_held_by_another_object_gets_the_former_name() {
    let dir = tempfile::tempdir().unwrap();
    let sql = fixture_sql("2-strict.sql").replace(
        "CREATE INDEX IF NOT EXISTS idx_session_state_events_time\n  \
         ON session_state_events(occurred_at DESC, sequence DESC);",
        "CREATE TABLE host (x INTEGER);\nCREATE INDEX idx_session_state_events_time ON host(x);",
    );
    let path = dir.path().join("openclaw.sqlite");
    Connection::open(&path)
        .unwrap()
        .execute_batch(&sql)
        .unwrap();
    let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
    let keys = index_keys(&fx.conn());
    assert_eq!(
        keys.get("session_state_events_occurred")
            .map(String::as_str),
        Some("session_state_events(occurred_at DESC, sequence DESC)")
    );
    assert_eq!(
        keys.get("idx_session_state_events_time")
            .map(String::as_str),
        Some("host(x)")
    );
}

#[test]
fn a_foreign_table_of_the_same_name_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.sqlite");
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TABLE session_watch_cursors (session_id TEXT PRIMARY KEY,
                last_seq INTEGER NOT NULL DEFAULT 0, updated_at TEXT NOT NULL);
             INSERT INTO session_watch_cursors VALUES ('s1', 4, '2026-11-30');
             PRAGMA user_version = 7;",
        )
        .unwrap();
    let before = Snapshot::take(&Connection::open(&path).unwrap());
    let bytes = std::fs::read(&path).unwrap();
    let err = Store::open(path.to_str().unwrap(), Options::default(), Hooks::default())
        .err()
        .expect("refused");
    assert_eq!(err.code(), "ERR_FOREIGN_SCHEMA");
    // Not even the journal mode changed: the file is byte for byte as it was, with no WAL.
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    let beside: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(beside, ["other.sqlite"]);
    let conn = Connection::open(&path).unwrap();
    assert_eq!(Snapshot::take(&conn), before);
    assert_eq!(user_version(&conn), 7);
}

#[test]
fn two_connections_upgrading_one_file_at_once_both_succeed() {
    for round in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        let path = file_of(dir.path(), "1-loose.sql", "");
        let path = path.to_str().unwrap().to_owned();
        let start = Arc::new(Barrier::new(2));
        let openers: Vec<_> = (0..2)
            .map(|_| {
                let (path, start) = (path.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    schema::open(&path, 30_000).map(|_| ())
                })
            })
            .collect();
        for opener in openers {
            opener
                .join()
                .unwrap()
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
        let conn = Connection::open(&path).unwrap();
        assert_eq!(
            column_names(&conn, "session_watch_cursors"),
            [
                "watcher_session_key",
                "target_session_key",
                "last_seen_sequence",
                "notified_sequence",
                "material_sequence",
                "updated_at",
                "watcher_store_path",
                "provenance",
            ],
            "round {round}"
        );
        assert_eq!(integrity(&conn), "ok");
    }
}

/// Every `.sqlite` file in the fixtures folder: a file some OpenClaw release wrote.
fn real_files() -> Vec<PathBuf> {
    let dir = fixture_dir().parent().unwrap().to_owned();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sqlite"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_real_openclaw_file_opens_unchanged_but_for_additions_and_works() {
    for original in real_files() {
        let name = original.file_name().unwrap().to_string_lossy().into_owned();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(&name);
        std::fs::copy(&original, &path).unwrap();
        let conn = Connection::open(&path).unwrap();
        let before = Snapshot::take(&conn);
        let version = user_version(&conn);
        let next: i64 = conn
            .query_row(
                "SELECT coalesce(max(seq), 0) + 1 FROM sqlite_sequence \
                 WHERE name = 'session_state_events'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let heads: i64 = conn
            .query_row("SELECT count(*) FROM session_state_heads", [], |r| r.get(0))
            .unwrap();
        drop(conn);

        let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
        let key = "agent:main:subagent:generations-check";
        assert_eq!(fx.rec(key, "created", None, T0).sequence, next, "{name}");
        assert_eq!(fx.store.state_version(key, None).unwrap(), next, "{name}");
        fx.store.sweep(None, T0).unwrap();
        fx.settle();
        let conn = fx.conn();
        use rusqlite::types::Value::{Integer, Text};
        let params = [
            (":session_key", Text(key.into())),
            (":agent_id", Text("main".into())),
            (":after", Integer(0)),
            (":limit", Integer(201)),
            (":one", Integer(1)),
            (":max_rows", Integer(50_000)),
        ];
        let reads: Vec<(String, Vec<String>)> = openclaw_reads()
            .into_iter()
            .map(|(read, sql)| (read, run_read(&conn, &sql, &params)))
            .collect();
        assert_eq!(reads[0].1, [format!("last_sequence={next}")], "{name}");
        assert_eq!(reads[2].0, "listSessionStateEventsSince rows");
        assert_eq!(reads[2].1.len(), 1, "{name}");
        fx.store.close();
        let heads_after: i64 = conn
            .query_row("SELECT count(*) FROM session_state_heads", [], |r| r.get(0))
            .unwrap();
        assert_eq!(heads_after, heads + 1, "{name}");
        Snapshot::take(&conn).assert_additive_over(&before, &[], &[], &name);
        assert_eq!(user_version(&conn), version, "{name}");
        assert_eq!(integrity(&conn), "ok", "{name}");
        assert_eq!(duplicate_indexes(&conn), Vec::<String>::new(), "{name}");
    }
}
