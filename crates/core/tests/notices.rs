//! semantics.md#cursors: acknowledging, the notice queue, the notice text and its context key.

mod common;
mod watching;

use common::*;
use session_awareness_core::{
    decode_notice_context_key, encode_notice_context_key, Notice, Options,
};
use watching::*;

/// A file store where MAIN watches CHILD, CHILD2 and W3 explicitly, from T0.
fn main_watching_three() -> Fixture {
    let fx = Fixture::file();
    for t in [CHILD, CHILD2, W3] {
        assert!(explicit(&fx, MAIN, t, T0));
    }
    fx
}

#[test]
fn acknowledge_then_reopen_hands_out_old_n_exactly_once() {
    let fx = Fixture::file();
    assert_eq!(fx.rec(CHILD, "created", None, T0).sequence, 1);
    assert!(explicit(&fx, MAIN, CHILD, T0));
    assert_eq!(fx.rec(CHILD, "goal_changed", None, T0).sequence, 2);
    assert_eq!(fx.next_wake().session_key, MAIN);
    fx.rec(CHILD, "goal_changed", None, T0);
    fx.rec(CHILD, "goal_changed", None, T0);
    assert_eq!(fx.lnm(MAIN, CHILD), (1, 2, 4));
    let first = fx.store.drain(MAIN, T0 + 10).unwrap();
    assert_eq!(pairs(&first), expect_pairs(&[(CHILD, 1)]));
    // L = old N, N = max(M, old N): a fresh notice from 2, and a wake for it.
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!(
        (c.last_seen, c.notified, c.material, c.updated_at),
        (2, 4, 4, T0 + 10)
    );
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 2)])
    );
    assert_eq!(fx.next_wake().reason, format!("session-state:{CHILD}"));
    let second = fx.store.drain(MAIN, T0).unwrap();
    assert_eq!(pairs(&second), expect_pairs(&[(CHILD, 2)]));
    assert_eq!(
        second[0].text,
        "Session \"agent:main:subagent:child\" changed (other actor). Reconcile before acting: \
         session_status sessionKey \"agent:main:subagent:child\" changesSince 2."
    );
    assert_eq!(fx.lnm(MAIN, CHILD), (4, 4, 4));
    assert!(fx.store.drain(MAIN, T0).unwrap().is_empty());
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    fx.assert_no_wake(150);
}

#[test]
fn acknowledge_counts_pending_targets_once() {
    let fx = main_watching_three();
    fx.rec(CHILD, "goal_changed", None, T0); // 1
    fx.rec(CHILD2, "goal_changed", None, T0); // 2
    let targets = strings(&[CHILD, CHILD, CHILD2, W3, "agent:main:none", "global"]);
    assert_eq!(fx.store.acknowledge(MAIN, &targets, T0 + 3).unwrap(), 2);
    assert_eq!(fx.lnm(MAIN, CHILD), (1, 1, 1));
    assert_eq!(fx.lnm(MAIN, CHILD2), (2, 2, 2));
    assert_eq!(fx.cursor(MAIN, CHILD).unwrap().updated_at, T0 + 3);
    assert_eq!(fx.lnm(MAIN, W3), (0, 0, 0));
    assert_eq!(fx.cursor(MAIN, W3).unwrap().updated_at, T0);
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    assert_eq!(fx.store.acknowledge(MAIN, &targets, T0).unwrap(), 0);
    assert_eq!(fx.store.acknowledge(MAIN, &[], T0).unwrap(), 0);

    // With material events after the notice opened, one fresh notice from old N; the next
    // acknowledge consumes it.
    fx.rec(CHILD, "goal_changed", None, T0); // 3
    fx.rec(CHILD, "goal_changed", None, T0); // 4
                                             // A repeated target counts once: the fresh notice stays pending.
    assert_eq!(
        fx.store
            .acknowledge(MAIN, &strings(&[CHILD, CHILD]), T0)
            .unwrap(),
        1
    );
    assert_eq!(fx.lnm(MAIN, CHILD), (3, 4, 4));
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 3)])
    );
    assert_eq!(
        fx.store.acknowledge(MAIN, &strings(&[CHILD]), T0).unwrap(),
        1
    );
    assert_eq!(fx.lnm(MAIN, CHILD), (4, 4, 4));
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    assert_eq!(
        fx.store.acknowledge(MAIN, &strings(&[CHILD]), T0).unwrap(),
        0
    );
}

#[test]
fn peek_acknowledges_nothing() {
    let fx = Fixture::file();
    assert!(explicit(&fx, MAIN, CHILD, T0));
    fx.rec(CHILD, "goal_changed", None, T0);
    let a = fx.store.peek(MAIN).unwrap();
    let b = fx.store.peek(MAIN).unwrap();
    assert_eq!((a.len(), a == b), (1, true));
    assert_eq!(fx.lnm(MAIN, CHILD), (0, 1, 1));
    assert_eq!(fx.store.drain(MAIN, T0).unwrap(), a);
}

#[test]
fn unwatch_drops_the_pending_notice() {
    let fx = Fixture::file();
    assert!(explicit(&fx, MAIN, CHILD, T0));
    assert!(explicit(&fx, MAIN, CHILD2, T0));
    fx.rec(CHILD, "goal_changed", None, T0);
    fx.rec(CHILD2, "goal_changed", None, T0);
    assert!(fx.store.unwatch(MAIN, CHILD).unwrap());
    assert!(fx.cursor(MAIN, CHILD).is_none());
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD2, 0)])
    );
    assert!(!fx.store.unwatch(MAIN, CHILD).unwrap());
    fx.rec(CHILD, "goal_changed", None, T0);
    assert_eq!(
        pairs(&fx.store.drain(MAIN, T0).unwrap()),
        expect_pairs(&[(CHILD2, 0)])
    );
    assert!(fx.cursor(MAIN, CHILD).is_none());
}

#[test]
fn a_re_seed_drops_the_pending_notice() {
    let fx = Fixture::file();
    assert!(explicit(&fx, MAIN, CHILD, T0));
    fx.rec(CHILD, "goal_changed", None, T0); // 1
    assert_eq!(fx.store.peek(MAIN).unwrap().len(), 1);
    assert_eq!(spawn(&fx, CHILD, &[MAIN], T0), 2);
    assert_eq!(fx.lnm(MAIN, CHILD), (2, 2, 2));
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    assert!(fx.store.drain(MAIN, T0).unwrap().is_empty());
    assert_eq!(fx.lnm(MAIN, CHILD), (2, 2, 2));
}

#[test]
fn the_notice_text_is_pinned_byte_for_byte() {
    let fx = Fixture::file();
    let odd = "agent:main:we\"ird\nkey\\x";
    assert!(explicit(&fx, MAIN, CHILD, T0));
    assert!(explicit(&fx, MAIN, odd, T0));
    for _ in 0..3 {
        fx.rec(CHILD2, "created", None, T0);
    }
    assert!(explicit(&fx, OPS, CHILD2, T0));
    fx.rec(CHILD, "human_direct_message", None, T0); // 4
    fx.rec(odd, "goal_changed", None, T0); // 5
    fx.rec(CHILD2, "goal_changed", None, T0); // 6
    let n = fx.store.drain(MAIN, T0).unwrap();
    assert_eq!(
        n,
        [
            Notice {
                watcher_key: MAIN.into(),
                target_key: CHILD.into(),
                changes_since: 0,
                text: "Session \"agent:main:subagent:child\" changed (other actor). Reconcile \
                       before acting: session_status sessionKey \"agent:main:subagent:child\" \
                       changesSince 0."
                    .into(),
                context_key: "session-state:6167656e743a6d61696e3a7375626167656e743a6368696c64"
                    .into(),

                scope: None,
            },
            Notice {
                watcher_key: MAIN.into(),
                target_key: odd.into(),
                changes_since: 0,
                text: r#"Session "agent:main:we\"ird\nkey\\x" changed (other actor). Reconcile before acting: session_status sessionKey "agent:main:we\"ird\nkey\\x" changesSince 0."#
                    .into(),
                context_key: "session-state:6167656e743a6d61696e3a7765226972640a6b65795c78"
                    .into(),

                scope: None,
            },
        ]
    );
    assert!(!n[1].text.contains('\n'));
    let o = fx.store.peek(OPS).unwrap();
    assert_eq!(
        o[0].text,
        "Session \"agent:main:subagent:second\" changed (other actor). Reconcile before acting: \
         session_status sessionKey \"agent:main:subagent:second\" changesSince 3."
    );
}

#[test]
fn the_context_key_is_hex_of_the_target_and_decodes_strictly() {
    assert_eq!(
        encode_notice_context_key("agent:main:x"),
        "session-state:6167656e743a6d61696e3a78"
    );
    assert_eq!(encode_notice_context_key("é"), "session-state:c3a9");
    for key in [
        CHILD,
        "agent:main:we\"ird\nkey",
        "é😀",
        "\u{feff}agent:main:x",
    ] {
        let ck = encode_notice_context_key(key);
        assert_eq!(decode_notice_context_key(&ck).as_deref(), Some(key));
    }
    assert_eq!(
        decode_notice_context_key("session-state:efbbbf78").as_deref(),
        Some("\u{feff}x")
    );
    for bad in [
        "session-state:",
        "session-state:616",
        "session-state:6A",
        "session-state:zz",
        "session-state:ff",
        "session-state: 61",
        "Session-state:61",
        "state:61",
        "61",
    ] {
        assert_eq!(decode_notice_context_key(bad), None, "{bad:?}");
    }
}

#[test]
fn drain_hands_out_notices_in_queue_order() {
    let fx = main_watching_three();
    fx.rec(CHILD2, "goal_changed", None, T0); // 1
    fx.rec(W3, "goal_changed", None, T0); // 2
    fx.rec(CHILD, "goal_changed", None, T0); // 3
    fx.rec(CHILD2, "goal_changed", None, T0); // 4: absorbed by the open notice
    let want = expect_pairs(&[(CHILD2, 0), (W3, 0), (CHILD, 0)]);
    assert_eq!(pairs(&fx.store.peek(MAIN).unwrap()), want);
    assert_eq!(pairs(&fx.store.drain(MAIN, T0).unwrap()), want);
    // The reopened CHILD2 notice is queued on its own.
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD2, 1)])
    );
}

#[test]
fn drain_runs_no_sql_with_nothing_pending_and_keeps_notices_on_failure() {
    let fx = Fixture::file_with(Options {
        busy_timeout_ms: 0,
        ..opts()
    });
    assert!(explicit(&fx, MAIN, CHILD, T0));
    fx.rec(CHILD, "goal_changed", None, T0);
    fx.settle();
    let blocker = fx.conn();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert!(fx.store.drain(OPS, T0).unwrap().is_empty());
    let err = fx.store.drain(MAIN, T0).unwrap_err();
    assert_eq!(err.code(), "ERR_DB");
    blocker.execute_batch("COMMIT").unwrap();
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 0)])
    );
    assert_eq!(
        pairs(&fx.store.drain(MAIN, T0).unwrap()),
        expect_pairs(&[(CHILD, 0)])
    );
    assert_eq!(fx.lnm(MAIN, CHILD), (1, 1, 1));
}

#[test]
fn every_watcher_of_a_target_gets_its_own_notice() {
    // Long enough that the drain below comes before the wakes are delivered.
    let fx = Fixture::file_with(Options {
        wake_coalesce_ms: 300,
        ..opts()
    });
    assert!(explicit(&fx, MAIN, CHILD, T0));
    assert!(explicit(&fx, OPS, CHILD, T0));
    fx.rec(CHILD, "goal_changed", None, T0);
    assert_eq!(
        pairs(&fx.store.drain(MAIN, T0).unwrap()),
        expect_pairs(&[(CHILD, 0)])
    );
    assert_eq!(
        pairs(&fx.store.peek(OPS).unwrap()),
        expect_pairs(&[(CHILD, 0)])
    );
    assert_eq!(fx.lnm(OPS, CHILD), (0, 1, 1));
    // The drain left MAIN nothing queued, so its wake was withdrawn (semantics.md#wake).
    assert_eq!(fx.next_wake().session_key, OPS);
    fx.assert_no_wake(400);
}
