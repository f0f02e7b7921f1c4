//! semantics.md#reading-foreign-events, as a property: for any content of the event table (rows
//! the store writes and rows it would not: unknown kinds and actor types, NULLs, multi-line or
//! huge summaries, payloads that are arrays, scalars, not JSON or not UTF-8, text where a
//! number belongs, rows above the head), the pages of `changesSince` from any `after` with any
//! `limit`, following `truncated`, are together exactly the session's stored rows after
//! `after`, in order, and `historyGap` is exactly `after < watermark`.

use proptest::prelude::*;
use rusqlite::types::Value;
use rusqlite::{params, Connection};
use session_awareness_core::{ChangeEvent, Hooks, Options, Store};

const T0: i64 = 1_900_000_000_000;
const SESSIONS: [(&str, &str); 3] = [
    ("agent:main:t", "main"),
    ("agent:main:u", "main"),
    ("global", "ops"),
];

const LOOSE_SCHEMA: &str = include_str!("fixtures/loose-schema.sql");

/// One stored row: its session, the gap before its sequence and its columns.
#[derive(Debug, Clone)]
struct Row {
    session: usize,
    gap: i64,
    kind: Value,
    actor_type: Value,
    actor_id: Value,
    occurred_at: Value,
    summary: Value,
    payload: Value,
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

fn value(choices: Vec<Value>) -> impl Strategy<Value = Value> {
    proptest::sample::select(choices)
}

prop_compose! {
    fn row()(
        session in 0..SESSIONS.len(),
        gap in 1i64..4,
        kind in value(vec![
            text("goal_changed"),
            text("compacted"),
            text("created"),
            text("session_forked"),
            Value::Null,
            Value::Integer(3),
            Value::Blob(vec![0x67, 0xff]),
        ]),
        actor_type in value(vec![
            text("human"),
            text("agent"),
            text("robot"),
            Value::Null,
        ]),
        actor_id in value(vec![
            Value::Null,
            text("agent:main:main"),
            text(""),
            text(&"a".repeat(1025)),
        ]),
        occurred_at in value(vec![
            Value::Integer(T0),
            Value::Real(1.5),
            text("soon"),
            Value::Null,
        ]),
        summary in value(vec![
            text("one line"),
            text("two\nlines"),
            text(&"s".repeat(500)),
            Value::Null,
            Value::Blob(vec![0xff]),
            text("é\u{2028}"),
        ]),
        payload in value(vec![
            Value::Null,
            text("{\"a\":1}"),
            text("[1,2]"),
            text("7"),
            text("{oops"),
            text(" {\"b\":true}"),
            text(&format!("{{\"c\":\"{}\"}}", "c".repeat(5000))),
            Value::Blob(vec![0x7b, 0x7d]),
        ]),
    ) -> Row {
        Row { session, gap, kind, actor_type, actor_id, occurred_at, summary, payload }
    }
}

/// Writes the rows and, per session, a head at its last row less `head_back` (at least 0) with
/// the watermark `watermark`; returns the file's directory and path.
fn build(rows: &[Row], head_back: i64, watermark: i64) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sqlite").to_str().unwrap().to_owned();
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(LOOSE_SCHEMA).unwrap();
    let mut seq = 0;
    let mut last = [0i64; SESSIONS.len()];
    for r in rows {
        seq += r.gap;
        let (key, agent) = SESSIONS[r.session];
        conn.execute(
            "INSERT INTO session_state_events (sequence, session_key, agent_id, kind, actor_type, \
             actor_id, occurred_at, summary, payload_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                seq,
                key,
                agent,
                r.kind,
                r.actor_type,
                r.actor_id,
                r.occurred_at,
                r.summary,
                r.payload
            ],
        )
        .unwrap();
        last[r.session] = seq;
    }
    for (i, (key, agent)) in SESSIONS.iter().enumerate() {
        if last[i] > 0 {
            conn.execute(
                "INSERT INTO session_state_heads VALUES (?1, ?2, ?3, ?4, ?5)",
                params![key, agent, (last[i] - head_back).max(0), watermark, T0],
            )
            .unwrap();
        }
    }
    (dir, path)
}

/// The session's stored sequences after `after`, read without the store.
fn stored_after(path: &str, session: usize, after: i64) -> Vec<i64> {
    let (key, agent) = SESSIONS[session];
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT sequence FROM session_state_events \
             WHERE session_key = ?1 AND agent_id = ?2 AND sequence > ?3 ORDER BY sequence",
        )
        .unwrap();
    let rows = stmt
        .query_map(params![key, agent, after], |r| r.get(0))
        .unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    #[test]
    fn pages_are_exactly_the_stored_rows(
        rows in proptest::collection::vec(row(), 0..24),
        head_back in 0i64..3,
        watermark in 0i64..6,
        after in 0i64..40,
        limit in 1u32..6,
    ) {
        let (_dir, path) = build(&rows, head_back, watermark);
        let store = Store::open(&path, Options::default(), Hooks::default()).unwrap();
        for (session, (key, agent)) in SESSIONS.iter().enumerate() {
            let want = stored_after(&path, session, after);
            let mut got: Vec<ChangeEvent> = Vec::new();
            let mut from = after;
            loop {
                let page = store
                    .changes_since(key, from as f64, Some(agent), Some(f64::from(limit)))
                    .unwrap();
                let has_head = rows.iter().any(|r| r.session == session);
                prop_assert_eq!(page.history_gap, has_head && from < watermark, "historyGap is after < watermark");
                prop_assert!(page.events.len() <= limit as usize);
                let done = !page.truncated;
                if let Some(e) = page.events.last() {
                    from = e.sequence();
                }
                prop_assert!(!page.events.is_empty() || done, "an empty page is the last one");
                got.extend(page.events);
                if done {
                    break;
                }
            }
            let seqs: Vec<i64> = got.iter().map(ChangeEvent::sequence).collect();
            prop_assert_eq!(&seqs, &want, "{}", key);
            for e in &got {
                // A foreign row names what differs; a summary always reads as one line.
                if let Some(f) = e.foreign() {
                    prop_assert!(!f.foreign.is_empty());
                }
                let one_line = !e.summary().contains(['\n', '\r', '\u{2028}']);
                prop_assert!(one_line, "summary {:?}", e.summary());
                prop_assert!(e.summary().chars().count() <= 240);
            }
        }
        store.close();
    }
}
