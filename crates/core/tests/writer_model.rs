//! semantics.md#promise-api, by random cases: records written as groups (cut at random
//! places, with watches between groups) give, record by record and in the end state, exactly
//! what the same records give one at a time.

mod common;

use common::*;
use proptest::prelude::*;
use session_awareness_core::{
    ChangeEvent, Error, Notice, Options, Provenance, RecordInput, StateEvent, Store,
};

const KEYS: [&str; 6] = [
    "agent:main:t1",
    "agent:main:t2",
    "agent:main:subagent:child",
    "agent:ops:main",
    "main",
    "",
];
const KINDS: [&str; 5] = [
    "human_direct_message",
    "goal_changed",
    "run_completed",
    "child_spawned",
    "bogus",
];

/// One step of a case: a record, maybe preceded by a watch, maybe closing its group.
#[derive(Debug, Clone)]
struct Step {
    key: usize,
    kind: usize,
    dedupe: u8,
    flags: u8,
}

impl Step {
    fn input(&self) -> RecordInput {
        let key = KEYS[self.key];
        RecordInput {
            session_key: key.into(),
            kind: KINDS[self.kind].into(),
            actor_type: if self.flags & 4 != 0 {
                "agent"
            } else {
                "human"
            }
            .into(),
            actor_id: (self.flags & 4 != 0).then(|| MAIN.into()),
            summary: "s".into(),
            dedupe_key: match self.dedupe {
                0 | 1 => Some(format!("d{}", self.dedupe)),
                _ => None,
            },
            watchers: if self.flags & 2 != 0 {
                vec![MAIN.into()]
            } else {
                Vec::new()
            },
            only_if_watched: self.flags & 1 != 0,
            ..Default::default()
        }
    }

    /// A watch by OPS of this step's key, before the record.
    fn watches_first(&self) -> bool {
        self.flags & 8 != 0
    }

    /// The group ends after this step.
    fn ends_group(&self) -> bool {
        self.flags & 16 != 0
    }
}

type Outcome = Result<Option<StateEvent>, &'static str>;

fn outcome(r: Result<Option<StateEvent>, Error>) -> Outcome {
    r.map_err(|e| e.code())
}

fn open() -> Store {
    let opts = Options {
        sync_interval_ms: 0,
        ..opts()
    };
    Fixture::memory_with(opts).store
}

fn watch(s: &Store, key: &str, now: i64) -> Result<bool, &'static str> {
    s.watch(OPS, key, Provenance::Explicit, now)
        .map_err(|e| e.code())
}

/// Every session's delta and every watcher's queue.
type Observed = (Vec<Vec<ChangeEvent>>, Vec<Vec<(String, i64)>>);

/// What a case leaves observable.
fn state(s: &Store) -> Observed {
    let deltas = KEYS[..5]
        .iter()
        .map(|k| s.changes_since(k, 0.0, None, Some(200.0)).unwrap().events)
        .collect();
    let queues = [MAIN, OPS]
        .iter()
        .map(|w| pairs(&s.peek(w).unwrap()))
        .collect();
    (deltas, queues)
}

fn run(steps: &[Step]) -> Result<(), TestCaseError> {
    let alone = open();
    let grouped = open();
    for k in &KEYS[..3] {
        assert!(alone.watch(MAIN, k, Provenance::Explicit, T0).unwrap());
        assert!(grouped.watch(MAIN, k, Provenance::Explicit, T0).unwrap());
    }
    let mut want: Vec<Outcome> = Vec::new();
    let mut got: Vec<Outcome> = Vec::new();
    let mut group: Vec<(RecordInput, i64)> = Vec::new();
    let flush = |group: &mut Vec<(RecordInput, i64)>, got: &mut Vec<Outcome>| {
        let items = std::mem::take(group);
        got.extend(grouped.record_group(items).into_iter().map(outcome));
    };
    for (i, step) in steps.iter().enumerate() {
        let now = T0 + i as i64;
        if step.watches_first() {
            flush(&mut group, &mut got);
            prop_assert_eq!(
                watch(&grouped, KEYS[step.key], now),
                watch(&alone, KEYS[step.key], now)
            );
        }
        want.push(outcome(alone.record(step.input(), now)));
        group.push((step.input(), now));
        if step.ends_group() {
            flush(&mut group, &mut got);
        }
    }
    flush(&mut group, &mut got);
    prop_assert_eq!(&got, &want);
    prop_assert_eq!(state(&grouped), state(&alone));
    let drained: Vec<Notice> = grouped.drain(MAIN, T0 + 1_000).unwrap();
    prop_assert_eq!(
        pairs(&drained),
        pairs(&alone.drain(MAIN, T0 + 1_000).unwrap())
    );
    Ok(())
}

fn step() -> impl Strategy<Value = Step> {
    (0..KEYS.len(), 0..KINDS.len(), 0u8..4, any::<u8>()).prop_map(|(key, kind, dedupe, flags)| {
        Step {
            key,
            kind,
            dedupe,
            flags,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn grouped_records_match_the_same_records_alone(steps in prop::collection::vec(step(), 1..40)) {
        run(&steps)?;
    }
}
