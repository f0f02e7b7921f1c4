//! semantics.md#retention retention and lifecycle: pruning by age and by row cap, watermarks, cursor expiry,
//! the automatic hourly prune (semantics.md#recording), resetSession and deleteSession.

mod common;

use std::time::{Duration, Instant};

use common::*;
use session_awareness_core::{Options, Provenance, PruneReport, VersionRef};

fn with(retention_ms: i64, max_events: u64) -> Options {
    Options {
        retention_ms,
        max_events,
        ..opts()
    }
}

fn report(events_deleted: u64, cursors_deleted: u64) -> PruneReport {
    PruneReport {
        events_deleted,
        cursors_deleted,
    }
}

fn at(fx: &Fixture, key: &str, occurred_at: i64, now: i64) -> i64 {
    let mut i = input(key, "goal_changed");
    i.occurred_at = Some(occurred_at as f64);
    fx.record(i, now).sequence
}

fn gap(fx: &Fixture, key: &str, after: i64) -> (Vec<i64>, bool, i64) {
    let c = fx
        .store
        .changes_since(key, after as f64, None, None)
        .unwrap();
    (
        seqs(&c.events),
        c.history_gap,
        c.earliest_available_sequence,
    )
}

#[test]
fn age_is_judged_on_occurred_at_and_the_watermark_never_drops() {
    let fx = Fixture::file_with(with(10 * MINUTE, 50_000));
    fx.rec(CHILD2, "created", None, T0); // 1
    fx.settle();
    assert_eq!(at(&fx, CHILD, T0 - 5 * MINUTE, T0), 2);
    assert_eq!(at(&fx, CHILD, T0 - 11 * MINUTE, T0), 3);
    assert_eq!(at(&fx, CHILD, T0, T0), 4);
    // The newer sequence is the older event: it goes first.
    assert_eq!(fx.store.prune(T0).unwrap(), report(1, 0));
    assert_eq!(fx.sequences(), [1, 2, 4]);
    assert_eq!(fx.head_row(CHILD, "main"), Some((4, 3)));
    assert_eq!(gap(&fx, CHILD, 0), (vec![2, 4], true, 2));
    assert_eq!(gap(&fx, CHILD, 2), (vec![4], true, 2));
    assert_eq!(gap(&fx, CHILD, 3), (vec![4], false, 2));
    // Exactly retentionMs old is kept; one ms more is not.
    assert_eq!(fx.store.prune(T0 + 5 * MINUTE).unwrap(), report(0, 0));
    assert_eq!(fx.store.prune(T0 + 5 * MINUTE + 1).unwrap(), report(1, 0));
    assert_eq!(fx.sequences(), [1, 4]);
    // Losing sequence 2 after 3 leaves the watermark at 3.
    assert_eq!(fx.head_row(CHILD, "main"), Some((4, 3)));
    assert_eq!(gap(&fx, CHILD, 2), (vec![4], true, 4));
    assert_eq!(gap(&fx, CHILD, 3), (vec![4], false, 4));
    assert_eq!(fx.head_row(CHILD2, "main"), Some((1, 0)));
    assert_eq!(fx.store.prune(T0 + 10 * MINUTE + 1).unwrap(), report(2, 0));
    assert_eq!(fx.head_row(CHILD, "main"), Some((4, 4)));
    assert_eq!(fx.head_row(CHILD2, "main"), Some((1, 1)));
}

#[test]
fn the_row_cap_keeps_the_newest_max_events() {
    let fx = Fixture::file_with(with(30 * DAY, 3));
    fx.rec(CHILD2, "created", None, T0); // 1
    fx.settle();
    for key in [CHILD, CHILD, CHILD2, CHILD, CHILD] {
        fx.rec(key, "goal_changed", None, T0); // 2..=6
    }
    assert_eq!(fx.store.prune(T0).unwrap(), report(3, 0));
    assert_eq!(fx.sequences(), [4, 5, 6]);
    assert_eq!(fx.head_row(CHILD, "main"), Some((6, 3)));
    assert_eq!(fx.head_row(CHILD2, "main"), Some((4, 1)));
    assert_eq!(gap(&fx, CHILD, 0), (vec![5, 6], true, 5));
    assert_eq!(gap(&fx, CHILD, 3), (vec![5, 6], false, 5));
    assert_eq!(gap(&fx, CHILD2, 0), (vec![4], true, 4));
    assert_eq!(gap(&fx, CHILD2, 1), (vec![4], false, 4));
    assert_eq!(fx.store.prune(T0).unwrap(), report(0, 0));
}

#[test]
fn age_goes_first_then_the_cap_counts_what_is_left() {
    let fx = Fixture::file_with(with(10 * MINUTE, 3));
    fx.rec(CHILD2, "created", None, T0); // 1
    fx.settle();
    assert_eq!(at(&fx, CHILD, T0 - 11 * MINUTE, T0), 2);
    for _ in 0..3 {
        at(&fx, CHILD, T0, T0); // 3..=5
    }
    assert_eq!(fx.store.prune(T0).unwrap(), report(2, 0));
    assert_eq!(fx.sequences(), [3, 4, 5]);
}

#[test]
fn a_backlog_larger_than_one_batch_is_pruned_whole() {
    let fx = Fixture::file_with(with(30 * DAY, 10));
    fx.rec(CHILD, "created", None, T0);
    fx.settle();
    for _ in 1..2500 {
        fx.rec(CHILD, "compacted", None, T0);
    }
    assert_eq!(fx.store.prune(T0).unwrap(), report(2490, 0));
    assert_eq!(fx.sequences(), (2491..=2500).collect::<Vec<i64>>());
    assert_eq!(fx.head_row(CHILD, "main"), Some((2500, 2490)));
}

#[test]
fn heads_are_never_pruned() {
    let fx = Fixture::file_with(with(30 * DAY, 1));
    fx.rec(CHILD, "created", None, T0); // 1
    fx.settle();
    fx.rec(CHILD, "goal_changed", None, T0); // 2
    fx.rec(CHILD2, "created", None, T0); // 3
    assert_eq!(fx.store.prune(T0).unwrap(), report(2, 0));
    assert_eq!(fx.sequences(), [3]);
    assert_eq!(fx.store.state_version(CHILD, None).unwrap(), 2);
    assert_eq!(fx.head_row(CHILD, "main"), Some((2, 2)));
    let refs = [VersionRef {
        session_key: CHILD.into(),
        agent_id: None,
    }];
    assert_eq!(
        fx.store.state_versions(&refs).unwrap(),
        [(CHILD.to_owned(), "main".to_owned(), 2)]
    );
    assert_eq!(gap(&fx, CHILD, 0), (vec![], true, 3));
    assert_eq!(fx.rec(CHILD, "goal_changed", None, T0).sequence, 4);
    assert_eq!(fx.store.state_version(CHILD, None).unwrap(), 4);
    assert_eq!(gap(&fx, CHILD, 2), (vec![4], false, 4));
}

#[test]
fn cursors_expire_by_updated_at_which_seed_material_ack_and_watch_refresh() {
    let fx = Fixture::file_with(with(10 * MINUTE, 50_000));
    let [a, b, c, d, e, f, g] = [
        "agent:main:a",
        "agent:main:b",
        "agent:main:c",
        "agent:main:d",
        "agent:main:e",
        "agent:main:f",
        "agent:main:g",
    ];
    fx.rec(CHILD2, "created", None, T0); // 1
    fx.settle();
    for t in [a, b, c, d, e, f, g] {
        assert!(fx.store.watch(MAIN, t, Provenance::Explicit, T0).unwrap());
    }
    fx.rec(a, "goal_changed", None, T0); // 2: a notice that expiry must drop
    fx.rec(d, "goal_changed", None, T0); // 3
    let later = T0 + 5 * MINUTE;
    let mut spawn = input(b, "child_spawned");
    spawn.watchers = strings(&[MAIN]);
    fx.record(spawn, later); // 4: seed
    fx.rec(c, "goal_changed", None, later); // 5: material update
    assert_eq!(
        fx.store.acknowledge(MAIN, &strings(&[d]), later).unwrap(),
        1
    );
    assert!(fx
        .store
        .watch(MAIN, e, Provenance::Explicit, later)
        .unwrap());
    let mut log_only = input(f, "run_completed");
    log_only.watchers = strings(&[MAIN]);
    fx.record(log_only, later); // 6: refreshes nothing
    fx.rec(g, "goal_changed", Some(MAIN), later); // 7: self-caused, refreshes nothing
    assert!(!fx.store.is_pruning());
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(a, 0), (c, 0)])
    );

    // Cut-off T0 + 1: the three cursors last touched at T0 go (events at T0 too).
    assert_eq!(fx.store.prune(T0 + 10 * MINUTE + 1).unwrap(), report(3, 3));
    for t in [a, f, g] {
        assert!(fx.cursor(MAIN, t).is_none(), "{t}");
    }
    for t in [b, c, d, e] {
        assert_eq!(fx.cursor(MAIN, t).unwrap().updated_at, later, "{t}");
    }
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(c, 0)])
    );
    // Exactly retentionMs since the refresh is kept; one ms more is not.
    assert_eq!(fx.store.prune(later + 10 * MINUTE).unwrap(), report(0, 0));
    assert_eq!(
        fx.store.prune(later + 10 * MINUTE + 1).unwrap(),
        report(4, 4)
    );
    assert_eq!(fx.cursor_count(), 0);
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    assert!(fx.store.drain(MAIN, later).unwrap().is_empty());
    fx.assert_no_error();
}

#[test]
fn the_first_record_after_open_prunes_then_not_again_within_the_hour() {
    let fx = Fixture::file_with(with(30 * DAY, 2));
    let step = |now: i64, seq: i64, expect_prune: bool| {
        assert_eq!(fx.rec(CHILD, "goal_changed", None, now).sequence, seq);
        if !expect_prune {
            assert!(!fx.store.is_pruning(), "no prune at {}", now - T0);
        }
        fx.settle();
    };
    step(T0, 1, true);
    step(T0 + 1, 2, false);
    step(T0 + 2, 3, false);
    step(T0 + 3, 4, false);
    assert_eq!(fx.sequences(), [1, 2, 3, 4]);
    step(T0 + HOUR, 5, false);
    assert_eq!(fx.sequences(), [1, 2, 3, 4, 5]);
    step(T0 + HOUR + 1, 6, true);
    assert_eq!(fx.sequences(), [5, 6]);
    assert_eq!(fx.head_row(CHILD, "main"), Some((6, 4)));
    step(T0 + 2 * HOUR + 1, 7, false);
    assert_eq!(fx.sequences(), [5, 6, 7]);
    step(T0 + 2 * HOUR + 2, 8, true);
    assert_eq!(fx.sequences(), [7, 8]);
    fx.assert_no_error();
}

#[test]
fn a_manual_prune_or_a_sweep_restarts_the_hour() {
    let fx = Fixture::file_with(with(30 * DAY, 2));
    fx.rec(CHILD, "goal_changed", None, T0); // 1
    fx.settle();
    assert_eq!(fx.store.prune(T0 + 30 * MINUTE).unwrap(), report(0, 0));
    fx.rec(CHILD, "goal_changed", None, T0 + HOUR + 1); // 2
    fx.settle();
    fx.rec(CHILD, "goal_changed", None, T0 + 30 * MINUTE + HOUR); // 3
    fx.settle();
    assert_eq!(fx.sequences(), [1, 2, 3]);
    fx.rec(CHILD, "goal_changed", None, T0 + 30 * MINUTE + HOUR + 1); // 4
    fx.settle();
    assert_eq!(fx.sequences(), [3, 4]);

    let swept = fx.store.sweep(None, T0 + 3 * HOUR).unwrap();
    assert_eq!(swept.prune, report(0, 0));
    fx.rec(CHILD, "goal_changed", None, T0 + 4 * HOUR); // 5
    fx.settle();
    assert_eq!(fx.sequences(), [3, 4, 5]);
    fx.rec(CHILD, "goal_changed", None, T0 + 4 * HOUR + 1); // 6
    fx.settle();
    assert_eq!(fx.sequences(), [5, 6]);
}

#[test]
fn opening_never_prunes() {
    let mut fx = Fixture::file();
    assert!(fx
        .store
        .watch(MAIN, CHILD, Provenance::Explicit, T0)
        .unwrap());
    for _ in 0..5 {
        fx.rec(CHILD, "goal_changed", None, T0);
    }
    fx.reopen_with(with(30 * DAY, 2));
    std::thread::sleep(Duration::from_millis(100));
    assert!(!fx.store.is_pruning());
    // Nothing but a record (or an explicit prune or sweep) prunes.
    assert_eq!(fx.store.state_version(CHILD, None).unwrap(), 5);
    fx.store.changes_since(CHILD, 0.0, None, None).unwrap();
    fx.store.peek(MAIN).unwrap();
    fx.store.drain(MAIN, T0 + 2 * HOUR).unwrap();
    assert!(fx
        .store
        .watch(MAIN, CHILD2, Provenance::Explicit, T0 + 2 * HOUR)
        .unwrap());
    fx.store
        .acknowledge(MAIN, &strings(&[CHILD]), T0 + 2 * HOUR)
        .unwrap();
    assert!(!fx.store.is_pruning());
    assert_eq!(fx.sequences(), [1, 2, 3, 4, 5]);
    fx.rec(CHILD, "goal_changed", None, T0 + 1);
    fx.settle();
    assert_eq!(fx.sequences(), [5, 6]);
}

#[test]
fn a_thirty_day_clock_jump() {
    let fx = Fixture::file();
    assert!(fx
        .store
        .watch(MAIN, CHILD, Provenance::Explicit, T0)
        .unwrap());
    assert!(fx
        .store
        .watch(MAIN, CHILD2, Provenance::Explicit, T0)
        .unwrap());
    fx.rec(CHILD, "human_direct_message", None, T0); // 1
    fx.settle();
    assert_eq!(
        pairs(&fx.store.drain(MAIN, T0).unwrap()),
        expect_pairs(&[(CHILD, 0)])
    );
    fx.rec(CHILD2, "human_direct_message", None, T0); // 2
    let t1 = T0 + 30 * DAY + 1;
    assert_eq!(fx.rec(CHILD, "human_direct_message", None, t1).sequence, 3);
    fx.settle();
    assert_eq!(fx.sequences(), [3]);
    // The record refreshed its own cursor before pruning; the other cursor expired.
    assert_eq!(fx.lnm(MAIN, CHILD), (1, 3, 3));
    assert!(fx.cursor(MAIN, CHILD2).is_none());
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 1)])
    );
    // The notice's changesSince is exactly the retained delta.
    assert_eq!(gap(&fx, CHILD, 1), (vec![3], false, 3));
    assert_eq!(gap(&fx, CHILD, 0), (vec![3], true, 3));
    assert_eq!(fx.store.state_version(CHILD2, None).unwrap(), 2);
    assert_eq!(gap(&fx, CHILD2, 0), (vec![], true, 3));
    fx.assert_no_error();
}

#[test]
fn a_failed_automatic_prune_is_reported_and_rolls_back() {
    let mut fx = Fixture::file();
    for _ in 0..3 {
        fx.rec(CHILD, "goal_changed", None, T0);
    }
    fx.reopen_with(with(30 * DAY, 1));
    fx.conn()
        .execute_batch(
            "CREATE TRIGGER hold_events BEFORE DELETE ON session_state_events \
             BEGIN SELECT RAISE(ABORT, 'held'); END;",
        )
        .unwrap();
    assert_eq!(fx.rec(CHILD, "goal_changed", None, T0).sequence, 4);
    let err = fx.errors.recv_timeout(PATIENCE).expect("reported");
    assert_eq!(err.code(), "ERR_DB");
    fx.settle();
    assert_eq!(fx.sequences(), [1, 2, 3, 4]);
    assert_eq!(fx.head_row(CHILD, "main"), Some((4, 0)));
    fx.conn().execute_batch("DROP TRIGGER hold_events").unwrap();
    assert_eq!(fx.store.prune(T0).unwrap(), report(3, 0));
    assert_eq!(fx.head_row(CHILD, "main"), Some((4, 3)));
}

#[test]
fn reset_session_drops_the_watchers_cursors_and_notices_but_keeps_history() {
    until_judged(|| {
        let fx = Fixture::file_with(Options {
            wake_coalesce_ms: 700,
            ..opts()
        });
        for (w, t) in [(MAIN, CHILD), (MAIN, CHILD2), (OPS, MAIN)] {
            assert!(fx.store.watch(w, t, Provenance::Explicit, T0).unwrap());
        }
        fx.rec(MAIN, "created", None, T0); // 1
        let start = Instant::now();
        fx.rec(CHILD, "goal_changed", None, T0); // 2: a wake for MAIN is due
        fx.rec(MAIN, "goal_changed", None, T0); // 3: a wake for OPS is due
        assert_eq!(fx.store.peek(MAIN).unwrap().len(), 1);
        fx.store.reset_session(MAIN).unwrap();
        if start.elapsed() >= Duration::from_millis(500) {
            return false;
        }
        assert!(fx.cursor(MAIN, CHILD).is_none());
        assert!(fx.cursor(MAIN, CHILD2).is_none());
        assert!(fx.store.peek(MAIN).unwrap().is_empty());
        assert!(fx.store.drain(MAIN, T0).unwrap().is_empty());
        assert_eq!(fx.lnm(OPS, MAIN), (0, 3, 3));
        assert_eq!(
            pairs(&fx.store.peek(OPS).unwrap()),
            expect_pairs(&[(MAIN, 0)])
        );
        assert_eq!(fx.store.state_version(MAIN, None).unwrap(), 3);
        assert_eq!(gap(&fx, MAIN, 0), (vec![1, 3], false, 1));
        // The wake due for the reset watcher is cancelled; others still come.
        assert_eq!(fx.next_wake().session_key, OPS);
        fx.assert_no_wake(900);
        fx.rec(CHILD, "goal_changed", None, T0); // 4
        assert!(fx.store.peek(MAIN).unwrap().is_empty());
        assert_eq!(fx.cursor_count(), 1);
        assert!(fx
            .store
            .watch(MAIN, CHILD, Provenance::Explicit, T0)
            .unwrap());
        assert_eq!(fx.lnm(MAIN, CHILD), (4, 4, 4));
        true
    });
}

fn link(fx: &Fixture, key: &str, agent: &str) {
    fx.conn()
        .execute(
            "INSERT INTO session_upstream_links (session_key, agent_id, catalog_id, host_id, \
             thread_id, upstream_kind, created_at, updated_at) \
             VALUES (?1, ?2, 'claude', 'gateway:local', '', 'claude-cli', 0, 0)",
            [key, agent],
        )
        .unwrap();
}

fn links(fx: &Fixture) -> Vec<String> {
    let conn = fx.conn();
    let mut stmt = conn
        .prepare("SELECT session_key FROM session_upstream_links ORDER BY 1")
        .unwrap();
    let rows = stmt.query_map([], |r| r.get(0)).unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

#[test]
fn delete_session_for_its_own_agent_takes_events_head_cursors_notices_and_link() {
    let fx = Fixture::file();
    let k = "agent:ops:k";
    for (w, t) in [(k, CHILD), (MAIN, k), (MAIN, CHILD2), (OPS, k)] {
        assert!(fx.store.watch(w, t, Provenance::Explicit, T0).unwrap());
    }
    fx.rec(k, "created", None, T0); // 1
    fx.rec(k, "human_direct_message", None, T0); // 2
    fx.rec(CHILD, "goal_changed", None, T0); // 3
    fx.rec(CHILD2, "goal_changed", None, T0); // 4
    link(&fx, k, "ops");
    link(&fx, CHILD2, "main");
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(k, 0), (CHILD2, 0)])
    );
    // Another agent of a qualified key is refused, and nothing changes.
    assert_eq!(
        fx.store.delete_session(k, Some("main")).unwrap_err().code(),
        "ERR_INVALID_ARG"
    );
    assert_eq!(fx.sequences(), [1, 2, 3, 4]);
    assert_eq!(fx.cursor_count(), 4);

    fx.store.delete_session(k, None).unwrap();
    assert_eq!(fx.sequences(), [3, 4]);
    assert_eq!(fx.head_row(k, "ops"), None);
    assert_eq!(fx.store.state_version(k, None).unwrap(), 0);
    assert_eq!(gap(&fx, k, 0), (vec![], false, 0));
    assert!(fx.cursor(k, CHILD).is_none());
    assert!(fx.cursor(MAIN, k).is_none());
    assert!(fx.cursor(OPS, k).is_none());
    assert_eq!(fx.lnm(MAIN, CHILD2), (0, 4, 4));
    assert_eq!(fx.cursor_count(), 1);
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD2, 0)])
    );
    assert!(fx.store.peek(k).unwrap().is_empty());
    assert!(fx.store.peek(OPS).unwrap().is_empty());
    assert_eq!(links(&fx), [CHILD2]);
    // Sequences are not handed out again.
    assert_eq!(fx.rec(k, "created", None, T0).sequence, 5);
    assert_eq!(fx.store.state_version(k, None).unwrap(), 5);
}

#[test]
fn delete_session_for_another_agent_leaves_cursors_alone() {
    let fx = Fixture::file();
    let mut ops = input("global", "goal_changed");
    ops.agent_id = Some("ops".into());
    fx.rec("global", "created", None, T0); // 1, agent main
    fx.record(ops.clone(), T0); // 2, agent ops
    fx.record(ops, T0); // 3, agent ops
                        // Cursor rows carry no agent: a (legacy) row naming the bare key shows who deletes it.
    fx.conn()
        .execute(
            "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, \
             last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) \
             VALUES (?1, 'global', 0, 1, 1, 'explicit', ?2)",
            rusqlite::params![MAIN, T0],
        )
        .unwrap();
    link(&fx, "global", "ops");
    link(&fx, "global", "main");
    fx.store.delete_session("global", Some("ops")).unwrap();
    // The link is the session's and agent's, as in OpenClaw: main's stays.
    assert_eq!(links(&fx), ["global"]);
    assert_eq!(fx.sequences(), [1]);
    assert_eq!(fx.store.state_version("global", Some("ops")).unwrap(), 0);
    assert_eq!(fx.store.state_version("global", None).unwrap(), 1);
    assert_eq!(fx.lnm(MAIN, "global"), (0, 1, 1));
    // The key's own agent (main, for a bare key) takes the cursors too.
    fx.store.delete_session("global", None).unwrap();
    assert_eq!(links(&fx), Vec::<String>::new());
    assert_eq!(fx.sequences(), Vec::<i64>::new());
    assert!(fx.cursor(MAIN, "global").is_none());
}
