//! Rows the store would never write itself (semantics.md#storage), mixed into every file case of the model
//! test: cursor rows on the model's targets that no operation of the model names as a pair,
//! written before the store opens. The model knows nothing of them, so any notice, wake,
//! re-queue or prune count they caused would disagree with it; at the end of the case each
//! row must be exactly as written, or gone because its watcher was reset or its watcher or
//! target deleted. Their `updated_at` lies past every clock of a case, so retention keeps them
//! and the model's expiry counts stay exact.

use std::collections::BTreeSet;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rusqlite::Connection;

/// The `updated_at` of every foreign row: no case's clock reaches it.
const FAR: i64 = 9_000_000_000_000_000;

/// The foreign rows: (watcher, target, L, N, M, provenance) as SQL expressions.
const ROWS: [&str; 8] = [
    // A bare watcher on a target, a notice pending.
    "'global', 'agent:main:t', 0, 1, 1, 'explicit'",
    // The empty watcher.
    "'', 'agent:ops:subagentx', 0, 1, 1, 'explicit'",
    // A self cursor.
    "'agent:main:t', 'agent:main:t', 0, 1, 1, 'explicit'",
    // An upper-case agent id: a bare watcher (the store's table refuses an unknown
    // provenance by its CHECK, so that row exists only in older, loose tables: foreign.rs).
    "'agent:MAIN:foreign', 'agent:main:t', 0, 1, 1, 'explicit'",
    // A watcher that is not valid UTF-8.
    "CAST(x'6167656e743a6d61696e3a77ff' AS TEXT), 'agent:main:subagent:y', 0, 1, 1, 'explicit'",
    // Positions above any head a case reaches.
    "'agent:main:foreign', 'agent:ops:subagentx', 0, 1000000, 1000000, 'explicit'",
    // A negative position.
    "'agent:main:foreign', 'agent:main:subagent:y', -1, 1, 1, 'ambient-group'",
    // A bare target.
    "'agent:main:main', 'global', 0, 1, 1, 'explicit'",
];

/// Creates the store's tables in the file at `path` and writes the foreign rows, through a
/// connection closed before the store opens.
pub fn seed(path: &str) {
    let conn = session_awareness_core::schema::open(path, 0).unwrap();
    for row in ROWS {
        conn.execute(
            &format!("INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ({row}, ?1)"),
            [FAR],
        )
        .unwrap();
    }
}

/// One foreign row: hex of its watcher and target, then every column as stored.
pub type Row = (String, String, String);

/// The foreign rows now in the file (the store must be closed).
pub fn rows(path: &str) -> BTreeSet<Row> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT hex(watcher_session_key), hex(target_session_key), \
             typeof(last_seen_sequence) || last_seen_sequence || ',' || \
             typeof(notified_sequence) || notified_sequence || ',' || \
             typeof(material_sequence) || material_sequence || ',' || \
             typeof(provenance) || hex(provenance) || ',' || typeof(updated_at) || updated_at \
             FROM session_watch_cursors WHERE updated_at = ?1",
        )
        .unwrap();
    let rows = stmt
        .query_map([FAR], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

/// Uppercase hex of a key's bytes, as SQLite's `hex()` writes it.
pub fn hex(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02X}")).collect()
}

/// Every foreign row of `before` is in `after` unchanged, or gone because its watcher is in
/// `reset` or its watcher or target in `deleted` (hex keys); `after` holds no other.
pub fn check(
    before: &BTreeSet<Row>,
    after: &BTreeSet<Row>,
    reset: &BTreeSet<String>,
    deleted: &BTreeSet<String>,
) -> Result<(), TestCaseError> {
    prop_assert!(after.is_subset(before), "foreign rows changed: {after:?}");
    for gone in before.difference(after) {
        prop_assert!(
            reset.contains(&gone.0) || deleted.contains(&gone.0) || deleted.contains(&gone.1),
            "a foreign row went without a reset or delete of its keys: {gone:?}"
        );
    }
    Ok(())
}

#[test]
fn the_foreign_rows_are_written_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.sqlite");
    let path = path.to_str().unwrap();
    seed(path);
    let rows = rows(path);
    assert_eq!(rows.len(), ROWS.len());
    assert!(rows.contains(&(
        hex("global"),
        hex("agent:main:t"),
        format!(
            "integer0,integer1,integer1,text{},integer{FAR}",
            hex("explicit")
        )
    )));
}
