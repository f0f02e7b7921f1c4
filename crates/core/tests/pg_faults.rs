//! Faults of the PostgreSQL server while a gateway records through the Promise API's writer
//! (docs/postgres.md#faults): 64 records in flight on 8 sessions, each matched afterwards to
//! its row by the `id` of its payload. A restart with `-m immediate`, a link frozen past the
//! call deadline, twenty `COMMIT`s whose answer is lost (the server committed, or did not),
//! an outage longer than `reconnectWindowMs`, and the deadline of a call on a frozen link.
//! Each test prints its tally (ok / null / unknown / rejected / lost / duplicated); run with
//! `--nocapture` to see it. Never skipped: without PostgreSQL's binaries they fail.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use session_awareness_core::{Hooks, Options, Store};
use session_awareness_pg_test::Cluster;

mod fault_driver;
mod fault_proxy;
mod pg_harness;
use fault_driver::{input, now_ms, options, Driver, Tally, AFTER, BACKOFF_MAX};
use fault_proxy::{CommitCut, Proxy};
use pg_harness::{cluster, url};

/// `c`'s URL through `proxy`.
fn through(c: &Cluster, proxy: &Proxy) -> String {
    url(c).replace(&format!(":{}/", c.port()), &format!(":{}/", proxy.port()))
}

/// Runs the driver on `store` while `fault` runs on a thread of its own; the tally.
fn under(store: &Store, c: &Cluster, fault: impl FnOnce(&AtomicBool) + Send) -> Tally {
    let ended = AtomicBool::new(false);
    let task = AtomicBool::new(false);
    let mut driver = Driver::new(store);
    thread::scope(|s| {
        s.spawn(|| {
            fault(&task);
            ended.store(true, Ordering::Release);
        });
        driver.run(&ended, &task);
    });
    driver.writer.join();
    driver.tally(c, "session_awareness")
}

#[test]
fn a_restart_with_immediate_shutdown_drops_nothing() {
    let mut c = cluster("faults-restart");
    let store = Store::open(&url(&c), options(30_000), Hooks::default()).unwrap();
    let ended = Arc::new(AtomicBool::new(false));
    let task = AtomicBool::new(false);
    let mut driver = Driver::new(&store);
    thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(Duration::from_millis(800));
            c.restart_immediate().unwrap();
            ended.store(true, Ordering::Release);
        });
        driver.run(&ended, &task);
    });
    driver.writer.join();
    let t = driver.tally(&c, "session_awareness");
    eprintln!("fault restart -m immediate: {t:?}");
    assert!(t.ok as u64 > AFTER, "{t:?}");
    assert_eq!(
        (t.null, t.unknown, t.rejected, t.lost, t.duplicated),
        (0, 0, 0, 0, 0),
        "{t:?}"
    );
}

#[test]
fn a_link_frozen_past_the_call_deadline_drops_nothing() {
    let c = cluster("faults-frozen");
    let proxy = Proxy::start(c.port());
    // Deadline 2 s + 5 s = 7 s: the calls in flight end their connection at 7 s and wait for
    // the link; the window (20 s from the loss) outlasts the 15 s freeze.
    let store = Store::open(&through(&c, &proxy), options(20_000), Hooks::default()).unwrap();
    let t = under(&store, &c, |_| {
        thread::sleep(Duration::from_millis(800));
        proxy.freeze(true);
        thread::sleep(Duration::from_secs(15));
        proxy.freeze(false);
    });
    eprintln!("fault link frozen 15 s: {t:?}");
    assert!(t.ok as u64 > AFTER, "{t:?}");
    assert_eq!(
        (t.null, t.unknown, t.rejected, t.lost, t.duplicated),
        (0, 0, 0, 0, 0),
        "{t:?}"
    );
}

#[test]
fn twenty_commits_whose_answer_is_lost_are_found_out_not_redone() {
    let c = cluster("faults-commit");
    let proxy = Proxy::start(c.port());
    // No listener: every COMMIT on the link is a group's.
    let o = Options {
        sync_interval_ms: 0,
        ..options(10_000)
    };
    let store = Store::open(&through(&c, &proxy), o, Hooks::default()).unwrap();
    let t = under(&store, &c, |_| {
        for i in 0..20 {
            // Half the server commits (the answer is lost), half it never sees the COMMIT.
            let how = match i % 2 {
                0 => CommitCut::After,
                _ => CommitCut::Before,
            };
            proxy.cut_at_next_commit(how);
            let start = Instant::now();
            while proxy.commit_cuts() < i + 1 {
                assert!(start.elapsed() < Duration::from_secs(30), "cut {i}");
                thread::sleep(Duration::from_millis(2));
            }
            thread::sleep(Duration::from_millis(50));
        }
    });
    eprintln!("fault 20 COMMITs with their answer lost: {t:?}");
    assert_eq!(proxy.commit_cuts(), 20);
    assert!(t.ok as u64 > AFTER, "{t:?}");
    assert_eq!(
        (t.null, t.unknown, t.rejected, t.lost, t.duplicated),
        (0, 0, 0, 0, 0),
        "{t:?}"
    );
}

#[test]
fn an_outage_longer_than_the_window_settles_every_call_and_later_calls_succeed() {
    let c = cluster("faults-outage");
    let proxy = Proxy::start(c.port());
    let o = Options {
        max_waiting_calls: 16,
        ..options(1_500)
    };
    let store = Store::open(&through(&c, &proxy), o, Hooks::default()).unwrap();
    let outage = Duration::from_secs(5);
    let ended = AtomicBool::new(false);
    let task = AtomicBool::new(false);
    let mut driver = Driver::new(&store);
    let mut after_window = None;
    thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(Duration::from_millis(800));
            proxy.down(true);
            let down = Instant::now();
            // A call that is not a record, within the window and past it.
            thread::sleep(Duration::from_millis(300));
            task.store(true, Ordering::Release);
            thread::sleep(Duration::from_millis(2_500));
            task.store(true, Ordering::Release);
            after_window = Some(down.elapsed());
            thread::sleep(outage.saturating_sub(down.elapsed()));
            proxy.down(false);
            // Past the window a call makes a reconnection attempt only when one is due (the
            // backoff reaches 5 s): the records after that are all stored.
            thread::sleep(BACKOFF_MAX + Duration::from_millis(500));
            ended.store(true, Ordering::Release);
        });
        driver.run(&ended, &task);
    });
    driver.writer.join();
    let t = driver.tally(&c, "session_awareness");
    eprintln!("fault outage 5 s, window 1.5 s: {t:?}");
    // Every call settled (the run returned); the records answered null are not stored, the
    // calls past the cap were refused at once, and every record made after the outage is in.
    assert!(t.null > 0, "{t:?}");
    assert!(t.rejected > 0, "{t:?}");
    assert_eq!(
        (t.lost, t.duplicated, t.null_but_stored),
        (0, 0, 0),
        "{t:?}"
    );
    let last = driver.next;
    for id in last - AFTER / 2..last {
        assert!(
            matches!(driver.answers.get(&id), Some(Ok(_))),
            "record {id} after the outage: {:?}",
            driver.answers.get(&id)
        );
    }
    // The tasks: failed with ERR_DB (waited within the window, refused or failed past it).
    assert_eq!(driver.tasks.len(), 2, "{:?}", driver.tasks);
    for r in &driver.tasks {
        assert!(
            matches!(
                r.as_ref().map_err(String::as_str),
                Err("ERR_DB" | "rejected:ERR_DB")
            ),
            "{r:?}"
        );
    }
    assert!(after_window.unwrap() < outage);
    // And a read now succeeds.
    store
        .changes_since("agent:main:subagent:f0", 0.0, None, None)
        .unwrap();
}

#[test]
fn a_call_on_a_frozen_link_settles_at_its_deadline() {
    let c = cluster("faults-deadline");
    let proxy = Proxy::start(c.port());
    let o = Options {
        sync_interval_ms: 0,
        ..options(0)
    };
    let store = Store::open(&through(&c, &proxy), o, Hooks::default()).unwrap();
    store.record(input(0), now_ms()).unwrap();
    // The first record of a session starts an automatic prune: a call that finds the
    // connection held waits for the holder first (docs/postgres.md#faults), so the link is
    // cut once the prune is done.
    let idle = Instant::now();
    while store.is_pruning() {
        assert!(
            idle.elapsed() < Duration::from_secs(10),
            "the prune never ended"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    proxy.freeze(true);
    let start = Instant::now();
    let e = store.record(input(1), now_ms()).unwrap_err();
    let took = start.elapsed();
    proxy.freeze(false);
    assert_eq!(e.code(), "ERR_DB");
    // statementTimeoutMs 2 s + max(connectTimeoutMs, 5 s): 7 s, and no wait for a reconnect
    // with reconnectWindowMs 0 (docs/postgres.md#faults).
    assert!(
        took >= Duration::from_secs(7) && took < Duration::from_millis(7_900),
        "{took:?}"
    );
    // The link is back: the next call connects again.
    store.record(input(2), now_ms()).unwrap();
}

#[test]
fn after_a_lost_connection_the_store_never_hands_out_a_sequence_again() {
    let c = cluster("faults-floor");
    let store = Store::open(&url(&c), options(10_000), Hooks::default()).unwrap();
    let handed: Vec<i64> = (0..10)
        .map(|i| store.record(input(i), now_ms()).unwrap().unwrap().sequence)
        .collect();
    let top = *handed.iter().max().unwrap();
    // What a promoted asynchronous standby looks like: the last events never reached it, and
    // its identity is behind what the old primary handed out.
    c.sql(&format!(
        "DELETE FROM session_awareness.session_state_events WHERE sequence > 5; \
         UPDATE session_awareness.session_state_heads SET last_sequence = least(last_sequence, 5); \
         ALTER TABLE session_awareness.session_state_events ALTER COLUMN sequence RESTART WITH 6; \
         SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE application_name = 'session-awareness'; -- {top}"
    ))
    .unwrap();
    let next = store.record(input(10), now_ms()).unwrap().unwrap().sequence;
    assert!(next > top, "{next} after {handed:?}");
    // Negative control: a store that never handed a number out draws the lost ones again.
    c.sql(
        "ALTER TABLE session_awareness.session_state_events ALTER COLUMN sequence RESTART WITH 6",
    )
    .unwrap();
    let other = Store::open(&url(&c), options(10_000), Hooks::default()).unwrap();
    assert_eq!(
        other.record(input(11), now_ms()).unwrap().unwrap().sequence,
        6
    );
}
