//! Upstream links in OpenClaw's table (semantics.md#storage, semantics.md#upstream): on the file OpenClaw 2026.9.6 wrote
//! (tests/fixtures/openclaw-2026.9.6.sqlite, made by scripts/openclaw-fixture.mjs with
//! OpenClaw's own code), on a fresh file, and on the store's own earlier table.
//!
//! The fixture, temp dirs and row readers: `openclaw_links/mod.rs`; adopt, scan and check on
//! these files: `upstream_openclaw_scan.rs`.

mod openclaw_links;

use openclaw_links::*;
use rusqlite::Connection;
use serde_json::{json, Value};
use session_awareness_core::upstream::links::EXTRA_COLUMNS;
use session_awareness_core::upstream::{AdoptInput, RemoteCheck};
use session_awareness_core::EventKind;

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
