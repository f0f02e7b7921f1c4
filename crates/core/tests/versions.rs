//! semantics.md#reading: `stateVersions` answers from the file as it is now, whoever wrote
//! it, although the store keeps the versions it has read in memory.

mod common;

use common::*;
use session_awareness_core::{Store, VersionRef};

const A: &str = "agent:main:subagent:a";
const B: &str = "agent:main:subagent:b";

/// `stateVersions` of `keys` (no agent given), twice: the second call reads what the first
/// one kept, and both must agree.
fn versions(store: &Store, keys: &[&str]) -> Vec<(String, i64)> {
    let refs: Vec<VersionRef> = keys
        .iter()
        .map(|k| VersionRef {
            session_key: (*k).to_owned(),
            agent_id: None,
        })
        .collect();
    let first = store.state_versions(&refs).unwrap();
    assert_eq!(store.state_versions(&refs).unwrap(), first, "a second read");
    first.into_iter().map(|(k, _, v)| (k, v)).collect()
}

fn want(list: &[(&str, i64)]) -> Vec<(String, i64)> {
    list.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

#[test]
fn versions_follow_writes_of_this_store_of_another_and_of_a_foreign_connection() {
    let fx = Fixture::file();
    let other = fx.attach();
    let raw = fx.conn();
    assert_eq!(versions(&fx.store, &[A, B]), want(&[]));
    fx.rec(A, "created", None, T0); // 1, this store
    assert_eq!(versions(&fx.store, &[A, B]), want(&[(A, 1)]));
    other.rec(B, "created", None, T0); // 2, another store on the file
    assert_eq!(versions(&fx.store, &[A, B]), want(&[(A, 1), (B, 2)]));
    fx.rec(A, "goal_changed", None, T0); // 3
    assert_eq!(versions(&fx.store, &[B, A]), want(&[(B, 2), (A, 3)]));
    raw.execute(
        "UPDATE session_state_heads SET last_sequence = 10 WHERE session_key = ?1",
        [B],
    )
    .unwrap();
    assert_eq!(versions(&fx.store, &[A, B]), want(&[(A, 3), (B, 10)]));
    fx.store.delete_session(A, None).unwrap();
    assert_eq!(versions(&fx.store, &[A, B]), want(&[(B, 10)]));
    other.rec(A, "created", None, T0); // 4
    assert_eq!(
        versions(&fx.store, &[A, B, A]),
        want(&[(A, 4), (B, 10), (A, 4)])
    );
    raw.execute("DELETE FROM session_state_heads", []).unwrap();
    assert_eq!(versions(&fx.store, &[A, B]), want(&[]));
    assert_eq!(versions(&other.store, &[A, B]), want(&[]));
}

#[test]
fn more_sessions_than_the_cache_holds_read_the_same() {
    let fx = Fixture::memory();
    let keys: Vec<String> = (0..20_005)
        .map(|i| format!("agent:main:subagent:n{i}"))
        .collect();
    let first = fx.rec(&keys[0], "created", None, T0).sequence;
    let last = fx.rec(&keys[20_004], "created", None, T0).sequence;
    let all: Vec<&str> = keys.iter().map(String::as_str).collect();
    assert_eq!(
        versions(&fx.store, &all),
        want(&[(&keys[0], first), (&keys[20_004], last)])
    );
    // Again after the cache started over part-way through: the first keys are read again.
    assert_eq!(versions(&fx.store, &all[..3]), want(&[(&keys[0], first)]));
}
