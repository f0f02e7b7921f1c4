//! The store's counters and gauges (docs/metrics.md) after scripted scenarios: exact counts
//! for each counter, the histograms' counts and sums, and the gauges.

mod common;

use std::sync::mpsc;

use common::*;
use session_awareness_core::{
    EventKind, Hist, Job, MetricsSnapshot, Options, Provenance, Writer, FAILURE_CODES,
};

fn sync_opts() -> Options {
    Options {
        sync_interval_ms: 60_000,
        ..opts()
    }
}

fn kind(s: &MetricsSnapshot, k: EventKind) -> u64 {
    s.events_recorded[EventKind::ALL.iter().position(|x| *x == k).unwrap()]
}

fn failures(s: &MetricsSnapshot, code: &str) -> u64 {
    s.record_failures[FAILURE_CODES.iter().position(|c| *c == code).unwrap()]
}

fn hist(s: &MetricsSnapshot, h: Hist) -> (u64, u64) {
    let t = s.histograms[h as usize];
    (t.count, t.sum)
}

#[test]
fn a_fresh_store_counts_nothing() {
    let fx = Fixture::memory();
    assert_eq!(fx.store.metrics(), MetricsSnapshot::default());
}

#[test]
fn records_notices_drains_acknowledges_wakes_and_failures_are_counted_exactly() {
    let fx = Fixture::file_with(sync_opts());
    let st = &fx.store;
    assert!(st.watch(MAIN, CHILD, Provenance::Explicit, T0).unwrap());
    fx.rec(CHILD, "human_direct_message", None, T0 + 1);
    let s = st.metrics();
    assert_eq!(s.notices_opened_new, 1);
    assert_eq!(s.notices_pending, 1);
    assert_eq!(s.watchers_served, 1);
    assert!(s.wal_bytes > 0);
    // The watch and the record: two commits of at least one frame each.
    assert!(s.wal_frames >= 2, "{}", s.wal_frames);
    fx.next_wake();
    // Pending already: M moves, no notice opens.
    fx.rec(CHILD, "goal_changed", None, T0 + 2);
    fx.rec(CHILD, "run_completed", None, T0 + 3);
    let mut dup = input(CHILD, "created");
    dup.dedupe_key = Some("once".into());
    fx.record(dup.clone(), T0 + 4);
    fx.record(dup, T0 + 5);
    let bad = st.record(input(CHILD, "no_such_kind"), T0 + 6).unwrap_err();
    assert_eq!(bad.code(), "ERR_INVALID_ARG");
    let s = st.metrics();
    assert_eq!(kind(&s, EventKind::HumanDirectMessage), 1);
    assert_eq!(kind(&s, EventKind::GoalChanged), 1);
    assert_eq!(kind(&s, EventKind::RunCompleted), 1);
    assert_eq!(kind(&s, EventKind::Created), 1);
    assert_eq!(s.events_recorded.iter().sum::<u64>(), 4);
    assert_eq!(failures(&s, "ERR_INVALID_ARG"), 1);
    assert_eq!(s.record_failures.iter().sum::<u64>(), 1);
    assert_eq!(s.notices_opened_new, 1);
    // Six calls into the store; five reached a write transaction (the dedupe hit too).
    assert_eq!(hist(&s, Hist::RecordSync).0, 6);
    assert_eq!(hist(&s, Hist::Commit).0, 5);

    // The drain hands out one notice; the goal change after it reopens one at once.
    assert_eq!(st.drain(MAIN, T0 + 7).unwrap().len(), 1);
    let s = st.metrics();
    assert_eq!(
        (
            s.notices_delivered,
            s.notices_opened_reopen,
            s.notices_pending
        ),
        (1, 1, 1)
    );
    fx.next_wake();
    assert_eq!(st.acknowledge(MAIN, &strings(&[CHILD]), T0 + 8).unwrap(), 1);
    fx.settle();
    let s = st.metrics();
    assert_eq!(
        (
            s.notices_acknowledged,
            s.notices_opened_reopen,
            s.notices_pending
        ),
        (1, 1, 0)
    );
    assert_eq!(s.wakes_requested, 2);
    assert_eq!(s.notices_opened_new, 1);

    st.changes_since(CHILD, 0.0, None, None).unwrap();
    assert_eq!(hist(&st.metrics(), Hist::ChangesSince).0, 1);
    fx.store.close();
    fx.store
        .record(input(CHILD, "goal_changed"), T0 + 9)
        .unwrap_err();
    let s = fx.store.metrics();
    assert_eq!(failures(&s, "ERR_CLOSED"), 1);
    assert_eq!((s.wal_bytes, s.wal_frames, s.watchers_served), (0, 0, 0));
}

#[test]
fn prunes_count_the_events_and_cursors_they_delete() {
    let fx = Fixture::memory();
    let st = &fx.store;
    assert!(st.watch(MAIN, CHILD, Provenance::Explicit, T0).unwrap());
    for i in 0..3 {
        fx.rec(CHILD, "run_completed", None, T0 + i);
    }
    let r = st.prune(T0 + 40 * DAY).unwrap();
    assert_eq!((r.events_deleted, r.cursors_deleted), (3, 1));
    let s = st.metrics();
    assert_eq!((s.prune_deleted_events, s.prune_deleted_cursors), (3, 1));
    let r = st.prune(T0 + 41 * DAY).unwrap();
    assert_eq!((r.events_deleted, r.cursors_deleted), (0, 0));
    assert_eq!(st.metrics().prune_deleted_events, 3);
}

#[test]
fn a_group_commit_counts_its_size_and_each_record_async() {
    let fx = Fixture::memory();
    fx.store.keep_metric_samples();
    let (tx, rx) = mpsc::channel();
    let tx = parking_lot::Mutex::new(tx);
    let w: Writer<u32> = Writer::start(
        fx.store.clone(),
        Box::new(move |done| {
            let _ = tx.lock().send(done.len());
        }),
    )
    .unwrap();
    // A task first holds the writer, so the three records after it are taken as one group.
    let (hold, held) = mpsc::channel::<()>();
    w.push(Job::Task(Box::new(move |_| {
        let _ = held.recv();
        0
    })))
    .unwrap();
    for k in ["goal_changed", "no_such_kind", "compacted"] {
        w.push(Job::Record(Box::new(input(CHILD, k)), T0)).unwrap();
    }
    drop(hold);
    w.settle();
    let mut n = 0;
    while n < 4 {
        n += rx.recv_timeout(PATIENCE).unwrap();
    }
    let s = fx.store.metrics();
    assert_eq!(hist(&s, Hist::RecordAsync).0, 3);
    // The failing record never reached the transaction: two in the group.
    assert_eq!(hist(&s, Hist::GroupSize), (1, 2));
    assert_eq!(hist(&s, Hist::Commit).0, 1);
    assert_eq!(hist(&s, Hist::RecordSync).0, 0);
    assert_eq!(failures(&s, "ERR_INVALID_ARG"), 1);
    assert_eq!(kind(&s, EventKind::Compacted), 1);
    let samples = fx.store.take_metric_samples();
    assert_eq!(samples[Hist::GroupSize as usize], vec![2]);
    assert_eq!(samples[Hist::RecordAsync as usize].len(), 3);
    assert_eq!(
        samples[Hist::RecordAsync as usize].iter().sum::<u64>(),
        hist(&s, Hist::RecordAsync).1
    );
    assert!(fx.store.take_metric_samples().iter().all(Vec::is_empty));
}

#[test]
fn a_poll_that_finds_another_process_change_is_a_catch_up() {
    let fx = Fixture::file_with(sync_opts());
    let other = fx.attach();
    assert!(fx
        .store
        .watch(MAIN, CHILD, Provenance::Explicit, T0)
        .unwrap());
    fx.store.sync_now().unwrap();
    let before = fx.store.metrics().sync_catch_ups;
    other.rec(CHILD, "human_direct_message", None, T0 + 1);
    fx.store.sync_now().unwrap();
    let s = fx.store.metrics();
    assert_eq!(s.sync_catch_ups, before + 1);
    // The notice arrived from the other process: it opened there, not here.
    assert_eq!((s.notices_pending, s.notices_opened_new), (1, 0));
    assert_eq!(other.store.metrics().notices_opened_new, 1);
    fx.store.sync_now().unwrap();
    assert_eq!(fx.store.metrics().sync_catch_ups, before + 1);
}
