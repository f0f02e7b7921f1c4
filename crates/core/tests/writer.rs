//! semantics.md#promise-api: the writer thread's queue and group commit. Records taken
//! together are one transaction, each processed exactly as alone (dedupe, cursors, notices,
//! wakes); a failing one leaves the others in; notices are queued before results go out.

mod common;

use std::sync::mpsc::{self, Receiver, Sender};

use common::*;
use session_awareness_core::{Done, Job, Options, Provenance, RecordInput, Store, Writer};

const T1: &str = "agent:main:t1";
const T2: &str = "agent:main:t2";
const BAD: &str = "agent:main:bad";

type Batch = Vec<Done<u32>>;

/// A writer whose batches arrive on a channel.
fn writer(store: &Store) -> (Writer<u32>, Receiver<Batch>) {
    let (tx, rx) = mpsc::channel();
    let tx = parking_lot::Mutex::new(tx);
    let w = Writer::start(
        store.clone(),
        Box::new(move |done| {
            let _ = tx.lock().send(done);
        }),
    )
    .expect("writer starts");
    (w, rx)
}

/// Queues a job that keeps the writer busy until the returned sender sends (or drops), and
/// returns once the writer runs it, so the jobs queued meanwhile are taken together. (Returning
/// right after the push let a writer that woke late take the first records with the held
/// job, as a batch of its own.)
fn hold(w: &Writer<u32>) -> Sender<()> {
    let (tx, rx) = mpsc::channel::<()>();
    let (running_tx, running) = mpsc::channel::<()>();
    w.push(Job::Task(Box::new(move |_| {
        let _ = running_tx.send(());
        let _ = rx.recv();
        0
    })))
    .expect("queued");
    running
        .recv_timeout(PATIENCE)
        .expect("the writer runs the held job");
    tx
}

/// Every result of the batches that arrive until `n` results came, and the batch sizes.
fn collect(rx: &Receiver<Batch>, n: usize) -> (Vec<Done<u32>>, Vec<usize>) {
    let mut all = Vec::new();
    let mut sizes = Vec::new();
    while all.len() < n {
        let b = rx.recv_timeout(PATIENCE).expect("a batch");
        sizes.push(b.len());
        all.extend(b);
    }
    (all, sizes)
}

/// The sequence a record result carries (0 for a null result); panics on an error.
fn seq(d: &Done<u32>) -> i64 {
    match d {
        Done::Recorded(Ok(e)) => e.as_ref().map_or(0, |e| e.sequence),
        Done::Recorded(Err(e)) => panic!("record failed: {} {e}", e.code()),
        Done::Ran(_) | Done::Lost(_) => panic!("not a record"),
    }
}

fn code(d: &Done<u32>) -> &'static str {
    match d {
        Done::Recorded(Err(e)) => e.code(),
        _ => panic!("not a failed record"),
    }
}

fn deduped(key: &str, kind: &str, dedupe: &str) -> RecordInput {
    RecordInput {
        dedupe_key: Some(dedupe.into()),
        ..input(key, kind)
    }
}

/// The script both stores run: material and non-material events, a dedupe repeat, a
/// producer-named watcher and an `onlyIfWatched` record that finds its watcher.
fn script() -> Vec<RecordInput> {
    vec![
        input(T1, "goal_changed"),
        input(T2, "human_direct_message"),
        deduped(T1, "goal_changed", "k1"),
        input(T1, "run_completed"),
        deduped(T1, "goal_changed", "k1"),
        RecordInput {
            watchers: vec![OPS.into()],
            ..input(T2, "goal_changed")
        },
        RecordInput {
            only_if_watched: true,
            ..input(T2, "goal_changed")
        },
        RecordInput {
            only_if_watched: true,
            ..input("agent:main:unwatched", "goal_changed")
        },
        // Reseeds MAIN's cursor on T1: its pending notice goes.
        RecordInput {
            watchers: vec![MAIN.into()],
            ..input(T1, "child_spawned")
        },
    ]
}

#[test]
fn a_group_is_processed_exactly_as_its_records_alone() {
    let alone = Fixture::file();
    let grouped = Fixture::file();
    for fx in [&alone, &grouped] {
        for t in [T1, T2] {
            assert!(fx.store.watch(MAIN, t, Provenance::Explicit, T0).unwrap());
        }
    }
    let expected: Vec<i64> = script()
        .into_iter()
        .map(|i| alone.store.record(i, T0).unwrap().map_or(0, |e| e.sequence))
        .collect();
    // A repeated dedupe key uses up a sequence number, alone as in a group.
    assert_eq!(expected, vec![1, 2, 3, 4, 3, 6, 7, 0, 8]);

    let (w, rx) = writer(&grouped.store);
    let release = hold(&w);
    for i in script() {
        w.push(Job::Record(Box::new(i), T0)).unwrap();
    }
    drop(release);
    let (done, sizes) = collect(&rx, 1 + expected.len());
    // The held task alone, then one taken batch holds every record.
    assert_eq!(sizes, [1, 9]);
    let got: Vec<i64> = done[1..].iter().map(seq).collect();
    assert_eq!(got, expected);
    for (watcher, target) in [(MAIN, T1), (MAIN, T2), (OPS, T2)] {
        assert_eq!(grouped.lnm(watcher, target), alone.lnm(watcher, target));
    }
    assert_eq!(
        pairs(&grouped.store.peek(MAIN).unwrap()),
        pairs(&alone.store.peek(MAIN).unwrap())
    );
    assert_eq!(
        pairs(&grouped.store.peek(MAIN).unwrap()),
        expect_pairs(&[(T2, 0)])
    );
    assert_eq!(
        pairs(&grouped.store.peek(OPS).unwrap()),
        expect_pairs(&[(T2, 0)])
    );
    // One wake for the main watcher, naming the first target whose notice made it due.
    let mut wakes = [grouped.next_wake(), grouped.next_wake()];
    wakes.sort_by(|a, b| a.session_key.cmp(&b.session_key));
    assert_eq!(
        wakes.map(|w| (w.session_key, w.reason)),
        [
            (MAIN.to_owned(), format!("session-state:{T1}")),
            (OPS.to_owned(), format!("session-state:{T2}")),
        ]
    );
    grouped.assert_no_wake(100);
}

#[test]
fn dedupe_inside_one_group_returns_the_first_row() {
    let fx = Fixture::memory();
    let (w, rx) = writer(&fx.store);
    let release = hold(&w);
    w.push(Job::Record(
        Box::new(deduped(T1, "goal_changed", "same")),
        T0,
    ))
    .unwrap();
    w.push(Job::Record(
        Box::new(deduped(T1, "goal_changed", "same")),
        T0 + 5,
    ))
    .unwrap();
    drop(release);
    let (done, _) = collect(&rx, 3);
    let (first, second) = match (&done[1], &done[2]) {
        (Done::Recorded(Ok(Some(a))), Done::Recorded(Ok(Some(b)))) => (a, b),
        _ => panic!("both records return an event"),
    };
    assert_eq!(first, second);
    assert_eq!(first.sequence, 1);
    assert_eq!(
        fx.store
            .changes_since(T1, 0.0, None, None)
            .unwrap()
            .events
            .len(),
        1
    );
}

#[test]
fn a_failing_event_leaves_the_others_of_its_group() {
    let fx = Fixture::file();
    for t in [T1, BAD, T2] {
        assert!(fx.store.watch(MAIN, t, Provenance::Explicit, T0).unwrap());
    }
    // The cursor update of BAD's record fails inside the group's transaction.
    fx.conn()
        .execute_batch(&format!(
            "CREATE TRIGGER refuse BEFORE UPDATE ON session_watch_cursors \
             WHEN NEW.target_session_key = '{BAD}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        ))
        .unwrap();
    let (w, rx) = writer(&fx.store);
    let release = hold(&w);
    w.push(Job::Record(Box::new(input(T1, "goal_changed")), T0))
        .unwrap();
    w.push(Job::Record(Box::new(input(BAD, "goal_changed")), T0))
        .unwrap();
    w.push(Job::Record(Box::new(input("", "goal_changed")), T0))
        .unwrap();
    w.push(Job::Record(Box::new(input(T2, "goal_changed")), T0))
        .unwrap();
    drop(release);
    let (done, _) = collect(&rx, 5);
    assert_eq!(seq(&done[1]), 1);
    assert_eq!(code(&done[2]), "ERR_DB");
    assert_eq!(code(&done[3]), "ERR_INVALID_ARG");
    // The failed event's sequence was rolled back with it: the next one takes it.
    assert_eq!(seq(&done[4]), 2);
    assert_eq!(fx.sequences(), vec![1, 2]);
    assert_eq!(fx.head_row(BAD, "main"), None);
    assert_eq!(fx.lnm(MAIN, BAD), (0, 0, 0));
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(T1, 0), (T2, 0)])
    );
}

#[test]
fn notices_are_queued_when_the_results_go_out() {
    let fx = Fixture::memory();
    assert!(fx.store.watch(MAIN, T1, Provenance::Explicit, T0).unwrap());
    let (tx, rx) = mpsc::channel();
    let tx = parking_lot::Mutex::new(tx);
    let store = fx.store.clone();
    let w: Writer<u32> = Writer::start(
        fx.store.clone(),
        Box::new(move |done| {
            let seen = pairs(&store.peek(MAIN).unwrap());
            let _ = tx.lock().send((done.len(), seen));
        }),
    )
    .unwrap();
    w.push(Job::Record(Box::new(input(T1, "goal_changed")), T0))
        .unwrap();
    let (n, seen) = rx.recv_timeout(PATIENCE).unwrap();
    assert_eq!(n, 1);
    assert_eq!(seen, expect_pairs(&[(T1, 0)]));
}

#[test]
fn a_group_that_cannot_begin_fails_every_record_and_queues_nothing() {
    let fx = Fixture::file_with(Options {
        busy_timeout_ms: 0,
        ..opts()
    });
    assert!(fx.store.watch(MAIN, T1, Provenance::Explicit, T0).unwrap());
    let other = fx.conn();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let (w, rx) = writer(&fx.store);
    let release = hold(&w);
    w.push(Job::Record(Box::new(input(T1, "goal_changed")), T0))
        .unwrap();
    w.push(Job::Record(Box::new(input(T2, "goal_changed")), T0))
        .unwrap();
    drop(release);
    let (done, _) = collect(&rx, 3);
    assert_eq!(code(&done[1]), "ERR_DB");
    assert_eq!(code(&done[2]), "ERR_DB");
    other.execute_batch("ROLLBACK").unwrap();
    assert!(fx.store.peek(MAIN).unwrap().is_empty());
    assert!(fx.sequences().is_empty());
    fx.assert_no_wake(100);
}

#[test]
fn tasks_run_alone_in_call_order_between_groups() {
    let fx = Fixture::memory();
    let (w, rx) = writer(&fx.store);
    let release = hold(&w);
    w.push(Job::Record(Box::new(input(T1, "goal_changed")), T0))
        .unwrap();
    w.push(Job::Task(Box::new(|s: &Store| {
        u32::from(s.watch(MAIN, T1, Provenance::Explicit, T0).unwrap())
    })))
    .unwrap();
    w.push(Job::Record(Box::new(input(T1, "human_direct_message")), T0))
        .unwrap();
    w.push(Job::Task(Box::new(|s: &Store| {
        s.peek(MAIN).unwrap().len() as u32
    })))
    .unwrap();
    drop(release);
    let (done, _) = collect(&rx, 5);
    assert_eq!(seq(&done[1]), 1);
    assert!(matches!(done[2], Done::Ran(1)));
    assert_eq!(seq(&done[3]), 2);
    assert!(matches!(done[4], Done::Ran(1)));
    // Watched after the first record: the notice reconciles from 1.
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(T1, 1)])
    );
}

#[test]
fn settle_waits_for_the_queue_and_a_stopped_writer_refuses_jobs() {
    let fx = Fixture::memory();
    let (w, _rx) = writer(&fx.store);
    let release = hold(&w);
    for _ in 0..3 {
        w.push(Job::Record(Box::new(input(T1, "goal_changed")), T0))
            .unwrap();
    }
    assert!(!w.is_idle());
    drop(release);
    w.settle();
    assert!(w.is_idle());
    assert_eq!(fx.store.state_version(T1, None).unwrap(), 3);
    w.stop();
    let refused = w.push(Job::Record(Box::new(input(T1, "goal_changed")), T0));
    assert_eq!(refused.unwrap_err().code(), "ERR_CLOSED");
    w.join();
    assert_eq!(fx.store.state_version(T1, None).unwrap(), 3);
}

#[test]
fn a_panicking_job_is_lost_alone_and_the_writer_goes_on() {
    let fx = Fixture::memory();
    let (w, rx) = writer(&fx.store);
    let release = hold(&w);
    w.push(Job::Task(Box::new(|_| panic!("a bug")))).unwrap();
    w.push(Job::Record(Box::new(input(T1, "goal_changed")), T0))
        .unwrap();
    drop(release);
    let (done, _) = collect(&rx, 3);
    assert!(matches!(&done[1], Done::Lost(e) if e.code() == "ERR_DB"));
    assert_eq!(seq(&done[2]), 1);
    w.settle();
    assert!(w.is_idle());
}

/// A refusal inside the transaction for `BAD`'s cursor (after its event and head are written)
/// and for any event of `BAD2` (before anything of it is written).
fn refuse(fx: &Fixture) {
    fx.conn()
        .execute_batch(&format!(
            "CREATE TRIGGER refuse BEFORE UPDATE ON session_watch_cursors \
             WHEN NEW.target_session_key = '{BAD}' BEGIN SELECT RAISE(ABORT, 'refused'); END; \
             CREATE TRIGGER refuse2 BEFORE INSERT ON session_state_events \
             WHEN NEW.session_key = '{BAD2}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        ))
        .unwrap();
}

const BAD2: &str = "agent:main:bad2";

#[test]
fn records_failing_anywhere_in_a_group_leave_every_other_answer_as_alone() {
    let alone = Fixture::file();
    let grouped = Fixture::file();
    for fx in [&alone, &grouped] {
        for t in [T1, T2, BAD, BAD2] {
            assert!(fx.store.watch(MAIN, t, Provenance::Explicit, T0).unwrap());
        }
        refuse(fx);
    }
    // The script with failures first, in the middle (one holding a dedupe key that a later
    // record then takes) and last.
    let mut items = script();
    items.insert(0, input(BAD2, "goal_changed"));
    items.insert(4, deduped(BAD, "goal_changed", "kb"));
    items.insert(5, deduped(T2, "goal_changed", "kb"));
    items.push(input(BAD, "goal_changed"));
    let answer = |r: Result<Option<i64>, &'static str>| match r {
        Ok(s) => s.unwrap_or(0).to_string(),
        Err(c) => c.to_owned(),
    };
    let expected: Vec<String> = items
        .iter()
        .map(|i| {
            let r = alone.store.record(i.clone(), T0);
            answer(r.map(|e| e.map(|e| e.sequence)).map_err(|e| e.code()))
        })
        .collect();
    // Each failed record's sequence went back with it; "kb" is first taken by T2's record.
    assert_eq!(
        expected,
        ["ERR_DB", "1", "2", "3", "ERR_DB", "4", "5", "3", "7", "8", "0", "9", "ERR_DB"]
    );

    let (w, rx) = writer(&grouped.store);
    let release = hold(&w);
    for i in items {
        w.push(Job::Record(Box::new(i), T0)).unwrap();
    }
    drop(release);
    let (done, _) = collect(&rx, 1 + expected.len());
    let got: Vec<String> = done[1..]
        .iter()
        .map(|d| match d {
            Done::Recorded(Ok(_)) => answer(Ok(Some(seq(d)))),
            _ => answer(Err(code(d))),
        })
        .collect();
    assert_eq!(got, expected);
    assert_eq!(grouped.sequences(), alone.sequences());
    assert_eq!(grouped.head_row(BAD, "main"), None);
    assert_eq!(grouped.head_row(BAD2, "main"), None);
    for (watcher, target) in [(MAIN, T1), (MAIN, T2), (OPS, T2), (MAIN, BAD), (MAIN, BAD2)] {
        assert_eq!(grouped.lnm(watcher, target), alone.lnm(watcher, target));
    }
    for watcher in [MAIN, OPS] {
        assert_eq!(
            pairs(&grouped.store.peek(watcher).unwrap()),
            pairs(&alone.store.peek(watcher).unwrap())
        );
    }
    assert_eq!(
        pairs(&grouped.store.peek(MAIN).unwrap()),
        expect_pairs(&[(T2, 0)])
    );
}
