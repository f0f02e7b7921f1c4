//! Upstream links in OpenClaw's table (semantics.md#storage, semantics.md#upstream): on the file OpenClaw 2026.9.6 wrote
//! (tests/fixtures/openclaw-2026.9.6.sqlite, made by scripts/openclaw-fixture.mjs with
//! OpenClaw's own code), on a fresh file, and on the store's own earlier table.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use serde_json::{json, Value};
use session_awareness_core::upstream::links::EXTRA_COLUMNS;
use session_awareness_core::upstream::{AdoptInput, RemoteCheck};
use session_awareness_core::{Error, ErrorSink, EventKind, Hooks, Options, Provenance, Store};

const MAIN: &str = "agent:main:main";
/// The links OpenClaw wrote into the fixture.
const OC_LOCAL: &str = "agent:main:claude:fixture-local";
const OC_REMOTE: &str = "agent:main:claude:fixture-remote";
const OC_REMOTE_MARKER: &str = "c0ffee00-0000-4000-8000-000000000003";
/// The highest sequence in the fixture.
const OC_HEAD: i64 = 13;
const THREAD: &str = "0d9e8f7a-6b5c-4d3e-8f21-a0b1c2d3e4f5";

/// An hour after OpenClaw's last write to the fixture: the store's retention (30 days) keeps
/// OpenClaw's rows, as it would in a gateway that moved to the store that day.
fn now() -> i64 {
    let report = fixture_json();
    let rows = report["rows"].as_object().unwrap();
    let last = rows
        .values()
        .flat_map(|t| t.as_array().unwrap())
        .filter_map(|r| r.get("updated_at").or_else(|| r.get("occurred_at")))
        .filter_map(Value::as_i64)
        .max()
        .unwrap();
    last + 3_600_000
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openclaw-2026.9.6.sqlite")
}

fn fixture_json() -> Value {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openclaw-2026.9.6.json"),
    )
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

#[derive(Default)]
struct Errors(Mutex<Vec<String>>);
impl ErrorSink for Errors {
    fn report(&self, error: Error) {
        self.0.lock().unwrap().push(error.code().to_owned());
    }
}

struct Dir {
    dir: tempfile::TempDir,
    db: PathBuf,
    errors: Arc<Errors>,
}

impl Dir {
    /// A temp dir with a database: a copy of OpenClaw's file, or none yet (a fresh one).
    fn new(openclaw: bool) -> Dir {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.sqlite");
        if openclaw {
            std::fs::copy(fixture(), &db).unwrap();
        }
        Dir {
            dir,
            db,
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

    /// A raw connection; only while no store has the file open.
    fn conn(&self) -> Connection {
        Connection::open(&self.db).unwrap()
    }

    fn transcript(&self) -> PathBuf {
        self.dir.path().join(format!("{THREAD}.jsonl"))
    }
}

fn human(text: &str) -> String {
    json!({"type": "user", "message": {"role": "user", "content": text}}).to_string() + "\n"
}

fn append(path: &Path, s: &str) {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(s.as_bytes()).unwrap();
}

fn human_item(uuid: &str, text: &str) -> Value {
    json!({"uuid": uuid, "type": "user", "message": {"role": "user", "content": text}})
}

/// (name, type, notnull, default, pk) of every column of the link table.
fn table_info(conn: &Connection) -> Vec<(String, String, i64, Option<String>, i64)> {
    let mut stmt = conn
        .prepare("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info('session_upstream_links')")
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

/// Every link row as (session_key, agent_id, catalog_id, host_id, thread_id, upstream_kind,
/// upstream_ref_json, last_marker_json, last_scanned_at, failure_count, own_messages_json).
type Row = (
    String,
    String,
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<String>,
);

fn rows(conn: &Connection) -> Vec<Row> {
    let mut stmt = conn
        .prepare(
            "SELECT session_key, agent_id, catalog_id, host_id, thread_id, upstream_kind, \
             upstream_ref_json, last_marker_json, last_scanned_at, failure_count, own_messages_json \
             FROM session_upstream_links ORDER BY session_key, agent_id",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
                r.get(9)?,
                r.get(10)?,
            ))
        })
        .unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

#[test]
fn a_fresh_file_gets_openclaws_link_table_plus_two_bare_columns() {
    let fresh = Dir::new(false);
    fresh.open().close();
    let theirs = Dir::new(true);
    let mut want = table_info(&theirs.conn());
    for (name, ty) in EXTRA_COLUMNS {
        want.push((name.to_owned(), ty.to_owned(), 0, None, 0));
    }
    assert_eq!(table_info(&fresh.conn()), want);
    let index: String = fresh
        .conn()
        .query_row(
            "SELECT sql FROM sqlite_master WHERE name = 'idx_session_upstream_links_catalog_id'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(index.contains("ON session_upstream_links(catalog_id)"));
}

#[test]
fn opening_openclaws_file_adds_only_the_two_columns_and_keeps_its_rows() {
    let d = Dir::new(true);
    let before = table_info(&d.conn());
    let rows_before = rows_by_openclaw(&d.conn());
    let tables = |c: &Connection| -> i64 {
        c.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    let n = tables(&d.conn());
    d.open().close();
    let conn = d.conn();
    let after = table_info(&conn);
    assert_eq!(after[..before.len()], before[..]);
    let added: Vec<&str> = after[before.len()..].iter().map(|c| c.0.as_str()).collect();
    assert_eq!(added, ["failure_count", "own_messages_json"]);
    assert_eq!(rows_by_openclaw(&conn), rows_before);
    assert_eq!(tables(&conn), n);
    let uv: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(uv, 18);
    // And the rows are the ones OpenClaw reported when it wrote them.
    let report = fixture_json();
    let theirs: Vec<Value> = report["rows"]["session_upstream_links"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        serde_json::to_value(&rows_before).unwrap(),
        json!(theirs
            .iter()
            .map(|r| json!([
                r["session_key"],
                r["agent_id"],
                r["catalog_id"],
                r["host_id"],
                r["thread_id"],
                r["upstream_kind"],
                r["upstream_ref_json"],
                r["last_marker_json"],
                r["last_scanned_at"],
                r["created_at"],
                r["updated_at"]
            ]))
            .collect::<Vec<_>>())
    );
}

/// The link rows in OpenClaw's own columns only.
fn rows_by_openclaw(conn: &Connection) -> Vec<Value> {
    let mut stmt = conn
        .prepare(
            "SELECT session_key, agent_id, catalog_id, host_id, thread_id, upstream_kind, \
             upstream_ref_json, last_marker_json, last_scanned_at, created_at, updated_at \
             FROM session_upstream_links ORDER BY session_key, agent_id",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            let mut v = Vec::new();
            for i in 0..11 {
                v.push(match r.get_ref(i)? {
                    rusqlite::types::ValueRef::Null => Value::Null,
                    rusqlite::types::ValueRef::Integer(n) => json!(n),
                    rusqlite::types::ValueRef::Text(t) => json!(String::from_utf8_lossy(t)),
                    _ => unreachable!("the link table is STRICT TEXT and INTEGER"),
                });
            }
            Ok(Value::Array(v))
        })
        .unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

#[test]
fn the_store_reads_the_links_openclaw_wrote() {
    let d = Dir::new(true);
    let store = d.open();
    let local = store.upstream_link(OC_LOCAL).unwrap().unwrap();
    assert_eq!(local.source, "claude");
    assert_eq!(local.host_id, "gateway:local");
    assert_eq!(local.upstream_kind, "claude-cli");
    assert_eq!(
        local.transcript_path.as_deref(),
        Some("/home/fixture/.claude/projects/-srv-demo/6f1c2a9e-0b7d-4e55-9a51-3c2d1e0f4a10.jsonl")
    );
    assert_eq!(local.remote_id, None);
    assert_eq!(local.scan_offset, 4096);
    assert_eq!((local.failure_count, local.own_messages.len()), (0, 0));
    let remote = store.upstream_link(OC_REMOTE).unwrap().unwrap();
    assert_eq!(remote.host_id, "node:fixture-node");
    assert_eq!(
        remote.remote_id.as_deref(),
        Some("8a3b4c5d-6e7f-4081-92a3-b4c5d6e7f809")
    );
    assert_eq!(remote.transcript_path, None);
    assert_eq!(
        remote.remote_cursor,
        Some(format!("uuid:{OC_REMOTE_MARKER}"))
    );
}

/// adopt + JSONL scan + checkUpstream on one file; `base` is the file's highest sequence.
fn adopt_scan_and_check(d: &Dir, base: i64) {
    let t0 = now();
    const LOCAL: &str = "agent:main:claude:adopted-local";
    const REMOTE: &str = "agent:main:claude:adopted-remote";
    let store = d.open();
    let transcript = d.transcript();
    append(&transcript, &human("before adoption"));
    let history = std::fs::metadata(&transcript).unwrap().len() as i64;
    let local = AdoptInput {
        source: "claude".into(),
        transcript_path: Some(transcript.to_str().unwrap().into()),
        ..Default::default()
    };
    let ev = store.adopt(LOCAL, local, t0).unwrap().unwrap();
    assert_eq!((ev.sequence, ev.kind), (base + 1, EventKind::Adopted));
    assert!(store.watch(MAIN, LOCAL, Provenance::Explicit, t0).unwrap());
    append(&transcript, &human("typed in the terminal"));
    let end = std::fs::metadata(&transcript).unwrap().len() as i64;
    let evs = store.scan_upstream(t0 + 1).unwrap();
    let mine: Vec<_> = evs.iter().filter(|e| e.session_key == LOCAL).collect();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].kind, EventKind::HumanDirectMessage);
    assert_eq!(mine[0].summary, "human message via claude");

    let remote = AdoptInput {
        source: "claude".into(),
        remote_id: Some(THREAD.into()),
        host_id: Some("node:n1".into()),
        ..Default::default()
    };
    store.adopt(REMOTE, remote, t0 + 2).unwrap().unwrap();
    let seen = vec![human_item("u-1", "old")];
    assert!(store
        .check_upstream(REMOTE, RemoteCheck::Found(seen.clone()), t0 + 3)
        .unwrap()
        .is_none());
    let mut newer = seen;
    newer.push(human_item("u-2", "new from the node"));
    let ev = store
        .check_upstream(REMOTE, RemoteCheck::Found(newer), t0 + 4)
        .unwrap()
        .unwrap();
    assert_eq!(ev.kind, EventKind::HumanDirectMessage);
    store.close();

    let conn = d.conn();
    let all = rows(&conn);
    let row = |k: &str| all.iter().find(|r| r.0 == k).unwrap().clone();
    assert_eq!(
        row(LOCAL),
        (
            LOCAL.into(),
            "main".into(),
            "claude".into(),
            "gateway:local".into(),
            THREAD.into(),
            "claude-cli".into(),
            Some(json!({ "filePath": transcript.to_str().unwrap() }).to_string()),
            Some(format!("{{\"offset\":{end}}}")),
            Some(t0 + 1),
            Some(0),
            Some("[]".into())
        )
    );
    assert!(end > history);
    assert_eq!(
        row(REMOTE),
        (
            REMOTE.into(),
            "main".into(),
            "claude".into(),
            "node:n1".into(),
            THREAD.into(),
            "claude-cli".into(),
            Some(json!({ "nodeId": "n1", "threadId": THREAD }).to_string()),
            Some("{\"uuid\":\"u-2\"}".into()),
            Some(t0 + 4),
            Some(0),
            Some("[]".into())
        )
    );
    drop(conn);

    // Three failed checks: upstream_missing, and the link is gone.
    let store = d.open();
    for i in 0..2 {
        assert!(store
            .check_upstream(REMOTE, RemoteCheck::Missing, t0 + 10 + i)
            .unwrap()
            .is_none());
    }
    let gone = store
        .check_upstream(REMOTE, RemoteCheck::Missing, t0 + 12)
        .unwrap()
        .unwrap();
    assert_eq!(gone.kind, EventKind::UpstreamMissing);
    assert_eq!(gone.summary, "upstream missing via claude");
    assert!(store.upstream_link(REMOTE).unwrap().is_none());
    assert!(store.upstream_link(LOCAL).unwrap().is_some());
    store.close();
    assert!(d.errors.0.lock().unwrap().is_empty());
}

#[test]
fn adopt_scan_and_check_on_a_fresh_file() {
    adopt_scan_and_check(&Dir::new(false), 0);
}

#[test]
fn adopt_scan_and_check_on_openclaws_file() {
    let d = Dir::new(true);
    // The transcript of OpenClaw's own local link is not on this machine: that link fails
    // the scans (`adopt_scan_and_check` looks at its own sessions only), and its rows stay.
    adopt_scan_and_check(&d, OC_HEAD);
}

#[test]
fn openclaws_links_are_scanned_and_checked_by_their_markers() {
    let t0 = now();
    let d = Dir::new(true);
    let store = d.open();
    // OpenClaw's remote marker is honoured: only the item after it is new.
    let items = vec![
        human_item("c0ffee00-0000-4000-8000-000000000002", "older"),
        human_item(OC_REMOTE_MARKER, "seen by OpenClaw"),
        human_item("c0ffee00-0000-4000-8000-000000000004", "new"),
    ];
    let ev = store
        .check_upstream(OC_REMOTE, RemoteCheck::Found(items), t0)
        .unwrap()
        .unwrap();
    assert_eq!(ev.sequence, OC_HEAD + 1);
    assert_eq!(
        serde_json::from_str::<Value>(ev.payload_json.as_deref().unwrap()).unwrap(),
        json!({ "turns": 1 })
    );
    // OpenClaw's local transcript is absent here: three scans, then upstream_missing.
    assert!(store.scan_upstream(t0 + 1).unwrap().is_empty());
    assert!(store.scan_upstream(t0 + 2).unwrap().is_empty());
    let evs = store.scan_upstream(t0 + 3).unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(
        (evs[0].session_key.as_str(), evs[0].kind, evs[0].sequence),
        (OC_LOCAL, EventKind::UpstreamMissing, OC_HEAD + 2)
    );
    assert!(store.upstream_link(OC_LOCAL).unwrap().is_none());
    store.close();
    let left = rows(&d.conn());
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].0, OC_REMOTE);
    assert_eq!(
        left[0].7.as_deref(),
        Some("{\"uuid\":\"c0ffee00-0000-4000-8000-000000000004\"}")
    );
}

/// A link insert refused by a trigger: `adopt` leaves no event, no head and no link.
fn adopt_is_one_transaction(d: &Dir, base: i64) {
    let t0 = now();
    const KEY: &str = "agent:main:claude:refused";
    d.open().close();
    d.conn()
        .execute_batch(
            "CREATE TRIGGER refuse_links BEFORE INSERT ON session_upstream_links \
             BEGIN SELECT RAISE(ABORT, 'refused'); END",
        )
        .unwrap();
    let before = rows(&d.conn());
    let store = d.open();
    let err = store
        .adopt(
            KEY,
            AdoptInput {
                source: "claude".into(),
                remote_id: Some(THREAD.into()),
                ..Default::default()
            },
            t0,
        )
        .unwrap_err();
    assert_eq!(err.code(), "ERR_DB");
    assert_eq!(store.state_version(KEY, None).unwrap(), 0);
    assert!(store
        .changes_since(KEY, 0.0, None, None)
        .unwrap()
        .events
        .is_empty());
    assert!(store.upstream_link(KEY).unwrap().is_none());
    // The next event takes the next sequence: nothing was committed in between.
    let ev = store
        .record(
            session_awareness_core::RecordInput {
                session_key: KEY.into(),
                kind: "compacted".into(),
                actor_type: "system".into(),
                summary: "after".into(),
                ..Default::default()
            },
            t0,
        )
        .unwrap()
        .unwrap();
    assert_eq!(ev.sequence, base + 1);
    store.close();
    assert_eq!(rows(&d.conn()), before);
}

#[test]
fn adopt_is_one_transaction_on_openclaws_file() {
    adopt_is_one_transaction(&Dir::new(true), OC_HEAD);
}

#[test]
fn adopt_is_one_transaction_on_a_fresh_file() {
    adopt_is_one_transaction(&Dir::new(false), 0);
}

/// The store's earlier table: primary key `session_key`, its own columns.
const EARLIER: &str = "
CREATE TABLE session_upstream_links (
    session_key TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    source TEXT NOT NULL,
    transcript_path TEXT,
    remote_id TEXT,
    scan_offset INTEGER NOT NULL DEFAULT 0,
    failure_count INTEGER NOT NULL DEFAULT 0,
    own_messages_json TEXT NOT NULL DEFAULT '[]',
    remote_cursor TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
INSERT INTO session_upstream_links VALUES
    ('agent:main:old-local', 'main', 'claude', '/srv/t/abc.jsonl', NULL, 120, 1, '[\"hi\"]', NULL, 5, 6),
    ('agent:main:old-remote', 'main', 'claude', NULL, 'r-9', 0, 0, '[]', 'uuid:u-7', 5, 6),
    ('agent:main:old-baseline', 'main', 'claude', NULL, 'r-8', 0, 2, '[]', '', 5, 6);
";

#[test]
fn the_stores_earlier_link_table_is_upgraded_additively() {
    let t0 = now();
    let d = Dir::new(false);
    d.conn().execute_batch(EARLIER).unwrap();
    let store = d.open();
    let local = store
        .upstream_link("agent:main:old-local")
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            local.source.as_str(),
            local.host_id.as_str(),
            local.transcript_path.as_deref(),
            local.scan_offset,
            local.failure_count,
            local.own_messages.clone()
        ),
        (
            "claude",
            "gateway:local",
            Some("/srv/t/abc.jsonl"),
            120,
            1,
            vec!["hi".to_owned()]
        )
    );
    let remote = store
        .upstream_link("agent:main:old-remote")
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            remote.host_id.as_str(),
            remote.remote_id.as_deref(),
            remote.remote_cursor.as_deref()
        ),
        ("remote", Some("r-9"), Some("uuid:u-7"))
    );
    let baseline = store
        .upstream_link("agent:main:old-baseline")
        .unwrap()
        .unwrap();
    assert_eq!(baseline.remote_cursor.as_deref(), Some(""));
    // Writes keep working on the earlier primary key and its NOT NULL `source`.
    let items = vec![human_item("u-7", "seen"), human_item("u-8", "new")];
    let ev = store
        .check_upstream("agent:main:old-remote", RemoteCheck::Found(items), t0)
        .unwrap()
        .unwrap();
    assert_eq!(ev.kind, EventKind::HumanDirectMessage);
    store
        .adopt(
            "agent:main:old-local",
            AdoptInput {
                source: "codex".into(),
                remote_id: Some("r-10".into()),
                ..Default::default()
            },
            t0,
        )
        .unwrap()
        .unwrap();
    store.close();
    let conn = d.conn();
    let (source, catalog, marker): (String, String, Option<String>) = conn
        .query_row(
            "SELECT source, catalog_id, last_marker_json FROM session_upstream_links \
             WHERE session_key = 'agent:main:old-local'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((source.as_str(), catalog.as_str()), ("codex", "codex"));
    // A new remote link has no marker until its first check.
    assert_eq!(marker, None);
    let n: i64 = conn
        .query_row("SELECT count(*) FROM session_upstream_links", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(n, 3);
}

#[test]
fn members_the_store_does_not_use_survive_and_uuidless_items_get_an_identity() {
    let t0 = now();
    let d = Dir::new(true);
    // OpenClaw's local link gets a transcript on this machine and members of its own.
    let transcript = d.transcript();
    append(&transcript, &human("already seen"));
    let seen = std::fs::metadata(&transcript).unwrap().len();
    d.conn()
        .execute(
            "UPDATE session_upstream_links SET upstream_ref_json = ?1, last_marker_json = ?2 \
             WHERE session_key = ?3",
            [
                json!({ "filePath": transcript.to_str().unwrap(), "project": "demo" }).to_string(),
                json!({ "size": seen, "note": "kept" }).to_string(),
                OC_LOCAL.to_owned(),
            ],
        )
        .unwrap();
    let store = d.open();
    append(&transcript, &human("new"));
    let end = std::fs::metadata(&transcript).unwrap().len();
    let evs = store.scan_upstream(t0).unwrap();
    assert_eq!(
        evs.iter()
            .map(|e| e.session_key.as_str())
            .collect::<Vec<_>>(),
        [OC_LOCAL]
    );
    // A remote item without a uuid is remembered by a hash of its JSON.
    let plain = json!({"type": "user", "message": {"role": "user", "content": "no uuid"}});
    store
        .check_upstream(OC_REMOTE, RemoteCheck::Found(vec![plain]), t0)
        .unwrap();
    store.close();
    let all = rows(&d.conn());
    let local = all.iter().find(|r| r.0 == OC_LOCAL).unwrap();
    assert_eq!(
        local.6.as_deref(),
        Some(&*json!({ "filePath": transcript.to_str().unwrap(), "project": "demo" }).to_string())
    );
    assert_eq!(
        local.7.as_deref(),
        Some(&*json!({ "note": "kept", "offset": end }).to_string())
    );
    let remote = all.iter().find(|r| r.0 == OC_REMOTE).unwrap();
    let marker: Value = serde_json::from_str(remote.7.as_deref().unwrap()).unwrap();
    let identity = marker["identity"].as_str().unwrap();
    assert_eq!(marker.as_object().unwrap().len(), 1);
    assert!(
        identity.starts_with("fnv:") && identity.len() == 20,
        "{identity}"
    );
}
