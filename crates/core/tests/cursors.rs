//! semantics.md#recording-fan-out and semantics.md#cursors: seeding and material updates.
//!
//! Acknowledging, the notice text and its context key: `notices.rs`; semantics.md#wake wakes
//! from records and acknowledges: `wakes.rs`.

mod common;
mod watching;

use common::*;
use session_awareness_core::Provenance;
use watching::*;

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
