//! The read-only inspection on real files: exact reports, refusals, and proof that the file
//! is left exactly as it was.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use session_awareness_core::inspect::{self, EventRow, InspectedCursor, SessionRow};
use session_awareness_core::system_now;
use session_awareness_core::{CursorRow, Hooks, Notice, Options, Provenance, RecordInput, Store};

const PARENT: &str = "agent:main:main";
const CHILD: &str = "agent:main:subagent:c";
const OPS: &str = "agent:ops:main";

fn input(key: &str, kind: &str, actor: &str, summary: &str, occurred_at: i64) -> RecordInput {
    RecordInput {
        session_key: key.into(),
        kind: kind.into(),
        actor_type: actor.into(),
        summary: summary.into(),
        occurred_at: Some(occurred_at as f64),
        ..Default::default()
    }
}

/// What the file system says about the database and its companions.
#[derive(Debug, PartialEq)]
struct Snapshot {
    bytes: Vec<u8>,
    modified: SystemTime,
    wal: bool,
    shm: bool,
}

fn snapshot(path: &Path) -> Snapshot {
    let companion = |suffix: &str| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        PathBuf::from(p).exists()
    };
    // The bytes are read by another process: a handle of this process on a file a store holds
    // is a foreign handle (its close would drop the store's locks), and the store's guard,
    // scanning on a background thread, may see it and refuse the file from then on.
    let cat = std::process::Command::new("cat")
        .arg(path)
        .output()
        .unwrap();
    assert!(cat.status.success());
    Snapshot {
        bytes: cat.stdout,
        modified: std::fs::metadata(path).unwrap().modified().unwrap(),
        wal: companion("-wal"),
        shm: companion("-shm"),
    }
}

/// A parent watching a child (spawn edge) and another agent's main session; a bare session.
/// Returns the clock used.
fn populate(store: &Store) -> i64 {
    let now = system_now();
    let spawn = RecordInput {
        actor_id: Some(PARENT.into()),
        watchers: vec![PARENT.into()],
        ..input(
            CHILD,
            "child_spawned",
            "agent",
            "child spawned",
            now - 5_000,
        )
    };
    assert_eq!(store.record(spawn, now).unwrap().unwrap().sequence, 1);
    let human = input(
        CHILD,
        "human_direct_message",
        "human",
        "human message",
        now - 4_000,
    );
    assert_eq!(store.record(human, now).unwrap().unwrap().sequence, 2);
    let goal = RecordInput {
        payload: Some(serde_json::json!({ "goal": "ship" })),
        ..input(CHILD, "goal_changed", "human", "goal changed", now - 3_000)
    };
    assert_eq!(store.record(goal, now).unwrap().unwrap().sequence, 3);
    let bare = input(
        "global",
        "created",
        "system",
        "global session",
        now - 10_000,
    );
    assert_eq!(store.record(bare, now).unwrap().unwrap().sequence, 4);
    assert!(store.watch(PARENT, OPS, Provenance::Explicit, now).unwrap());
    let ops = input(
        OPS,
        "human_direct_message",
        "human",
        "ops message",
        now - 1_000,
    );
    assert_eq!(store.record(ops, now).unwrap().unwrap().sequence, 5);
    now
}

#[test]
fn reports_a_closed_database_exactly_and_leaves_it_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sqlite");
    let p = path.to_str().unwrap();
    let store = Store::open(p, Options::default(), Hooks::default()).unwrap();
    let now = populate(&store);
    store.close();
    let before = snapshot(&path);
    assert!(
        !before.wal && !before.shm,
        "a closed WAL database leaves no -wal or -shm"
    );

    let report = inspect::inspect(p).unwrap();

    assert_eq!(snapshot(&path), before);
    assert_eq!(report.path, p);
    assert_eq!(report.file_bytes, before.bytes.len() as u64);
    assert!(!report.wal);
    assert!(report.missing_tables.is_empty());
    assert_eq!(
        (
            report.counts.events,
            report.counts.heads,
            report.counts.cursors,
            report.counts.upstream_links
        ),
        (5, 3, 2, 0)
    );
    assert_eq!(report.last_sequence, 5);
    assert_eq!(
        report.oldest_event,
        Some(EventRow {
            sequence: 4,
            session_key: "global".into(),
            agent_id: "main".into(),
            kind: "created".into(),
            actor_type: "system".into(),
            actor_id: None,
            run_id: None,
            session_id: None,
            occurred_at: now - 10_000,
            summary: "global session".into(),
            payload_json: None,
        })
    );
    let session = |key: &str, agent: &str, version: i64, events: i64, earliest: i64| SessionRow {
        session_key: key.into(),
        agent_id: agent.into(),
        state_version: version,
        pruned_max_sequence: 0,
        updated_at: now,
        retained_events: events,
        earliest_retained_sequence: Some(earliest),
    };
    assert_eq!(
        report.sessions,
        vec![
            session(CHILD, "main", 3, 3, 1),
            session(OPS, "ops", 5, 1, 5),
            session("global", "main", 4, 1, 4),
        ]
    );
    let cursor = |target: &str, l: i64, n: i64, m: i64, version: i64, lag: i64| InspectedCursor {
        row: CursorRow {
            watcher: PARENT.into(),
            target: target.into(),
            last_seen: l,
            notified: n,
            material: m,
            provenance: "explicit".into(),
            scope: None,
            updated_at: now,
        },
        target_version: version,
        lag,
        pending: n != l,
    };
    assert_eq!(
        report.cursors,
        vec![cursor(CHILD, 1, 2, 3, 3, 2), cursor(OPS, 0, 5, 5, 5, 1)]
    );
    assert_eq!(
        report.pending_notices,
        vec![
            Notice::new(PARENT, CHILD, 1, None),
            Notice::new(PARENT, OPS, 0, None)
        ]
    );
    let child = inspect::read_events(p, CHILD, None, 2.0).unwrap();
    assert_eq!(child.events.len(), 1);
    assert_eq!(
        child.events[0].stored().unwrap().payload_json.as_deref(),
        Some(r#"{"goal":"ship"}"#)
    );
    assert_eq!(snapshot(&path), before);
    assert_eq!(
        report.pending_notices[0].text,
        "Session \"agent:main:subagent:c\" changed (other actor). Reconcile before acting: \
         session_status sessionKey \"agent:main:subagent:c\" changesSince 1."
    );
}

#[test]
fn reads_through_the_wal_of_an_open_database_without_writing_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.sqlite");
    let p = path.to_str().unwrap();
    let store = Store::open(p, Options::default(), Hooks::default()).unwrap();
    populate(&store);
    let before = snapshot(&path);
    assert!(before.wal, "an open WAL database has a -wal file");

    let report = inspect::inspect(p).unwrap();
    assert!(report.wal);
    assert_eq!(report.counts.events, 5);
    assert_eq!(report.last_sequence, 5);
    assert_eq!(snapshot(&path).bytes, before.bytes);

    // The gateway keeps working beside the reader, and the reader sees its commits.
    let now = system_now();
    store
        .record(input(CHILD, "run_completed", "agent", "done", now), now)
        .unwrap();
    assert_eq!(inspect::inspect(p).unwrap().counts.events, 6);
    store.close();
}

#[test]
fn refuses_a_missing_file_without_creating_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing.sqlite");
    let err = inspect::inspect(path.to_str().unwrap()).unwrap_err();
    assert_eq!(err.code(), "ERR_DB");
    let err = inspect::read_events(path.to_str().unwrap(), CHILD, None, 0.0).unwrap_err();
    assert_eq!(err.code(), "ERR_DB");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert_eq!(inspect::inspect("").unwrap_err().code(), "ERR_INVALID_ARG");
}

#[test]
fn refuses_what_is_not_a_sqlite_database() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "hello, not a database\n").unwrap();
    let short = dir.path().join("short.bin");
    std::fs::write(&short, b"SQLite").unwrap();
    // The right header, then garbage: SQLite itself says SQLITE_NOTADB.
    let corrupt = dir.path().join("corrupt.sqlite");
    let mut bytes = b"SQLite format 3\0".to_vec();
    bytes.extend((0..4080).map(|i| (i % 251) as u8));
    std::fs::write(&corrupt, &bytes).unwrap();
    for path in [&text, &short, &corrupt, &dir.path().to_path_buf()] {
        let p = path.to_str().unwrap();
        assert_eq!(
            inspect::inspect(p).unwrap_err().code(),
            "ERR_NOT_SQLITE",
            "{p}"
        );
        assert_eq!(
            inspect::read_events(p, CHILD, None, 0.0)
                .unwrap_err()
                .code(),
            "ERR_NOT_SQLITE",
            "{p}"
        );
    }
    assert_eq!(std::fs::read(&corrupt).unwrap(), bytes);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
}

#[test]
fn a_database_without_the_schema_reports_its_missing_tables() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    let foreign = dir.path().join("foreign.sqlite");
    let conn = rusqlite::Connection::open(&foreign).unwrap();
    conn.execute_batch("CREATE TABLE other (x INTEGER); INSERT INTO other VALUES (1);")
        .unwrap();
    drop(conn);
    for path in [&empty, &foreign] {
        let p = path.to_str().unwrap();
        let report = inspect::inspect(p).unwrap();
        assert_eq!(report.missing_tables, inspect::TABLES.to_vec(), "{p}");
        assert_eq!(report.counts, Default::default());
        assert_eq!(
            (
                report.last_sequence,
                report.oldest_event,
                report.sessions.len()
            ),
            (0, None, 0)
        );
        let events = inspect::read_events(p, CHILD, None, 0.0).unwrap();
        assert_eq!((events.state_version, events.events.len()), (0, 0));
    }
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
}

#[test]
fn reads_a_sessions_events_after_a_version_with_the_gap_flag() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.sqlite");
    let p = path.to_str().unwrap();
    let opts = Options {
        max_events: 4,
        ..Options::default()
    };
    let store = Store::open(p, opts, Hooks::default()).unwrap();
    // A prune first, of nothing: it restarts the automatic prune's hour, so the records below
    // start no background prune that would take events before the prune this test counts.
    store.prune(system_now()).unwrap();
    let now = populate(&store);
    // Seven events over a cap of four: the prune keeps the newest four (5, 6, 7 and the
    // bare session's 4) and raises the child's watermark to 3.
    for summary in ["one", "two"] {
        store
            .record(input(CHILD, "run_completed", "agent", summary, now), now)
            .unwrap();
    }
    let pruned = store.prune(now).unwrap();
    assert_eq!(pruned.events_deleted, 3);
    store.close();

    let all = inspect::read_events(p, CHILD, None, 0.0).unwrap();
    assert_eq!(
        (
            all.agent_id.as_str(),
            all.state_version,
            all.pruned_max_sequence
        ),
        ("main", 7, 3)
    );
    assert!(all.history_gap);
    let seqs: Vec<i64> = all.events.iter().map(|e| e.sequence()).collect();
    assert_eq!(seqs, vec![6, 7]);
    assert_eq!(
        (
            all.events[0].stored().unwrap().kind.as_str(),
            all.events[0].summary()
        ),
        ("run_completed", "one")
    );
    assert!(
        inspect::read_events(p, CHILD, None, 2.0)
            .unwrap()
            .history_gap
    );

    let since = inspect::read_events(p, CHILD, Some("main"), 6.0).unwrap();
    assert!(!since.history_gap);
    assert_eq!(since.events.len(), 1);
    assert_eq!(since.events[0].summary(), "two");
    let at_watermark = inspect::read_events(p, CHILD, None, 3.0).unwrap();
    assert!(!at_watermark.history_gap);
    assert_eq!(at_watermark.events.len(), 2);

    let bare_other_agent = inspect::read_events(p, "global", Some("ops"), 0.0).unwrap();
    assert_eq!(
        (
            bare_other_agent.state_version,
            bare_other_agent.events.len()
        ),
        (0, 0)
    );

    for (key, agent, since) in [
        ("", None, 0.0),
        (CHILD, Some("ops"), 0.0),
        (CHILD, Some("Bad Agent"), 0.0),
        (CHILD, None, -1.0),
        (CHILD, None, 0.5),
    ] {
        assert_eq!(
            inspect::read_events(p, key, agent, since)
                .unwrap_err()
                .code(),
            "ERR_INVALID_ARG",
            "{key} {agent:?} {since}"
        );
    }
}

#[test]
fn a_row_without_an_integer_sequence_cannot_be_answered_and_is_a_gap() {
    // semantics.md#reading-foreign-events: a table another program made without OpenClaw's
    // INTEGER PRIMARY KEY can hold a row with no place in the order. The store refuses to open
    // such a table, but `readEvents` reads any file: it answers the rows it can, in order,
    // and says historyGap for the one it cannot.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("foreign.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE session_state_events (sequence, dedupe_key TEXT, session_key TEXT,
           session_id TEXT, agent_id TEXT, kind TEXT, actor_type TEXT, actor_id TEXT,
           run_id TEXT, occurred_at INTEGER, summary TEXT, payload_json TEXT);
         CREATE TABLE session_state_heads (session_key TEXT, agent_id TEXT, last_sequence INTEGER,
           pruned_max_sequence INTEGER, updated_at INTEGER);
         INSERT INTO session_state_heads VALUES ('agent:main:t', 'main', 3, 0, 1);
         INSERT INTO session_state_events VALUES
           (1, NULL, 'agent:main:t', NULL, 'main', 'created', 'system', NULL, NULL, 1, 'a', NULL),
           ('two', NULL, 'agent:main:t', NULL, 'main', 'created', 'system', NULL, NULL, 1, 'b', NULL),
           (3, NULL, 'agent:main:t', NULL, 'main', 'created', 'system', NULL, NULL, 1, 'c', NULL);",
    )
    .unwrap();
    drop(conn);
    let r = inspect::read_events(path.to_str().unwrap(), "agent:main:t", None, 0.0).unwrap();
    let seqs: Vec<i64> = r.events.iter().map(|e| e.sequence()).collect();
    assert_eq!(seqs, [1, 3]);
    assert!(r.history_gap);
    let clean = inspect::read_events(path.to_str().unwrap(), "agent:main:t", None, 3.0).unwrap();
    // The text sequence sorts after every integer (SQLite's order), so it is after 3 too.
    assert!(clean.events.is_empty() && clean.history_gap);
}
