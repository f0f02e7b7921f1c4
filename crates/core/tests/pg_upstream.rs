//! Upstream links on a PostgreSQL store (semantics.md#upstream, docs/postgres.md#differences),
//! on a throwaway cluster: adoption writes the event and the link in one transaction, the
//! local scan and the remote checks record exactly as on SQLite, and a local transcript is
//! scanned only by the host that adopted it. Never skipped: without PostgreSQL's server
//! binaries these tests fail with the line saying what to install.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use session_awareness_core::upstream::{AdoptInput, RemoteCheck};
use session_awareness_core::{
    ErrorSink, EventKind, Hooks, HostName, Options, Provenance, SchemaName, StateEvent, Store,
};
use session_awareness_pg_test::Cluster;

mod pg_harness;
mod transcripts;
use pg_harness::cluster;
use transcripts::{append, human, Errors};

const NOW: i64 = 1_800_000_000_000;
const KEY: &str = "agent:main:adopted";
const WATCHER: &str = "agent:main:main";

fn open(c: &Cluster, schema: &str, host: &str, errors: &Arc<Errors>) -> Store {
    let opts = Options {
        pg_schema: SchemaName::parse(schema).unwrap(),
        host_name: HostName::parse(host).unwrap(),
        ..Options::default()
    };
    let hooks = Hooks {
        errors: Some(errors.clone() as Arc<dyn ErrorSink>),
        ..Default::default()
    };
    Store::open(&format!("{}?sslmode=disable", c.url()), opts, hooks).unwrap()
}

fn payload(ev: &StateEvent) -> Value {
    serde_json::from_str(ev.payload_json.as_deref().unwrap()).unwrap()
}

fn local(path: &Path) -> AdoptInput {
    AdoptInput {
        source: "claude".into(),
        transcript_path: Some(path.to_str().unwrap().into()),
        ..Default::default()
    }
}

fn remote(id: &str) -> AdoptInput {
    AdoptInput {
        source: "claude".into(),
        remote_id: Some(id.into()),
        ..Default::default()
    }
}

/// The link row's `scan_host`, `failure_count` and `own_messages_json`, as stored.
fn row(c: &Cluster, schema: &str) -> String {
    c.sql(&format!(
        "SELECT coalesce(scan_host, '-') || '|' || coalesce(failure_count::text, '-') || '|' || \
         coalesce(own_messages_json, '-') FROM {schema}.session_upstream_links"
    ))
    .unwrap()
}

#[test]
fn adopt_writes_the_event_and_the_link_in_one_transaction() {
    let c = cluster("rs-up-adopt");
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("0a1b.jsonl");
    append(&transcript, &human("before adoption"));
    let errors = Arc::default();
    let store = open(&c, "sa_up", "host-a", &errors);
    assert!(store
        .watch(WATCHER, KEY, Provenance::Explicit, NOW)
        .unwrap());

    let ev = store.adopt(KEY, local(&transcript), NOW).unwrap().unwrap();
    assert_eq!(ev.sequence, 1);
    assert_eq!(ev.kind, EventKind::Adopted);
    assert_eq!(ev.summary, "adopted from claude");
    assert_eq!(payload(&ev), json!({"source": "claude"}));
    // Log only: the watcher is not notified.
    assert!(store.peek(WATCHER).unwrap().is_empty());
    let link = store.upstream_link(KEY).unwrap().unwrap();
    assert_eq!(link.agent_id, "main");
    assert_eq!(link.host_id, "gateway:local");
    assert_eq!(link.thread_id, "0a1b");
    assert_eq!(link.scan_offset, human("before adoption").len() as i64);
    assert_eq!(row(&c, "sa_up"), "host-a|0|[]");
    assert_eq!(
        c.sql(
            "SELECT upstream_ref_json || ' ' || last_marker_json FROM sa_up.session_upstream_links"
        )
        .unwrap(),
        format!(
            "{} {}",
            json!({"filePath": transcript.to_str().unwrap()}),
            json!({"offset": link.scan_offset})
        )
    );

    // A link the server refuses takes the event with it.
    c.sql("ALTER TABLE sa_up.session_upstream_links ADD CONSTRAINT no_refused CHECK (catalog_id <> 'refused')")
        .unwrap();
    let refused = AdoptInput {
        source: "refused".into(),
        ..remote("r-1")
    };
    let e = store.adopt("agent:main:other", refused, NOW).unwrap_err();
    assert_eq!(e.code(), "ERR_DB");
    assert_eq!(
        c.sql("SELECT count(*) FROM sa_up.session_state_events WHERE session_key = 'agent:main:other'")
            .unwrap(),
        "0"
    );
    assert_eq!(
        c.sql("SELECT count(*) FROM sa_up.session_upstream_links")
            .unwrap(),
        "1"
    );
    assert!(store.upstream_link("agent:main:other").unwrap().is_none());
    assert_eq!(
        store
            .changes_since("agent:main:other", 0.0, None, None)
            .unwrap()
            .state_version,
        0
    );

    // The store still writes afterwards, and deleteSession drops the link with the session.
    let ev = store.adopt(KEY, remote("r-2"), NOW + 1).unwrap().unwrap();
    // The refused record spent two identity values (the group's try and the event's own,
    // docs/postgres.md#differences): sequences increase, they are not dense.
    assert_eq!(ev.sequence, 4);
    assert_eq!(row(&c, "sa_up"), "-|0|[]");
    store.delete_session(KEY, None).unwrap();
    assert!(store.upstream_link(KEY).unwrap().is_none());
    assert_eq!(
        c.sql("SELECT count(*) FROM sa_up.session_upstream_links")
            .unwrap(),
        "0"
    );
    assert!(errors.0.lock().unwrap().is_empty());
    store.close();
}

#[test]
fn a_local_scan_records_human_turns_once_and_suppresses_the_gateways_echo() {
    let c = cluster("rs-up-scan");
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("s.jsonl");
    append(&transcript, &human("history"));
    let errors = Arc::default();
    let store = open(&c, "sa_scan", "host-a", &errors);
    store.adopt(KEY, local(&transcript), NOW).unwrap().unwrap();
    // Not watched yet: nothing is scanned.
    append(&transcript, &human("unseen"));
    assert!(store.scan_upstream(NOW).unwrap().is_empty());
    assert!(store
        .watch(WATCHER, KEY, Provenance::Explicit, NOW)
        .unwrap());

    let from = human("history").len();
    append(&transcript, &human("typed in the terminal"));
    let to = std::fs::metadata(&transcript).unwrap().len();
    let evs = store.scan_upstream(NOW + 10).unwrap();
    assert_eq!(evs.len(), 1);
    let ev = &evs[0];
    assert_eq!(ev.sequence, 2);
    assert_eq!(ev.kind, EventKind::HumanDirectMessage);
    assert_eq!(ev.summary, "human message via claude");
    assert_eq!(payload(ev), json!({"turns": 2}));
    assert_eq!(
        c.sql("SELECT dedupe_key FROM sa_scan.session_state_events WHERE sequence = 2")
            .unwrap(),
        format!("upstream:{KEY}:main:{from}-{to}")
    );
    let link = store.upstream_link(KEY).unwrap().unwrap();
    assert_eq!(link.scan_offset, to as i64);
    assert_eq!(link.last_scanned_at, Some(NOW + 10));
    assert_eq!(store.peek(WATCHER).unwrap().len(), 1);
    assert!(store.scan_upstream(NOW + 20).unwrap().is_empty());

    // The gateway's own message comes back as an echo: not a human turn.
    store
        .note_own_user_message(KEY, "sent by the gateway", NOW + 30)
        .unwrap();
    assert_eq!(row(&c, "sa_scan"), "host-a|0|[\"sent by the gateway\"]");
    append(&transcript, &human("sent by the gateway"));
    assert!(store.scan_upstream(NOW + 40).unwrap().is_empty());
    assert_eq!(row(&c, "sa_scan"), "host-a|0|[]");
    assert_eq!(
        store.upstream_link(KEY).unwrap().unwrap().scan_offset,
        std::fs::metadata(&transcript).unwrap().len() as i64
    );
    // A session without a link: nothing, no row.
    store
        .note_own_user_message("agent:main:none", "x", NOW)
        .unwrap();
    assert_eq!(
        c.sql("SELECT count(*) FROM sa_scan.session_upstream_links")
            .unwrap(),
        "1"
    );
    assert!(errors.0.lock().unwrap().is_empty());
    store.close();
}

#[test]
fn remote_checks_set_a_baseline_then_count_new_turns_and_three_failures_drop_the_link() {
    let c = cluster("rs-up-remote");
    let errors = Arc::default();
    let store = open(&c, "sa_remote", "host-a", &errors);
    store.adopt(KEY, remote("r-9"), NOW).unwrap().unwrap();
    let item = |uuid: &str, text: &str| json!({"uuid": uuid, "type": "user", "message": {"role": "user", "content": text}});
    let a = item("u-a", "before");
    assert!(store
        .check_upstream(KEY, RemoteCheck::Found(vec![a.clone()]), NOW + 1)
        .unwrap()
        .is_none());
    assert_eq!(
        store
            .upstream_link(KEY)
            .unwrap()
            .unwrap()
            .remote_cursor
            .as_deref(),
        Some("uuid:u-a")
    );
    let ev = store
        .check_upstream(
            KEY,
            RemoteCheck::Found(vec![a, item("u-b", "one"), item("u-c", "two")]),
            NOW + 2,
        )
        .unwrap()
        .unwrap();
    assert_eq!(ev.sequence, 2);
    assert_eq!(ev.kind, EventKind::HumanDirectMessage);
    assert_eq!(payload(&ev), json!({"turns": 2}));
    assert_eq!(
        c.sql("SELECT last_marker_json FROM sa_remote.session_upstream_links")
            .unwrap(),
        json!({"uuid": "u-c"}).to_string()
    );

    assert!(store
        .check_upstream(KEY, RemoteCheck::Unknown, NOW + 3)
        .unwrap()
        .is_none());
    assert!(store
        .check_upstream(KEY, RemoteCheck::Missing, NOW + 4)
        .unwrap()
        .is_none());
    assert_eq!(row(&c, "sa_remote"), "-|1|[]");
    assert!(store
        .check_upstream(KEY, RemoteCheck::Missing, NOW + 5)
        .unwrap()
        .is_none());
    assert_eq!(row(&c, "sa_remote"), "-|2|[]");
    let ev = store
        .check_upstream(KEY, RemoteCheck::Missing, NOW + 6)
        .unwrap()
        .unwrap();
    assert_eq!(ev.sequence, 3);
    assert_eq!(ev.kind, EventKind::UpstreamMissing);
    assert_eq!(ev.summary, "upstream missing via claude");
    assert_eq!(payload(&ev), json!({"source": "claude", "failures": 3}));
    assert!(store.upstream_link(KEY).unwrap().is_none());
    assert_eq!(
        c.sql("SELECT count(*) FROM sa_remote.session_upstream_links")
            .unwrap(),
        "0"
    );
    assert!(store
        .check_upstream(KEY, RemoteCheck::Missing, NOW + 7)
        .unwrap()
        .is_none());
    store.close();
}

#[test]
fn only_the_adopting_host_scans_a_local_transcript_and_counts_its_failures() {
    let c = cluster("rs-up-hosts");
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("s.jsonl");
    append(&transcript, &human("history"));
    let (ea, eb) = (Arc::default(), Arc::default());
    let a = open(&c, "sa_hosts", "host-a", &ea);
    let b = open(&c, "sa_hosts", "host-b", &eb);
    a.adopt(KEY, local(&transcript), NOW).unwrap().unwrap();
    assert!(b.watch(WATCHER, KEY, Provenance::Explicit, NOW).unwrap());
    // Both see the link; only its host scans it.
    assert_eq!(
        b.upstream_link(KEY).unwrap().unwrap().transcript_path,
        Some(transcript.to_str().unwrap().to_owned())
    );
    append(&transcript, &human("typed"));
    assert!(b.scan_upstream(NOW + 1).unwrap().is_empty());
    let evs = a.scan_upstream(NOW + 2).unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].sequence, 2);

    // Host b cannot open a transcript on host a: it never counts that as a failure.
    std::fs::remove_file(&transcript).unwrap();
    for i in 0..4 {
        assert!(b.scan_upstream(NOW + 10 + i).unwrap().is_empty());
    }
    assert_eq!(row(&c, "sa_hosts"), "host-a|0|[]");
    // Host a can: the third failed scan records upstream_missing and drops the link.
    assert!(a.scan_upstream(NOW + 20).unwrap().is_empty());
    assert!(a.scan_upstream(NOW + 21).unwrap().is_empty());
    assert_eq!(row(&c, "sa_hosts"), "host-a|2|[]");
    let evs = a.scan_upstream(NOW + 22).unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].sequence, 3);
    assert_eq!(evs[0].kind, EventKind::UpstreamMissing);
    assert!(b.upstream_link(KEY).unwrap().is_none());
    assert!(ea.0.lock().unwrap().is_empty());
    assert!(eb.0.lock().unwrap().is_empty());
    a.close();
    b.close();
}

#[test]
fn the_background_monitor_scans_on_postgres() {
    let c = cluster("rs-up-monitor");
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("s.jsonl");
    append(&transcript, &human("history"));
    let errors = Arc::default();
    let store = open(&c, "sa_monitor", "host-a", &errors);
    store.adopt(KEY, local(&transcript), NOW).unwrap().unwrap();
    assert!(store
        .watch(WATCHER, KEY, Provenance::Explicit, NOW)
        .unwrap());
    store.start_upstream_monitor(20).unwrap();
    append(&transcript, &human("typed while the monitor runs"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let changes = loop {
        let ch = store.changes_since(KEY, 1.0, None, None).unwrap();
        if !ch.events.is_empty() || Instant::now() > deadline {
            break ch;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(changes.events.len(), 1);
    assert_eq!(changes.state_version, 2);
    store.stop_upstream_monitor();
    assert_eq!(
        c.sql("SELECT kind FROM sa_monitor.session_state_events WHERE sequence = 2")
            .unwrap(),
        "human_direct_message"
    );
    assert!(errors.0.lock().unwrap().is_empty());
    store.close();
}

#[test]
fn imported_local_links_are_scanned_by_the_importing_machine() {
    let c = cluster("rs-up-import");
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("s.jsonl");
    append(&transcript, &human("history"));
    let file = dir.path().join("state.sqlite");
    let sqlite = Store::open(file.to_str().unwrap(), Options::default(), Hooks::default()).unwrap();
    sqlite.adopt(KEY, local(&transcript), NOW).unwrap().unwrap();
    sqlite
        .adopt("agent:main:remote", remote("r-1"), NOW)
        .unwrap()
        .unwrap();
    sqlite.close();
    let url = format!("{}?sslmode=disable", c.url());
    let summary = session_awareness_core::pg_import::import(
        file.to_str().unwrap(),
        &url,
        "sa_import",
        Default::default(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(summary.upstream_links.inserted, 2);
    let machine = HostName::machine();
    assert_eq!(
        c.sql(
            "SELECT string_agg(session_key || '=' || coalesce(scan_host, '-'), ',' ORDER BY session_key) \
             FROM sa_import.session_upstream_links"
        )
        .unwrap(),
        format!("{KEY}={machine},agent:main:remote=-")
    );

    let errors = Arc::default();
    let store = open(&c, "sa_import", machine.as_str(), &errors);
    assert!(store
        .watch(WATCHER, KEY, Provenance::Explicit, NOW)
        .unwrap());
    append(&transcript, &human("typed after the move"));
    let evs = store.scan_upstream(NOW + 1).unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].sequence, 3);
    assert_eq!(payload(&evs[0]), json!({"turns": 1}));
    let other = open(&c, "sa_import", "elsewhere", &errors);
    append(&transcript, &human("again"));
    assert!(other.scan_upstream(NOW + 2).unwrap().is_empty());
    other.close();
    store.close();
}
