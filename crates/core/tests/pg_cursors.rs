//! The cursor calls on PostgreSQL (semantics.md#cursors, semantics.md#retention,
//! semantics.md#lifecycle), with exact rows: `watch` seeds at the head and refreshes,
//! `unwatch`, `drain` acknowledges and reopens once, `acknowledge` with `through` and
//! `scope`, `sweep` re-freezes and queues in order, `prune` by age and by row count with the
//! pruned watermarks, `resetSession` and `deleteSession`; and, across two stores on one
//! database, a pending cursor written by another host reaches a served watcher through the
//! hint and is handed out once when both drain at once. Rows another host would have written
//! are put in with SQL, so these tests need nothing but the cursor calls. A real cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use session_awareness_core::{Hooks, Options, Provenance, Store, WatchOptions};

mod pg_harness;
mod two_stores;
use pg_harness::{schema, shared, until};
use two_stores::{positions, NOW, T, W};

fn open(schema: &str, sync_ms: u32, retention_ms: i64, max_events: u64) -> Store {
    open_as(schema, "sa-test", sync_ms, retention_ms, max_events)
}

/// A store whose connections carry `app` as their application_name (its listener's is
/// `<app> listener`).
fn open_as(schema: &str, app: &str, sync_ms: u32, retention_ms: i64, max_events: u64) -> Store {
    let mut opts = Options {
        sync_interval_ms: sync_ms,
        wake_coalesce_ms: 0,
        retention_ms,
        max_events,
        ..Options::default()
    };
    opts.pg_schema = session_awareness_core::SchemaName::parse(schema).unwrap();
    let url = format!("{}?application_name={app}", shared().url());
    Store::open(&url, opts, Hooks::default()).unwrap()
}

fn sql(q: &str) -> String {
    shared().sql(q).unwrap()
}

/// A fresh schema and a store on it (polling every `sync_ms`, the default retention) where
/// [`W`]'s cursor on [`T`] stands at L 1, N 2, M 4, the target's head at 4: a notice pending.
fn behind(sync_ms: u32) -> (String, Store) {
    let s = schema("cursors");
    let store = open(&s, sync_ms, 30 * 86_400_000, 50_000);
    head(&s, T, 4);
    cursor(&s, W, T, 1, 2, 4, None);
    (s, store)
}

/// A cursor row as another host would have left it.
fn cursor(s: &str, w: &str, t: &str, l: i64, n: i64, m: i64, scope: Option<&str>) {
    let scope = scope.map_or("NULL".into(), |x| format!("'{x}'"));
    sql(&format!(
        "INSERT INTO {s}.session_watch_cursors VALUES ('{w}', {scope}, '{t}', {l}, {n}, {m}, \
         'explicit', {NOW})"
    ));
}

fn head(s: &str, t: &str, last: i64) {
    sql(&format!(
        "INSERT INTO {s}.session_state_heads VALUES ('{t}', 'main', {last}, 0, {NOW}) \
         ON CONFLICT (session_key, agent_id) DO UPDATE SET last_sequence = {last}"
    ));
}

fn row(s: &str, w: &str, t: &str) -> String {
    sql(&format!(
        "SELECT concat_ws('|', last_seen_sequence, notified_sequence, material_sequence, \
         provenance, updated_at) FROM {s}.session_watch_cursors \
         WHERE watcher_session_key = '{w}' AND target_session_key = '{t}'"
    ))
}

#[test]
fn watch_seeds_at_the_head_refreshes_and_unwatch_removes() {
    let s = schema("cursors");
    let store = open(&s, 0, 30 * 86_400_000, 50_000);
    head(&s, T, 7);
    let o = WatchOptions {
        provenance: Provenance::AmbientGroup,
        ..WatchOptions::default()
    };
    assert!(store.watch_with(W, T, &o, NOW).unwrap());
    assert_eq!(row(&s, W, T), format!("7|7|7|ambient-group|{NOW}"));
    // Re-watching leaves the positions, refreshes updated_at, and promotes to explicit.
    head(&s, T, 9);
    assert!(store.watch(W, T, Provenance::Explicit, NOW + 5).unwrap());
    assert_eq!(row(&s, W, T), format!("7|7|7|explicit|{}", NOW + 5));
    assert!(store.watch_with(W, T, &o, NOW + 6).unwrap());
    assert_eq!(row(&s, W, T), format!("7|7|7|explicit|{}", NOW + 6));
    // A bare key or watcher == target writes nothing.
    assert!(!store.watch("main", T, Provenance::Explicit, NOW).unwrap());
    assert!(!store.watch(T, T, Provenance::Explicit, NOW).unwrap());
    assert_eq!(
        store
            .watch("", T, Provenance::Explicit, NOW)
            .unwrap_err()
            .code(),
        "ERR_INVALID_ARG"
    );
    assert!(store.unwatch(W, T).unwrap());
    assert!(!store.unwatch(W, T).unwrap());
    assert_eq!(row(&s, W, T), "");
    store.close();
}

#[test]
fn drain_hands_out_acknowledges_and_reopens_once() {
    let (s, store) = behind(100);
    store.serve(W).unwrap();
    until("the catch-up", || !store.peek(W).unwrap().is_empty());
    assert_eq!(positions(&store.peek(W).unwrap()), [(T.to_owned(), 1)]);
    assert_eq!(
        positions(&store.drain(W, NOW + 1).unwrap()),
        [(T.to_owned(), 1)]
    );
    assert_eq!(row(&s, W, T), format!("2|4|4|explicit|{}", NOW + 1));
    // Material past the old N: one fresh notice, naming the old N.
    assert_eq!(positions(&store.peek(W).unwrap()), [(T.to_owned(), 2)]);
    assert_eq!(
        positions(&store.drain(W, NOW + 2).unwrap()),
        [(T.to_owned(), 2)]
    );
    assert_eq!(row(&s, W, T), format!("4|4|4|explicit|{}", NOW + 2));
    assert!(store.drain(W, NOW + 3).unwrap().is_empty());
    assert!(!store.has_pending(W).unwrap());
    store.close();
}

#[test]
fn acknowledge_through_and_scope() {
    let s = schema("cursors");
    let store = open(&s, 0, 30 * 86_400_000, 50_000);
    let u = "agent:main:subagent:other";
    head(&s, T, 4);
    head(&s, u, 4);
    cursor(&s, W, T, 1, 2, 4, None);
    cursor(&s, W, u, 1, 2, 4, Some("/a"));
    let both = [T.to_owned(), u.to_owned(), T.to_owned()];
    // Only the cursor bound to the scope.
    assert_eq!(
        store
            .acknowledge_through(W, &both, Some("/a"), Some(3.0), NOW)
            .unwrap(),
        1
    );
    assert_eq!(row(&s, W, u), format!("3|4|4|explicit|{NOW}"));
    assert_eq!(row(&s, W, T), format!("1|2|4|explicit|{NOW}"));
    // Nothing new read: nothing changes.
    assert_eq!(
        store
            .acknowledge_through(W, &both, None, Some(1.0), NOW + 1)
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .acknowledge_through(W, &both, None, Some(9.0), NOW + 2)
            .unwrap(),
        2
    );
    assert_eq!(row(&s, W, T), format!("4|4|4|explicit|{}", NOW + 2));
    assert_eq!(row(&s, W, u), format!("4|4|4|explicit|{}", NOW + 2));
    assert_eq!(store.acknowledge(W, &both, NOW + 3).unwrap(), 0);
    let bad = store
        .acknowledge_through(W, &both, None, Some(-1.0), NOW)
        .unwrap_err();
    assert_eq!(bad.code(), "ERR_INVALID_ARG");
    store.close();
}

#[test]
fn sweep_refreezes_and_queues_in_order_then_prunes() {
    let s = schema("cursors");
    let store = open(&s, 0, 30 * 86_400_000, 50_000);
    let (w2, u) = ("agent:other:main", "agent:main:subagent:u");
    head(&s, T, 9);
    head(&s, u, 9);
    cursor(&s, W, T, 1, 2, 6, None);
    cursor(&s, w2, u, 3, 3, 5, None);
    cursor(&s, W, u, 9, 9, 9, None);
    assert_eq!(
        store.sweep_candidates().unwrap(),
        [W.to_owned(), w2.to_owned()]
    );
    let mut only_w2 = |w: &str| w == w2;
    let report = store.sweep(Some(&mut only_w2), NOW).unwrap();
    assert_eq!(report.notices, 1);
    assert_eq!(row(&s, W, T), format!("1|2|6|explicit|{NOW}"));
    assert_eq!(row(&s, w2, u), format!("3|5|5|explicit|{NOW}"));
    assert_eq!(positions(&store.peek(w2).unwrap()), [(u.to_owned(), 3)]);
    let report = store.sweep(None, NOW).unwrap();
    assert_eq!(report.notices, 2);
    assert_eq!(row(&s, W, T), format!("1|6|6|explicit|{NOW}"));
    assert_eq!(positions(&store.peek(W).unwrap()), [(T.to_owned(), 1)]);
    store.close();
}

#[test]
fn prune_by_age_then_by_count_raises_the_watermarks() {
    let s = schema("cursors");
    // Retention 10 s; at most 3 events.
    let store = open(&s, 0, 10_000, 3);
    for i in 0..8i64 {
        let key = format!("agent:main:s{}", i % 2);
        sql(&format!(
            "INSERT INTO {s}.session_state_events (sequence, session_key, agent_id, kind, \
             actor_type, occurred_at, summary) VALUES ({}, '{key}', 'main', 'created', 'system', {}, '')",
            i + 1,
            NOW - 20_000 + i * 3_000
        ));
        head(&s, &key, i + 1);
    }
    // Stale cursor (updated 20 s ago) and a fresh one.
    cursor(&s, W, T, 0, 0, 0, None);
    sql(&format!(
        "UPDATE {s}.session_watch_cursors SET updated_at = {}",
        NOW - 20_000
    ));
    cursor(&s, W, "agent:main:s0", 0, 0, 0, None);
    let report = store.prune(NOW).unwrap();
    // Occurred at -20, -17, -14, -11 s go by age (1..=4); then the cap of 3 takes 5.
    assert_eq!((report.events_deleted, report.cursors_deleted), (5, 1));
    assert_eq!(sql(&format!("SELECT string_agg(sequence::text, ',' ORDER BY sequence) FROM {s}.session_state_events")), "6,7,8");
    let marks = sql(&format!(
        "SELECT string_agg(session_key || '=' || pruned_max_sequence || '/' || last_sequence, ',' \
         ORDER BY session_key) FROM {s}.session_state_heads"
    ));
    assert_eq!(marks, "agent:main:s0=5/7,agent:main:s1=4/8");
    assert_eq!(store.prune(NOW).unwrap().events_deleted, 0);
    store.close();
}

#[test]
fn reset_and_delete_drop_cursors_and_notices() {
    let (s, store) = behind(0);
    cursor(&s, T, W, 0, 0, 0, None);
    store.sweep(None, NOW).unwrap();
    assert!(store.has_pending(W).unwrap());
    store.reset_session(W).unwrap();
    assert!(!store.has_pending(W).unwrap());
    assert_eq!(row(&s, W, T), "");
    assert_eq!(row(&s, T, W), format!("0|0|0|explicit|{NOW}"));
    cursor(&s, W, T, 1, 2, 4, None);
    store.delete_session(T, None).unwrap();
    assert_eq!(
        sql(&format!("SELECT count(*) FROM {s}.session_watch_cursors")),
        "0"
    );
    assert_eq!(
        sql(&format!("SELECT count(*) FROM {s}.session_state_heads")),
        "0"
    );
    store.close();
}

#[test]
fn a_hinted_cursor_reaches_both_hosts_and_is_handed_out_once() {
    let s = schema("cursors");
    let a = open(&s, 100, 30 * 86_400_000, 50_000);
    let b = open(&s, 100, 30 * 86_400_000, 50_000);
    a.serve(W).unwrap();
    b.serve(W).unwrap();
    until("both listeners", || a.is_syncing() && b.is_syncing());
    let targets: Vec<String> = (0..30)
        .map(|i| format!("agent:main:subagent:t{i:02}"))
        .collect();
    let mut handed: BTreeMap<(String, i64), usize> = BTreeMap::new();
    for round in 0..4i64 {
        for t in &targets {
            head(&s, t, 10 * (round + 1));
            sql(&format!(
                "INSERT INTO {s}.session_watch_cursors VALUES ('{W}', NULL, '{t}', {l}, {n}, {n}, \
                 'explicit', {NOW}) ON CONFLICT (watcher_session_key, target_session_key) DO UPDATE \
                 SET notified_sequence = {n}, material_sequence = {n}",
                l = 10 * round,
                n = 10 * (round + 1)
            ));
        }
        // Another host's record would send this hint after its commit.
        sql(&format!(
            "SELECT pg_notify('{s}', '{{\"i\":\"elsewhere\",\"w\":[\"{W}\"]}}')"
        ));
        until("both queues", || {
            a.peek(W).unwrap().len() == targets.len() && b.peek(W).unwrap().len() == targets.len()
        });
        let (ga, gb) = std::thread::scope(|sc| {
            let ha = sc.spawn(|| a.drain(W, NOW).unwrap());
            let hb = sc.spawn(|| b.drain(W, NOW).unwrap());
            (ha.join().unwrap(), hb.join().unwrap())
        });
        for p in positions(&ga).into_iter().chain(positions(&gb)) {
            *handed.entry(p).or_insert(0) += 1;
        }
        until("both queues empty", || {
            a.peek(W).unwrap().is_empty() && b.peek(W).unwrap().is_empty()
        });
    }
    assert_eq!(handed.len(), 4 * targets.len());
    assert!(
        handed.values().all(|&c| c == 1),
        "handed out twice: {handed:?}"
    );
    a.close();
    b.close();
}

#[test]
fn a_killed_listener_reconnects_and_catches_up_from_the_rows() {
    let s = schema("cursors");
    // A poll too slow to matter: only the catch-up at the reconnect can find the row.
    let b = open_as(&s, "kill-b", 60_000, 30 * 86_400_000, 50_000);
    b.serve(W).unwrap();
    until("B's listener", || {
        b.is_syncing() && b.listener_connects() == 1
    });
    // The lease is written by the first turn of the task.
    until("B's lease", || {
        sql(&format!(
            "SELECT count(*) FROM {s}.session_awareness_served WHERE watcher_key = '{W}'"
        )) == "1"
    });
    // Written with no hint (as if sent while B was disconnected): only the catch-up at the
    // reconnect can find it.
    head(&s, T, 4);
    cursor(&s, W, T, 1, 2, 4, None);
    std::thread::sleep(Duration::from_millis(200));
    assert!(b.peek(W).unwrap().is_empty());
    assert_eq!(shared().terminate_backends("kill-b listener").unwrap(), 1);
    until("B's reconnect", || b.listener_connects() == 2);
    until("B's queue", || !b.peek(W).unwrap().is_empty());
    assert_eq!(positions(&b.peek(W).unwrap()), [(T.to_owned(), 1)]);
    // The hints work again on the new connection.
    assert_eq!(positions(&b.drain(W, NOW).unwrap()), [(T.to_owned(), 1)]);
    assert_eq!(positions(&b.drain(W, NOW).unwrap()), [(T.to_owned(), 2)]);
    let u = "agent:main:subagent:after";
    head(&s, u, 3);
    cursor(&s, W, u, 0, 3, 3, None);
    sql(&format!("SELECT pg_notify('{s}', '{{\"w\":[\"{W}\"]}}')"));
    until("the hinted notice", || !b.peek(W).unwrap().is_empty());
    assert_eq!(positions(&b.peek(W).unwrap()), [(u.to_owned(), 0)]);
    b.close();
    // Closing drops the store's leases.
    assert_eq!(
        sql(&format!(
            "SELECT count(*) FROM {s}.session_awareness_served"
        )),
        "0"
    );
}

#[test]
fn every_backend_killed_loses_no_notice() {
    let s = schema("cursors");
    let b = open_as(&s, "kill-all", 100, 30 * 86_400_000, 50_000);
    head(&s, T, 4);
    cursor(&s, W, T, 1, 2, 4, None);
    b.serve(W).unwrap();
    until("B's queue", || !b.peek(W).unwrap().is_empty());
    let killed = shared().terminate_backends("kill-all").unwrap()
        + shared().terminate_backends("kill-all listener").unwrap();
    assert!(killed >= 1, "the store's backends");
    // A call in flight may fail with ERR_DB (its notices stay queued); a later one succeeds
    // on a new connection, without reopening.
    let mut drained = Vec::new();
    for _ in 0..3 {
        match b.drain(W, NOW) {
            Ok(n) => {
                drained = n;
                break;
            }
            Err(e) => {
                assert_eq!(e.code(), "ERR_DB");
                assert_eq!(positions(&b.peek(W).unwrap()), [(T.to_owned(), 1)]);
            }
        }
    }
    assert_eq!(positions(&drained), [(T.to_owned(), 1)]);
    assert_eq!(row(&s, W, T), format!("2|4|4|explicit|{NOW}"));
    until("the listener again", || {
        b.listener_connects() >= 2 && b.is_syncing()
    });
    b.close();
}

#[test]
fn watch_in_another_scope_reseeds_and_drops_the_notice() {
    let s = schema("scope");
    let store = open(&s, 0, 30 * 86_400_000, 50_000);
    head(&s, T, 4);
    cursor(&s, W, T, 1, 2, 4, Some("/a"));
    store.sweep(None, NOW).unwrap();
    assert_eq!(positions(&store.peek(W).unwrap()), [(T.to_owned(), 1)]);
    let in_scope = |scope: &str| WatchOptions {
        scope: Some(scope.into()),
        ..WatchOptions::default()
    };
    // Same scope: positions kept, the notice stays.
    assert!(store.watch_with(W, T, &in_scope("/a"), NOW + 1).unwrap());
    assert_eq!(row(&s, W, T), format!("1|4|4|explicit|{}", NOW + 1));
    assert_eq!(positions(&store.peek(W).unwrap()), [(T.to_owned(), 1)]);
    // Another scope: re-seeded at the head, bound to it, the notice dropped.
    assert!(store.watch_with(W, T, &in_scope("/b"), NOW + 2).unwrap());
    assert_eq!(row(&s, W, T), format!("4|4|4|explicit|{}", NOW + 2));
    assert_eq!(
        sql(&format!(
            "SELECT watcher_store_path FROM {s}.session_watch_cursors"
        )),
        "/b"
    );
    assert!(store.peek(W).unwrap().is_empty());
    // No refresh asked: updated_at stays.
    let o = WatchOptions {
        refresh: false,
        ..in_scope("/b")
    };
    assert!(store.watch_with(W, T, &o, NOW + 3).unwrap());
    assert_eq!(row(&s, W, T), format!("4|4|4|explicit|{}", NOW + 2));
    store.close();
}
