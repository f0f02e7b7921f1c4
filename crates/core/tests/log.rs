//! semantics.md#keys keys and agents, semantics.md#recording recording into the log, semantics.md#reading reading it back with `changesSince`.

mod common;

use common::*;
use serde_json::json;
use session_awareness_core::{
    ActorType, EventKind, Options, Provenance, RecordInput, StateEvent, VersionRef,
};

fn code(r: session_awareness_core::Result<Option<StateEvent>>) -> &'static str {
    r.expect_err("refused").code()
}

#[test]
fn one_global_sequence_and_a_head_per_session() {
    let fx = Fixture::memory();
    assert_eq!(fx.rec(CHILD, "created", None, T0).sequence, 1);
    assert_eq!(fx.rec(CHILD2, "created", None, T0).sequence, 2);
    assert_eq!(fx.rec(CHILD, "goal_changed", None, T0).sequence, 3);
    assert_eq!(fx.rec("agent:ops:x", "run_failed", None, T0).sequence, 4);
    assert_eq!(fx.store.state_version(CHILD, None).unwrap(), 3);
    assert_eq!(fx.store.state_version(CHILD2, None).unwrap(), 2);
    assert_eq!(fx.store.state_version("agent:ops:x", None).unwrap(), 4);
    assert_eq!(fx.store.state_version("agent:main:none", None).unwrap(), 0);
    let refs = [
        (CHILD2, None),
        ("agent:main:none", None),
        (CHILD, Some("main")),
        ("agent:ops:x", None),
        ("global", Some("ops")),
    ]
    .map(|(k, a): (&str, Option<&str>)| VersionRef {
        session_key: k.into(),
        agent_id: a.map(Into::into),
    });
    assert_eq!(
        fx.store.state_versions(&refs).unwrap(),
        [
            (CHILD2.to_owned(), "main".to_owned(), 2),
            (CHILD.to_owned(), "main".to_owned(), 3),
            ("agent:ops:x".to_owned(), "ops".to_owned(), 4),
        ]
    );
    let bad = [VersionRef {
        session_key: CHILD.into(),
        agent_id: Some("ops".into()),
    }];
    assert_eq!(
        fx.store.state_versions(&bad).unwrap_err().code(),
        "ERR_INVALID_ARG"
    );
}

#[test]
fn the_same_bare_key_under_two_agents_is_two_sessions() {
    let fx = Fixture::memory();
    let mut ops = input("global", "goal_changed");
    ops.agent_id = Some("ops".into());
    assert_eq!(fx.rec("global", "goal_changed", None, T0).agent_id, "main");
    let e = fx.record(ops.clone(), T0);
    assert_eq!((e.sequence, e.agent_id.as_str()), (2, "ops"));
    assert_eq!(fx.rec("global", "compacted", None, T0).sequence, 3);
    assert_eq!(fx.store.state_version("global", None).unwrap(), 3);
    assert_eq!(fx.store.state_version("global", Some("main")).unwrap(), 3);
    assert_eq!(fx.store.state_version("global", Some("ops")).unwrap(), 2);
    let main = fx.store.changes_since("global", 0.0, None, None).unwrap();
    assert_eq!(seqs(&main.events), [1, 3]);
    assert!(stored(&main.events).iter().all(|e| e.agent_id == "main"));
    let o = fx
        .store
        .changes_since("global", 0.0, Some("ops"), None)
        .unwrap();
    assert_eq!((seqs(&o.events), o.state_version), (vec![2], 2));
    // Deleting one agent's session leaves the other's.
    fx.store.delete_session("global", Some("ops")).unwrap();
    assert_eq!(fx.store.state_version("global", Some("ops")).unwrap(), 0);
    assert_eq!(fx.store.state_version("global", None).unwrap(), 3);
    // Bare keys are logged but never watched.
    assert!(!fx
        .store
        .watch(MAIN, "global", Provenance::Explicit, T0)
        .unwrap());
}

#[test]
fn agent_id_defaults_to_the_keys_own_else_main() {
    let fx = Fixture::memory();
    let cases: [(&str, Option<&str>, &str); 8] = [
        ("agent:ops:x", None, "ops"),
        ("agent:ops:x", Some("ops"), "ops"),
        ("agent:MAIN:x", None, "main"),
        ("agent:Main:x", None, "main"),
        ("agent:MAIN:x", Some("build-2"), "build-2"),
        ("main", None, "main"),
        ("global", Some("a_b"), "a_b"),
        (
            "agent:0123456789012345678901234567890123456789012345678901234567890123:x",
            None,
            "0123456789012345678901234567890123456789012345678901234567890123",
        ),
    ];
    for (key, agent, want) in cases {
        let mut i = input(key, "created");
        i.agent_id = agent.map(Into::into);
        let e = fx.record(i, T0);
        assert_eq!(e.agent_id, want, "{key} {agent:?}");
        let c = fx.store.changes_since(key, 0.0, Some(want), None).unwrap();
        assert_eq!(c.events.last().unwrap().stored().unwrap().agent_id, want);
    }
}

#[test]
fn refused_inputs_write_nothing() {
    let fx = Fixture::file();
    let long = "a".repeat(65);
    let agents: [(&str, &str); 6] = [
        ("agent:ops:x", "main"),
        ("global", "OPS"),
        ("global", "Ops"),
        ("global", "-x"),
        ("global", "a.b"),
        ("global", long.as_str()),
    ];
    for (key, agent) in agents {
        let mut i = input(key, "goal_changed");
        i.agent_id = Some(agent.into());
        assert_eq!(code(fx.store.record(i, T0)), "ERR_INVALID_ARG", "{agent}");
    }
    assert_eq!(
        code(fx.store.record(input("", "goal_changed"), T0)),
        "ERR_INVALID_ARG"
    );
    assert_eq!(
        code(fx.store.record(input(CHILD, "GOAL_CHANGED"), T0)),
        "ERR_INVALID_ARG"
    );
    let mut i = input(CHILD, "goal_changed");
    i.actor_type = "bot".into();
    assert_eq!(code(fx.store.record(i, T0)), "ERR_INVALID_ARG");
    let mut i = input(CHILD, "goal_changed");
    i.payload = Some(json!("text"));
    assert_eq!(code(fx.store.record(i, T0)), "ERR_INVALID_ARG");
    // Reads refuse the same way.
    assert_eq!(
        fx.store
            .state_version("agent:ops:x", Some("main"))
            .unwrap_err()
            .code(),
        "ERR_INVALID_ARG"
    );
    assert_eq!(
        fx.store
            .changes_since("agent:ops:x", 0.0, Some("main"), None)
            .unwrap_err()
            .code(),
        "ERR_INVALID_ARG"
    );
    // Nothing was written, not even a consumed sequence.
    assert_eq!(fx.sequences(), Vec::<i64>::new());
    assert_eq!(fx.rec(CHILD, "created", None, T0).sequence, 1);
}

#[test]
fn a_dedupe_hit_returns_the_first_row_with_no_head_bump_and_no_notice() {
    let fx = Fixture::file();
    assert!(fx
        .store
        .watch(MAIN, CHILD, Provenance::Explicit, T0)
        .unwrap());
    let mut first = input(CHILD, "human_direct_message");
    first.dedupe_key = Some("msg-1".into());
    first.summary = "first".into();
    let e1 = fx.record(first, T0);
    assert_eq!(e1.sequence, 1);
    assert_eq!(fx.next_wake().session_key, MAIN);
    assert_eq!(
        pairs(&fx.store.drain(MAIN, T0).unwrap()),
        expect_pairs(&[(CHILD, 0)])
    );

    let mut again = input(CHILD, "goal_changed");
    again.dedupe_key = Some("msg-1".into());
    again.summary = "second".into();
    again.actor_type = "agent".into();
    let e2 = fx.record(again, T0 + 1000);
    assert_eq!(e2, e1, "the first row, unchanged");
    // The same key on another session still returns the first row and writes nothing.
    let mut elsewhere = input(CHILD2, "human_direct_message");
    elsewhere.dedupe_key = Some("msg-1".into());
    elsewhere.watchers = vec![MAIN.into()];
    assert_eq!(fx.record(elsewhere, T0 + 2000), e1);
    assert_eq!(fx.store.state_version(CHILD, None).unwrap(), 1);
    assert_eq!(fx.store.state_version(CHILD2, None).unwrap(), 0);
    assert_eq!(fx.lnm(MAIN, CHILD), (1, 1, 1));
    assert!(fx.cursor(MAIN, CHILD2).is_none());
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    assert_eq!(fx.sequences(), [1]);
    fx.assert_no_wake(150);
    // SQLite spent sequences on the two hits: unique and increasing, not consecutive.
    assert_eq!(fx.rec(CHILD, "created", None, T0).sequence, 4);
    // An empty dedupe key is absent.
    let mut a = input(CHILD, "created");
    a.dedupe_key = Some(String::new());
    let b = a.clone();
    assert_eq!(fx.record(a, T0).sequence, 5);
    assert_eq!(fx.record(b, T0).sequence, 6);
}

#[test]
fn only_if_watched_returns_none_and_writes_nothing() {
    let fx = Fixture::file();
    let quiet = |key: &str, watchers: &[&str]| {
        let mut i = input(key, "human_direct_message");
        i.only_if_watched = true;
        i.watchers = strings(watchers);
        i
    };
    assert!(fx.store.record(quiet(CHILD, &[]), T0).unwrap().is_none());
    assert!(fx
        .store
        .record(quiet(CHILD, &["global", CHILD, "agent:MAIN:x"]), T0)
        .unwrap()
        .is_none());
    // The input is validated first: a blank named watcher is refused, not skipped.
    assert_eq!(
        fx.store
            .record(quiet(CHILD, &["global", " "]), T0)
            .unwrap_err()
            .code(),
        "ERR_INVALID_ARG"
    );
    // A bare target can never be watched.
    assert!(fx
        .store
        .record(quiet("global", &[MAIN]), T0)
        .unwrap()
        .is_none());
    // A cursor where the session is the watcher does not count.
    assert!(fx
        .store
        .watch(CHILD, CHILD2, Provenance::Explicit, T0)
        .unwrap());
    assert!(fx.store.record(quiet(CHILD, &[]), T0).unwrap().is_none());
    assert_eq!(fx.sequences(), Vec::<i64>::new());
    assert_eq!(fx.store.state_version(CHILD, None).unwrap(), 0);
    assert_eq!(fx.store.state_version("global", None).unwrap(), 0);
    assert_eq!(fx.cursor_count(), 1);
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    fx.assert_no_wake(100);
    fx.assert_no_error();

    // A usable producer-named watcher is enough.
    let e = fx.record(quiet(CHILD, &["global", MAIN]), T0);
    assert_eq!(e.sequence, 1);
    assert_eq!(fx.lnm(MAIN, CHILD), (0, 1, 1));
    // So is any cursor on the target, for any kind.
    let mut log_only = quiet(CHILD, &[]);
    log_only.kind = "run_completed".into();
    assert_eq!(fx.record(log_only, T0).sequence, 2);
    assert_eq!(fx.sequences(), [1, 2]);
}

#[test]
fn summary_is_one_line_of_at_most_240_scalars_untrimmed() {
    let fx = Fixture::memory();
    let cases: Vec<(String, String)> = vec![
        (
            "a\r\nb\rc\nd\u{2028}e\u{2029}f".into(),
            "a b c d e f".into(),
        ),
        ("\r\n\n\r".into(), "   ".into()),
        ("  padded\t ".into(), "  padded\t ".into()),
        ("é".repeat(300), "é".repeat(240)),
        ("😀".repeat(241), "😀".repeat(240)),
        (
            format!("{}\r\nxyz", "a".repeat(238)),
            format!("{} x", "a".repeat(238)),
        ),
        (String::new(), String::new()),
    ];
    for (given, want) in cases {
        let mut i = input(CHILD, "goal_changed");
        i.summary = given.clone();
        let e = fx.record(i, T0);
        assert_eq!(e.summary, want, "{given:?}");
        let c = fx
            .store
            .changes_since(CHILD, (e.sequence - 1) as f64, None, None)
            .unwrap();
        assert_eq!(c.events[0].summary(), want);
    }
}

#[test]
fn payload_is_a_compact_json_object_of_at_most_4096_bytes() {
    let fx = Fixture::memory();
    let with = |payload: Option<serde_json::Value>| {
        let mut i = input(CHILD, "goal_changed");
        i.payload = payload;
        fx.store.record(i, T0)
    };
    let e = with(Some(
        json!({ "z": 1, "a": [1, 2], "m": { "n": null }, "s": "é" }),
    ))
    .unwrap()
    .unwrap();
    assert_eq!(
        e.payload_json.as_deref(),
        Some(r#"{"z":1,"a":[1,2],"m":{"n":null},"s":"é"}"#)
    );
    let stored = fx.store.changes_since(CHILD, 0.0, None, None).unwrap();
    assert_eq!(stored.events[0], e);
    assert_eq!(with(Some(json!(null))).unwrap().unwrap().payload_json, None);
    assert_eq!(with(None).unwrap().unwrap().payload_json, None);
    assert_eq!(
        with(Some(json!({})))
            .unwrap()
            .unwrap()
            .payload_json
            .as_deref(),
        Some("{}")
    );
    for bad in [json!([1]), json!("x"), json!(1), json!(true)] {
        assert_eq!(code(with(Some(bad))), "ERR_INVALID_ARG");
    }
    // {"a":"…"} has 8 bytes of framing; "é" is two UTF-8 bytes.
    let exact = with(Some(json!({ "a": "é".repeat(2044) })))
        .unwrap()
        .unwrap();
    assert_eq!(exact.payload_json.unwrap().len(), 4096);
    let over = format!("{}x", "é".repeat(2044));
    assert_eq!(code(with(Some(json!({ "a": over })))), "ERR_INVALID_ARG");
    assert_eq!(fx.store.state_version(CHILD, None).unwrap(), 5);
}

#[test]
fn occurred_at_is_floored_and_clamped_while_heads_use_now() {
    let fx = Fixture::file();
    let now = T0 + 5 * DAY;
    let cases: [(Option<f64>, i64); 9] = [
        (None, now),
        (Some(f64::NAN), now),
        (Some(f64::INFINITY), now),
        (Some(f64::NEG_INFINITY), now),
        (Some((now + 5000) as f64), now),
        (Some((now - 1000) as f64 - 0.7), now - 1001),
        (Some((now - 1000) as f64 + 0.7), now - 1000),
        (Some((now - DAY) as f64), now - DAY),
        (Some((now - DAY - 1) as f64), now - DAY),
    ];
    for (given, want) in cases {
        let mut i = input(CHILD, "goal_changed");
        i.occurred_at = given;
        let e = fx.record(i, now);
        assert_eq!(e.occurred_at, want, "{given:?}");
        let c = fx
            .store
            .changes_since(CHILD, (e.sequence - 1) as f64, None, None)
            .unwrap();
        assert_eq!(c.events[0].stored().unwrap().occurred_at, want);
    }
    fx.settle();
    let updated: i64 = fx
        .conn()
        .query_row(
            "SELECT updated_at FROM session_state_heads WHERE session_key = ?1",
            [CHILD],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(updated, now);
}

#[test]
fn a_stored_event_round_trips_every_field() {
    let fx = Fixture::memory();
    let i = RecordInput {
        session_key: "agent:ops:subagent:w".into(),
        agent_id: None,
        session_id: Some("sess-1".into()),
        kind: "run_failed".into(),
        actor_type: "system".into(),
        actor_id: Some("agent:ops:main".into()),
        run_id: Some("run-9".into()),
        summary: "timed out".into(),
        payload: Some(json!({ "reason": "timeout" })),
        occurred_at: Some((T0 - 10) as f64),
        ..Default::default()
    };
    let e = fx.record(i, T0);
    let want = StateEvent {
        sequence: 1,
        session_key: "agent:ops:subagent:w".into(),
        agent_id: "ops".into(),
        kind: EventKind::RunFailed,
        actor_type: ActorType::System,
        actor_id: Some("agent:ops:main".into()),
        run_id: Some("run-9".into()),
        session_id: Some("sess-1".into()),
        occurred_at: T0 - 10,
        summary: "timed out".into(),
        payload_json: Some(r#"{"reason":"timeout"}"#.into()),
    };
    assert_eq!(e, want);
    let c = fx
        .store
        .changes_since("agent:ops:subagent:w", 0.0, None, None)
        .unwrap();
    assert_eq!(c.events, [want]);
    // Empty optional strings are absent.
    let mut blank = input(CHILD, "created");
    blank.session_id = Some(String::new());
    blank.actor_id = Some(String::new());
    blank.run_id = Some(String::new());
    let e = fx.record(blank, T0);
    assert_eq!((e.session_id, e.actor_id, e.run_id), (None, None, None));
}

#[test]
fn changes_since_is_ascending_limited_and_moves_no_cursor() {
    let fx = Fixture::file();
    assert!(fx
        .store
        .watch(MAIN, CHILD, Provenance::Explicit, T0)
        .unwrap());
    for i in 0..5 {
        assert_eq!(fx.rec(CHILD, "goal_changed", None, T0).sequence, 2 * i + 1);
        if i < 4 {
            fx.rec(CHILD2, "created", None, T0);
        }
    }
    let all = fx.store.changes_since(CHILD, 0.0, None, None).unwrap();
    assert_eq!(seqs(&all.events), [1, 3, 5, 7, 9]);
    assert!(stored(&all.events).iter().all(|e| e.session_key == CHILD));
    assert_eq!(
        (
            all.state_version,
            all.truncated,
            all.earliest_available_sequence,
            all.history_gap
        ),
        (9, false, 1, false)
    );
    let after = |a: f64, limit: Option<f64>| {
        let c = fx.store.changes_since(CHILD, a, None, limit).unwrap();
        (seqs(&c.events), c.truncated)
    };
    assert_eq!(after(3.0, None), (vec![5, 7, 9], false));
    assert_eq!(after(4.0, None), (vec![5, 7, 9], false));
    assert_eq!(after(9.0, None), (vec![], false));
    assert_eq!(after(1000.0, None), (vec![], false));
    assert_eq!(after(0.0, Some(2.0)), (vec![1, 3], true));
    assert_eq!(after(0.0, Some(2.9)), (vec![1, 3], true));
    assert_eq!(after(0.0, Some(0.0)), (vec![1], true));
    assert_eq!(after(0.0, Some(-5.0)), (vec![1], true));
    assert_eq!(after(0.0, Some(0.5)), (vec![1], true));
    assert_eq!(after(0.0, Some(5.0)), (vec![1, 3, 5, 7, 9], false));
    assert_eq!(after(3.0, Some(2.0)), (vec![5, 7], true));
    assert_eq!(after(0.0, Some(1e12)), (vec![1, 3, 5, 7, 9], false));
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert_eq!(
            fx.store
                .changes_since(CHILD, 0.0, None, Some(bad))
                .unwrap_err()
                .code(),
            "ERR_INVALID_ARG"
        );
    }
    // The notice opened by the first event is untouched by reads.
    assert_eq!(fx.lnm(MAIN, CHILD), (0, 1, 9));
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 0)])
    );
}

#[test]
fn limit_defaults_to_and_clamps_at_200() {
    let fx = Fixture::memory();
    for i in 1..=201 {
        assert_eq!(fx.rec(CHILD, "compacted", None, T0).sequence, i);
    }
    let c = fx.store.changes_since(CHILD, 0.0, None, None).unwrap();
    assert_eq!(c.events.len(), 200);
    assert_eq!((c.events[0].sequence(), c.events[199].sequence()), (1, 200));
    assert!(c.truncated);
    let c = fx
        .store
        .changes_since(CHILD, 0.0, None, Some(201.0))
        .unwrap();
    assert_eq!((c.events.len(), c.truncated), (200, true));
    let c = fx.store.changes_since(CHILD, 200.0, None, None).unwrap();
    assert_eq!((seqs(&c.events), c.truncated), (vec![201], false));
    let c = fx.store.changes_since(CHILD, 1.0, None, None).unwrap();
    assert_eq!((c.events.len(), c.truncated), (200, false));
}

#[test]
fn after_must_be_a_non_negative_safe_integer() {
    let fx = Fixture::memory();
    fx.rec(CHILD, "created", None, T0);
    for bad in [
        -1.0,
        -0.5,
        0.5,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        9_007_199_254_740_992.0,
        1e300,
    ] {
        assert_eq!(
            fx.store
                .changes_since(CHILD, bad, None, None)
                .unwrap_err()
                .code(),
            "ERR_INVALID_ARG",
            "{bad}"
        );
    }
    let c = fx
        .store
        .changes_since(CHILD, 9_007_199_254_740_991.0, None, None)
        .unwrap();
    assert_eq!((c.events.len(), c.history_gap), (0, false));
    assert_eq!(
        seqs(
            &fx.store
                .changes_since(CHILD, -0.0, None, None)
                .unwrap()
                .events
        ),
        [1]
    );
}

#[test]
fn earliest_available_sequence_in_all_three_cases() {
    let fx = Fixture::file_with(Options {
        max_events: 1,
        ..opts()
    });
    // No head at all: 0.
    let none = fx.store.changes_since(CHILD, 0.0, None, None).unwrap();
    assert_eq!(
        (
            none.state_version,
            none.earliest_available_sequence,
            none.history_gap
        ),
        (0, 0, false)
    );
    assert!(none.events.is_empty());
    // Retained rows: the session's own smallest sequence, not the global one.
    fx.rec(CHILD2, "created", None, T0);
    fx.settle();
    fx.rec(CHILD, "created", None, T0);
    fx.rec(CHILD2, "created", None, T0);
    fx.rec(CHILD, "goal_changed", None, T0);
    let kept = fx.store.changes_since(CHILD, 3.0, None, None).unwrap();
    assert_eq!(
        (seqs(&kept.events), kept.earliest_available_sequence),
        (vec![4], 2)
    );
    // Every row pruned, head > 0: head + 1.
    fx.rec(CHILD2, "created", None, T0);
    assert_eq!(fx.store.prune(T0).unwrap().events_deleted, 4);
    assert_eq!(fx.sequences(), [5]);
    let gone = fx.store.changes_since(CHILD, 0.0, None, None).unwrap();
    assert_eq!(
        (
            gone.state_version,
            gone.earliest_available_sequence,
            gone.history_gap
        ),
        (4, 5, true)
    );
    assert!(gone.events.is_empty());
    let other = fx.store.changes_since(CHILD2, 0.0, None, None).unwrap();
    assert_eq!(
        (seqs(&other.events), other.earliest_available_sequence),
        (vec![5], 5)
    );
}

#[test]
fn history_gap_comes_only_from_a_real_prune() {
    let fx = Fixture::file_with(Options {
        max_events: 2,
        ..opts()
    });
    for i in 1..=3 {
        assert_eq!(fx.rec(CHILD, "goal_changed", None, T0).sequence, i);
        fx.settle();
    }
    // A row deleted by hand leaves a hole but no gap.
    fx.conn()
        .execute("DELETE FROM session_state_events WHERE sequence = 1", [])
        .unwrap();
    let c = fx.store.changes_since(CHILD, 0.0, None, None).unwrap();
    assert_eq!(
        (
            seqs(&c.events),
            c.earliest_available_sequence,
            c.history_gap
        ),
        (vec![2, 3], 2, false)
    );
    fx.rec(CHILD, "goal_changed", None, T0);
    let report = fx.store.prune(T0).unwrap();
    assert_eq!(report.events_deleted, 1);
    assert_eq!(fx.sequences(), [3, 4]);
    assert_eq!(fx.head_row(CHILD, "main"), Some((4, 2)));
    let gap = |after: f64| {
        let c = fx.store.changes_since(CHILD, after, None, None).unwrap();
        (
            seqs(&c.events),
            c.history_gap,
            c.earliest_available_sequence,
        )
    };
    assert_eq!(gap(0.0), (vec![3, 4], true, 3));
    assert_eq!(gap(1.0), (vec![3, 4], true, 3));
    assert_eq!(gap(2.0), (vec![3, 4], false, 3));
    assert_eq!(gap(3.0), (vec![4], false, 3));
    // The gap is per session: another session's history is whole.
    fx.rec(CHILD2, "created", None, T0);
    let other = fx.store.changes_since(CHILD2, 0.0, None, None).unwrap();
    assert!(!other.history_gap);
}
