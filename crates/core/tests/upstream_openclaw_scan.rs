//! Upstream links in OpenClaw's table (semantics.md#upstream): `adopt`, the JSONL scan and
//! `checkUpstream` on a fresh file and on the file OpenClaw 2026.9.6 wrote, by OpenClaw's
//! markers, and `adopt` as one transaction.

mod openclaw_links;

use openclaw_links::*;
use serde_json::{json, Value};
use session_awareness_core::upstream::{AdoptInput, RemoteCheck};
use session_awareness_core::{EventKind, Provenance};

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
