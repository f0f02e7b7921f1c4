//! semantics.md#recording-fan-out and semantics.md#cursors: seeding, material updates, acknowledging, the notice text and its
//! context key; semantics.md#wake wakes from records and acknowledges.

mod common;

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, OnceLock};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use common::*;
use parking_lot::Mutex;
use session_awareness_core::{
    decode_notice_context_key, encode_notice_context_key, Hooks, Notice, Options, Provenance,
    Store, WakeRequest, WakeSink,
};

const W3: &str = "agent:main:coordinator";

fn explicit(fx: &Fixture, watcher: &str, target: &str, now: i64) -> bool {
    fx.store
        .watch(watcher, target, Provenance::Explicit, now)
        .unwrap()
}

/// A spawn edge as a gateway records it: the spawning parent is both actor and watcher.
fn spawn(fx: &Fixture, child: &str, watchers: &[&str], now: i64) -> i64 {
    let mut i = input(child, "child_spawned");
    i.actor_type = "agent".into();
    i.actor_id = watchers.first().map(|w| (*w).to_owned());
    i.watchers = strings(watchers);
    fx.record(i, now).sequence
}

fn notify_with(fx: &Fixture, target: &str, watchers: &[&str], now: i64) -> i64 {
    let mut i = input(target, "human_direct_message");
    i.watchers = strings(watchers);
    fx.record(i, now).sequence
}

#[test]
fn a_spawn_edge_seeds_the_named_watchers_at_the_new_sequence() {
    let fx = Fixture::file();
    fx.rec(CHILD2, "created", None, T0);
    assert!(explicit(&fx, W3, CHILD, T0));
    let s = spawn(
        &fx,
        CHILD,
        &[MAIN, "global", CHILD, MAIN, "agent:MAIN:x"],
        T0 + 1,
    );
    assert_eq!(s, 2);
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!((c.last_seen, c.notified, c.material), (2, 2, 2));
    assert_eq!((c.provenance, c.updated_at), (Provenance::Explicit, T0 + 1));
    // Only the named watchers: the existing cursor of an unnamed watcher is left alone.
    assert_eq!(fx.lnm(W3, CHILD), (0, 0, 0));
    assert_eq!(fx.cursor_count(), 2);
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    fx.assert_no_wake(100);

    // A re-seed keeps the provenance of an existing cursor.
    assert!(fx
        .store
        .watch(OPS, CHILD, Provenance::AmbientGroup, T0)
        .unwrap());
    assert_eq!(spawn(&fx, CHILD, &[OPS], T0 + 2), 3);
    let c = fx.cursor(OPS, CHILD).unwrap();
    assert_eq!((c.last_seen, c.notified, c.material), (3, 3, 3));
    assert_eq!(c.provenance, Provenance::AmbientGroup);
    // A bare target gets no cursor.
    spawn(&fx, "global", &[MAIN], T0);
    assert!(fx.cursor(MAIN, "global").is_none());
    assert_eq!(fx.cursor_count(), 3);
}

#[test]
fn a_producer_named_watcher_without_a_cursor_opens_from_zero() {
    let fx = Fixture::file();
    fx.rec(CHILD2, "created", None, T0);
    assert_eq!(notify_with(&fx, CHILD, &[MAIN], T0 + 5), 2);
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!((c.last_seen, c.notified, c.material), (0, 2, 2));
    assert_eq!((c.provenance, c.updated_at), (Provenance::Explicit, T0 + 5));
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 0)])
    );
    let w = fx.next_wake();
    assert_eq!(w.reason, format!("session-state:{CHILD}"));
    // Naming a watcher that already has a cursor is an ordinary material update.
    assert_eq!(notify_with(&fx, CHILD, &[MAIN], T0 + 6), 3);
    assert_eq!(fx.lnm(MAIN, CHILD), (0, 2, 3));
    assert_eq!(fx.store.peek(MAIN).unwrap().len(), 1);
    // A log-only kind naming a watcher creates nothing.
    let mut i = input(CHILD2, "run_completed");
    i.watchers = strings(&[MAIN]);
    fx.record(i, T0);
    assert!(fx.cursor(MAIN, CHILD2).is_none());
}

#[test]
fn bare_keys_are_never_watched_nor_watchers() {
    let fx = Fixture::file();
    for (w, t) in [
        (MAIN, "global"),
        ("global", CHILD),
        ("main", CHILD),
        ("agent:MAIN:x", CHILD),
        (MAIN, "agent:main:"),
        (MAIN, MAIN),
    ] {
        assert!(!explicit(&fx, w, t, T0), "{w} -> {t}");
        assert!(!fx.store.watch(w, t, Provenance::AmbientGroup, T0).unwrap());
    }
    assert_eq!(
        fx.store
            .watch("", CHILD, Provenance::Explicit, T0)
            .unwrap_err()
            .code(),
        "ERR_INVALID_ARG"
    );
    notify_with(&fx, "global", &[MAIN], T0);
    notify_with(&fx, CHILD, &["main", "global", "agent:MAIN:x"], T0);
    assert_eq!(fx.cursor_count(), 0);
    assert_eq!(fx.store.state_version("global", None).unwrap(), 1);
    assert!(fx.store.peek("global").unwrap().is_empty());
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
}

#[test]
fn watch_seeds_at_the_head_and_never_clobbers() {
    let fx = Fixture::file();
    fx.rec(CHILD, "created", None, T0);
    fx.rec(CHILD, "compacted", None, T0);
    assert!(explicit(&fx, MAIN, CHILD, T0));
    assert_eq!(fx.lnm(MAIN, CHILD), (2, 2, 2));
    assert_eq!(fx.rec(CHILD, "goal_changed", None, T0).sequence, 3);
    let before = fx.store.peek(MAIN).unwrap();
    assert_eq!(pairs(&before), expect_pairs(&[(CHILD, 2)]));
    assert!(explicit(&fx, MAIN, CHILD, T0 + 9));
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!(
        (c.last_seen, c.notified, c.material, c.updated_at),
        (2, 3, 3, T0 + 9)
    );
    assert_eq!(fx.store.peek(MAIN).unwrap(), before);
    // A target with no head seeds at 0; the head read is the target's own agent's.
    assert!(explicit(&fx, MAIN, CHILD2, T0));
    assert_eq!(fx.lnm(MAIN, CHILD2), (0, 0, 0));
    fx.rec("agent:ops:x", "created", None, T0);
    assert!(explicit(&fx, MAIN, "agent:ops:x", T0));
    assert_eq!(fx.lnm(MAIN, "agent:ops:x"), (4, 4, 4));
}

#[test]
fn ambient_group_is_promoted_to_explicit_and_never_back() {
    let fx = Fixture::file();
    let prov = |p| {
        assert!(fx.store.watch(MAIN, CHILD, p, T0).unwrap());
        fx.cursor(MAIN, CHILD).unwrap().provenance
    };
    assert_eq!(prov(Provenance::AmbientGroup), Provenance::AmbientGroup);
    assert_eq!(prov(Provenance::AmbientGroup), Provenance::AmbientGroup);
    assert_eq!(prov(Provenance::Explicit), Provenance::Explicit);
    assert_eq!(prov(Provenance::AmbientGroup), Provenance::Explicit);
    assert_eq!(fx.lnm(MAIN, CHILD), (0, 0, 0));
}

#[test]
fn a_watchers_own_event_does_not_touch_its_cursor() {
    let fx = Fixture::file();
    assert!(explicit(&fx, MAIN, CHILD, T0));
    assert!(explicit(&fx, OPS, CHILD, T0));
    assert_eq!(
        fx.rec(CHILD, "goal_changed", Some(MAIN), T0 + 7).sequence,
        1
    );
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!(
        (c.last_seen, c.notified, c.material, c.updated_at),
        (0, 0, 0, T0)
    );
    assert_eq!(fx.lnm(OPS, CHILD), (0, 1, 1));
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    assert_eq!(
        pairs(&fx.store.peek(OPS).unwrap()),
        expect_pairs(&[(CHILD, 0)])
    );
    // A producer-named watcher that is the actor gets no cursor.
    let mut i = input(CHILD2, "human_direct_message");
    i.actor_type = "agent".into();
    i.actor_id = Some(W3.into());
    i.watchers = strings(&[W3, MAIN]);
    assert_eq!(fx.record(i, T0).sequence, 2);
    assert!(fx.cursor(W3, CHILD2).is_none());
    assert_eq!(fx.lnm(MAIN, CHILD2), (0, 2, 2));
}

#[test]
fn log_only_kinds_never_touch_cursors() {
    let fx = Fixture::file();
    assert!(explicit(&fx, MAIN, CHILD, T0));
    for (i, kind) in [
        "run_completed",
        "run_failed",
        "compacted",
        "adopted",
        "created",
    ]
    .iter()
    .enumerate()
    {
        let mut e = input(CHILD, kind);
        e.watchers = strings(&[MAIN, OPS]);
        assert_eq!(fx.record(e, T0 + 1 + i as i64).sequence, i as i64 + 1);
    }
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!(
        (c.last_seen, c.notified, c.material, c.updated_at),
        (0, 0, 0, T0)
    );
    assert!(fx.cursor(OPS, CHILD).is_none());
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    assert_eq!(fx.store.state_version(CHILD, None).unwrap(), 5);
    fx.assert_no_wake(100);
    // With a notice open, log-only events neither move M nor reopen it after the drain.
    assert_eq!(fx.rec(CHILD, "human_direct_message", None, T0).sequence, 6);
    fx.rec(CHILD, "run_completed", None, T0);
    assert_eq!(fx.lnm(MAIN, CHILD), (0, 6, 6));
    assert_eq!(
        pairs(&fx.store.drain(MAIN, T0).unwrap()),
        expect_pairs(&[(CHILD, 0)])
    );
    assert_eq!(fx.lnm(MAIN, CHILD), (6, 6, 6));
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
}

#[test]
fn a_seed_then_three_material_events() {
    let fx = Fixture::file();
    assert_eq!(fx.rec(CHILD, "created", None, T0).sequence, 1);
    assert!(explicit(&fx, MAIN, CHILD, T0));
    assert_eq!(fx.rec(CHILD, "human_direct_message", None, T0).sequence, 2);
    assert_eq!(fx.rec(CHILD, "goal_changed", None, T0).sequence, 3);
    assert_eq!(fx.rec(CHILD, "upstream_missing", None, T0).sequence, 4);
    assert_eq!(fx.lnm(MAIN, CHILD), (1, 2, 4));
    let p = fx.store.peek(MAIN).unwrap();
    assert_eq!(pairs(&p), expect_pairs(&[(CHILD, 1)]));
}

#[test]
fn twenty_rapid_material_events_give_one_notice_and_one_wake() {
    let fx = Fixture::file();
    assert!(explicit(&fx, MAIN, CHILD, T0));
    let mut peeks = Vec::new();
    for i in 1..=20 {
        assert_eq!(
            fx.rec(CHILD, "human_direct_message", None, T0 + i).sequence,
            i
        );
        peeks.push(fx.store.peek(MAIN).unwrap());
    }
    // Byte-stable while pending.
    assert!(peeks.iter().all(|p| *p == peeks[0]));
    assert_eq!(pairs(&peeks[0]), expect_pairs(&[(CHILD, 0)]));
    assert_eq!(fx.lnm(MAIN, CHILD), (0, 1, 20));
    let w = fx.next_wake();
    assert_eq!(
        (
            w.source,
            w.intent,
            w.reason.as_str(),
            w.session_key.as_str()
        ),
        (
            "session-state",
            "immediate",
            "session-state:agent:main:subagent:child",
            MAIN
        )
    );
    fx.assert_no_wake(300);
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
    let fx = Fixture::file();
    for t in [CHILD, CHILD2, W3] {
        assert!(explicit(&fx, MAIN, t, T0));
    }
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
    let fx = Fixture::file();
    for t in [CHILD, CHILD2, W3] {
        assert!(explicit(&fx, MAIN, t, T0));
    }
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

#[test]
fn wakes_coalesce_per_watcher_and_name_the_first_target() {
    until_judged(|| {
        let fx = Fixture::file_with(Options {
            wake_coalesce_ms: 400,
            ..opts()
        });
        for t in [CHILD, CHILD2, W3] {
            assert!(explicit(&fx, MAIN, t, T0));
        }
        let start = Instant::now();
        fx.rec(CHILD2, "goal_changed", None, T0);
        fx.rec(CHILD, "goal_changed", None, T0);
        if start.elapsed() >= Duration::from_millis(300) {
            return false;
        }
        let w = fx.next_wake();
        assert!(start.elapsed() >= Duration::from_millis(400));
        assert_eq!(
            (w.session_key.as_str(), w.reason.as_str()),
            (MAIN, "session-state:agent:main:subagent:second")
        );
        fx.assert_no_wake(500);
        // After the call, a new notice schedules a new one.
        fx.rec(W3, "goal_changed", None, T0);
        assert_eq!(fx.next_wake().reason, format!("session-state:{W3}"));
        true
    });
}

#[test]
fn close_cancels_a_scheduled_wake() {
    until_judged(|| {
        let fx = Fixture::file_with(Options {
            wake_coalesce_ms: 500,
            ..opts()
        });
        assert!(explicit(&fx, MAIN, CHILD, T0));
        let start = Instant::now();
        fx.rec(CHILD, "goal_changed", None, T0);
        fx.store.close();
        if start.elapsed() >= Duration::from_millis(400) {
            return false;
        }
        fx.assert_no_wake(800);
        true
    });
}

#[test]
fn keys_are_compared_exactly() {
    let fx = Fixture::file();
    assert!(explicit(&fx, MAIN, CHILD, T0));
    for other in [
        "agent:main:subagent:Child",
        "agent:main:subagent:child ",
        " agent:main:subagent:child",
    ] {
        fx.rec(other, "goal_changed", None, T0);
    }
    // An actor id that differs in case is another actor.
    fx.rec(CHILD, "goal_changed", Some("agent:main:MAIN"), T0); // 4
    assert_eq!(fx.lnm(MAIN, CHILD), (0, 4, 4));
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 0)])
    );
}

#[test]
fn a_reopen_on_acknowledge_wakes_the_watcher() {
    let fx = Fixture::file();
    assert!(explicit(&fx, MAIN, CHILD, T0));
    fx.rec(CHILD, "goal_changed", None, T0); // 1
    assert_eq!(fx.next_wake().session_key, MAIN);
    fx.rec(CHILD, "goal_changed", None, T0); // 2: absorbed by the open notice
    fx.assert_no_wake(150);
    assert_eq!(
        fx.store.acknowledge(MAIN, &strings(&[CHILD]), T0).unwrap(),
        1
    );
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 1)])
    );
    let w = fx.next_wake();
    assert_eq!(
        (w.session_key.as_str(), w.reason.as_str()),
        (MAIN, "session-state:agent:main:subagent:child")
    );
    assert_eq!(
        fx.store.acknowledge(MAIN, &strings(&[CHILD]), T0).unwrap(),
        1
    );
    fx.assert_no_wake(150);
}

/// A host whose wake handler drains the watcher at once.
struct DrainingHost {
    store: OnceLock<Store>,
    caller: ThreadId,
    tx: Mutex<Sender<(ThreadId, Vec<Notice>)>>,
}

impl WakeSink for DrainingHost {
    fn wake(&self, request: WakeRequest) {
        let here = std::thread::current().id();
        // Called on the recording thread, the drain below could only deadlock.
        let drained = if here == self.caller {
            Vec::new()
        } else {
            let store = self.store.get().expect("store set");
            store.drain(&request.session_key, T0).unwrap()
        };
        let _ = self.tx.lock().send((here, drained));
    }
}

#[test]
fn the_wake_comes_after_the_record_and_may_drain() {
    let (tx, rx) = mpsc::channel();
    let host = Arc::new(DrainingHost {
        store: OnceLock::new(),
        caller: std::thread::current().id(),
        tx: Mutex::new(tx),
    });
    let store = Store::open(
        ":memory:",
        Options {
            wake_coalesce_ms: 0,
            ..opts()
        },
        Hooks {
            wake: Some(host.clone()),
            ..Hooks::default()
        },
    )
    .unwrap();
    assert!(host.store.set(store.clone()).is_ok());
    assert!(store.watch(MAIN, CHILD, Provenance::Explicit, T0).unwrap());
    let e = rec(&store, CHILD, "human_direct_message", None, T0);
    let (thread, drained) = rx.recv_timeout(PATIENCE).unwrap();
    assert_ne!(thread, std::thread::current().id());
    assert_eq!(pairs(&drained), expect_pairs(&[(CHILD, 0)]));
    assert_eq!(store.state_version(CHILD, None).unwrap(), e.sequence);
    assert!(store.peek(MAIN).unwrap().is_empty());
    store.close();
}
