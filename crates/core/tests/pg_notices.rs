//! Notices across hosts on PostgreSQL (semantics.md#processes, docs/postgres.md#notices):
//! two `Store`s on one database stand for two gateway hosts. A notice recorded on A reaches
//! the queue of B, which serves its watcher, and B's wake is called (the hint over
//! LISTEN/NOTIFY; the latency over 200 notices is printed, never asserted); both draining at
//! once hand each notice out exactly once, counted by (watcher, target, N); a listener whose
//! backend is killed reconnects, its catch-up delivers what was sent meanwhile and its leases
//! are written again at once (docs/postgres.md#async); and the lease rule: a notice nobody serves is queued where it was recorded, one served on B only on
//! B. A real cluster (`session_awareness_pg_test::Cluster`); every wait is a generous timeout.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use session_awareness_core::{Hooks, Notice, Options, Provenance, QueueSignal, RecordInput, Store};

mod pg_harness;
mod pg_hosts;
mod two_stores;
use pg_harness::{schema, shared, until, PATIENCE};
use pg_hosts::{host, leased, served_on_b, two_hosts, Wakes};
use two_stores::{human, positions, NOW, W};

/// True when nothing at all is queued in `store`, asked without serving any watcher.
fn nothing_queued(store: &Store) -> bool {
    store.queue_signal().words[0].load(Ordering::Acquire) == QueueSignal::EMPTY
}

#[test]
fn a_notice_recorded_on_a_is_queued_and_woken_on_b() {
    let t = "agent:main:subagent:research";
    let ((a, a_wakes), (b, b_wakes)) = served_on_b("host", t);
    let seq = a.record(human(t), NOW).unwrap().unwrap().sequence;
    until("B's queue", || !b.peek(W).unwrap().is_empty());
    assert_eq!(positions(&b.peek(W).unwrap()), [(t.to_owned(), seq - 1)]);
    assert_eq!(
        b.peek(W).unwrap()[0].text,
        format!(
            "Session \"{t}\" changed (other actor). Reconcile before acting: session_status \
             sessionKey \"{t}\" changesSince {}.",
            seq - 1
        )
    );
    let (wake, _) = b_wakes.recv_timeout(PATIENCE).unwrap();
    assert_eq!(wake.session_key, W);
    assert_eq!(wake.reason, format!("session-state:{t}"));
    // Served on B only: A neither queues nor wakes.
    assert!(nothing_queued(&a));
    assert!(a_wakes.try_recv().is_err());
    let drained = b.drain(W, NOW).unwrap();
    assert_eq!(positions(&drained), [(t.to_owned(), seq - 1)]);
    a.close();
    b.close();
}

#[test]
fn the_cross_host_latency_over_200_notices() {
    let t = "agent:main:subagent:latency";
    let ((a, _a_wakes), (b, b_wakes)) = served_on_b("lat", t);
    let mut queued = Vec::new();
    let mut woken = Vec::new();
    for i in 0..200 {
        let start = Instant::now();
        let seq = a.record(human(t), NOW + i).unwrap().unwrap().sequence;
        until("B's queue", || !b.peek(W).unwrap().is_empty());
        queued.push(start.elapsed());
        let (wake, at) = b_wakes.recv_timeout(PATIENCE).unwrap();
        assert_eq!(wake.session_key, W);
        woken.push(at - start);
        assert_eq!(
            positions(&b.drain(W, NOW + i).unwrap()),
            [(t.to_owned(), seq - 1)]
        );
    }
    let pct = |v: &mut Vec<Duration>, p: usize| {
        v.sort();
        v[(v.len() * p / 100).min(v.len() - 1)]
    };
    println!(
        "cross-host notice latency over 200 notices: queued p50 {:?} p99 {:?}; wake p50 {:?} p99 {:?}",
        pct(&mut queued, 50),
        pct(&mut queued, 99),
        pct(&mut woken, 50),
        pct(&mut woken, 99)
    );
    a.close();
    b.close();
}

#[test]
fn both_hosts_draining_at_once_hand_each_notice_out_once() {
    let (s, (a, _aw), (b, _bw)) = two_hosts("once");
    let targets: Vec<String> = (0..20)
        .map(|i| format!("agent:main:subagent:t{i:02}"))
        .collect();
    for t in &targets {
        assert!(a.watch(W, t, Provenance::Explicit, NOW).unwrap());
    }
    b.serve(W).unwrap();
    leased(&s, W, 2);
    let mut expected = BTreeMap::new();
    for round in 0..5 {
        for t in &targets {
            let seq = a.record(human(t), NOW + round).unwrap().unwrap().sequence;
            expected.entry((t.clone(), seq - 1)).or_insert(0);
            let _ = seq;
        }
        let want: usize = targets.len();
        until("both queues", || {
            a.peek(W).unwrap().len() == want && b.peek(W).unwrap().len() == want
        });
        let got: Vec<Vec<Notice>> = std::thread::scope(|sc| {
            let ha = sc.spawn(|| a.drain(W, NOW + round).unwrap());
            let hb = sc.spawn(|| b.drain(W, NOW + round).unwrap());
            vec![ha.join().unwrap(), hb.join().unwrap()]
        });
        let mut handed = BTreeMap::new();
        for (t, n) in got.iter().flat_map(|g| positions(g)) {
            *handed.entry((t, n)).or_insert(0) += 1;
        }
        assert!(
            handed.values().all(|&c| c == 1),
            "handed out twice: {handed:?}"
        );
        assert_eq!(
            handed.len(),
            want,
            "every notice handed out once: {handed:?}"
        );
        // Whoever lost drops its copies (at once for the pairs its drain found consumed).
        until("both queues empty", || {
            a.peek(W).unwrap().is_empty() && b.peek(W).unwrap().is_empty()
        });
    }
    a.close();
    b.close();
}

#[test]
fn a_killed_listener_reconnects_and_catches_up() {
    let t = "agent:main:subagent:killed";
    let ((a, _aw), (b, b_wakes)) = served_on_b("kill", t);
    until("B's listener", || b.listener_connects() >= 1);
    let before = b.listener_connects();
    assert_eq!(shared().terminate_backends("kill-b listener").unwrap(), 1);
    // Sent while B's listener is gone: only the catch-up at its reconnect can find it.
    let seq = a.record(human(t), NOW).unwrap().unwrap().sequence;
    until("B's reconnect", || b.listener_connects() > before);
    until("B's queue", || !b.peek(W).unwrap().is_empty());
    assert_eq!(positions(&b.peek(W).unwrap()), [(t.to_owned(), seq - 1)]);
    assert_eq!(b_wakes.recv_timeout(PATIENCE).unwrap().0.session_key, W);
    // And the hints work again after the reconnect.
    b.drain(W, NOW).unwrap();
    let seq = a.record(human(t), NOW).unwrap().unwrap().sequence;
    until("B's queue again", || !b.peek(W).unwrap().is_empty());
    assert_eq!(positions(&b.peek(W).unwrap()), [(t.to_owned(), seq - 1)]);
    a.close();
    b.close();
}

#[test]
fn the_lease_rule_decides_where_a_notice_is_queued() {
    let (s, (a, a_wakes), (b, b_wakes)) = two_hosts("lease");
    let t = "agent:main:subagent:leased";
    // Watched through A's seed-free path, served nowhere: the recording host queues.
    let c = host(&s, "lease-c", 0).0;
    assert!(c.watch(W, t, Provenance::Explicit, NOW).unwrap());
    c.close();
    let seq = a.record(human(t), NOW).unwrap().unwrap().sequence;
    assert_eq!(positions(&a.peek(W).unwrap()), [(t.to_owned(), seq - 1)]);
    assert_eq!(a_wakes.recv_timeout(PATIENCE).unwrap().0.session_key, W);
    // A drains it; now B serves the watcher: A's next record leaves the notice to B.
    a.drain(W, NOW).unwrap();
    a.close();
    let (a, a_wakes) = host(&s, "lease-a2", 100);
    b.serve(W).unwrap();
    leased(&s, W, 1);
    let seq = a.record(human(t), NOW).unwrap().unwrap().sequence;
    until("B's queue", || !b.peek(W).unwrap().is_empty());
    assert_eq!(positions(&b.peek(W).unwrap()), [(t.to_owned(), seq - 1)]);
    assert_eq!(b_wakes.recv_timeout(PATIENCE).unwrap().0.session_key, W);
    assert!(nothing_queued(&a));
    assert!(a_wakes.try_recv().is_err());
    // B closes: its leases go with it, and A queues again.
    b.close();
    leased(&s, W, 0);
    let seq2 = a.record(human(t), NOW).unwrap().unwrap().sequence;
    assert!(seq2 > seq);
    assert_eq!(positions(&a.peek(W).unwrap()), [(t.to_owned(), seq - 1)]);
    a.close();
}

#[test]
fn a_lease_counts_until_it_expires() {
    let s = schema("notices");
    let (a, _aw) = host(&s, "ghost-a", 100);
    let t = "agent:main:subagent:ghost";
    let c = host(&s, "ghost-c", 0).0;
    assert!(c.watch(W, t, Provenance::Explicit, NOW).unwrap());
    c.close();
    // A host that crashed a moment ago: its lease is still live.
    let live = session_awareness_core::system_now() + 60_000;
    shared()
        .sql(&format!(
            "INSERT INTO {s}.session_awareness_served VALUES ('{W}', 'crashed-host', {live})"
        ))
        .unwrap();
    let first = a.record(human(t), NOW).unwrap().unwrap().sequence;
    assert!(nothing_queued(&a), "left to the host that holds the lease");
    // Once its lease has expired, the next material event heals the notice here.
    shared()
        .sql(&format!(
            "UPDATE {s}.session_awareness_served SET expires_at = {}",
            live - 120_000
        ))
        .unwrap();
    a.record(human(t), NOW).unwrap().unwrap();
    assert_eq!(positions(&a.peek(W).unwrap()), [(t.to_owned(), first - 1)]);
    a.close();
}

/// Listens on `schema`'s channel on a connection of its own; each payload arrives with the
/// number of events visible on another connection when it arrived.
fn listener(
    rt: &tokio::runtime::Runtime,
    schema: &str,
) -> tokio::sync::mpsc::UnboundedReceiver<(String, i64)> {
    let url = shared().url();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    rt.block_on(async {
        let connect = || tokio_postgres::connect(&url, tokio_postgres::NoTls);
        let (reader, conn) = connect().await.unwrap();
        tokio::spawn(conn);
        let (client, mut conn) = connect().await.unwrap();
        let count = format!("SELECT count(*) FROM {schema}.session_state_events");
        tokio::spawn(async move {
            while let Some(Ok(m)) = futures_util::future::poll_fn(|cx| conn.poll_message(cx)).await
            {
                if let tokio_postgres::AsyncMessage::Notification(n) = m {
                    let seen: i64 = reader.query_one(&count, &[]).await.unwrap().get(0);
                    let _ = tx.send((n.payload().to_owned(), seen));
                }
            }
        });
        client
            .batch_execute(&format!("LISTEN {schema}"))
            .await
            .unwrap();
        // The client must live as long as the connection listens.
        std::mem::forget(client);
    });
    rx
}

/// A runtime of one worker for [`listener`].
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// Writes a lease row of another host, `other-host`, on [`W`] in `schema`, expiring at
/// `expires_at`.
fn other_row(schema: &str, expires_at: i64) {
    shared()
        .sql(&format!(
            "INSERT INTO {schema}.session_awareness_served VALUES ('{W}', 'other-host', {expires_at}) \
             ON CONFLICT (watcher_key, instance_id) DO UPDATE SET expires_at = excluded.expires_at"
        ))
        .unwrap();
}

/// The hints that arrive on `hints` up to a marker sent on `schema`'s channel after them,
/// the listeners' questions (`"q":"f"`) left out: each as the watchers it names.
fn hints_before_marker(
    rt: &tokio::runtime::Runtime,
    hints: &mut tokio::sync::mpsc::UnboundedReceiver<(String, i64)>,
    schema: &str,
) -> Vec<serde_json::Value> {
    shared()
        .sql(&format!("SELECT pg_notify('{schema}', 'marker')"))
        .unwrap();
    let mut named = Vec::new();
    loop {
        let (payload, _) = rt
            .block_on(async { tokio::time::timeout(PATIENCE, hints.recv()).await })
            .expect("the marker within the patience")
            .unwrap();
        if payload == "marker" {
            return named;
        }
        let v: serde_json::Value = serde_json::from_str(&payload).unwrap();
        if v["q"] != "f" {
            named.push(v["w"].clone());
        }
    }
}

#[test]
fn a_hint_goes_out_only_when_another_host_has_a_lease_row_on_its_watcher() {
    let s = schema("hint");
    let (a, _aw) = host(&s, "only-a", 100);
    let t = "agent:main:subagent:only";
    assert!(a.watch(W, t, Provenance::Explicit, NOW).unwrap());
    leased(&s, W, 1);
    let rt = runtime();
    let mut hints = listener(&rt, &s);
    // Served here only: neither the record that opens the notice nor the drain hints.
    a.record(human(t), NOW).unwrap().unwrap();
    assert_eq!(a.drain(W, NOW).unwrap().len(), 1);
    assert_eq!(
        hints_before_marker(&rt, &mut hints, &s),
        Vec::<serde_json::Value>::new()
    );
    // Another host's row, live and then lapsed (not yet deleted as stale): one hint each.
    let now = session_awareness_core::system_now();
    for expires_at in [now + 600_000, now - 1_000] {
        other_row(&s, expires_at);
        a.record(human(t), NOW).unwrap().unwrap();
        assert_eq!(a.drain(W, NOW).unwrap().len(), 1);
        let w = serde_json::json!([W]);
        assert_eq!(hints_before_marker(&rt, &mut hints, &s), [w.clone(), w]);
    }
    // The row gone: nothing again.
    shared()
        .sql(&format!(
            "DELETE FROM {s}.session_awareness_served WHERE instance_id = 'other-host'"
        ))
        .unwrap();
    a.record(human(t), NOW).unwrap().unwrap();
    assert_eq!(a.drain(W, NOW).unwrap().len(), 1);
    assert_eq!(
        hints_before_marker(&rt, &mut hints, &s),
        Vec::<serde_json::Value>::new()
    );
    a.close();
}

#[test]
fn a_watcher_whose_lease_row_is_written_anew_is_caught_up_after_it() {
    // Periodic catch-ups a minute apart: only the lease write's catch-up can be seen.
    let s = schema("anew");
    let (a, _aw) = host(&s, "anew-a", 60_000);
    let (b, b_wakes) = host(&s, "anew-b", 60_000);
    let t = "agent:main:subagent:anew";
    assert!(b.watch(W, t, Provenance::Explicit, NOW).unwrap());
    leased(&s, W, 1);
    // B's row deleted (as another host deletes a stale one): A's record hints nobody and,
    // no live lease elsewhere, is queued on A.
    shared()
        .sql(&format!("DELETE FROM {s}.session_awareness_served"))
        .unwrap();
    let seq = a.record(human(t), NOW).unwrap().unwrap().sequence;
    // (Asked without serving W on A: a peek would.)
    assert!(!nothing_queued(&a));
    assert!(nothing_queued(&b));
    // B's next lease write (due now: it serves one more watcher) inserts W's row again and
    // catches W up after it.
    b.serve("agent:main:other").unwrap();
    leased(&s, W, 1);
    until("B's queue", || !b.peek(W).unwrap().is_empty());
    assert_eq!(positions(&b.peek(W).unwrap()), [(t.to_owned(), seq - 1)]);
    assert_eq!(b_wakes.recv_timeout(PATIENCE).unwrap().0.session_key, W);
    a.close();
    b.close();
}

#[test]
fn the_hint_goes_out_once_per_commit_after_it() {
    let s = schema("hint");
    let (a, _aw) = host(&s, "hint-a", 100);
    let t: Vec<String> = (0..8)
        .map(|i| format!("agent:main:subagent:hint-{i}"))
        .collect();
    for target in &t {
        assert!(a.watch(W, target, Provenance::Explicit, NOW).unwrap());
    }
    // Another host holds a lease row on the watcher: the hints are for it.
    other_row(&s, session_awareness_core::system_now() + 600_000);
    let rt = runtime();
    let mut hints = listener(&rt, &s);
    let mut next = || loop {
        let (payload, seen) = rt
            .block_on(async { tokio::time::timeout(PATIENCE, hints.recv()).await })
            .expect("a hint within the patience")
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&payload).unwrap();
        assert!(v["i"].is_string(), "{payload}");
        // A host's listener that (re)connects asks who follows what (`"q":"f"`,
        // postgres/follow.rs): not a record's hint, and its timing is the listener's.
        if v["q"] == "f" {
            continue;
        }
        assert_eq!(v["w"], serde_json::json!([W]), "{payload}");
        return seen;
    };
    // One record at a time: its hint arrives once its event is visible to everyone.
    for (k, target) in t[..3].iter().enumerate() {
        a.record(human(target), NOW).unwrap().unwrap();
        assert_eq!(next(), k as i64 + 1);
    }
    // A group of three is one commit, and one hint naming the watcher once.
    let out = a.record_group(t[3..6].iter().map(|t| (human(t), NOW)).collect());
    assert!(out.iter().all(|r| matches!(r, Ok(Some(_)))));
    assert_eq!(next(), 6);
    // A group the server refuses a row of: the failed attempt's hint (harmless, its commit
    // rolled back), then the one of the group written again event by event.
    shared()
        .sql(&format!(
            "ALTER TABLE {s}.session_state_events \
             ADD CONSTRAINT refused CHECK (dedupe_key IS DISTINCT FROM 'refused')"
        ))
        .unwrap();
    let refused = RecordInput {
        dedupe_key: Some("refused".into()),
        ..human(&t[7])
    };
    let out = a.record_group(vec![(human(&t[6]), NOW), (refused, NOW)]);
    assert!(matches!(out[0], Ok(Some(_))));
    assert_eq!(out[1].as_ref().unwrap_err().code(), "ERR_DB");
    let first = next();
    assert!((6..=7).contains(&first), "{first}");
    assert_eq!(next(), 7);
    // A record that opens no notice sends no hint.
    a.record(human("agent:main:subagent:unwatched"), NOW)
        .unwrap()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let others: Vec<String> = std::iter::from_fn(|| hints.try_recv().ok())
        .map(|(payload, _)| payload)
        .filter(|p| !p.contains(r#""q":"f""#))
        .collect();
    assert_eq!(others, Vec::<String>::new(), "no other hint");
    a.close();
}

#[test]
fn records_racing_drains_on_both_hosts_hand_each_notice_out_once() {
    let s = schema("race");
    let (a, _aw) = host(&s, "race-a", 100);
    let (b, _bw) = host(&s, "race-b", 100);
    let targets: Vec<String> = (0..8)
        .map(|i| format!("agent:main:subagent:r{i}"))
        .collect();
    for t in &targets {
        assert!(a.watch(W, t, Provenance::Explicit, NOW).unwrap());
    }
    b.serve(W).unwrap();
    leased(&s, W, 2);
    let recording = std::sync::atomic::AtomicBool::new(true);
    let handed: Mutex<Vec<(String, i64)>> = Mutex::new(Vec::new());
    std::thread::scope(|sc| {
        sc.spawn(|| {
            for i in 0..240 {
                let t = &targets[i % targets.len()];
                a.record(human(t), NOW).unwrap().unwrap();
            }
            recording.store(false, Ordering::Release);
        });
        for store in [&a, &b] {
            let (recording, handed, s) = (&recording, &handed, s.as_str());
            sc.spawn(move || {
                let start = Instant::now();
                loop {
                    let got = store.drain(W, NOW).unwrap();
                    handed.lock().unwrap().extend(positions(&got));
                    let pending = shared()
                        .sql(&format!(
                            "SELECT count(*) FROM {s}.session_watch_cursors \
                             WHERE notified_sequence <> last_seen_sequence"
                        ))
                        .unwrap();
                    if !recording.load(Ordering::Acquire) && pending == "0" {
                        return;
                    }
                    assert!(start.elapsed() < PATIENCE * 3, "drains did not finish");
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
        }
    });
    let handed = handed.into_inner().unwrap();
    let mut seen = BTreeMap::new();
    for p in &handed {
        *seen.entry(p.clone()).or_insert(0) += 1;
    }
    assert!(seen.values().all(|&c| c == 1), "handed out twice: {seen:?}");
    // Every target's notices form one chain from its seed: the first names 0.
    for t in &targets {
        let first = handed.iter().filter(|(x, _)| x == t).map(|(_, n)| *n).min();
        assert_eq!(first, Some(0), "{t}");
    }
    until("both queues empty", || {
        a.peek(W).unwrap().is_empty() && b.peek(W).unwrap().is_empty()
    });
    println!(
        "records racing drains: {} notices handed out, none twice",
        handed.len()
    );
    a.close();
    b.close();
}

#[test]
fn a_server_restart_loses_no_notice() {
    // A cluster of its own: it is restarted as a crash would (`-m immediate`).
    let mut own =
        session_awareness_pg_test::Cluster::start().expect("a throwaway PostgreSQL cluster");
    let open = |app: &str| {
        let (tx, rx) = mpsc::channel();
        let hooks = Hooks {
            wake: Some(Arc::new(Wakes(Mutex::new(tx)))),
            ..Hooks::default()
        };
        let opts = Options {
            sync_interval_ms: 100,
            wake_coalesce_ms: 0,
            ..Options::default()
        };
        let url = format!("{}?application_name={app}", own.url());
        (Store::open(&url, opts, hooks).unwrap(), rx)
    };
    let (a, _aw) = open("restart-a");
    let (b, b_wakes) = open("restart-b");
    let t = "agent:main:subagent:restart";
    assert!(b.watch(W, t, Provenance::Explicit, NOW).unwrap());
    until("B's listener", || b.listener_connects() == 1);
    let before = a.record(human(t), NOW).unwrap().unwrap().sequence;
    until("B's queue", || !b.peek(W).unwrap().is_empty());
    own.restart_immediate().unwrap();
    // The record committed before the crash is still pending; B still holds its notice, and
    // a record after the restart (on a new connection) reaches B through the catch-up or the
    // hint once B's listener is back.
    let after = (0..50)
        .find_map(|_| match a.record(human(t), NOW) {
            Ok(Some(e)) => Some(e.sequence),
            _ => {
                std::thread::sleep(Duration::from_millis(100));
                None
            }
        })
        .expect("records succeed again without reopening");
    assert!(after > before);
    until("B's listener again", || {
        b.listener_connects() >= 2 && b.is_syncing()
    });
    let drained = (0..50)
        .find_map(|_| match b.drain(W, NOW) {
            Ok(n) if !n.is_empty() => Some(n),
            _ => {
                std::thread::sleep(Duration::from_millis(100));
                None
            }
        })
        .expect("the notice is handed out after the restart");
    // One notice for the burst, naming the position before the first record.
    assert_eq!(positions(&drained), [(t.to_owned(), before - 1)]);
    assert_eq!(b_wakes.recv_timeout(PATIENCE).unwrap().0.session_key, W);
    a.close();
    b.close();
}

#[test]
fn a_reconnected_listener_writes_its_leases_at_once() {
    // A lease of 90 s, renewed every 30 s: only the rebuild at the reconnect writes it sooner
    // (a failover to an asynchronous standby may have lost it).
    let s = schema("notices");
    let (b, _w) = host(&s, "lease-rebuild-b", 30_000);
    assert!(b
        .watch(W, "agent:main:subagent:leased", Provenance::Explicit, NOW)
        .unwrap());
    leased(&s, W, 1);
    until("B's listener", || b.listener_connects() >= 1);
    let before = b.listener_connects();
    shared()
        .sql(&format!("DELETE FROM {s}.session_awareness_served"))
        .unwrap();
    assert_eq!(
        shared()
            .terminate_backends("lease-rebuild-b listener")
            .unwrap(),
        1
    );
    until("B's reconnect", || b.listener_connects() > before);
    leased(&s, W, 1);
    b.close();
}
