//! Upstream monitoring (semantics.md#upstream): adoption, the local transcript scan, remote checks.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};
use session_awareness_core::upstream::{AdoptInput, RemoteCheck};
use session_awareness_core::{ErrorSink, EventKind, Hooks, Options, Provenance, Store};

mod transcripts;
use transcripts::{append, human, Errors};

const NOW: i64 = 1_800_000_000_000;
const KEY: &str = "agent:main:adopted";
const WATCHER: &str = "agent:main:main";

struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
    transcript: PathBuf,
    errors: Arc<Errors>,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.sqlite");
        let transcript = dir.path().join("session.jsonl");
        Fixture {
            db,
            transcript,
            _dir: dir,
            errors: Arc::default(),
        }
    }

    fn open(&self) -> Store {
        let hooks = Hooks {
            errors: Some(self.errors.clone() as Arc<dyn ErrorSink>),
            ..Default::default()
        };
        Store::open(self.db.to_str().unwrap(), Options::default(), hooks).unwrap()
    }

    fn adopt_local(&self, store: &Store) {
        let input = AdoptInput {
            source: "claude".into(),
            transcript_path: Some(self.transcript.to_str().unwrap().into()),
            ..Default::default()
        };
        let ev = store.adopt(KEY, input, NOW).unwrap().unwrap();
        assert_eq!(ev.kind, EventKind::Adopted);
        assert!(store
            .watch(WATCHER, KEY, Provenance::Explicit, NOW)
            .unwrap());
    }
}

fn turns(ev: &session_awareness_core::StateEvent) -> Value {
    serde_json::from_str::<Value>(ev.payload_json.as_deref().unwrap()).unwrap()["turns"].clone()
}

#[test]
fn growth_between_intervals_and_passed_over_lines() {
    let f = Fixture::new();
    append(&f.transcript, &human("before adoption"));
    let store = f.open();
    f.adopt_local(&store);
    assert!(
        store.scan_upstream(NOW).unwrap().is_empty(),
        "history before adoption is not reported"
    );

    append(&f.transcript, &human("hello from the terminal"));
    let evs = store.scan_upstream(NOW).unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].kind, EventKind::HumanDirectMessage);
    assert_eq!(evs[0].summary, "human message via claude");
    assert_eq!(evs[0].actor_type, session_awareness_core::ActorType::Human);
    assert_eq!(turns(&evs[0]), json!(1));
    // Metadata only: the text itself never enters the log.
    assert!(!evs[0].payload_json.as_deref().unwrap().contains("terminal"));

    let passed_over = [
        json!({"type": "assistant", "message": {"role": "assistant", "content": "hi"}}),
        json!({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "content": "ok"}]}}),
        json!({"type": "user", "isMeta": true, "message": {"role": "user", "content": "meta"}}),
        json!({"type": "user", "isSidechain": true, "message": {"role": "user", "content": "side"}}),
        json!({"type": "summary", "summary": "s"}),
        json!({"type": "mystery"}),
    ];
    for v in &passed_over {
        append(&f.transcript, &(v.to_string() + "\n"));
    }
    assert!(store.scan_upstream(NOW).unwrap().is_empty());
    append(&f.transcript, &human("one"));
    append(&f.transcript, &json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "two"}]}}).to_string());
    append(&f.transcript, "\n");
    let evs = store.scan_upstream(NOW).unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(turns(&evs[0]), json!(2));
    let len = std::fs::metadata(&f.transcript).unwrap().len() as i64;
    assert_eq!(store.upstream_link(KEY).unwrap().unwrap().scan_offset, len);
    // The notice reached the watcher.
    assert_eq!(store.peek(WATCHER).unwrap().len(), 1);
}

#[test]
fn partial_last_line_waits_and_malformed_lines_are_reported() {
    let f = Fixture::new();
    let store = f.open();
    f.adopt_local(&store);
    let line = human("typed slowly");
    let (a, b) = line.split_at(10);
    append(&f.transcript, "{not json}\n");
    append(&f.transcript, a);
    assert!(store.scan_upstream(NOW).unwrap().is_empty());
    assert_eq!(
        store.upstream_link(KEY).unwrap().unwrap().scan_offset,
        11,
        "offset stops at the partial line"
    );
    assert_eq!(*f.errors.0.lock().unwrap(), ["ERR_UPSTREAM_PARSE"]);
    append(&f.transcript, b);
    let evs = store.scan_upstream(NOW).unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(
        store.upstream_link(KEY).unwrap().unwrap().scan_offset,
        (11 + line.len()) as i64
    );
    assert_eq!(
        f.errors.0.lock().unwrap().len(),
        1,
        "a malformed line is reported once"
    );
}

#[test]
fn a_three_mib_line_is_classified_across_intervals() {
    let f = Fixture::new();
    let store = f.open();
    f.adopt_local(&store);
    let big = human(&"x".repeat(3 * 1024 * 1024));
    append(&f.transcript, &big);
    append(&f.transcript, &human("after the big one"));
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.extend(store.scan_upstream(NOW).unwrap());
        assert_eq!(
            store.upstream_link(KEY).unwrap().unwrap().scan_offset,
            0,
            "never past unclassified bytes"
        );
    }
    assert!(seen.is_empty());
    let evs = store.scan_upstream(NOW).unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(turns(&evs[0]), json!(2));
    let len = std::fs::metadata(&f.transcript).unwrap().len() as i64;
    assert_eq!(store.upstream_link(KEY).unwrap().unwrap().scan_offset, len);
}

#[test]
fn self_echo_within_and_beyond_the_last_ten() {
    let f = Fixture::new();
    let store = f.open();
    f.adopt_local(&store);
    for i in 0..11 {
        store
            .note_own_user_message(KEY, &format!("own  message\t{i}"), NOW)
            .unwrap();
    }
    assert_eq!(
        store
            .upstream_link(KEY)
            .unwrap()
            .unwrap()
            .own_messages
            .len(),
        10
    );
    // m0 fell out of the last ten: its echo counts as a human turn; m5 is an echo (whitespace
    // and NFC differences aside).
    append(&f.transcript, &human("own message 0"));
    append(&f.transcript, &human("  own message 5 "));
    let evs = store.scan_upstream(NOW).unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(turns(&evs[0]), json!(1));
    // Only echoes: no event.
    append(&f.transcript, &human("own message 7"));
    assert!(store.scan_upstream(NOW).unwrap().is_empty());
    // An echo is consumed: the same text typed again is a human.
    append(&f.transcript, &human("own message 7"));
    assert_eq!(store.scan_upstream(NOW).unwrap().len(), 1);
}

#[test]
fn a_deleted_transcript_is_missing_after_exactly_three_intervals() {
    let f = Fixture::new();
    append(&f.transcript, &human("x"));
    let store = f.open();
    f.adopt_local(&store);
    std::fs::remove_file(&f.transcript).unwrap();
    for expected in 1..=2 {
        assert!(store.scan_upstream(NOW).unwrap().is_empty());
        assert_eq!(
            store.upstream_link(KEY).unwrap().unwrap().failure_count,
            expected
        );
    }
    let evs = store.scan_upstream(NOW).unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].kind, EventKind::UpstreamMissing);
    assert_eq!(evs[0].actor_type, session_awareness_core::ActorType::System);
    assert!(store.upstream_link(KEY).unwrap().is_none());
    assert!(
        store.scan_upstream(NOW).unwrap().is_empty(),
        "no more checks"
    );
    let v = store.state_version(KEY, None).unwrap();
    assert_eq!(v, evs[0].sequence);
    assert_eq!(
        store.peek(WATCHER).unwrap().len(),
        1,
        "upstream_missing notifies"
    );
}

#[test]
fn a_success_resets_the_failure_count() {
    let f = Fixture::new();
    let store = f.open();
    f.adopt_local(&store);
    store.scan_upstream(NOW).unwrap();
    assert_eq!(store.upstream_link(KEY).unwrap().unwrap().failure_count, 1);
    append(&f.transcript, "");
    store.scan_upstream(NOW).unwrap();
    assert_eq!(store.upstream_link(KEY).unwrap().unwrap().failure_count, 0);
}

#[test]
fn unwatched_adopted_sessions_are_not_scanned() {
    let f = Fixture::new();
    let store = f.open();
    let input = AdoptInput {
        source: "claude".into(),
        transcript_path: Some(f.transcript.to_str().unwrap().into()),
        ..Default::default()
    };
    store.adopt(KEY, input, NOW).unwrap();
    append(&f.transcript, &human("hi"));
    assert!(store.scan_upstream(NOW).unwrap().is_empty());
    assert_eq!(store.upstream_link(KEY).unwrap().unwrap().scan_offset, 0);
}

#[test]
fn restart_resumes_at_the_durable_offset_without_re_reporting() {
    let f = Fixture::new();
    let line = human("first");
    {
        let store = f.open();
        f.adopt_local(&store);
        append(&f.transcript, &line);
        append(&f.transcript, &human("second")[..5]);
        assert_eq!(store.scan_upstream(NOW).unwrap().len(), 1);
        store.close();
    }
    let store = f.open();
    assert_eq!(
        store.upstream_link(KEY).unwrap().unwrap().scan_offset,
        line.len() as i64
    );
    append(&f.transcript, &human("second")[5..]);
    let evs = store.scan_upstream(NOW).unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(turns(&evs[0]), json!(1));
    assert!(store.scan_upstream(NOW).unwrap().is_empty());
    let all = store.changes_since(KEY, 0.0, None, None).unwrap().events;
    let kinds: Vec<_> = all
        .iter()
        .map(|e| e.stored().unwrap().kind.as_str())
        .collect();
    assert_eq!(
        kinds,
        ["adopted", "human_direct_message", "human_direct_message"]
    );
}

#[test]
fn a_scan_repeated_after_a_crash_is_idempotent() {
    let f = Fixture::new();
    let store = f.open();
    f.adopt_local(&store);
    append(&f.transcript, &human("once"));
    let first = store.scan_upstream(NOW).unwrap();
    // The event and the offset commit together; the offset can still move back under the
    // store (a copy of the file restored from before the scan).
    let conn = rusqlite::Connection::open(&f.db).unwrap();
    conn.execute(
        "UPDATE session_upstream_links SET last_marker_json = json_set(last_marker_json, '$.offset', 0)",
        [],
    )
    .unwrap();
    let again = store.scan_upstream(NOW).unwrap();
    assert_eq!(again[0].sequence, first[0].sequence);
    assert_eq!(
        store
            .changes_since(KEY, 0.0, None, None)
            .unwrap()
            .events
            .len(),
        2
    );
}

fn item(uuid: &str, v: Value) -> Value {
    let mut v = v;
    v["uuid"] = json!(uuid);
    v
}

fn human_item(uuid: &str, text: &str) -> Value {
    item(
        uuid,
        json!({"type": "user", "message": {"role": "user", "content": text}}),
    )
}

#[test]
fn remote_checks_baseline_window_and_failures() {
    let f = Fixture::new();
    let store = f.open();
    let input = AdoptInput {
        source: "claude".into(),
        remote_id: Some("node-1/abc".into()),
        ..Default::default()
    };
    store.adopt(KEY, input, NOW).unwrap();
    let history = vec![human_item("a", "old")];
    assert_eq!(
        store
            .check_upstream(KEY, RemoteCheck::Found(history.clone()), NOW)
            .unwrap(),
        None,
        "the first check is the baseline"
    );
    let mut items = history.clone();
    items.push(human_item("b", "new one"));
    items.push(item(
        "c",
        json!({"type": "assistant", "message": {"role": "assistant", "content": "x"}}),
    ));
    items.push(human_item("d", "new two"));
    let ev = store
        .check_upstream(KEY, RemoteCheck::Found(items.clone()), NOW)
        .unwrap()
        .unwrap();
    assert_eq!(ev.summary, "human message via claude");
    assert_eq!(ev.payload_json.as_deref(), Some(r#"{"turns":2}"#));
    assert_eq!(
        store
            .check_upstream(KEY, RemoteCheck::Found(items.clone()), NOW)
            .unwrap(),
        None,
        "nothing new"
    );

    // 60 new items, the last 50 of which hold 50 human turns.
    let mut burst = items.clone();
    for i in 0..60 {
        burst.push(human_item(&format!("n{i}"), &format!("burst {i}")));
    }
    let ev = store
        .check_upstream(KEY, RemoteCheck::Found(burst.clone()), NOW)
        .unwrap()
        .unwrap();
    assert_eq!(
        ev.payload_json.as_deref(),
        Some(r#"{"turns":50,"windowOverflow":true}"#)
    );

    // Only `found: false` counts; `unknown` neither fails nor succeeds; a success resets.
    store
        .check_upstream(KEY, RemoteCheck::Missing, NOW)
        .unwrap();
    store
        .check_upstream(KEY, RemoteCheck::Unknown, NOW)
        .unwrap();
    store
        .check_upstream(KEY, RemoteCheck::Missing, NOW)
        .unwrap();
    assert_eq!(store.upstream_link(KEY).unwrap().unwrap().failure_count, 2);
    store
        .check_upstream(KEY, RemoteCheck::Found(burst.clone()), NOW)
        .unwrap();
    assert_eq!(store.upstream_link(KEY).unwrap().unwrap().failure_count, 0);
    for _ in 0..2 {
        assert_eq!(
            store
                .check_upstream(KEY, RemoteCheck::Missing, NOW)
                .unwrap(),
            None
        );
    }
    let gone = store
        .check_upstream(KEY, RemoteCheck::Missing, NOW)
        .unwrap()
        .unwrap();
    assert_eq!(gone.kind, EventKind::UpstreamMissing);
    assert!(store.upstream_link(KEY).unwrap().is_none());
    assert_eq!(
        store
            .check_upstream(KEY, RemoteCheck::Missing, NOW)
            .unwrap(),
        None,
        "no link, no check"
    );
}

#[test]
fn adopting_again_replaces_the_link_and_delete_session_drops_it() {
    let f = Fixture::new();
    let store = f.open();
    f.adopt_local(&store);
    store.note_own_user_message(KEY, "mine", NOW).unwrap();
    store
        .adopt(
            KEY,
            AdoptInput {
                source: "codex".into(),
                remote_id: Some("r".into()),
                ..Default::default()
            },
            NOW,
        )
        .unwrap();
    let link = store.upstream_link(KEY).unwrap().unwrap();
    assert_eq!(
        (
            link.source.as_str(),
            link.transcript_path.as_deref(),
            link.own_messages.len()
        ),
        ("codex", None, 0)
    );
    assert_eq!(
        store
            .adopt(KEY, AdoptInput::default(), NOW)
            .unwrap_err()
            .code(),
        "ERR_INVALID_ARG"
    );
    store.delete_session(KEY, None).unwrap();
    assert!(store.upstream_link(KEY).unwrap().is_none());
}
