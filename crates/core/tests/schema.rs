//! semantics.md#storage Storage: the tables coexist with the host's, `user_version` is never touched, the file
//! is born private, WAL is used on files, and several stores may share one file.

mod common;

use std::time::Duration;

use common::*;
use rusqlite::Connection;
use session_awareness_core::{Hooks, Options, Provenance, Store};

fn user_version(conn: &Connection) -> i64 {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("user_version")
}

fn table_names(conn: &Connection) -> Vec<String> {
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .expect("prepare");
    let rows = stmt.query_map([], |r| r.get(0)).expect("query");
    rows.collect::<rusqlite::Result<_>>().expect("rows")
}

#[test]
fn coexists_with_unrelated_tables_and_leaves_user_version_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openclaw.sqlite");
    {
        let host = Connection::open(&path).unwrap();
        host.execute_batch(
            "CREATE TABLE gateway_sessions (id TEXT PRIMARY KEY, data TEXT NOT NULL);
             INSERT INTO gateway_sessions VALUES ('s1', '{\"a\":1}');
             PRAGMA user_version = 42;",
        )
        .unwrap();
    }
    let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
    assert!(fx
        .store
        .watch(MAIN, CHILD, Provenance::Explicit, T0)
        .unwrap());
    assert_eq!(fx.rec(CHILD, "goal_changed", None, T0).sequence, 1);
    fx.settle();
    fx.store.close();

    let conn = Connection::open(&path).unwrap();
    assert_eq!(user_version(&conn), 42);
    let row: (String, String) = conn
        .query_row("SELECT id, data FROM gateway_sessions", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(row, ("s1".to_owned(), "{\"a\":1}".to_owned()));
    assert_eq!(
        table_names(&conn),
        [
            "gateway_sessions",
            // The store created the shared tables here, so the file is its own and holds the
            // served-watcher leases (semantics.md#processes).
            "session_awareness_served",
            "session_state_events",
            "session_state_heads",
            "session_upstream_links",
            "session_watch_cursors",
            "sqlite_sequence",
        ]
    );
    drop(conn);

    // Opening an existing schema again is additive: nothing changes, user_version neither.
    let again = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
    assert_eq!(again.store.state_version(CHILD, None).unwrap(), 1);
    again.store.close();
    assert_eq!(user_version(&Connection::open(&path).unwrap()), 42);
}

#[test]
fn a_new_file_keeps_user_version_zero() {
    let fx = Fixture::file();
    fx.rec(CHILD, "created", None, T0);
    fx.settle();
    assert_eq!(user_version(&fx.conn()), 0);
}

/// (name, declared type, not null, primary-key position) of each column.
fn columns(conn: &Connection, table: &str) -> Vec<(String, String, bool, i64)> {
    let mut stmt = conn
        .prepare(&format!("PRAGMA table_info({table})"))
        .unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(3)?, r.get(5)?)))
        .unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

fn col(name: &str, ty: &str, not_null: bool, pk: i64) -> (String, String, bool, i64) {
    (name.into(), ty.into(), not_null, pk)
}

/// The key columns (name, descending) of every index on `table`, with its uniqueness.
fn indexes(conn: &Connection, table: &str) -> Vec<(bool, Vec<(String, bool)>)> {
    let mut stmt = conn
        .prepare(&format!("PRAGMA index_list({table})"))
        .unwrap();
    let list: Vec<(String, bool)> = stmt
        .query_map([], |r| Ok((r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let mut out = Vec::new();
    for (name, unique) in list {
        let mut stmt = conn
            .prepare(&format!("PRAGMA index_xinfo(\"{name}\")"))
            .unwrap();
        let cols: Vec<(String, bool)> = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(5)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, bool>(3)?,
                ))
            })
            .unwrap()
            .filter_map(|row| {
                let (key, name, desc) = row.unwrap();
                (key == 1).then(|| (name.unwrap_or_default(), desc))
            })
            .collect();
        out.push((unique, cols));
    }
    out.sort();
    out
}

fn key_cols(list: &[(&str, bool)]) -> Vec<(String, bool)> {
    list.iter().map(|(n, d)| ((*n).to_owned(), *d)).collect()
}

#[test]
fn tables_columns_and_indexes_follow_the_shipped_schema() {
    let fx = Fixture::file();
    let conn = fx.conn();
    assert_eq!(
        columns(&conn, "session_state_events"),
        [
            col("sequence", "INTEGER", false, 1),
            col("dedupe_key", "TEXT", false, 0),
            col("session_key", "TEXT", true, 0),
            col("session_id", "TEXT", false, 0),
            col("agent_id", "TEXT", true, 0),
            col("kind", "TEXT", true, 0),
            col("actor_type", "TEXT", true, 0),
            col("actor_id", "TEXT", false, 0),
            col("run_id", "TEXT", false, 0),
            col("occurred_at", "INTEGER", true, 0),
            col("summary", "TEXT", true, 0),
            col("payload_json", "TEXT", false, 0),
        ]
    );
    let heads = columns(&conn, "session_state_heads");
    let names: Vec<&str> = heads.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "session_key",
            "agent_id",
            "last_sequence",
            "pruned_max_sequence",
            "updated_at"
        ]
    );
    assert_eq!(
        (heads[0].3, heads[1].3),
        (1, 2),
        "primary key (session_key, agent_id)"
    );
    let default: Option<String> = conn
        .query_row(
            "SELECT dflt_value FROM pragma_table_info('session_state_heads') \
             WHERE name = 'pruned_max_sequence'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(default.as_deref(), Some("0"));
    let cursors = columns(&conn, "session_watch_cursors");
    let names: Vec<&str> = cursors.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "watcher_session_key",
            "watcher_store_path",
            "target_session_key",
            "last_seen_sequence",
            "notified_sequence",
            "material_sequence",
            "provenance",
            "updated_at"
        ]
    );
    assert_eq!((cursors[0].3, cursors[2].3), (1, 2));

    for table in [
        "session_state_events",
        "session_state_heads",
        "session_watch_cursors",
        "session_upstream_links",
    ] {
        let sql: String = conn
            .query_row(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get(0),
            )
            .unwrap();
        assert!(sql.trim_end().ends_with("STRICT"), "{table} is STRICT");
        let autoinc = sql.contains("AUTOINCREMENT");
        assert_eq!(autoinc, table == "session_state_events", "{table}");
    }

    assert_eq!(
        indexes(&conn, "session_state_events"),
        [
            (
                false,
                key_cols(&[("occurred_at", true), ("sequence", true)])
            ),
            (
                false,
                key_cols(&[("session_key", false), ("sequence", true)])
            ),
            (true, key_cols(&[("dedupe_key", false)])),
        ]
    );
    assert!(indexes(&conn, "session_watch_cursors")
        .contains(&(false, key_cols(&[("target_session_key", false)]))));
}

#[test]
fn an_existing_state_db_keeps_its_history() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openclaw.sqlite");
    {
        // A state DB written by the shipped gateway, before the upstream-links table existed.
        let host = Connection::open(&path).unwrap();
        host.execute_batch(
            "CREATE TABLE session_state_events (
                sequence INTEGER PRIMARY KEY AUTOINCREMENT, dedupe_key TEXT UNIQUE,
                session_key TEXT NOT NULL, session_id TEXT, agent_id TEXT NOT NULL,
                kind TEXT NOT NULL, actor_type TEXT NOT NULL, actor_id TEXT, run_id TEXT,
                occurred_at INTEGER NOT NULL, summary TEXT NOT NULL, payload_json TEXT) STRICT;
             CREATE TABLE session_state_heads (
                session_key TEXT NOT NULL, agent_id TEXT NOT NULL, last_sequence INTEGER NOT NULL,
                pruned_max_sequence INTEGER NOT NULL DEFAULT 0, updated_at INTEGER NOT NULL,
                PRIMARY KEY (session_key, agent_id)) STRICT;
             CREATE TABLE session_watch_cursors (
                watcher_session_key TEXT NOT NULL, target_session_key TEXT NOT NULL,
                last_seen_sequence INTEGER NOT NULL, notified_sequence INTEGER NOT NULL,
                material_sequence INTEGER NOT NULL, provenance TEXT NOT NULL,
                updated_at INTEGER NOT NULL,
                PRIMARY KEY (watcher_session_key, target_session_key)) STRICT;
             INSERT INTO session_state_events (sequence, session_key, agent_id, kind, actor_type,
                occurred_at, summary) VALUES (7, 'agent:main:subagent:child', 'main',
                'goal_changed', 'human', 1700000000000, 'old goal');
             INSERT INTO session_state_heads VALUES ('agent:main:subagent:child', 'main', 7, 3,
                1700000000000);
             INSERT INTO session_watch_cursors VALUES ('agent:main:main',
                'agent:main:subagent:child', 3, 7, 7, 'explicit', 1700000000000);
             PRAGMA user_version = 9;",
        )
        .unwrap();
    }
    let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
    assert_eq!(fx.store.state_version(CHILD, None).unwrap(), 7);
    let c = fx.store.changes_since(CHILD, 0.0, None, None).unwrap();
    assert_eq!(seqs(&c.events), [7]);
    assert_eq!(c.events[0].summary(), "old goal");
    assert!(c.history_gap, "the shipped watermark 3 is honoured");
    assert_eq!(fx.lnm(MAIN, CHILD), (3, 7, 7));
    // The sequence continues after the shipped history.
    assert_eq!(fx.rec(CHILD, "compacted", None, T0).sequence, 8);
    fx.settle();
    let conn = fx.conn();
    assert!(table_names(&conn).contains(&"session_upstream_links".to_owned()));
    assert_eq!(user_version(&conn), 9);
}

#[test]
fn reopening_the_same_file_keeps_history_and_never_reuses_sequences() {
    let mut fx = Fixture::file();
    for (i, key) in [CHILD, CHILD2, CHILD].iter().enumerate() {
        assert_eq!(fx.rec(key, "created", None, T0).sequence, i as i64 + 1);
    }
    fx.settle();
    fx.reopen();
    assert_eq!(fx.store.state_version(CHILD, None).unwrap(), 3);
    assert_eq!(fx.store.state_version(CHILD2, None).unwrap(), 2);
    assert_eq!(fx.rec(CHILD2, "created", None, T0).sequence, 4);
    // Deleting every row does not make SQLite hand a sequence out again.
    fx.store.delete_session(CHILD, None).unwrap();
    fx.store.delete_session(CHILD2, None).unwrap();
    assert_eq!(fx.sequences(), Vec::<i64>::new());
    fx.reopen();
    assert_eq!(fx.rec(CHILD, "created", None, T0).sequence, 5);
}

#[test]
fn close_is_idempotent_and_later_calls_fail_closed() {
    let fx = Fixture::file();
    fx.rec(CHILD, "created", None, T0);
    fx.settle();
    fx.store.close();
    fx.store.close();
    assert!(fx.store.is_closed());
    let err = fx
        .store
        .record(input(CHILD, "goal_changed"), T0)
        .unwrap_err();
    assert_eq!(err.code(), "ERR_CLOSED");
    assert_eq!(
        fx.store.state_version(CHILD, None).unwrap_err().code(),
        "ERR_CLOSED"
    );
    assert_eq!(
        fx.store
            .watch(MAIN, CHILD, Provenance::Explicit, T0)
            .unwrap_err()
            .code(),
        "ERR_CLOSED"
    );
    assert_eq!(fx.store.drain(MAIN, T0).unwrap_err().code(), "ERR_CLOSED");
    assert_eq!(fx.store.prune(T0).unwrap_err().code(), "ERR_CLOSED");
    assert_eq!(fx.sequences(), [1]);
}

#[test]
fn two_stores_on_one_file_at_once() {
    let a = Fixture::file();
    let b = a.attach();
    assert!(a
        .store
        .watch(MAIN, CHILD, Provenance::Explicit, T0)
        .unwrap());
    let mut got = Vec::new();
    for i in 0..4 {
        let s = if i % 2 == 0 { &a.store } else { &b.store };
        got.push(rec(s, CHILD, "run_completed", None, T0 + i).sequence);
    }
    assert_eq!(got, [1, 2, 3, 4]);
    // Each sees the other's history and heads; the cursor row is shared.
    assert_eq!(a.store.state_version(CHILD, None).unwrap(), 4);
    assert_eq!(
        seqs(
            &b.store
                .changes_since(CHILD, 0.0, None, None)
                .unwrap()
                .events
        ),
        [1, 2, 3, 4]
    );
    assert_eq!(b.rec(CHILD, "goal_changed", None, T0 + 5).sequence, 5);
    assert_eq!(a.lnm(MAIN, CHILD), (0, 5, 5));
    a.settle();
    b.settle();

    // Concurrent writers from two threads: every sequence unique, none lost, no BUSY.
    let (sa, sb) = (a.store.clone(), b.store.clone());
    let spawn = |s: Store, key: &'static str| {
        std::thread::spawn(move || {
            (0..50)
                .map(|i| rec(&s, key, "run_completed", None, T0 + 10 + i).sequence)
                .collect::<Vec<_>>()
        })
    };
    let ta = spawn(sa, CHILD);
    let tb = spawn(sb, CHILD2);
    let mut all: Vec<i64> = ta.join().unwrap();
    let from_b = tb.join().unwrap();
    assert!(all.windows(2).all(|w| w[0] < w[1]));
    assert!(from_b.windows(2).all(|w| w[0] < w[1]));
    all.extend(&from_b);
    all.sort_unstable();
    assert_eq!(all, (6..=105).collect::<Vec<i64>>());
    assert_eq!(a.sequences(), (1..=105).collect::<Vec<i64>>());
    assert_eq!(
        b.store.state_version(CHILD2, None).unwrap(),
        *from_b.last().unwrap()
    );
    a.assert_no_error();
    b.assert_no_error();
}

#[cfg(unix)]
#[test]
fn a_new_file_is_0600_and_a_created_parent_dir_0700() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("state");
    let nested = parent.join("openclaw");
    let path = nested.join("openclaw.sqlite");
    let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
    fx.rec(CHILD, "created", None, T0);
    fx.settle();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&nested), 0o700);
    assert_eq!(mode(&parent), 0o700);
    let wal = nested.join("openclaw.sqlite-wal");
    assert!(wal.exists(), "WAL file beside the database");
    assert_eq!(mode(&wal), 0o600);
}

#[test]
fn a_file_uses_the_wal_journal() {
    let fx = Fixture::file();
    let mode: String = fx
        .conn()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn a_busy_database_fails_the_record_with_err_db_and_writes_nothing() {
    let fx = Fixture::file_with(Options {
        busy_timeout_ms: 0,
        ..opts()
    });
    let blocker = fx.conn();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let err = fx
        .store
        .record(input(CHILD, "goal_changed"), T0)
        .unwrap_err();
    assert_eq!(err.code(), "ERR_DB");
    assert!(err.is_busy());
    blocker.execute_batch("COMMIT").unwrap();
    assert_eq!(fx.store.state_version(CHILD, None).unwrap(), 0);
    assert_eq!(fx.rec(CHILD, "goal_changed", None, T0).sequence, 1);
}

#[test]
fn a_writer_waits_out_another_writer_within_busy_timeout() {
    let fx = Fixture::file_with(Options {
        busy_timeout_ms: 5_000,
        ..opts()
    });
    let blocker = fx.conn();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        blocker.execute_batch("COMMIT").unwrap();
    });
    assert_eq!(fx.rec(CHILD, "goal_changed", None, T0).sequence, 1);
    release.join().unwrap();
}

#[test]
fn in_memory_stores_are_private() {
    let a = Fixture::memory();
    let b = Fixture::memory();
    assert_eq!(a.rec(CHILD, "created", None, T0).sequence, 1);
    assert_eq!(b.store.state_version(CHILD, None).unwrap(), 0);
    assert_eq!(b.rec(CHILD, "created", None, T0).sequence, 1);
}

#[test]
fn options_out_of_range_and_an_empty_path_are_refused() {
    let bad = [
        Options {
            retention_ms: 0,
            ..Options::default()
        },
        Options {
            max_events: 0,
            ..Options::default()
        },
        Options {
            busy_timeout_ms: u32::MAX,
            ..Options::default()
        },
        Options {
            wake_coalesce_ms: 60_001,
            ..Options::default()
        },
    ];
    for o in bad {
        let err = Store::open(":memory:", o, Hooks::default()).err().unwrap();
        assert_eq!(err.code(), "ERR_INVALID_ARG", "{o:?}");
    }
    let err = Store::open("", Options::default(), Hooks::default())
        .err()
        .unwrap();
    assert_eq!(err.code(), "ERR_INVALID_ARG");
    let d = Options::default();
    assert_eq!(
        (
            d.retention_ms,
            d.max_events,
            d.busy_timeout_ms,
            d.wake_coalesce_ms
        ),
        (30 * DAY, 50_000, 30_000, 250)
    );
}

#[test]
fn a_file_that_is_not_sqlite_is_err_not_sqlite_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    let text = "this is a text file, not a database\n".repeat(40);
    std::fs::write(&path, &text).unwrap();
    let p = path.to_str().unwrap();
    let e = Store::open(p, Options::default(), Hooks::default())
        .err()
        .expect("refused");
    assert_eq!(e.code(), "ERR_NOT_SQLITE");
    assert!(e.to_string().contains(p), "{e}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|d| d.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["notes.txt"]);
}

#[test]
fn a_file_error_of_opening_names_the_file() {
    let p = "/proc/nope/x.sqlite";
    let e = Store::open(p, Options::default(), Hooks::default())
        .err()
        .expect("refused");
    assert_eq!(e.code(), "ERR_DB");
    assert!(e.to_string().contains(p), "{e}");
}
