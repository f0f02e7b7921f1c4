//! semantics.md#processes: served watchers are leased in the file, so a record queues and
//! wakes a notice only where its watcher is served, and in the recording process only when no
//! live process serves it. Two stores on one file stand for two processes; `sync_now` runs a
//! poll (which writes the leases) on demand. Also: a watcher's first drain in a store reads
//! what is pending for it from the file.

mod two_stores;

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::Connection;
use session_awareness_core::{Provenance, QueueSignal, Store, WakeRequest};
use two_stores::{db, human, open_waking, positions, record, woken, NOW, T, W};

/// True when nothing at all is queued in `store` (read without serving anybody).
fn queue_empty(store: &Store) -> bool {
    store.queue_signal().words[0].load(Ordering::Acquire) == QueueSignal::EMPTY
}

fn leases(path: &str) -> Vec<String> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT watcher_key FROM session_awareness_served ORDER BY watcher_key")
        .unwrap();
    let rows = stmt.query_map([], |r| r.get(0)).unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

fn lnm(path: &str) -> (i64, i64, i64) {
    two_stores::lnm(&Connection::open(path).unwrap(), W, T)
}

fn quiet(wakes: &mpsc::Receiver<WakeRequest>) -> bool {
    wakes.recv_timeout(Duration::from_millis(200)).is_err()
}

#[test]
fn the_recording_store_leaves_a_watcher_another_live_store_serves_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let (a, a_wakes) = open_waking(&path);
    let (b, b_wakes) = open_waking(&path);
    assert!(b.watch(W, T, Provenance::Explicit, NOW).unwrap());
    assert!(leases(&path).is_empty(), "written by the poll");
    b.sync_now().unwrap();
    assert_eq!(leases(&path), [W]);
    let s1 = record(&a, human(T));
    let s2 = record(&a, human(T));
    assert_eq!(lnm(&path), (0, s1, s2));
    assert!(queue_empty(&a));
    assert!(quiet(&a_wakes));
    b.sync_now().unwrap();
    assert_eq!(positions(&b.peek(W).unwrap()), [(T.to_owned(), 0)]);
    assert_eq!(woken(&b_wakes), W);
    assert!(quiet(&b_wakes));
    assert!(!a.serves(W));
    // Once B stops (its close drops its leases), A's next record queues and wakes here.
    b.close();
    assert!(leases(&path).is_empty());
    let s3 = record(&a, human(T));
    assert_eq!(lnm(&path), (0, s1, s3));
    assert!(!queue_empty(&a));
    assert_eq!(woken(&a_wakes), W);
    assert_eq!(positions(&a.peek(W).unwrap()), [(T.to_owned(), 0)]);
}

#[test]
fn a_store_that_serves_the_watcher_itself_queues_its_own_notice() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let (a, a_wakes) = open_waking(&path);
    let (b, _b_wakes) = open_waking(&path);
    b.serve(W).unwrap();
    b.sync_now().unwrap();
    a.watch(W, T, Provenance::Explicit, NOW).unwrap();
    assert!(a.serves(W));
    record(&a, human(T));
    assert_eq!(positions(&a.peek(W).unwrap()), [(T.to_owned(), 0)]);
    assert_eq!(woken(&a_wakes), W);
}

#[test]
fn an_expired_lease_counts_no_more() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let (a, a_wakes) = open_waking(&path);
    a.watch("agent:ops:main", T, Provenance::Explicit, NOW)
        .unwrap();
    // A cursor of W that A does not serve, and a lease of a process that crashed a while ago.
    {
        let (c, _) = open_waking(&path);
        c.watch(W, T, Provenance::Explicit, NOW).unwrap();
        c.close();
    }
    let raw = Connection::open(&path).unwrap();
    let wall = session_awareness_core::system_now();
    raw.execute(
        "INSERT INTO session_awareness_served VALUES (?1, 'crashed', ?2)",
        rusqlite::params![W, wall - 1],
    )
    .unwrap();
    record(&a, human(T));
    assert_eq!(positions(&a.peek(W).unwrap()), [(T.to_owned(), 0)]);
    let mut called: Vec<String> = (0..2).map(|_| woken(&a_wakes)).collect();
    called.sort();
    assert_eq!(called, ["agent:main:main", "agent:ops:main"]);
    // A live one (another process's lease, a minute to go) keeps the next target's notice out.
    let t2 = "agent:main:subagent:other";
    {
        let (c, _) = open_waking(&path);
        c.watch("agent:qa:main", t2, Provenance::Explicit, NOW)
            .unwrap();
        c.close();
    }
    raw.execute(
        "INSERT INTO session_awareness_served VALUES ('agent:qa:main', 'live', ?1)",
        [wall + 60_000],
    )
    .unwrap();
    record(&a, human(t2));
    assert!(quiet(&a_wakes));
    // The poll deletes the rows that expired a lease length ago, never live ones.
    raw.execute(
        "UPDATE session_awareness_served SET expires_at = ?1 WHERE instance_id = 'crashed'",
        [wall - 1_000_000],
    )
    .unwrap();
    a.sync_now().unwrap();
    assert_eq!(
        leases(&path),
        ["agent:main:main", "agent:ops:main", "agent:qa:main"]
    );
    let owners: Vec<String> = {
        let mut stmt = raw
            .prepare("SELECT instance_id FROM session_awareness_served WHERE watcher_key = ?1")
            .unwrap();
        let rows = stmt.query_map([W], |r| r.get(0)).unwrap();
        rows.collect::<rusqlite::Result<_>>().unwrap()
    };
    assert_eq!(owners.len(), 1);
    assert_ne!(owners[0], "crashed");
}

#[test]
fn a_file_whose_tables_another_writer_created_keeps_the_old_rule() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    {
        let (s, _) = open_waking(&path);
        s.close();
    }
    // As OpenClaw's file, or one this store wrote before leases: the shared tables, no lease
    // table. Opening it adds none.
    Connection::open(&path)
        .unwrap()
        .execute_batch("DROP TABLE session_awareness_served")
        .unwrap();
    let (a, a_wakes) = open_waking(&path);
    let (b, _b_wakes) = open_waking(&path);
    b.watch(W, T, Provenance::Explicit, NOW).unwrap();
    b.sync_now().unwrap();
    let exists: bool = Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'session_awareness_served')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(!exists);
    record(&a, human(T));
    assert!(!queue_empty(&a));
    assert_eq!(woken(&a_wakes), W);
    b.sync_now().unwrap();
    assert_eq!(positions(&b.peek(W).unwrap()), [(T.to_owned(), 0)]);
}

#[test]
fn a_first_drain_reads_the_pending_notices_even_of_a_watcher_a_watch_already_served() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let (a, _a_wakes) = open_waking(&path);
    a.watch(W, T, Provenance::Explicit, NOW).unwrap();
    let s1 = record(&a, human(T));
    let (b, _b_wakes) = open_waking(&path);
    // Served by the watch (of another target), not read yet: no poll has run in B.
    b.watch(W, "agent:main:subagent:other", Provenance::Explicit, NOW)
        .unwrap();
    assert!(b.serves(W));
    assert!(queue_empty(&b));
    assert_eq!(positions(&b.drain(W, NOW).unwrap()), [(T.to_owned(), 0)]);
    assert_eq!(lnm(&path), (s1, s1, s1));
    // Read once: the next drain with nothing queued is the empty answer again.
    assert_eq!(b.drain(W, NOW).unwrap(), []);
    b.sync_now().unwrap();
    assert!(queue_empty(&b));
}
