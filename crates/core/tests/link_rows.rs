//! The link table's rows in OpenClaw's terms (`Store::link_row`, `watched_link_rows`,
//! `upsert_link_row`, `set_link_marker`, `delete_link_row`), with OpenClaw 2026.9.6's upsert
//! rule: a changed source (thread, host, kind or reference) takes the new marker and forgets
//! its last scan; an unchanged one keeps both.

mod common;

use common::*;
use session_awareness_core::upstream::LinkRow;
use session_awareness_core::Provenance;

fn link(key: &str, thread: &str, marker: &str) -> LinkRow {
    LinkRow {
        session_key: key.into(),
        agent_id: "main".into(),
        catalog_id: "claude".into(),
        host_id: "gateway:local".into(),
        thread_id: thread.into(),
        upstream_kind: "claude-cli".into(),
        upstream_ref_json: Some(r#"{"filePath":"/t/1.jsonl"}"#.into()),
        last_marker_json: Some(marker.into()),
        ..LinkRow::default()
    }
}

#[test]
fn upsert_keeps_or_resets_the_marker_by_source() {
    let fx = Fixture::memory();
    let s = &fx.store;
    assert!(s
        .upsert_link_row(&link(CHILD, "t1", r#"{"offset":1}"#), false, T0)
        .unwrap());
    assert!(s
        .set_link_marker(CHILD, "main", r#"{"offset":9}"#, T0 + 1, None)
        .unwrap());
    assert!(s
        .upsert_link_row(&link(CHILD, "t1", r#"{"offset":5}"#), false, T0 + 2)
        .unwrap());
    let kept = s.link_row(CHILD, "main").unwrap().unwrap();
    assert_eq!(kept.last_marker_json.as_deref(), Some(r#"{"offset":9}"#));
    assert_eq!(
        (kept.last_scanned_at, kept.created_at, kept.updated_at),
        (Some(T0 + 1), T0, T0 + 2)
    );

    assert!(s
        .upsert_link_row(&link(CHILD, "t2", r#"{"offset":5}"#), false, T0 + 3)
        .unwrap());
    let moved = s.link_row(CHILD, "main").unwrap().unwrap();
    assert_eq!(moved.last_marker_json.as_deref(), Some(r#"{"offset":5}"#));
    assert_eq!((moved.last_scanned_at, moved.updated_at), (None, T0 + 3));

    assert!(!s
        .upsert_link_row(&link(CHILD, "t3", "null"), true, T0 + 4)
        .unwrap());
    assert_eq!(s.link_row(CHILD, "main").unwrap().unwrap(), moved);
    assert_eq!(s.link_row(CHILD, "ops").unwrap(), None);
}

#[test]
fn the_marker_moves_only_at_the_expected_version() {
    let fx = Fixture::memory();
    let s = &fx.store;
    s.upsert_link_row(&link(CHILD, "t1", "null"), false, T0)
        .unwrap();
    assert!(!s
        .set_link_marker(CHILD, "main", r#"{"uuid":"u"}"#, T0 + 1, Some(T0 - 1))
        .unwrap());
    assert!(s
        .set_link_marker(CHILD, "main", r#"{"uuid":"u"}"#, T0 + 1, Some(T0))
        .unwrap());
    assert!(!s
        .set_link_marker(MAIN, "main", "null", T0 + 1, None)
        .unwrap());
    let row = s.link_row(CHILD, "main").unwrap().unwrap();
    assert_eq!(
        (row.last_marker_json.as_deref(), row.last_scanned_at),
        (Some(r#"{"uuid":"u"}"#), Some(T0 + 1))
    );
}

#[test]
fn watched_rows_and_delete() {
    let fx = Fixture::memory();
    let s = &fx.store;
    let mut codex = link(CHILD2, "t1", "null");
    codex.catalog_id = "codex".into();
    s.upsert_link_row(&codex, false, T0).unwrap();
    s.upsert_link_row(&link(CHILD, "t1", "null"), false, T0)
        .unwrap();
    s.upsert_link_row(&link(OPS, "t1", "null"), false, T0)
        .unwrap();
    s.watch(MAIN, CHILD, Provenance::Explicit, T0).unwrap();
    s.watch(MAIN, CHILD2, Provenance::Explicit, T0).unwrap();
    let keys = |rows: Vec<LinkRow>| {
        rows.into_iter()
            .map(|r| (r.catalog_id, r.session_key))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        keys(s.watched_link_rows().unwrap()),
        vec![
            ("claude".into(), CHILD.into()),
            ("codex".into(), CHILD2.into())
        ]
    );
    assert!(s.delete_link_row(CHILD, "main").unwrap());
    assert!(!s.delete_link_row(CHILD, "main").unwrap());
    assert_eq!(
        keys(s.watched_link_rows().unwrap()),
        vec![("codex".into(), CHILD2.into())]
    );
}
