//! semantics.md#cursors-scope: watcher scopes on cursors (`watch`, `record`'s `watcherScopes`,
//! `acknowledge`), the `notify_kinds` and `seed_resets_provenance` options, and the notice
//! outbox of semantics.md#notices-listener.
//!
//! The OpenClaw facts these rules reproduce were checked by running OpenClaw 2026.9.6's
//! published module under Node 24 (`registerSessionStateWatch`, `registerMainSessionGroupWatch`,
//! `upsertSeedCursor`, `updateMaterialCursor`, `acknowledgeSessionStateNotices`; the outcomes
//! are listed in `__test__/scope.test.ts`) and are cited where a test checks one.

mod common;

use common::*;
use session_awareness_core::{
    EventKind, Notice, NotifyKinds, Options, Provenance, QueuedNotice, WatchOptions,
};

const A: &str = "/state/agents/main/agent/a.sqlite";
const B: &str = "/state/agents/main/agent/b.sqlite";
const W3: &str = "agent:main:coordinator";

fn scoped(provenance: Provenance, scope: Option<&str>, refresh: bool) -> WatchOptions {
    WatchOptions {
        provenance,
        scope: scope.map(str::to_owned),
        refresh,
    }
}

fn watch(fx: &Fixture, w: &str, t: &str, o: WatchOptions, now: i64) -> bool {
    fx.store.watch_with(w, t, &o, now).expect("watch")
}

fn scope_of(fx: &Fixture, w: &str, t: &str) -> Option<String> {
    fx.cursor(w, t).expect("a cursor").scope
}

fn notify(fx: &Fixture, target: &str, watchers: &[&str], scopes: &[(&str, &str)], now: i64) -> i64 {
    let mut i = input(target, "human_direct_message");
    i.watchers = strings(watchers);
    i.watcher_scopes = scopes
        .iter()
        .map(|(w, s)| ((*w).to_owned(), (*s).to_owned()))
        .collect();
    fx.record(i, now).sequence
}

fn spawn(fx: &Fixture, child: &str, parent: &str, scope: Option<&str>, now: i64) -> i64 {
    let mut i = input(child, "child_spawned");
    i.actor_type = "agent".into();
    i.actor_id = Some(parent.into());
    i.watchers = strings(&[parent]);
    if let Some(s) = scope {
        i.watcher_scopes.insert(parent.into(), s.into());
    }
    fx.record(i, now).sequence
}

fn text(target: &str, l: i64) -> String {
    format!(
        "Session \"{target}\" changed (other actor). Reconcile before acting: session_status \
         sessionKey \"{target}\" changesSince {l}."
    )
}

#[test]
fn watch_with_a_scope_seeds_a_new_cursor_bound_to_it() {
    let fx = Fixture::file();
    fx.rec(CHILD, "created", None, T0);
    fx.rec(CHILD, "compacted", None, T0);
    assert!(watch(
        &fx,
        MAIN,
        CHILD,
        scoped(Provenance::Explicit, Some(A), true),
        T0 + 1
    ));
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!((c.last_seen, c.notified, c.material), (2, 2, 2));
    assert_eq!((c.provenance, c.updated_at), (Provenance::Explicit, T0 + 1));
    assert_eq!(c.scope.as_deref(), Some(A));
    // Without a scope the column stays NULL, as before.
    assert!(watch(&fx, OPS, CHILD, WatchOptions::default(), T0 + 1));
    assert_eq!(scope_of(&fx, OPS, CHILD), None);
}

#[test]
fn watch_with_the_same_scope_keeps_the_positions_and_refreshes_unless_told_not_to() {
    let fx = Fixture::file();
    assert!(watch(
        &fx,
        MAIN,
        CHILD,
        scoped(Provenance::AmbientGroup, Some(A), true),
        T0
    ));
    notify(&fx, CHILD, &[], &[], T0 + 1);
    assert_eq!(fx.lnm(MAIN, CHILD), (0, 1, 1));
    // OpenClaw's ambient re-register with the same store path changes nothing: `refresh: false`.
    assert!(watch(
        &fx,
        MAIN,
        CHILD,
        scoped(Provenance::AmbientGroup, Some(A), false),
        T0 + 5
    ));
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!(
        (c.provenance, c.updated_at),
        (Provenance::AmbientGroup, T0 + 1)
    );
    // OpenClaw's explicit re-register with the same path promotes to explicit and leaves
    // updated_at alone.
    assert!(watch(
        &fx,
        MAIN,
        CHILD,
        scoped(Provenance::Explicit, Some(A), false),
        T0 + 6
    ));
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!((c.provenance, c.updated_at), (Provenance::Explicit, T0 + 1));
    // The default refreshes updated_at; never demotes.
    assert!(watch(
        &fx,
        MAIN,
        CHILD,
        scoped(Provenance::AmbientGroup, Some(A), true),
        T0 + 7
    ));
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!((c.provenance, c.updated_at), (Provenance::Explicit, T0 + 7));
    assert_eq!(fx.lnm(MAIN, CHILD), (0, 1, 1));
    assert_eq!(c.scope.as_deref(), Some(A));
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 0)])
    );
}

#[test]
fn watch_with_another_scope_reseeds_at_the_head_and_drops_the_notice() {
    let fx = Fixture::file();
    assert!(watch(
        &fx,
        MAIN,
        CHILD,
        scoped(Provenance::Explicit, Some(A), true),
        T0
    ));
    notify(&fx, CHILD, &[], &[], T0 + 1);
    notify(&fx, CHILD, &[], &[], T0 + 2);
    assert_eq!(fx.lnm(MAIN, CHILD), (0, 1, 2));
    assert_eq!(fx.store.peek(MAIN).unwrap().len(), 1);
    // Another scope, as OpenClaw's ambient registration with another store path: re-seeded
    // as ambient-group at the head.
    assert!(watch(
        &fx,
        MAIN,
        CHILD,
        scoped(Provenance::AmbientGroup, Some(B), true),
        T0 + 3
    ));
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!((c.last_seen, c.notified, c.material), (2, 2, 2));
    assert_eq!(
        (c.provenance, c.updated_at),
        (Provenance::AmbientGroup, T0 + 3)
    );
    assert_eq!(c.scope.as_deref(), Some(B));
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    assert!(fx.store.drain(MAIN, T0 + 4).unwrap().is_empty());
    // A NULL scope is another scope too: a cursor without one is re-seeded (explicit default).
    assert!(watch(&fx, OPS, CHILD, WatchOptions::default(), T0 + 4));
    notify(&fx, CHILD, &[], &[], T0 + 5);
    assert_eq!(fx.lnm(OPS, CHILD), (2, 3, 3));
    assert!(watch(
        &fx,
        OPS,
        CHILD,
        scoped(Provenance::Explicit, Some(A), false),
        T0 + 6
    ));
    let c = fx.cursor(OPS, CHILD).unwrap();
    assert_eq!((c.last_seen, c.notified, c.material), (3, 3, 3));
    assert_eq!((c.provenance, c.updated_at), (Provenance::Explicit, T0 + 6));
    assert_eq!(c.scope.as_deref(), Some(A));
    assert!(fx.store.peek(OPS).unwrap().is_empty());
}

#[test]
fn watch_without_a_scope_leaves_a_bound_cursor_bound() {
    let fx = Fixture::file();
    assert!(watch(
        &fx,
        MAIN,
        CHILD,
        scoped(Provenance::Explicit, Some(A), true),
        T0
    ));
    notify(&fx, CHILD, &[], &[], T0 + 1);
    assert!(watch(&fx, MAIN, CHILD, WatchOptions::default(), T0 + 2));
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!(
        (c.last_seen, c.notified, c.material, c.updated_at),
        (0, 1, 1, T0 + 2)
    );
    assert_eq!(c.scope.as_deref(), Some(A));
}

#[test]
fn scopes_are_checked_and_a_refused_watch_changes_nothing() {
    let fx = Fixture::file();
    let long = "x".repeat(4097);
    for bad in ["", long.as_str()] {
        let o = scoped(Provenance::Explicit, Some(bad), true);
        let e = fx.store.watch_with(MAIN, CHILD, &o, T0).unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_ARG");
        let e = fx
            .store
            .acknowledge_in(MAIN, &strings(&[CHILD]), Some(bad), T0)
            .unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_ARG");
        let mut i = input(CHILD, "goal_changed");
        i.watchers = strings(&[MAIN]);
        i.watcher_scopes.insert(MAIN.into(), bad.into());
        assert_eq!(
            fx.store.record(i, T0).unwrap_err().code(),
            "ERR_INVALID_ARG"
        );
    }
    assert_eq!(fx.cursor_count(), 0);
    assert!(fx.sequences().is_empty());
    let max = "é".repeat(2048);
    assert!(watch(
        &fx,
        MAIN,
        CHILD,
        scoped(Provenance::Explicit, Some(&max), true),
        T0
    ));
    assert_eq!(scope_of(&fx, MAIN, CHILD), Some(max));
}

#[test]
fn a_named_watcher_gets_its_scope_and_the_notice_carries_it() {
    let fx = Fixture::file();
    let s = notify(&fx, CHILD, &[MAIN], &[(MAIN, A)], T0);
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!((c.last_seen, c.notified, c.material), (0, s, s));
    assert_eq!(c.scope.as_deref(), Some(A));
    assert_eq!(
        fx.store.peek(MAIN).unwrap(),
        [Notice {
            watcher_key: MAIN.into(),
            target_key: CHILD.into(),
            changes_since: 0,
            text: text(CHILD, 0),
            context_key: session_awareness_core::encode_notice_context_key(CHILD),
            scope: Some(A.into()),
        }]
    );
    let drained = fx.store.drain(MAIN, T0 + 1).unwrap();
    assert_eq!(drained[0].scope.as_deref(), Some(A));
}

#[test]
fn a_cursor_bound_to_another_scope_is_left_alone_by_a_notify_kind() {
    let fx = Fixture::file();
    assert!(watch(
        &fx,
        MAIN,
        CHILD,
        scoped(Provenance::Explicit, Some(A), true),
        T0
    ));
    assert!(watch(
        &fx,
        OPS,
        CHILD,
        scoped(Provenance::Explicit, Some(B), true),
        T0
    ));
    assert!(watch(&fx, W3, CHILD, WatchOptions::default(), T0));
    // MAIN is named with another scope: OpenClaw's updateMaterialCursor returns a notice with
    // a null store path, which its queue drops; the row is not written.
    let s = notify(&fx, CHILD, &[MAIN], &[(MAIN, B)], T0 + 1);
    assert_eq!(fx.lnm(MAIN, CHILD), (0, 0, 0));
    assert_eq!(fx.cursor(MAIN, CHILD).unwrap().updated_at, T0);
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    // Watchers found from the cursors use their stored scope.
    assert_eq!(fx.lnm(OPS, CHILD), (0, s, s));
    assert_eq!(fx.store.peek(OPS).unwrap()[0].scope.as_deref(), Some(B));
    assert_eq!(fx.lnm(W3, CHILD), (0, s, s));
    assert_eq!(fx.store.peek(W3).unwrap()[0].scope, None);
    // A scope given for an unnamed watcher is checked too (OpenClaw looks up every watcher
    // in `watcherStorePaths`); a NULL scope never equals a given one.
    // MAIN, given no scope this time, is found from its cursor and updated.
    let s2 = notify(&fx, CHILD, &[], &[(W3, A), (OPS, B)], T0 + 2);
    assert_eq!(fx.lnm(W3, CHILD), (0, s, s));
    assert_eq!(fx.lnm(OPS, CHILD), (0, s, s2));
    assert_eq!(fx.lnm(MAIN, CHILD), (0, s2, s2));
    // The same scope: today's rules.
    let s3 = notify(&fx, CHILD, &[MAIN], &[(MAIN, A)], T0 + 3);
    assert_eq!(fx.lnm(MAIN, CHILD), (0, s2, s3));
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 0)])
    );
}

#[test]
fn self_suppression_comes_before_the_scope_check() {
    let fx = Fixture::file();
    assert!(watch(
        &fx,
        MAIN,
        CHILD,
        scoped(Provenance::Explicit, Some(A), true),
        T0
    ));
    let mut i = input(CHILD, "goal_changed");
    i.actor_type = "agent".into();
    i.actor_id = Some(MAIN.into());
    i.watcher_scopes.insert(MAIN.into(), B.into());
    fx.record(i, T0 + 1);
    assert_eq!(fx.lnm(MAIN, CHILD), (0, 0, 0));
    assert_eq!(scope_of(&fx, MAIN, CHILD).as_deref(), Some(A));
}

#[test]
fn a_spawn_writes_the_named_watchers_scope_and_keeps_provenance_by_default() {
    let fx = Fixture::file();
    assert!(watch(
        &fx,
        MAIN,
        CHILD,
        scoped(Provenance::AmbientGroup, Some(A), true),
        T0
    ));
    let s = spawn(&fx, CHILD, MAIN, Some(B), T0 + 1);
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!((c.last_seen, c.notified, c.material), (s, s, s));
    assert_eq!(
        (c.provenance, c.scope.as_deref()),
        (Provenance::AmbientGroup, Some(B))
    );
    // Without a scope for the watcher, the cursor keeps its own.
    let s = spawn(&fx, CHILD, MAIN, None, T0 + 2);
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!((c.last_seen, c.scope.as_deref()), (s, Some(B)));
    // A new cursor from a spawn is explicit and bound to the given scope.
    spawn(&fx, CHILD2, OPS, Some(A), T0 + 3);
    let c = fx.cursor(OPS, CHILD2).unwrap();
    assert_eq!(
        (c.provenance, c.scope.as_deref()),
        (Provenance::Explicit, Some(A))
    );
}

#[test]
fn seed_resets_provenance_makes_a_reseeded_cursor_explicit() {
    // OpenClaw's upsertSeedCursor writes provenance 'explicit' on conflict.
    let fx = Fixture::file_with(Options {
        seed_resets_provenance: true,
        ..opts()
    });
    assert!(watch(
        &fx,
        MAIN,
        CHILD,
        scoped(Provenance::AmbientGroup, Some(A), true),
        T0
    ));
    spawn(&fx, CHILD, MAIN, Some(A), T0 + 1);
    let c = fx.cursor(MAIN, CHILD).unwrap();
    assert_eq!(
        (c.provenance, c.scope.as_deref()),
        (Provenance::Explicit, Some(A))
    );
}

#[test]
fn acknowledge_with_a_scope_skips_cursors_bound_elsewhere() {
    let fx = Fixture::file();
    assert!(watch(
        &fx,
        MAIN,
        CHILD,
        scoped(Provenance::Explicit, Some(A), true),
        T0
    ));
    assert!(watch(
        &fx,
        MAIN,
        CHILD2,
        scoped(Provenance::Explicit, Some(B), true),
        T0
    ));
    assert!(watch(&fx, MAIN, OPS, WatchOptions::default(), T0));
    notify(&fx, CHILD, &[], &[], T0 + 1);
    notify(&fx, CHILD2, &[], &[], T0 + 1);
    notify(&fx, OPS, &[], &[], T0 + 1);
    let all = strings(&[CHILD, CHILD2, OPS]);
    assert_eq!(
        fx.store
            .acknowledge_in(MAIN, &all, Some(A), T0 + 2)
            .unwrap(),
        1
    );
    assert_eq!(fx.lnm(MAIN, CHILD), (1, 1, 1));
    assert_eq!(fx.lnm(MAIN, CHILD2), (0, 2, 2));
    assert_eq!(fx.lnm(MAIN, OPS), (0, 3, 3));
    // The skipped notices stay queued, in their order.
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD2, 0), (OPS, 0)])
    );
    // Without a scope every cursor is acknowledged, as before.
    assert_eq!(fx.store.acknowledge(MAIN, &all, T0 + 3).unwrap(), 2);
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
}

#[test]
fn notify_kinds_choose_which_kinds_notify() {
    let kinds = [EventKind::HumanDirectMessage, EventKind::RunCompleted];
    let fx = Fixture::file_with(Options {
        notify_kinds: NotifyKinds::of(&kinds).unwrap(),
        ..opts()
    });
    assert!(watch(&fx, MAIN, CHILD, WatchOptions::default(), T0));
    let s = fx.rec(CHILD, "run_completed", None, T0 + 1).sequence;
    assert_eq!(fx.lnm(MAIN, CHILD), (0, s, s));
    // goal_changed is not in the set: log only, even for a named watcher.
    let mut i = input(CHILD, "goal_changed");
    i.watchers = strings(&[OPS]);
    fx.record(i, T0 + 2);
    assert_eq!(fx.lnm(MAIN, CHILD), (0, s, s));
    assert!(fx.cursor(OPS, CHILD).is_none());
    assert_eq!(
        NotifyKinds::of(&[EventKind::ChildSpawned])
            .unwrap_err()
            .code(),
        "ERR_INVALID_ARG"
    );
    // The default is the three notify kinds; run_failed stays log only.
    let d = NotifyKinds::default();
    let on: Vec<_> = EventKind::ALL
        .into_iter()
        .filter(|k| d.contains(*k))
        .collect();
    assert_eq!(
        on,
        [
            EventKind::HumanDirectMessage,
            EventKind::GoalChanged,
            EventKind::UpstreamMissing
        ]
    );
    assert!(!NotifyKinds::of(&[])
        .unwrap()
        .contains(EventKind::GoalChanged));
}

fn queued(
    w: &str,
    t: &str,
    l: i64,
    scope: Option<&str>,
    wake: bool,
    queue_only: bool,
) -> QueuedNotice {
    QueuedNotice {
        notice: Notice::new(w, t, l, scope),
        wake,
        queue_only,
    }
}

#[test]
fn the_outbox_holds_every_notice_that_entered_in_order() {
    let fx = Fixture::file_with(Options {
        notice_outbox: true,
        ..opts()
    });
    assert!(watch(
        &fx,
        MAIN,
        CHILD,
        scoped(Provenance::Explicit, Some(A), true),
        T0
    ));
    assert!(watch(
        &fx,
        MAIN,
        CHILD2,
        scoped(Provenance::AmbientGroup, None, true),
        T0
    ));
    assert!(watch(&fx, CHILD2, CHILD, WatchOptions::default(), T0));
    assert!(fx.store.take_entered_notices().is_empty());
    notify(&fx, CHILD, &[], &[], T0 + 1);
    notify(&fx, CHILD2, &[], &[], T0 + 2);
    // A second change while pending enters nothing.
    notify(&fx, CHILD, &[], &[], T0 + 3);
    assert_eq!(
        fx.store.take_entered_notices(),
        [
            queued(MAIN, CHILD, 0, Some(A), true, false),
            queued(CHILD2, CHILD, 0, None, false, false),
            queued(MAIN, CHILD2, 0, None, false, true),
        ]
    );
    assert!(fx.store.take_entered_notices().is_empty());
    // A drain that reopens a notice: the reopened one enters.
    let drained = fx.store.drain(MAIN, T0 + 4).unwrap();
    assert_eq!(pairs(&drained), expect_pairs(&[(CHILD, 0), (CHILD2, 0)]));
    assert_eq!(
        fx.store.take_entered_notices(),
        [queued(MAIN, CHILD, 1, Some(A), true, false)]
    );
    // A sweep enters nothing already queued.
    fx.store.sweep(None, T0 + 5).unwrap();
    assert!(fx.store.take_entered_notices().is_empty());
}

#[test]
fn without_the_option_the_outbox_stays_empty() {
    let fx = Fixture::file();
    assert!(watch(&fx, MAIN, CHILD, WatchOptions::default(), T0));
    notify(&fx, CHILD, &[], &[], T0 + 1);
    assert_eq!(fx.store.peek(MAIN).unwrap().len(), 1);
    assert!(fx.store.take_entered_notices().is_empty());
}
