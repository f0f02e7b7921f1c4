//! semantics.md#cursors-acknowledge: acknowledging after reconciling (`through`), and
//! semantics.md#wake: a drain or acknowledge that leaves the watcher nothing queued withdraws
//! its scheduled wake.

mod common;

use common::*;
use session_awareness_core::{Options, Provenance};

fn watched(fx: &Fixture) {
    assert_eq!(fx.rec(CHILD, "created", None, T0).sequence, 1);
    assert!(fx
        .store
        .watch(MAIN, CHILD, Provenance::Explicit, T0)
        .unwrap());
}

/// Three quick messages: L1 N2 M4, as in the gateway guide's scenario.
fn burst(fx: &Fixture) {
    for _ in 0..3 {
        fx.rec(CHILD, "human_direct_message", None, T0);
    }
    assert_eq!(fx.lnm(MAIN, CHILD), (1, 2, 4));
}

fn through(fx: &Fixture, targets: &[&str], t: f64) -> u64 {
    fx.store
        .acknowledge_through(MAIN, &strings(targets), None, Some(t), T0 + 20)
        .unwrap()
}

#[test]
fn the_guide_pattern_gives_one_notice_and_one_wake_per_burst() {
    let fx = Fixture::file();
    watched(&fx);
    burst(&fx);
    assert_eq!(fx.next_wake().reason, format!("session-state:{CHILD}"));
    // The turn: drain, read changesSince(target, L), acknowledge through the last sequence.
    let notices = fx.store.drain(MAIN, T0 + 10).unwrap();
    assert_eq!(pairs(&notices), expect_pairs(&[(CHILD, 1)]));
    assert_eq!(fx.lnm(MAIN, CHILD), (2, 4, 4));
    assert_eq!(fx.store.scheduled_wakes(), vec![MAIN.to_owned()]);
    let read = fx.store.changes_since(CHILD, 1.0, None, None).unwrap();
    assert_eq!(seqs(&read.events), [2, 3, 4]);
    assert_eq!(through(&fx, &[CHILD], 4.0), 1);
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!(
        (c.last_seen, c.notified, c.material, c.updated_at),
        (4, 4, 4, T0 + 20)
    );
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    assert!(fx.store.scheduled_wakes().is_empty());
    fx.assert_no_wake(150);
    assert!(fx.store.drain(MAIN, T0).unwrap().is_empty());
    // A later event opens a fresh notice as usual.
    assert_eq!(fx.rec(CHILD, "human_direct_message", None, T0).sequence, 5);
    assert_eq!(fx.lnm(MAIN, CHILD), (4, 5, 5));
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 4)])
    );
    assert_eq!(fx.next_wake().session_key, MAIN);
}

#[test]
fn without_through_the_drain_reopens_as_the_seeds_say() {
    let fx = Fixture::file();
    watched(&fx);
    burst(&fx);
    fx.next_wake();
    fx.store.drain(MAIN, T0 + 10).unwrap();
    assert_eq!(
        fx.store.acknowledge(MAIN, &strings(&[CHILD]), T0).unwrap(),
        1
    );
    assert_eq!(fx.lnm(MAIN, CHILD), (4, 4, 4));
    // Drained but not acknowledged: the reopened notice is handed out and wakes again.
    let fx = Fixture::file();
    watched(&fx);
    burst(&fx);
    fx.next_wake();
    fx.store.drain(MAIN, T0 + 10).unwrap();
    assert_eq!(fx.next_wake().session_key, MAIN);
    assert_eq!(
        pairs(&fx.store.drain(MAIN, T0).unwrap()),
        expect_pairs(&[(CHILD, 2)])
    );
}

#[test]
fn through_withdraws_an_unreopened_notice_and_a_partial_read_names_through() {
    let fx = Fixture::file();
    watched(&fx);
    burst(&fx);
    // Not drained: L1 N2 M4. A read up to 3 leaves one notice naming 3.
    assert_eq!(through(&fx, &[CHILD], 3.0), 1);
    assert_eq!(fx.lnm(MAIN, CHILD), (3, 4, 4));
    let left = fx.store.peek(MAIN).unwrap();
    assert_eq!(pairs(&left), expect_pairs(&[(CHILD, 3)]));
    assert_eq!(
        left[0].text,
        "Session \"agent:main:subagent:child\" changed (other actor). Reconcile before acting: \
         session_status sessionKey \"agent:main:subagent:child\" changesSince 3."
    );
    // A read that goes no further than L reads nothing new: nothing changes.
    assert_eq!(through(&fx, &[CHILD], 3.0), 0);
    assert_eq!(through(&fx, &[CHILD], 0.0), 0);
    assert_eq!(fx.lnm(MAIN, CHILD), (3, 4, 4));
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 3)])
    );
    // Past M (log-only events may follow the last material one): everything is read.
    fx.rec(CHILD, "run_completed", None, T0); // 5, log only
    assert_eq!(through(&fx, &[CHILD], 5.0), 1);
    assert_eq!(fx.lnm(MAIN, CHILD), (4, 4, 4));
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    assert_eq!(through(&fx, &[CHILD], 9.0), 0);
    // A partial read below N (a truncated changesSince): L = through, N = M.
    for _ in 0..3 {
        fx.rec(CHILD, "human_direct_message", None, T0); // 6, 7, 8
    }
    assert_eq!(fx.lnm(MAIN, CHILD), (4, 6, 8));
    assert_eq!(through(&fx, &[CHILD], 5.0), 1);
    assert_eq!(fx.lnm(MAIN, CHILD), (5, 8, 8));
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 5)])
    );
}

#[test]
fn through_must_be_a_non_negative_safe_integer_and_changes_nothing_otherwise() {
    let fx = Fixture::file();
    watched(&fx);
    burst(&fx);
    for bad in [-1.0, 0.5, f64::NAN, f64::INFINITY, 9_007_199_254_740_992.0] {
        let e = fx
            .store
            .acknowledge_through(MAIN, &strings(&[CHILD]), None, Some(bad), T0)
            .unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_ARG");
    }
    assert_eq!(fx.lnm(MAIN, CHILD), (1, 2, 4));
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 1)])
    );
    assert_eq!(fx.store.scheduled_wakes(), vec![MAIN.to_owned()]);
}

#[test]
fn through_keeps_the_wake_while_another_notice_is_queued_and_combines_with_scope() {
    let fx = Fixture::file();
    watched(&fx);
    assert!(fx
        .store
        .watch(MAIN, CHILD2, Provenance::Explicit, T0)
        .unwrap());
    fx.rec(CHILD, "human_direct_message", None, T0); // 2
    fx.rec(CHILD2, "human_direct_message", None, T0); // 3
    assert_eq!(through(&fx, &[CHILD], 2.0), 1);
    assert_eq!(fx.lnm(MAIN, CHILD), (2, 2, 2));
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD2, 0)])
    );
    assert_eq!(fx.store.scheduled_wakes(), vec![MAIN.to_owned()]);
    // A scope that the cursor is not bound to leaves it alone.
    let n = fx
        .store
        .acknowledge_through(MAIN, &strings(&[CHILD2]), Some("/other"), Some(3.0), T0)
        .unwrap();
    assert_eq!(n, 0);
    assert_eq!(fx.lnm(MAIN, CHILD2), (0, 3, 3));
    assert_eq!(through(&fx, &[CHILD2], 3.0), 1);
    assert!(fx.store.scheduled_wakes().is_empty());
    fx.assert_no_wake(150);
}
#[test]
fn a_drain_that_empties_the_watcher_withdraws_its_wake() {
    let fx = Fixture::file_with(Options {
        wake_coalesce_ms: 100,
        ..opts()
    });
    watched(&fx);
    fx.rec(CHILD, "human_direct_message", None, T0);
    assert_eq!(fx.store.scheduled_wakes(), vec![MAIN.to_owned()]);
    assert_eq!(
        pairs(&fx.store.drain(MAIN, T0).unwrap()),
        expect_pairs(&[(CHILD, 1)])
    );
    assert!(fx.store.scheduled_wakes().is_empty());
    fx.assert_no_wake(300);
    // A drain that reopens keeps the wake: a notice is queued.
    fx.rec(CHILD, "human_direct_message", None, T0); // 3: opens
    fx.store.drain(MAIN, T0).unwrap();
    assert_eq!(fx.lnm(MAIN, CHILD), (3, 3, 3));
    fx.rec(CHILD, "human_direct_message", None, T0); // 4: opens
    fx.rec(CHILD, "human_direct_message", None, T0); // 5
    assert_eq!(fx.lnm(MAIN, CHILD), (3, 4, 5));
    fx.store.drain(MAIN, T0).unwrap();
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 4)])
    );
    assert_eq!(fx.store.scheduled_wakes(), vec![MAIN.to_owned()]);
    assert_eq!(fx.next_wake().session_key, MAIN);
}
