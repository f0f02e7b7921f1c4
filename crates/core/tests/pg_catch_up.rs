//! The catch-up against this host's own records (docs/postgres.md#notices): a catch-up reads
//! the pending cursor rows, then brings the queue in line with them. A record this host
//! commits after the read began is not in the rows, and its notice must stay queued. Each test
//! holds the catch-up between its read and its queue update (`Store::pause_next_catch_up`)
//! and records in that gap, so the race happens on every run instead of under load only.
//! A real cluster; every wait is a generous timeout.

use std::time::Duration;

use session_awareness_core::{Provenance, Store};

mod pg_harness;
mod pg_hosts;
mod two_stores;
use pg_harness::{schema, PATIENCE};
use pg_hosts::{host, leased};
use two_stores::{human, positions, record, NOW, W};

const T: &str = "agent:main:subagent:research";
const T2: &str = "agent:main:subagent:writer";

/// Two hosts on a fresh schema, A serving [`W`] (watching [`T`] and [`T2`]). Neither polls on
/// its own within a test (a minute apart): only the hints start a catch-up.
fn served_on_a(name: &str) -> (Store, Store) {
    let s = schema(name);
    let (a, _) = host(&s, &format!("{name}-a"), 60_000);
    let (b, _) = host(&s, &format!("{name}-b"), 60_000);
    for t in [T, T2] {
        assert!(a.watch(W, t, Provenance::Explicit, NOW).unwrap());
    }
    leased(&s, W, 1);
    a.sync_now().unwrap();
    (a, b)
}

/// Runs `during` while A's next catch-up (started by `start`) is held after its read; returns
/// once that catch-up has updated the queue.
fn in_the_gap(a: &Store, start: impl FnOnce(), during: impl FnOnce()) {
    let pause = a.pause_next_catch_up().expect("a PostgreSQL store pauses");
    start();
    assert!(pause.wait_reached(PATIENCE), "A's catch-up read the rows");
    during();
    pause.resume();
    assert!(pause.wait_done(PATIENCE), "A's catch-up updated the queue");
}

#[test]
fn a_notice_queued_while_the_catch_up_reads_stays_queued() {
    let (a, b) = served_on_a("gap_new");
    in_the_gap(
        &a,
        // B's record names W in its hint; A serves W, so A catches W up.
        || {
            record(&b, human(T2));
        },
        || {
            record(&a, human(T));
        },
    );
    let mut queued = positions(&a.peek(W).unwrap());
    queued.sort();
    // Both seeded at an empty session: each notice is from position 0.
    assert_eq!(queued, [(T.to_owned(), 0), (T2.to_owned(), 0)]);
    assert_eq!(positions(&a.drain(W, NOW).unwrap()).len(), 2);
    a.close();
    b.close();
}

#[test]
fn a_notice_reopened_while_the_catch_up_reads_stays_queued() {
    let (a, b) = served_on_a("gap_reopened");
    let first = record(&a, human(T));
    assert_eq!(positions(&a.peek(W).unwrap()), [(T.to_owned(), 0)]);
    let mut second = 0;
    in_the_gap(
        &a,
        // B consumes W's notice on T and hints; A's catch-up reads it consumed.
        || assert_eq!(b.acknowledge(W, &[T.to_owned()], NOW).unwrap(), 1),
        // A's record opens it again, at the position B acknowledged.
        || second = record(&a, human(T)),
    );
    assert_eq!(second, first + 1);
    assert_eq!(positions(&a.peek(W).unwrap()), [(T.to_owned(), first)]);
    assert_eq!(
        positions(&a.drain(W, NOW).unwrap()),
        [(T.to_owned(), first)]
    );
    a.close();
    b.close();
}

#[test]
fn a_notice_consumed_elsewhere_still_leaves_at_the_catch_up() {
    // The negative side: the gap's rule keeps only what this host queued meanwhile.
    let (a, b) = served_on_a("gap_consumed");
    record(&a, human(T));
    assert_eq!(positions(&a.peek(W).unwrap()), [(T.to_owned(), 0)]);
    in_the_gap(
        &a,
        || assert_eq!(b.acknowledge(W, &[T.to_owned()], NOW).unwrap(), 1),
        || std::thread::sleep(Duration::from_millis(50)),
    );
    assert!(a.peek(W).unwrap().is_empty());
    a.close();
    b.close();
}
