//! Notices across processes (semantics.md#processes): two stores on one file behave like two gateway processes,
//! each with its own connection, queue and poller. `sync_now` runs a poll on demand, so most
//! tests do not depend on the background interval.

use std::collections::HashSet;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use session_awareness_core::{
    Hooks, Notice, Options, Provenance, RecordInput, Store, WakeRequest, WakeSink,
};

const W: &str = "agent:main:main";
const T: &str = "agent:main:subagent:research";
const NOW: i64 = 1_700_000_000_000;

struct Wakes(Mutex<mpsc::Sender<WakeRequest>>);
impl WakeSink for Wakes {
    fn wake(&self, request: WakeRequest) {
        let _ = self.0.lock().send(request);
    }
}

fn opts(sync_interval_ms: u32) -> Options {
    Options {
        sync_interval_ms,
        wake_coalesce_ms: 0,
        ..Options::default()
    }
}

/// A store on `path` whose background poll is too slow to matter: tests poll with `sync_now`.
fn open(path: &str) -> Store {
    Store::open(path, opts(60_000), Hooks::default()).unwrap()
}

fn open_waking(path: &str) -> (Store, mpsc::Receiver<WakeRequest>) {
    let (tx, rx) = mpsc::channel();
    let hooks = Hooks {
        wake: Some(Arc::new(Wakes(Mutex::new(tx)))),
        ..Hooks::default()
    };
    (Store::open(path, opts(60_000), hooks).unwrap(), rx)
}

fn db(dir: &tempfile::TempDir) -> String {
    dir.path().join("state.sqlite").to_str().unwrap().to_owned()
}

fn human(target: &str) -> RecordInput {
    RecordInput {
        session_key: target.into(),
        kind: "human_direct_message".into(),
        actor_type: "human".into(),
        summary: "human message via telegram".into(),
        ..Default::default()
    }
}

fn record(store: &Store, input: RecordInput) -> i64 {
    store.record(input, NOW).unwrap().unwrap().sequence
}

fn text(target: &str, since: i64) -> String {
    format!(
        "Session \"{target}\" changed (other actor). Reconcile before acting: session_status sessionKey \"{target}\" changesSince {since}."
    )
}

fn positions(notices: &[Notice]) -> Vec<(String, i64)> {
    notices
        .iter()
        .map(|n| (n.target_key.clone(), n.changes_since))
        .collect()
}

#[test]
fn a_record_in_one_store_reaches_a_watcher_served_by_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(&db(&dir));
    let (b, wakes) = open_waking(&db(&dir));
    assert!(b.watch(W, T, Provenance::Explicit, NOW).unwrap());
    assert!(b.serves(W));
    assert!(!a.serves(W));
    // B's first peek reads what is pending for W from the file: nothing yet.
    assert_eq!(b.peek(W).unwrap(), []);
    record(&a, human(T));
    // Later notices from A arrive with B's poll.
    assert_eq!(b.peek(W).unwrap(), []);
    b.sync_now().unwrap();
    let notices = b.peek(W).unwrap();
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].watcher_key, W);
    assert_eq!(notices[0].target_key, T);
    assert_eq!(notices[0].changes_since, 0);
    assert_eq!(notices[0].text, text(T, 0));
    assert_eq!(
        notices[0].context_key,
        "session-state:6167656e743a6d61696e3a7375626167656e743a7265736561726368"
    );
    let wake = wakes.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(wake.session_key, W);
    assert_eq!(wake.reason, format!("session-state:{T}"));
    assert_eq!(b.drain(W, NOW).unwrap(), notices);
    assert_eq!(b.peek(W).unwrap(), []);
}

#[test]
fn twenty_records_give_one_notice_and_one_wake() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(&db(&dir));
    let (b, wakes) = open_waking(&db(&dir));
    b.watch(W, T, Provenance::Explicit, NOW).unwrap();
    record(&a, human(T));
    b.sync_now().unwrap();
    // The first wake is delivered before the other nineteen records, so a second notice
    // entering the queue would schedule a second call rather than be absorbed.
    assert_eq!(
        wakes
            .recv_timeout(Duration::from_secs(10))
            .unwrap()
            .session_key,
        W
    );
    for _ in 0..19 {
        record(&a, human(T));
        b.sync_now().unwrap();
    }
    assert_eq!(positions(&b.peek(W).unwrap()), [(T.to_owned(), 0)]);
    assert!(wakes.recv_timeout(Duration::from_millis(300)).is_err());
}

#[test]
fn an_unserved_watcher_gets_no_remote_notice_until_its_first_peek_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(&db(&dir));
    let (b, wakes) = open_waking(&db(&dir));
    a.watch(W, T, Provenance::Explicit, NOW).unwrap();
    let s1 = record(&a, human(T));
    b.sync_now().unwrap();
    assert!(!b.serves(W));
    assert!(wakes.try_recv().is_err());
    // Peeking serves the watcher and reads what is already pending at once, woken.
    assert_eq!(positions(&b.peek(W).unwrap()), [(T.to_owned(), 0)]);
    assert!(b.serves(W));
    assert_eq!(
        wakes
            .recv_timeout(Duration::from_secs(10))
            .unwrap()
            .session_key,
        W
    );
    // The next poll finds it queued already: no second entry, no second wake.
    b.sync_now().unwrap();
    assert_eq!(positions(&b.peek(W).unwrap()), [(T.to_owned(), 0)]);
    assert!(wakes.recv_timeout(Duration::from_millis(200)).is_err());
    assert!(s1 > 0);
}

#[test]
fn an_acknowledge_in_one_store_is_seen_by_the_other_and_a_later_event_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(&db(&dir));
    let b = open(&db(&dir));
    a.watch(W, T, Provenance::Explicit, NOW).unwrap();
    b.serve(W).unwrap();
    let s1 = record(&a, human(T));
    a.sync_now().unwrap();
    b.sync_now().unwrap();
    assert_eq!(positions(&a.peek(W).unwrap()), [(T.to_owned(), 0)]);
    assert_eq!(b.drain(W, NOW).unwrap()[0].text, text(T, 0));
    // A still holds the notice until it polls; its drain asks the cursor and hands out nothing.
    assert_eq!(positions(&a.peek(W).unwrap()), [(T.to_owned(), 0)]);
    assert_eq!(a.drain(W, NOW).unwrap(), []);
    // An acknowledge writes no event: A's poll finds it by checking the notices it holds.
    let s2 = record(&a, human(T));
    a.sync_now().unwrap();
    b.sync_now().unwrap();
    assert_eq!(b.drain(W, NOW).unwrap()[0].text, text(T, s1));
    assert_eq!(positions(&a.peek(W).unwrap()), [(T.to_owned(), s1)]);
    a.sync_now().unwrap();
    assert_eq!(a.peek(W).unwrap(), []);
    // A's next material event reopens from where B acknowledged, in both stores.
    let s3 = record(&a, human(T));
    b.sync_now().unwrap();
    for store in [&a, &b] {
        let n = store.peek(W).unwrap();
        assert_eq!(positions(&n), [(T.to_owned(), s2)]);
        assert_eq!(n[0].text, text(T, s2));
    }
    assert!(s3 > s2);
}

#[test]
fn a_notice_reopened_by_a_drain_elsewhere_replaces_the_consumed_one() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(&db(&dir));
    let b = open(&db(&dir));
    a.watch(W, T, Provenance::Explicit, NOW).unwrap();
    b.serve(W).unwrap();
    let s1 = record(&a, human(T));
    b.sync_now().unwrap();
    // Material after the notice froze: B's drain consumes L=0 and reopens at L=s1.
    record(&a, human(T));
    b.sync_now().unwrap();
    assert_eq!(positions(&b.drain(W, NOW).unwrap()), [(T.to_owned(), 0)]);
    assert_eq!(positions(&b.peek(W).unwrap()), [(T.to_owned(), s1)]);
    a.sync_now().unwrap();
    assert_eq!(positions(&a.peek(W).unwrap()), [(T.to_owned(), s1)]);
    assert_eq!(positions(&a.drain(W, NOW).unwrap()), [(T.to_owned(), s1)]);
    assert_eq!(b.drain(W, NOW).unwrap(), []);
}

#[test]
fn a_store_that_does_not_serve_the_watcher_drops_a_notice_consumed_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(&db(&dir));
    let b = open(&db(&dir));
    // The cursor is B's; A's own record still queues the notice locally, as it always did.
    b.watch(W, T, Provenance::Explicit, NOW).unwrap();
    let s1 = record(&a, human(T));
    record(&a, human(T));
    assert!(!a.serves(W));
    a.sync_now().unwrap();
    b.sync_now().unwrap();
    assert_eq!(positions(&b.drain(W, NOW).unwrap()), [(T.to_owned(), 0)]);
    // B reopened at s1; A's held notice at 0 is stale and A does not take the fresh one.
    a.sync_now().unwrap();
    assert!(!a.serves(W));
    // A's first peek serves the watcher and reads the fresh one from the file.
    assert_eq!(positions(&a.peek(W).unwrap()), [(T.to_owned(), s1)]);
    assert!(a.serves(W));
    a.sync_now().unwrap();
    assert_eq!(positions(&a.peek(W).unwrap()), [(T.to_owned(), s1)]);
}

#[test]
fn events_missing_from_the_range_make_the_poll_read_every_served_watcher() {
    let dir = tempfile::tempdir().unwrap();
    let opts_a = Options {
        max_events: 1,
        ..opts(60_000)
    };
    let a = Store::open(&db(&dir), opts_a, Hooks::default()).unwrap();
    let b = open(&db(&dir));
    b.watch(W, T, Provenance::Explicit, NOW).unwrap();
    b.sync_now().unwrap();
    record(&a, human(T));
    record(
        &a,
        RecordInput {
            session_key: "agent:main:other".into(),
            kind: "run_completed".into(),
            actor_type: "agent".into(),
            summary: "done".into(),
            ..Default::default()
        },
    );
    // The prune keeps one event: B never sees the row of T's event, only the gap it leaves.
    while a.is_pruning() {
        std::thread::yield_now();
    }
    a.prune(NOW).unwrap();
    b.sync_now().unwrap();
    assert_eq!(positions(&b.peek(W).unwrap()), [(T.to_owned(), 0)]);
}

#[test]
fn unwatch_and_delete_elsewhere_drop_the_held_notices() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(&db(&dir));
    let b = open(&db(&dir));
    let u = "agent:main:subagent:u";
    b.watch(W, T, Provenance::Explicit, NOW).unwrap();
    b.watch(W, u, Provenance::Explicit, NOW).unwrap();
    record(&a, human(T));
    record(&a, human(u));
    b.sync_now().unwrap();
    assert_eq!(b.peek(W).unwrap().len(), 2);
    assert!(a.unwatch(W, T).unwrap());
    a.delete_session(u, None).unwrap();
    b.sync_now().unwrap();
    assert_eq!(b.peek(W).unwrap(), []);
}

#[test]
fn the_background_poll_delivers_without_being_asked() {
    let dir = tempfile::tempdir().unwrap();
    let a = Store::open(&db(&dir), opts(20), Hooks::default()).unwrap();
    let b = Store::open(&db(&dir), opts(20), Hooks::default()).unwrap();
    assert!(a.is_syncing() && b.is_syncing());
    b.watch(W, T, Provenance::Explicit, NOW).unwrap();
    record(&a, human(T));
    let deadline = Instant::now() + Duration::from_secs(20);
    while b.peek(W).unwrap().is_empty() {
        assert!(
            Instant::now() < deadline,
            "no notice reached the other store"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(b.peek(W).unwrap()[0].text, text(T, 0));
    b.close();
    assert!(!b.is_syncing());
    assert!(a.is_syncing());
    assert_eq!(b.sync_now().unwrap_err().code(), "ERR_CLOSED");
}

#[test]
fn concurrent_drains_in_two_stores_deliver_each_notice_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let targets: Vec<String> = (0..6)
        .map(|i| format!("agent:main:subagent:t{i}"))
        .collect();
    let recorder = open(&path);
    for t in &targets {
        recorder.watch(W, t, Provenance::Explicit, NOW).unwrap();
    }
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let drainers: Vec<_> = (0..2)
        .map(|_| {
            let store = open(&path);
            store.serve(W).unwrap();
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                let mut got = Vec::new();
                loop {
                    let finished = done.load(std::sync::atomic::Ordering::Acquire);
                    store.sync_now().unwrap();
                    got.extend(positions(&store.drain(W, NOW).unwrap()));
                    if finished {
                        return got;
                    }
                }
            })
        })
        .collect();
    for i in 0..300 {
        record(&recorder, human(&targets[i % targets.len()]));
    }
    // Wait until every notice has been consumed somewhere, then let the drainers stop.
    let reader = rusqlite::Connection::open(&path).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let open: i64 = reader
            .query_row(
                "SELECT COUNT(*) FROM session_watch_cursors \
                 WHERE notified_sequence != last_seen_sequence OR material_sequence > last_seen_sequence",
                [],
                |r| r.get(0),
            )
            .unwrap();
        if open == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "notices were left pending");
        std::thread::sleep(Duration::from_millis(5));
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    let delivered: Vec<(String, i64)> = drainers
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let unique: HashSet<_> = delivered.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        delivered.len(),
        "a notice was delivered twice"
    );
    for t in &targets {
        let mut ls: Vec<i64> = delivered
            .iter()
            .filter(|(k, _)| k == t)
            .map(|(_, l)| *l)
            .collect();
        ls.sort_unstable();
        // The chain of positions: it starts where the watch seeded the cursor, and each later
        // one (and the final acknowledged one) is an event of the target.
        assert_eq!(ls.first(), Some(&0), "{t}");
        let (last_seen, notified, material): (i64, i64, i64) = reader
            .query_row(
                "SELECT last_seen_sequence, notified_sequence, material_sequence \
                 FROM session_watch_cursors WHERE watcher_session_key = ?1 AND target_session_key = ?2",
                [W, t.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!(notified, last_seen);
        assert_eq!(material, last_seen);
        let events = recorder.changes_since(t, 0.0, None, Some(200.0)).unwrap();
        let seqs: HashSet<i64> = events.events.iter().map(|e| e.sequence()).collect();
        for l in ls.iter().skip(1).chain([&last_seen]) {
            assert!(seqs.contains(l), "{t}: position {l} is not an event");
        }
    }
}

#[test]
fn serving_rules_and_options() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(&db(&dir));
    assert_eq!(a.serve("").unwrap_err().code(), "ERR_INVALID_ARG");
    a.serve("global").unwrap();
    assert!(!a.serves("global"));
    a.serve(W).unwrap();
    assert!(a.serves(W));
    let named = "agent:ops:main";
    record(
        &a,
        RecordInput {
            watchers: vec![named.into()],
            ..human(T)
        },
    );
    assert!(a.serves(named));
    a.delete_session(named, None).unwrap();
    assert!(!a.serves(named));
    let bad = Options {
        sync_interval_ms: 60_001,
        ..Options::default()
    };
    let err = Store::open(&db(&dir), bad, Hooks::default()).err().unwrap();
    assert_eq!(err.code(), "ERR_INVALID_ARG");
    // Off: no poller, nothing served, sync_now does nothing.
    let off = Store::open(&db(&dir), opts(0), Hooks::default()).unwrap();
    assert!(!off.is_syncing());
    off.serve(W).unwrap();
    assert!(!off.serves(W));
    off.sync_now().unwrap();
    let memory = Store::open(":memory:", Options::default(), Hooks::default()).unwrap();
    assert!(!memory.is_syncing());
}
