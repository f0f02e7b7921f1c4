//! The automatic prune's hour rule (semantics.md#recording), deterministic, on a file and on
//! a PostgreSQL store.

use std::sync::Arc;

use session_awareness_core::{Hooks, Options, Store};

use super::spec::{DAY, HOUR};
use super::{core_input, input, plain_record, Harness, START, T0};

/// semantics.md#recording, deterministic: opening never prunes; the first record after opening prunes; then a
/// record prunes only once more than an hour has passed since the last prune, and any prune
/// (an explicit one too) restarts the hour. Retention is 10 s and every event is recorded
/// 20 s in the past, so an event survives exactly until the next prune.
#[test]
fn the_automatic_prune_follows_the_hour_rule() {
    let dir = tempfile::tempdir().unwrap();
    hour_rule(
        dir.path().join("state.sqlite").to_str().unwrap(),
        Options::default(),
    );
}

/// The hour rule on the store at `path` (a file or a PostgreSQL URL), opened with `opts`.
fn hour_rule(path: &str, opts: Options) {
    let opts = Options {
        retention_ms: 10_000,
        sync_interval_ms: 0,
        ..opts
    };
    // Background work reads this clock: were opening to prune, everything would be old.
    let hooks = Hooks {
        clock: Some(Arc::new(|| START + 100 * DAY)),
        ..Hooks::default()
    };
    let open = || Store::open(path, opts, hooks.clone()).unwrap();
    let record = |s: &Store, now: i64| {
        let mut input = core_input(&input(&plain_record(), now));
        input.occurred_at = Some((now - 20_000) as f64);
        let seq = s.record(input, now).unwrap().unwrap().sequence;
        Harness::settle(s);
        seq
    };
    let kept = |s: &Store| -> Vec<i64> {
        let c = s.changes_since(T0, 0.0, None, None).unwrap();
        c.events.iter().map(|e| e.sequence()).collect()
    };

    let s = open();
    let t = START;
    let a = record(&s, t);
    assert_eq!(
        kept(&s),
        Vec::<i64>::new(),
        "the first record after opening prunes"
    );
    let b = record(&s, t + 1);
    let c = record(&s, t + HOUR);
    assert_eq!(
        kept(&s),
        [b, c],
        "no prune within the hour, nor at exactly one hour"
    );
    let d = record(&s, t + HOUR + 1);
    assert_eq!(
        kept(&s),
        Vec::<i64>::new(),
        "more than an hour: the record prunes"
    );
    let changes = s.changes_since(T0, a as f64, None, None).unwrap();
    assert_eq!((changes.state_version, changes.history_gap), (d, true));

    let report = s.prune(t + 2 * HOUR).unwrap();
    assert_eq!(report.events_deleted, 0);
    let e = record(&s, t + 3 * HOUR);
    assert_eq!(kept(&s), [e], "an explicit prune restarts the hour");
    s.close();

    let s = open();
    assert_eq!(kept(&s), [e], "opening never prunes");
    let f = record(&s, t + 3 * HOUR + 2);
    assert_eq!(
        kept(&s),
        Vec::<i64>::new(),
        "the first record after reopening prunes"
    );
    assert_eq!(s.state_version(T0, None).unwrap(), f);
}

/// The automatic prune's hour rule on a PostgreSQL store.
#[test]
fn the_automatic_prune_follows_the_hour_rule_on_postgres() {
    let opts = session_awareness_core::Options {
        pg_schema: super::pg::schema(),
        ..Default::default()
    };
    hour_rule(&super::pg::cluster().url(), opts);
}
