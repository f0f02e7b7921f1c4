//! Failover to a streaming standby while a gateway records (docs/postgres.md#async): the
//! tests build a primary and a standby with `pg_basebackup`, open every store on the
//! multi-host URL `postgres://127.0.0.1:P1,127.0.0.1:P2/…?target_session_attrs=read-write`,
//! keep 64 records in flight on 8 sessions, crash the primary (`-m immediate`) and promote
//! the standby. Each record is matched afterwards to its row on the new primary by the `id`
//! of its payload; each test prints its tally (run with `--nocapture`). The last two test
//! the standby the harness builds. Never skipped: without PostgreSQL's binaries (with
//! `pg_basebackup`) they fail.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use session_awareness_core::{Hooks, Provenance, RecordInput, Store};
use session_awareness_pg_test::Cluster;

mod fault_driver;
mod pg_harness;
use fault_driver::{input, now_ms, options, Driver, AFTER};
use pg_harness::{cluster, until};

/// The watcher a second store (the other gateway host) serves.
const W: &str = "agent:main:subagent:watcher";
/// A session the driver records on, which [`W`] watches.
const TARGET: &str = "agent:main:subagent:f0";

/// Both hosts in one URL, the primary first; only the one that accepts writes is kept.
fn multi_url(primary: &Cluster, standby: &Cluster) -> String {
    format!(
        "postgresql://postgres@127.0.0.1:{},127.0.0.1:{}/postgres\
         ?target_session_attrs=read-write&sslmode=disable",
        primary.port(),
        standby.port()
    )
}

fn open(url: &str) -> Store {
    Store::open(url, options(30_000), Hooks::default()).unwrap()
}

fn human(session: &str, id: u64) -> RecordInput {
    RecordInput {
        session_key: session.into(),
        ..input(id)
    }
}

/// Raises the flag that ends the driver's run when dropped, so a fault thread that panics
/// ends the run too (the test then fails on the panic, not on a timeout).
struct Ends<'a>(&'a AtomicBool);

impl Drop for Ends<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// The sequences answered, in call order: each above the one before (none handed out twice,
/// and every one answered after the failover above every one answered before it).
fn assert_increasing(driver: &Driver) {
    let mut ids: Vec<u64> = driver.answers.keys().copied().collect();
    ids.sort_unstable();
    let mut last = (0, 0);
    for id in ids {
        if let Some(Ok(seq)) = driver.answers.get(&id) {
            assert!(
                *seq > last.1,
                "record {id} got {seq} after record {} got {}",
                last.0,
                last.1
            );
            last = (id, *seq);
        }
    }
}

/// Every notice `store` holds for `watcher` names a position at or below its target's head
/// on the server.
fn assert_at_or_below_heads(store: &Store, watcher: &str) -> usize {
    let notices = store.peek(watcher).unwrap();
    for n in &notices {
        let head = store.state_version(&n.target_key, None).unwrap();
        assert!(
            n.changes_since <= head,
            "{watcher}: a notice at {} on {} whose head is {head}",
            n.changes_since,
            n.target_key
        );
    }
    notices.len()
}

/// Records one event on [`TARGET`] through `a` and waits until `b`'s queue holds [`W`]'s
/// notice for it (read through the head first, so it names that head); returns how
/// long that took.
fn cross_host_notice(a: &Store, b: &Store, id: u64) -> Duration {
    let head = b.state_version(TARGET, None).unwrap();
    b.acknowledge_through(W, &[TARGET.to_owned()], None, Some(head as f64), now_ms())
        .unwrap();
    assert_eq!(
        b.cursor_rows(Some(W), Some(TARGET)).unwrap()[0].last_seen,
        head
    );
    let start = Instant::now();
    let e = a.record(human(TARGET, id), now_ms()).unwrap().unwrap();
    until("the cross-host notice", || !b.peek(W).unwrap().is_empty());
    let took = start.elapsed();
    let n = b.peek(W).unwrap();
    assert_eq!(
        n.iter()
            .map(|n| (n.target_key.as_str(), n.changes_since))
            .collect::<Vec<_>>(),
        [(TARGET, head)],
        "after {}",
        e.sequence
    );
    took
}

#[test]
fn failover_to_a_synchronous_standby_loses_nothing_resolved() {
    let mut primary = cluster("failover-sync");
    let standby = primary.standby("sa_sync", true).unwrap();
    let url = multi_url(&primary, &standby);
    let a = open(&url);
    let b = open(&url);
    assert!(b.watch(W, TARGET, Provenance::Explicit, now_ms()).unwrap());
    until("B's listener", || b.listener_connects() >= 1);
    let before = cross_host_notice(&a, &b, 1_000_000);
    let ended = AtomicBool::new(false);
    let task = AtomicBool::new(false);
    let mut driver = Driver::new(&a);
    let promoted = Mutex::new(None);
    let crashed = Mutex::new(None);
    thread::scope(|s| {
        s.spawn(|| {
            let _ends = Ends(&ended);
            thread::sleep(Duration::from_millis(800));
            primary.crash().unwrap();
            // Once the primary is gone: no answer stamped later can come from it.
            *crashed.lock().unwrap() = Some(Instant::now());
            standby.promote().unwrap();
            *promoted.lock().unwrap() = Some(Instant::now());
        });
        driver.run(&ended, &task);
    });
    driver.writer.join();
    let t = driver.tally(&standby, "session_awareness");
    eprintln!("fault failover to a synchronous standby: {t:?}");
    let crashed = crashed.lock().unwrap().unwrap();
    let promoted_at = promoted.lock().unwrap().unwrap();
    // The longest pause between two answers around the failover: how long records waited.
    let pause = driver
        .answered_at
        .windows(2)
        .filter(|w| w[1] > crashed)
        .map(|w| w[1].saturating_duration_since(w[0]))
        .max()
        .unwrap();
    let back = driver
        .answered_at
        .iter()
        .find(|at| **at > promoted_at)
        .map(|at| at.saturating_duration_since(crashed));
    eprintln!(
        "promoted {:?} after the crash; records answered again {back:?} after it (longest pause {pause:?})",
        promoted_at - crashed
    );
    assert!(t.ok as u64 > AFTER, "{t:?}");
    assert_eq!(
        (t.null, t.unknown, t.rejected, t.lost, t.duplicated),
        (0, 0, 0, 0, 0),
        "{t:?}"
    );
    assert_increasing(&driver);
    // Neither store was reopened: records and cross-host notices go on.
    until("B's listener on the new primary", || {
        b.listener_connects() >= 2
    });
    let after = cross_host_notice(&a, &b, 1_000_001);
    eprintln!("cross-host notice: {before:?} before the failover, {after:?} after");
    assert_at_or_below_heads(&b, W);
}

#[test]
fn failover_to_an_asynchronous_standby_hands_no_sequence_out_twice() {
    let mut primary = cluster("failover-async");
    let standby = primary.standby("sa_async", false).unwrap();
    let url = multi_url(&primary, &standby);
    let a = open(&url);
    let b = open(&url);
    assert!(b.watch(W, TARGET, Provenance::Explicit, now_ms()).unwrap());
    until("B's listener", || b.listener_connects() >= 1);
    // A watcher nobody serves once C closes: A's records queue its notices on A.
    const W2: &str = "agent:main:subagent:unserved";
    const T2: &str = "agent:main:subagent:quiet";
    {
        let c = open(&url);
        assert!(c.watch(W2, T2, Provenance::Explicit, now_ms()).unwrap());
        c.close();
    }
    a.record(human(T2, 2_000_000), now_ms()).unwrap().unwrap();
    // What the test set up so far must be on the standby when it is cut off: streaming does
    // not mean caught up, and under load an asynchronous standby can be a second behind.
    let set_up = primary.sql("SELECT pg_current_wal_lsn()").unwrap();
    let ended = AtomicBool::new(false);
    let task = AtomicBool::new(false);
    let mut driver = Driver::new(&a);
    let lost_from = Mutex::new(0);
    let crashed = Mutex::new(None);
    thread::scope(|s| {
        s.spawn(|| {
            let _ends = Ends(&ended);
            thread::sleep(Duration::from_millis(800));
            until("the standby to replay the set-up", || {
                standby
                    .sql(&format!(
                        "SELECT pg_last_wal_replay_lsn() >= '{set_up}'::pg_lsn"
                    ))
                    .is_ok_and(|r| r == "t")
            });
            // From here on the standby gets nothing: what the primary commits is lost.
            standby.detach().unwrap();
            // The watchers' positions move past what the standby has, on both kinds of host:
            // B drains the watcher it serves; another store drains the unserved one and
            // closes, so A queues W2's next notice at that position.
            let head = b.state_version(TARGET, None).unwrap() as f64;
            b.acknowledge_through(W, &[TARGET.to_owned()], None, Some(head), now_ms())
                .unwrap();
            let lost = a.record(human(T2, 2_000_001), now_ms()).unwrap().unwrap();
            *lost_from.lock().unwrap() = lost.sequence;
            {
                let c = open(&url);
                let through = Some(lost.sequence as f64);
                let acked = c
                    .acknowledge_through(W2, &[T2.to_owned()], None, through, now_ms())
                    .unwrap();
                assert_eq!(acked, 1);
                c.close();
            }
            a.record(human(T2, 2_000_002), now_ms()).unwrap().unwrap();
            thread::sleep(Duration::from_millis(500));
            *crashed.lock().unwrap() = Some(Instant::now());
            primary.crash().unwrap();
            standby.promote().unwrap();
        });
        driver.run(&ended, &task);
    });
    driver.writer.join();
    let (t, lost) = driver.tally_with_lost(&standby, "session_awareness");
    eprintln!("fault failover to an asynchronous standby: {t:?}");
    // Lost: what the old primary committed after the standby's last replicated commit, so
    // one run of calls in call order (the writer runs them one after another): every record
    // before it and every record after it is stored. Told by the rows, not by clocks: an
    // answer the old primary sent just before it died can be read a few ms after.
    let crashed = crashed.lock().unwrap().unwrap();
    assert_eq!(driver.answered_at.len() as u64, driver.next);
    if let (Some(&lo), Some(&hi)) = (lost.first(), lost.last()) {
        assert_eq!(
            lost,
            (lo..=hi).collect::<Vec<u64>>(),
            "the lost records are not one run of calls"
        );
        let last = driver.answered_at[hi as usize];
        eprintln!(
            "the last lost record was answered {:?} before the crash was over",
            crashed.saturating_duration_since(last)
        );
    }
    // What PostgreSQL lost is lost; nothing is stored twice, and every record made after the
    // failover is stored.
    assert!(
        t.lost > 0,
        "nothing was lost: the standby did not lag ({t:?})"
    );
    assert_eq!(
        (t.null, t.unknown, t.rejected, t.duplicated),
        (0, 0, 0, 0),
        "{t:?}"
    );
    let last = driver.next;
    for id in last - AFTER..last {
        assert!(
            matches!(driver.answers.get(&id), Some(Ok(_))),
            "record {id}"
        );
    }
    assert_eq!(t.ok + t.lost, driver.answers.len(), "{t:?}");
    assert_increasing(&driver);
    // The queues were rebuilt from the new primary's rows: no notice names a position above
    // its target's head, on the host that serves the watcher and on the host that queued the
    // notice of a watcher nobody serves.
    until("A's listener on the new primary", || {
        a.listener_connects() >= 2
    });
    until("B's listener on the new primary", || {
        b.listener_connects() >= 2
    });
    let lost_at = *lost_from.lock().unwrap();
    let head2 = a.state_version(T2, None).unwrap();
    assert!(
        head2 < lost_at,
        "the standby had {T2} at {head2}, not behind {lost_at}"
    );
    // A reader that saw the lost events is told by the head: below its `after`
    // (docs/semantics.md#reading), as on a SQLite store; the watermark is untouched.
    let read = a.changes_since(T2, lost_at as f64, None, None).unwrap();
    assert_eq!(
        (read.state_version, read.events.len(), read.history_gap),
        (head2, 0, false)
    );
    assert!(!a.serves(W2));
    assert_eq!(assert_at_or_below_heads(&a, W2), 1);
    assert_at_or_below_heads(&b, W);
    // Records and cross-host notices go on without reopening either store.
    cross_host_notice(&a, &b, 1_000_002);
}

// The harness itself (crates/pg-test/src/standby.rs), here rather than in its own crate: npm's
// server binaries, which that crate's tests also run on, ship no `pg_basebackup`.

#[test]
fn the_harness_synchronous_standby_has_what_was_acknowledged_and_is_promoted() {
    let mut primary = cluster("standby-sync");
    let standby = primary.standby("rs_sync", true).unwrap();
    assert_ne!(standby.port(), primary.port());
    primary
        .sql("CREATE TABLE t (n int); INSERT INTO t VALUES (1), (2)")
        .unwrap();
    // Acknowledged once the standby has it; replayed a moment later.
    let start = std::time::Instant::now();
    while standby.sql("SELECT count(*) FROM t").ok().as_deref() != Some("2") {
        assert!(
            start.elapsed().as_secs() < 20,
            "the standby never replayed the rows"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(standby.sql("INSERT INTO t VALUES (3)").is_err());
    primary.crash().unwrap();
    standby.promote().unwrap();
    standby.sql("INSERT INTO t VALUES (3)").unwrap();
    assert_eq!(standby.sql("SELECT sum(n) FROM t").unwrap(), "6");
    let dirs = [primary.data_dir().to_owned(), standby.data_dir().to_owned()];
    drop((primary, standby));
    assert!(dirs.iter().all(|d| !d.exists()), "{dirs:?}");
}

#[test]
fn the_harness_detached_standby_misses_what_its_primary_commits_afterwards() {
    let mut primary = cluster("standby-async");
    let standby = primary.standby("rs_async", false).unwrap();
    primary
        .sql("CREATE TABLE t (n int); INSERT INTO t VALUES (1)")
        .unwrap();
    let start = std::time::Instant::now();
    while standby.sql("SELECT count(*) FROM t").ok().as_deref() != Some("1") {
        assert!(
            start.elapsed().as_secs() < 20,
            "the standby never replayed the row"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    standby.detach().unwrap();
    primary.sql("INSERT INTO t VALUES (2)").unwrap();
    primary.crash().unwrap();
    standby.promote().unwrap();
    assert_eq!(standby.sql("SELECT array_agg(n) FROM t").unwrap(), "{1}");
    assert!(standby.standby("rs_bad name", false).is_err());
}
