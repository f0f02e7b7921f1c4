//! Model-based test of semantics.md#recording–semantics.md#retention: random sequences of operations (record, watch, unwatch,
//! drain, acknowledge, sweep, prune, resetSession, deleteSession, changesSince, clock jumps,
//! restarts) drive the core [`Store`] and the small in-memory model of `model/spec.rs` side by
//! side, over a small key space (`model/ops.rs`). After every operation its result must
//! agree, and so must every watcher's queued notices (exact text included), `hasPending`, the
//! watchers with a scheduled wake, and the full `changesSince` of every session the operation
//! may change by the SPEC; at the end of a case every session's `changesSince`,
//! `stateVersion` and `stateVersions`, and `ERR_CLOSED` from every call once closed.
//!
//! - The automatic prune (semantics.md#recording) runs in the background after a record: the driver waits until
//!   `is_pruning()` is false after every record, so it has run at the record's clock reading
//!   before the next operation, and the model applies it right after the record.
//! - Wakes (semantics.md#wake): the coalescing delay (60 s) outlasts every case, so the watchers with a
//!   scheduled wake are exactly those a wake was due for since the last restart, less those
//!   reset or deleted; none is delivered.
//! - One case in five runs on a database file and may restart: the queue and the wakes are
//!   lost, the rows stay, and sweeps then bring the notices back in their order (semantics.md#cursors).
//! - Each operation is decoded from one `u64` in the model's current state, which keeps the
//!   generation cheap enough for 10,000 cases in a debug build (`PROPTEST_CASES` overrides
//!   the count); a failure lists the decoded operations of its shrunk case.
//! - The Promise API's writer thread (semantics.md#promise-api): `Hold` parks it on a job that
//!   waits, the calls that follow are queued behind it (`Queue`) or made synchronously, and
//!   `Release` lets it take the whole queue in one batch. The model applies the synchronous
//!   calls at once, and at the release the queued ones in call order, each run of records as
//!   one group (one automatic prune after it, if due); every result must agree. A core
//!   [`Store`] call does not wait for its writer thread, which is what lets a synchronous call
//!   commit while jobs are queued; the binding's synchronous methods wait for the queue first.
//!   Every state between batches is observed as after any other step.
//! - Every file case starts with rows the store would never write (`model/foreign.rs`, semantics.md#storage):
//!   the model ignores them, so a notice, wake or count they caused fails the case, and at
//!   the end each must be unchanged or deleted by a reset or delete of its keys.

#[path = "model/foreign.rs"]
mod foreign;
#[path = "model/hour.rs"]
mod hour;
#[path = "model/ops.rs"]
mod ops;
#[path = "model/pg.rs"]
mod pg;
#[path = "model/queue.rs"]
mod queue;
#[path = "model/spec.rs"]
mod spec;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ops::*;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{FileFailurePersistence, TestCaseError};
use queue::{call, expect, Outcome, Queue};
use serde_json::json;
use session_awareness_core::{
    ActorType, ChangeEvent, Changes, Error, ErrorSink, EventKind, Hooks, Notice, Options,
    Provenance, RecordInput, StateEvent, Store, VersionRef, WakeRequest, WakeSink,
};
use spec::{Delta, Ev, Input, Model, Queued, HOUR};

fn summary(i: u8) -> String {
    match i {
        0 => "s".into(),
        1 => "a\r\nb\rc\nd\u{2028}e\u{2029}f".into(),
        2 => "é".repeat(300),
        _ => "  x  ".into(),
    }
}

fn input(r: &Rec, now: i64) -> Input {
    Input {
        key: r.key.into(),
        agent: r.agent.map(Into::into),
        session_id: r.ids.then(|| "sess-1".into()),
        kind: r.kind.into(),
        actor_type: r.actor_type.into(),
        actor_id: r.actor.map(Into::into),
        run_id: r.ids.then(|| "run-1".into()),
        summary: summary(r.summary),
        payload: match r.payload {
            0 => None,
            1 => Some(serde_json::Value::Null),
            2 => Some(json!({ "n": 1, "s": "x" })),
            _ => Some(json!([1])),
        },
        occurred_at: match r.occurred {
            Occurred::Absent => None,
            Occurred::Ago(ms) => Some(now as f64 - ms),
            Occurred::NaN => Some(f64::NAN),
        },
        dedupe: r.dedupe.map(Into::into),
        watchers: r.watchers.iter().map(|w| (*w).into()).collect(),
        only_if_watched: r.only_if_watched,
    }
}

fn core_input(i: &Input) -> RecordInput {
    RecordInput {
        session_key: i.key.clone(),
        agent_id: i.agent.clone(),
        session_id: i.session_id.clone(),
        kind: i.kind.clone(),
        actor_type: i.actor_type.clone(),
        actor_id: i.actor_id.clone(),
        run_id: i.run_id.clone(),
        summary: i.summary.clone(),
        payload: i.payload.clone(),
        occurred_at: i.occurred_at,
        dedupe_key: i.dedupe.clone(),
        watchers: i.watchers.clone(),
        only_if_watched: i.only_if_watched,
        watcher_scopes: Default::default(),
    }
}

fn event(e: &Ev) -> StateEvent {
    StateEvent {
        sequence: e.seq,
        session_key: e.key.clone(),
        agent_id: e.agent.clone(),
        kind: EventKind::parse(&e.kind).expect("a valid kind"),
        actor_type: ActorType::parse(&e.actor_type).expect("a valid actor type"),
        actor_id: e.actor_id.clone(),
        run_id: e.run_id.clone(),
        session_id: e.session_id.clone(),
        occurred_at: e.occurred_at,
        summary: e.summary.clone(),
        payload_json: e.payload.clone(),
    }
}

fn notices(q: &[Queued]) -> Vec<Notice> {
    q.iter()
        .map(|(w, t, l)| Notice {
            watcher_key: w.clone(),
            target_key: t.clone(),
            changes_since: *l,
            text: spec::notice_text(t, *l),
            context_key: spec::context_key(t),
            scope: None,
        })
        .collect()
}

fn changes(d: Delta) -> Changes {
    Changes {
        state_version: d.state_version,
        events: d
            .events
            .iter()
            .map(|e| ChangeEvent::Stored(event(e)))
            .collect(),
        truncated: d.truncated,
        earliest_available_sequence: d.earliest,
        history_gap: d.gap,
    }
}

fn code<T>(r: Result<T, Error>) -> Result<T, &'static str> {
    r.map_err(|e| e.code())
}

/// Counts wakes delivered: none may be, the coalescing delay outlasts every case.
#[derive(Default)]
struct Wakes(AtomicUsize);
impl WakeSink for Wakes {
    fn wake(&self, _: WakeRequest) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Collects background failures: none may happen.
#[derive(Default)]
struct Failures(Mutex<Vec<String>>);
impl ErrorSink for Failures {
    fn report(&self, e: Error) {
        self.0.lock().unwrap().push(e.to_string());
    }
}

struct Harness {
    store: Store,
    queue: Queue,
    model: Model,
    /// The database file of a restartable case (else the store is in memory).
    file: Option<(tempfile::TempDir, String)>,
    opts: Options,
    wakes: Arc<Wakes>,
    failures: Arc<Failures>,
    /// The foreign rows written before the store opened (file cases).
    foreign: BTreeSet<foreign::Row>,
    /// The URL of a PostgreSQL case (its schema in `opts`): restartable, no foreign rows.
    pg: Option<String>,
    /// Hex of the keys reset, and of the keys deleted, during the case.
    reset: BTreeSet<String>,
    deleted: BTreeSet<String>,
}

impl Harness {
    fn open(retention: i64, max_events: u64, restartable: bool, pg: Option<String>) -> Self {
        let file = (restartable && pg.is_none()).then(|| {
            // A RAM-backed directory where there is one: the file only has to outlive a
            // restart.
            let shm = std::path::Path::new("/dev/shm");
            let dir = if shm.is_dir() {
                tempfile::tempdir_in(shm)
            } else {
                tempfile::tempdir()
            }
            .unwrap();
            let path = dir.path().join("state.sqlite").to_str().unwrap().to_owned();
            (dir, path)
        });
        let opts = Options {
            pg_schema: pg.as_ref().map_or_else(Default::default, |_| pg::schema()),
            retention_ms: retention,
            max_events,
            wake_coalesce_ms: 60_000,
            // One process: no polling for other processes' changes.
            sync_interval_ms: 0,
            ..Options::default()
        };
        let wakes = Arc::new(Wakes::default());
        let failures = Arc::new(Failures::default());
        let file_path = file.as_ref().map_or(":memory:", |f| f.1.as_str());
        let path = pg.as_deref().unwrap_or(file_path);
        let foreign = match &file {
            Some((_, path)) => {
                foreign::seed(path);
                foreign::rows(path)
            }
            None => BTreeSet::new(),
        };
        let store = Self::store(path, opts, &wakes, &failures);
        Harness {
            queue: Queue::start(&store),
            store,
            model: Model::new(START, retention, max_events),
            file,
            opts,
            wakes,
            failures,
            foreign,
            pg,
            reset: BTreeSet::new(),
            deleted: BTreeSet::new(),
        }
    }

    fn store(path: &str, opts: Options, wakes: &Arc<Wakes>, failures: &Arc<Failures>) -> Store {
        let hooks = Hooks {
            wake: Some(wakes.clone() as Arc<dyn WakeSink>),
            errors: Some(failures.clone() as Arc<dyn ErrorSink>),
            clock: None,
        };
        Store::open(path, opts, hooks).unwrap()
    }

    /// Waits for the automatic prune a record may have started.
    fn settle(store: &Store) {
        while store.is_pruning() {
            // Sleep rather than spin: on a busy machine the prune needs this core.
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }

    /// Applies `op` to both and compares its result.
    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let (s, m) = (&self.store, &mut self.model);
        let now = m.now;
        match op {
            Op::Record(_) | Op::Watch(..) | Op::Drain(_) | Op::Acknowledge(..) => {
                let got = call(s, op, now);
                if let Op::Record(_) = op {
                    Self::settle(s);
                }
                prop_assert_eq!(got, expect(m, op), "{:?}", op);
            }
            Op::Hold => self.queue.hold(),
            Op::Queue(job) => self.queue.queue(job, now),
            Op::Release => {
                let (jobs, got) = self.queue.release();
                // The background prune a group may have started.
                Self::settle(&self.store);
                let m = &mut self.model;
                let mut want = Vec::new();
                let mut group = Vec::new();
                for (k, job) in jobs.iter().enumerate() {
                    if let Op::Record(r) = job {
                        group.push(input(r, m.now));
                    }
                    let last = !matches!(jobs.get(k + 1), Some(Op::Record(_)));
                    if !group.is_empty() && last {
                        let results = m.record_group(&group);
                        want.extend(
                            results
                                .into_iter()
                                .map(|r| Outcome::Record(r.map(|e| e.as_ref().map(event)))),
                        );
                        group.clear();
                    } else if !matches!(job, Op::Record(_)) {
                        want.push(expect(m, job));
                    }
                }
                prop_assert_eq!(got, want, "the queued calls {:?}", jobs);
            }
            Op::Unwatch(w, t) => {
                prop_assert_eq!(code(s.unwatch(w, t)), m.unwatch(w, t), "unwatch");
            }
            Op::Sweep(exists) => {
                let got = match exists {
                    None => s.sweep(None, now),
                    Some(set) => s.sweep(Some(&mut |w: &str| set.contains(&w)), now),
                }
                .unwrap();
                let set: Option<BTreeSet<String>> = exists
                    .as_ref()
                    .map(|v| v.iter().map(|w| (*w).into()).collect());
                let (n, e, c) = m.sweep(set.as_ref());
                prop_assert_eq!(
                    (
                        got.notices,
                        got.prune.events_deleted,
                        got.prune.cursors_deleted
                    ),
                    (n, e, c),
                    "sweep"
                );
            }
            Op::Prune => {
                let got = s.prune(now).unwrap();
                let want = m.prune();
                prop_assert_eq!((got.events_deleted, got.cursors_deleted), want, "prune");
            }
            Op::Reset(k) => {
                self.reset.insert(foreign::hex(k));
                prop_assert_eq!(code(s.reset_session(k)), m.reset(k), "reset")
            }
            Op::Delete(k, a) => {
                self.deleted.insert(foreign::hex(k));
                prop_assert_eq!(code(s.delete_session(k, *a)), m.delete(k, *a), "delete")
            }
            Op::Clock(j) => {
                m.now += match j {
                    Jump::Ms(ms) => *ms,
                    Jump::RetentionPlus(ms) => m.retention + ms,
                }
            }
            Op::Restart => {
                self.queue.writer.join();
                self.store.close();
                let file = self.file.as_ref().map(|f| f.1.as_str());
                let path = self.pg.as_deref().or(file).expect("a restartable case");
                self.store = Self::store(path, self.opts, &self.wakes, &self.failures);
                self.queue = Queue::start(&self.store);
                self.model.restart();
            }
            Op::Changes(k, a, after, limit) => {
                let top = m.top_seq() as f64;
                let after = match after {
                    After::Zero => 0.0,
                    After::Half => (top / 2.0).floor(),
                    After::Top => top,
                    After::Beyond => top + 5.0,
                    After::Raw(x) => *x,
                };
                let got = code(s.changes_since(k, after, *a, *limit));
                let want = m.changes_since(k, after, *a, *limit).map(changes);
                prop_assert_eq!(got, want, "changesSince");
            }
        }
        Ok(())
    }

    /// Compares what is observable: the notices, `hasPending` and the scheduled wakes after
    /// every step, with the full `changesSince` of the sessions in `touched`, those the step
    /// may change by the SPEC (the recorded or deleted session; every session after a prune).
    /// A head or an event changed where the SPEC changes none persists, so the comparison of
    /// every session at the end of the case ([`Harness::observe_all`]) still finds it.
    fn observe(&self, touched: &[(&str, Option<&str>)]) -> Result<(), TestCaseError> {
        let (s, m) = (&self.store, &self.model);
        for &(k, a) in touched {
            let got = s.changes_since(k, 0.0, a, None).unwrap();
            let want = changes(m.changes_since(k, 0.0, a, None).unwrap());
            prop_assert_eq!(got, want, "changesSince {} {:?}", k, a);
        }
        for w in WATCHERS.iter().chain(&TARGETS).chain([&BARE]) {
            let want = notices(&m.peek(w));
            prop_assert_eq!(
                s.has_pending(w).unwrap(),
                !want.is_empty(),
                "hasPending {}",
                w
            );
            prop_assert_eq!(s.peek(w).unwrap(), want, "peek {}", w);
        }
        let wakes: Vec<String> = m.wakes.iter().cloned().collect();
        prop_assert_eq!(s.scheduled_wakes(), wakes, "scheduled wakes");
        Ok(())
    }

    /// Everything, every session included: `changesSince`, `stateVersion`, `stateVersions`.
    fn observe_all(&self) -> Result<(), TestCaseError> {
        let (s, m) = (&self.store, &self.model);
        self.observe(&sessions())?;
        let mut refs = Vec::new();
        let mut want = Vec::new();
        for (k, a) in sessions() {
            let v = m.state_version(k, a).unwrap();
            prop_assert_eq!(s.state_version(k, a).unwrap(), v, "stateVersion {}", k);
            refs.push(VersionRef {
                session_key: k.into(),
                agent_id: a.map(Into::into),
            });
            if v > 0 {
                want.push((k.to_owned(), spec::resolve_agent(k, a).unwrap(), v));
            }
        }
        prop_assert_eq!(s.state_versions(&refs).unwrap(), want, "stateVersions");
        Ok(())
    }

    /// Closes the store: every later call is `ERR_CLOSED` (`record` included), and closing
    /// again is harmless.
    fn close(self) -> Result<(), TestCaseError> {
        let s = &self.store;
        for w in ["global", "agent:main:foreign"] {
            prop_assert_eq!(
                s.peek(w).unwrap(),
                Vec::<Notice>::new(),
                "no notice for {}",
                w
            );
        }
        self.queue.writer.join();
        s.close();
        s.close();
        let input = core_input(&input(&plain_record(), START));
        let codes = [
            s.record(input, START).err(),
            s.watch(W0, T0, Provenance::Explicit, START).err(),
            s.unwatch(W0, T0).err(),
            s.drain(W0, START).err(),
            s.peek(W0).err(),
            s.has_pending(W0).err(),
            s.acknowledge(W0, &[T0.into()], START).err(),
            s.sweep(None, START).err(),
            s.prune(START).err(),
            s.reset_session(W0).err(),
            s.delete_session(T0, None).err(),
            s.state_version(T0, None).err(),
            s.changes_since(T0, 0.0, None, None).err(),
        ]
        .map(|e| e.map(|e| e.code()));
        prop_assert_eq!(codes, [Some("ERR_CLOSED"); 13]);
        prop_assert_eq!(s.scheduled_wakes(), Vec::<String>::new());
        prop_assert_eq!(
            self.wakes.0.load(Ordering::SeqCst),
            0,
            "no wake is delivered"
        );
        prop_assert_eq!(
            self.failures.0.lock().unwrap().clone(),
            Vec::<String>::new()
        );
        if let Some((_, path)) = &self.file {
            let after = foreign::rows(path);
            foreign::check(&self.foreign, &after, &self.reset, &self.deleted)?;
        }
        Ok(())
    }
}

/// The observed sessions a step may change by the SPEC.
fn touched(op: &Op, pruned: bool) -> Vec<(&'static str, Option<&'static str>)> {
    let all = sessions();
    match op {
        _ if pruned => all,
        Op::Release => all,
        Op::Record(r) => all.into_iter().filter(|s| s.0 == r.key).collect(),
        Op::Delete(k, _) => all.into_iter().filter(|s| s.0 == *k).collect(),
        _ => Vec::new(),
    }
}

/// A valid, plain record.
fn plain_record() -> Rec {
    Rec {
        key: T0,
        agent: None,
        kind: NOTIFY[0],
        actor_type: "human",
        actor: None,
        watchers: Vec::new(),
        dedupe: None,
        occurred: Occurred::Absent,
        summary: 0,
        payload: 0,
        only_if_watched: false,
        ids: false,
    }
}

/// One case, on the PostgreSQL store `pg` names (a URL), or on SQLite without one.
fn run_on(
    retention: i64,
    max_events: u64,
    restartable: bool,
    ops: &[u64],
    pg: Option<String>,
) -> Result<(), TestCaseError> {
    let mut h = Harness::open(retention, max_events, restartable, pg);
    let mut done: Vec<Op> = Vec::new();
    let fail = |done: &[Op], e: TestCaseError| {
        let steps: Vec<String> = done
            .iter()
            .enumerate()
            .map(|(i, op)| format!("  {i}: {op:?}"))
            .collect();
        TestCaseError::fail(format!("{e}\nsteps:\n{}", steps.join("\n")))
    };
    let held = ops.iter().map(|n| (*n, true));
    // A case that ends with the writer thread held releases it.
    let release = std::iter::once((0, false));
    for (n, drawn) in held.chain(release) {
        let op = match (h.queue.held.is_some(), drawn) {
            (true, true) => decode_held(n, &h.model, h.model.prune_due()),
            (false, true) => decode(n, &h.model, restartable),
            (true, false) => Op::Release,
            (false, false) => break,
        };
        let prunes = h.model.prunes;
        let outcome = h.step(&op).and_then(|()| {
            h.model.check();
            h.observe(&touched(&op, h.model.prunes != prunes))
        });
        done.push(op);
        outcome.map_err(|e| fail(&done, e))?;
    }
    h.observe_all().map_err(|e| fail(&done, e))?;
    h.close().map_err(|e| fail(&done, e))
}

fn config() -> ProptestConfig {
    let base = ProptestConfig {
        // Next to this file (proptest's default looks for a lib.rs or main.rs).
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/model.proptest-regressions",
        ))),
        ..ProptestConfig::default()
    };
    if std::env::var_os("PROPTEST_CASES").is_some() {
        base
    } else {
        ProptestConfig {
            cases: 10_000,
            ..base
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_core_behaves_like_the_model(
        retention in select(&[10_000, HOUR, 25 * HOUR][..]),
        max_events in select(&[1u64, 2, 4, 1_000][..]),
        restartable in prop::bool::weighted(0.2),
        ops in prop::collection::vec(any::<u64>(), 1..30),
    ) {
        run_on(retention, max_events, restartable, &ops, None)?;
    }
}
