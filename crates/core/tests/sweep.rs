//! semantics.md#cursors sweep and self-healing after a restart; semantics.md#wake which watchers are woken.

mod common;

use std::cell::RefCell;

use common::*;
use session_awareness_core::{Options, Provenance};

const T1: &str = "agent:main:t1";
const T2: &str = "agent:main:t2";
const T3: &str = "agent:main:t3";
const T4: &str = "agent:main:t4";
const NESTED: &str = "agent:main:subagent:planner";
const MAIN_LIKE: &str = "agent:main:subagentx";

/// One process, no cross-process delivery: with it, a watcher's first drain or peek after a
/// restart reads its pending cursors itself (semantics.md#processes, tested in `sync.rs`).
fn local() -> Options {
    Options {
        sync_interval_ms: 0,
        ..opts()
    }
}

fn explicit(fx: &Fixture, watcher: &str, target: &str) {
    assert!(fx
        .store
        .watch(watcher, target, Provenance::Explicit, T0)
        .unwrap());
}

fn ambient(fx: &Fixture, watcher: &str, target: &str) {
    assert!(fx
        .store
        .watch(watcher, target, Provenance::AmbientGroup, T0)
        .unwrap());
}

/// Leaves MAIN with three pending notices and one settled cursor, then restarts:
/// T2 (L 0, N 1, M 3), T1 (L 0, N 2, M 2), T4 (L 6, N 7, M 7), T3 (L = N = M = 4).
fn pending_then_restart(fx: &mut Fixture) {
    for t in [T1, T2, T3, T4] {
        explicit(fx, MAIN, t);
    }
    assert_eq!(fx.rec(T2, "goal_changed", None, T0).sequence, 1);
    assert_eq!(fx.rec(T1, "goal_changed", None, T0).sequence, 2);
    assert_eq!(fx.rec(T2, "human_direct_message", None, T0).sequence, 3);
    assert_eq!(fx.rec(T3, "goal_changed", None, T0).sequence, 4);
    assert_eq!(fx.store.acknowledge(MAIN, &strings(&[T3]), T0).unwrap(), 1);
    assert_eq!(fx.rec(T3, "run_completed", None, T0).sequence, 5);
    assert_eq!(fx.rec(T4, "goal_changed", None, T0).sequence, 6);
    assert_eq!(fx.store.acknowledge(MAIN, &strings(&[T4]), T0).unwrap(), 1);
    assert_eq!(fx.rec(T4, "goal_changed", None, T0).sequence, 7);
    assert_eq!(fx.lnm(MAIN, T2), (0, 1, 3));
    assert_eq!(fx.lnm(MAIN, T1), (0, 2, 2));
    assert_eq!(fx.lnm(MAIN, T3), (4, 4, 4));
    assert_eq!(fx.lnm(MAIN, T4), (6, 7, 7));
    fx.reopen();
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
}

#[test]
fn sweep_after_a_restart_requeues_in_ascending_refrozen_n_with_text_from_l() {
    // A wide coalescing window, so the three re-queued notices surely share one wake.
    let mut fx = Fixture::file_with(Options {
        wake_coalesce_ms: 200,
        ..local()
    });
    pending_then_restart(&mut fx);
    let report = fx.store.sweep(None, T0 + 1).unwrap();
    assert_eq!(report.notices, 3);
    assert_eq!(fx.lnm(MAIN, T2), (0, 3, 3));
    assert_eq!(fx.lnm(MAIN, T1), (0, 2, 2));
    assert_eq!(fx.lnm(MAIN, T4), (6, 7, 7));
    assert_eq!(fx.lnm(MAIN, T3), (4, 4, 4));
    let p = fx.store.peek(MAIN).unwrap();
    assert_eq!(pairs(&p), expect_pairs(&[(T1, 0), (T2, 0), (T4, 6)]));
    assert_eq!(
        p[2].text,
        "Session \"agent:main:t4\" changed (other actor). Reconcile before acting: \
         session_status sessionKey \"agent:main:t4\" changesSince 6."
    );
    // One coalesced wake, naming the first notice re-queued.
    let w = fx.next_wake();
    assert_eq!(
        (w.session_key.as_str(), w.reason.as_str()),
        (MAIN, "session-state:agent:main:t1")
    );
    fx.assert_no_wake(150);
    // Re-frozen at M, so draining settles every cursor with no reopen.
    assert_eq!(pairs(&fx.store.drain(MAIN, T0).unwrap()), pairs(&p));
    assert_eq!(fx.lnm(MAIN, T2), (3, 3, 3));
    assert_eq!(fx.lnm(MAIN, T1), (2, 2, 2));
    assert_eq!(fx.lnm(MAIN, T4), (7, 7, 7));
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    assert_eq!(fx.store.sweep(None, T0).unwrap().notices, 0);
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
}

#[test]
fn sweep_orders_across_watchers_by_refrozen_n() {
    let mut fx = Fixture::file_with(local());
    explicit(&fx, MAIN, T1);
    explicit(&fx, OPS, T2);
    explicit(&fx, OPS, T1);
    fx.rec(T2, "goal_changed", None, T0); // 1
    fx.rec(T1, "goal_changed", None, T0); // 2
    fx.rec(T2, "goal_changed", None, T0); // 3
    fx.reopen();
    assert_eq!(fx.store.sweep(None, T0).unwrap().notices, 3);
    assert_eq!(
        pairs(&fx.store.peek(OPS).unwrap()),
        expect_pairs(&[(T1, 0), (T2, 0)])
    );
    assert_eq!(fx.lnm(OPS, T2), (0, 3, 3));
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(T1, 0)])
    );
}

#[test]
fn a_queued_notice_is_neither_duplicated_nor_woken_again() {
    let fx = Fixture::file_with(local());
    explicit(&fx, MAIN, T1);
    fx.rec(T1, "goal_changed", None, T0); // 1
    assert_eq!(fx.next_wake().reason, "session-state:agent:main:t1");
    let before = fx.store.peek(MAIN).unwrap();
    fx.rec(T1, "goal_changed", None, T0); // 2
    let report = fx.store.sweep(None, T0).unwrap();
    assert_eq!(report.notices, 1);
    assert_eq!(fx.store.peek(MAIN).unwrap(), before);
    assert_eq!(fx.lnm(MAIN, T1), (0, 2, 2));
    fx.assert_no_wake(200);
    assert_eq!(fx.store.sweep(None, T0).unwrap().notices, 1);
    assert_eq!(fx.store.peek(MAIN).unwrap(), before);
    fx.assert_no_wake(100);
    assert_eq!(
        pairs(&fx.store.drain(MAIN, T0).unwrap()),
        expect_pairs(&[(T1, 0)])
    );
    assert_eq!(fx.lnm(MAIN, T1), (2, 2, 2));
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
}

#[test]
fn watcher_exists_filters_and_may_call_back_into_the_store() {
    let mut fx = Fixture::file_with(local());
    explicit(&fx, MAIN, T1);
    explicit(&fx, OPS, T1);
    explicit(&fx, "agent:ops:idle", T1);
    fx.rec(T1, "goal_changed", None, T0); // 1
    assert_eq!(
        fx.store
            .acknowledge("agent:ops:idle", &strings(&[T1]), T0)
            .unwrap(),
        1
    );
    fx.rec(T1, "compacted", None, T0); // 2
    fx.rec(T1, "goal_changed", None, T0); // 3
    assert_eq!(fx.lnm(OPS, T1), (0, 1, 3));
    assert_eq!(fx.lnm("agent:ops:idle", T1), (1, 3, 3));
    fx.reopen();
    let asked = RefCell::new(Vec::new());
    let store = fx.store.clone();
    let mut exists = |w: &str| {
        // No lock is held while asking.
        assert_eq!(store.state_version(T1, None).unwrap(), 3);
        asked.borrow_mut().push(w.to_owned());
        w != OPS
    };
    let report = fx.store.sweep(Some(&mut exists), T0).unwrap();
    assert_eq!(report.notices, 2);
    assert_eq!(
        *asked.borrow(),
        ["agent:main:main", "agent:ops:idle", "agent:ops:main"]
    );
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(T1, 0)])
    );
    assert_eq!(
        pairs(&fx.store.peek("agent:ops:idle").unwrap()),
        expect_pairs(&[(T1, 1)])
    );
    assert!(fx.store.peek(OPS).unwrap().is_empty());
    // The filtered watcher's cursor is not re-frozen.
    assert_eq!(fx.lnm(OPS, T1), (0, 1, 3));
    assert_eq!(fx.lnm(MAIN, T1), (0, 3, 3));
    // Only watchers with material history past L are asked.
    fx.store.drain(MAIN, T0).unwrap();
    fx.store.drain("agent:ops:idle", T0).unwrap();
    asked.borrow_mut().clear();
    let mut exists = |w: &str| {
        asked.borrow_mut().push(w.to_owned());
        true
    };
    assert_eq!(fx.store.sweep(Some(&mut exists), T0).unwrap().notices, 1);
    assert_eq!(*asked.borrow(), [OPS]);
    assert_eq!(
        pairs(&fx.store.peek(OPS).unwrap()),
        expect_pairs(&[(T1, 0)])
    );
}

#[test]
fn a_notice_lost_from_memory_self_heals_on_the_next_material_event() {
    let mut fx = Fixture::file_with(local());
    explicit(&fx, MAIN, T1);
    explicit(&fx, MAIN, T2);
    fx.rec(T1, "goal_changed", None, T0); // 1
    fx.rec(T2, "goal_changed", None, T0); // 2
    fx.reopen();
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    assert!(fx.store.drain(MAIN, T0).unwrap().is_empty());
    // A log-only event heals nothing.
    fx.rec(T1, "run_completed", None, T0); // 3
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    fx.rec(T1, "human_direct_message", None, T0); // 4
    assert_eq!(fx.lnm(MAIN, T1), (0, 1, 4));
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(T1, 0)])
    );
    assert_eq!(fx.next_wake().reason, "session-state:agent:main:t1");
    // Draining consumes the healed notice and reopens from the frozen N.
    assert_eq!(
        pairs(&fx.store.drain(MAIN, T0).unwrap()),
        expect_pairs(&[(T1, 0)])
    );
    assert_eq!(fx.lnm(MAIN, T1), (1, 4, 4));
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(T1, 1)])
    );
    // The other lost notice still waits for a sweep or a material event.
    assert_eq!(fx.lnm(MAIN, T2), (0, 2, 2));
}

#[test]
fn nested_watchers_and_ambient_cursors_are_never_woken() {
    let mut fx = Fixture::file_with(local());
    explicit(&fx, NESTED, T1);
    ambient(&fx, OPS, T1);
    explicit(&fx, MAIN_LIKE, T2);
    explicit(&fx, MAIN, T3);
    fx.rec(T1, "goal_changed", None, T0); // 1
    fx.rec(T1, "goal_changed", None, T0); // 2
    fx.rec(T2, "goal_changed", None, T0); // 3
                                          // The main-like `subagentx` watcher is woken; the nested and ambient ones only queue.
    let w = fx.next_wake();
    assert_eq!(
        (w.session_key.as_str(), w.reason.as_str()),
        (MAIN_LIKE, "session-state:agent:main:t2")
    );
    fx.assert_no_wake(200);
    assert_eq!(
        pairs(&fx.store.peek(NESTED).unwrap()),
        expect_pairs(&[(T1, 0)])
    );
    assert_eq!(
        pairs(&fx.store.peek(OPS).unwrap()),
        expect_pairs(&[(T1, 0)])
    );
    // Reopening on drain does not wake them either.
    assert_eq!(
        pairs(&fx.store.drain(NESTED, T0).unwrap()),
        expect_pairs(&[(T1, 0)])
    );
    assert_eq!(
        pairs(&fx.store.peek(NESTED).unwrap()),
        expect_pairs(&[(T1, 1)])
    );
    assert_eq!(fx.store.acknowledge(OPS, &strings(&[T1]), T0).unwrap(), 1);
    assert_eq!(
        pairs(&fx.store.peek(OPS).unwrap()),
        expect_pairs(&[(T1, 1)])
    );
    // A producer-named nested watcher with no cursor: queue only.
    let mut i = input(T3, "goal_changed");
    i.watchers = strings(&[CHILD]);
    fx.record(i, T0); // 4
    assert_eq!(fx.next_wake().session_key, MAIN);
    assert_eq!(
        pairs(&fx.store.peek(CHILD).unwrap()),
        expect_pairs(&[(T3, 0)])
    );
    fx.assert_no_wake(200);
    // Nor after a restart and a sweep.
    fx.reopen();
    assert_eq!(fx.store.sweep(None, T0).unwrap().notices, 5);
    let mut woken = [fx.next_wake().session_key, fx.next_wake().session_key];
    woken.sort();
    assert_eq!(woken, [MAIN, MAIN_LIKE]);
    fx.assert_no_wake(200);
    assert_eq!(
        pairs(&fx.store.peek(NESTED).unwrap()),
        expect_pairs(&[(T1, 1)])
    );
    // Promoting the ambient cursor makes its next notice wake.
    explicit(&fx, OPS, T1);
    fx.store.drain(OPS, T0).unwrap();
    fx.rec(T1, "goal_changed", None, T0);
    assert_eq!(fx.next_wake().session_key, OPS);
}

#[test]
fn a_watchers_own_events_never_notify_it() {
    let mut fx = Fixture::file_with(local());
    explicit(&fx, MAIN, T1);
    for _ in 0..3 {
        fx.rec(T1, "goal_changed", Some(MAIN), T0);
    }
    assert_eq!(fx.lnm(MAIN, T1), (0, 0, 0));
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    fx.assert_no_wake(150);
    // Mixed: another actor opens the notice; MAIN's own events after it change nothing.
    assert_eq!(fx.rec(T1, "goal_changed", Some(OPS), T0).sequence, 4);
    assert_eq!(fx.next_wake().session_key, MAIN);
    fx.rec(T1, "human_direct_message", Some(MAIN), T0); // 5
    assert_eq!(fx.lnm(MAIN, T1), (0, 4, 4));
    assert_eq!(
        pairs(&fx.store.drain(MAIN, T0).unwrap()),
        expect_pairs(&[(T1, 0)])
    );
    assert_eq!(fx.lnm(MAIN, T1), (4, 4, 4));
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    fx.rec(T1, "goal_changed", Some(MAIN), T0); // 6
    fx.reopen();
    assert_eq!(fx.store.sweep(None, T0).unwrap().notices, 0);
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    fx.assert_no_wake(150);
}

#[test]
fn sweep_then_prunes() {
    let mut fx = Fixture::file_with(Options {
        max_events: 2,
        ..local()
    });
    explicit(&fx, MAIN, T1);
    fx.rec(T1, "goal_changed", None, T0);
    // The first record's automatic prune finds one row; let it finish before the backlog.
    fx.settle();
    for _ in 0..3 {
        fx.rec(T1, "goal_changed", None, T0);
    }
    assert_eq!(fx.sequences(), [1, 2, 3, 4]);
    fx.reopen();
    let report = fx.store.sweep(None, T0).unwrap();
    assert_eq!(report.notices, 1);
    assert_eq!(
        (report.prune.events_deleted, report.prune.cursors_deleted),
        (2, 0)
    );
    assert_eq!(fx.sequences(), [3, 4]);
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(T1, 0)])
    );
}

#[test]
fn acknowledge_after_a_restart_consumes_the_stored_notice() {
    let mut fx = Fixture::file_with(local());
    explicit(&fx, MAIN, T1);
    fx.rec(T1, "goal_changed", None, T0); // 1
    fx.rec(T1, "goal_changed", None, T0); // 2
    fx.reopen();
    // A host that kept the notice in its own queue acknowledges it after the restart.
    assert_eq!(fx.store.acknowledge(MAIN, &strings(&[T1]), T0).unwrap(), 1);
    assert_eq!(fx.lnm(MAIN, T1), (1, 2, 2));
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(T1, 1)])
    );
    assert_eq!(fx.store.sweep(None, T0).unwrap().notices, 1);
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(T1, 1)])
    );
    assert_eq!(fx.store.acknowledge(MAIN, &strings(&[T1]), T0).unwrap(), 1);
    assert_eq!(fx.lnm(MAIN, T1), (2, 2, 2));
    assert_eq!(fx.store.sweep(None, T0).unwrap().notices, 0);
}

#[test]
fn a_sweep_wakes_each_watcher_once_even_without_coalescing() {
    // No coalescing window: a wake is called as soon as its timer task runs, so a watcher
    // woken for each of its notices would be woken many times.
    let mut fx = Fixture::file_with(Options {
        wake_coalesce_ms: 0,
        ..local()
    });
    let targets: Vec<String> = (0..200).map(|i| format!("agent:main:t{i}")).collect();
    for t in &targets {
        explicit(&fx, MAIN, t);
        fx.rec(t, "goal_changed", None, T0);
    }
    fx.reopen();
    // The records' own wakes, from before the restart.
    while fx
        .wakes
        .recv_timeout(std::time::Duration::from_millis(100))
        .is_ok()
    {}
    let report = fx.store.sweep(None, T0 + 1).unwrap();
    assert_eq!(report.notices, 200);
    let w = fx.next_wake();
    assert_eq!(
        (w.session_key.as_str(), w.reason.as_str()),
        (MAIN, "session-state:agent:main:t0")
    );
    fx.assert_no_wake(200);
    assert_eq!(fx.store.peek(MAIN).unwrap().len(), 200);
}
