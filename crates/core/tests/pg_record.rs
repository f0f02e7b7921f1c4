//! The PostgreSQL store's write path and reads on a throwaway cluster: exact sequences, heads,
//! watermarks and events read back, the same outcome as a SQLite store for the same calls
//! (spawn seeding, material events, self-suppression, scopes, `onlyIfWatched`, dedupe, group
//! commit), dedupe from two stores racing on one key, the head lock's fixed order (two stores'
//! groups over the same sessions in opposite orders never deadlock), and a record in flight
//! while its backend is terminated. Never skipped: without PostgreSQL's binaries they fail.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use session_awareness_core::{
    ChangeEvent, Hooks, Options, RecordInput, Scopes, StateEvent, Store, VersionRef,
};
use session_awareness_pg_test::Cluster;

mod pg_harness;
use pg_harness::{cluster, url};

const MAIN: &str = "agent:main:main";
const CHILD: &str = "agent:main:subagent:c";
const OTHER: &str = "agent:main:subagent:d";
const NOW: i64 = 1_700_000_000_000;

fn open(c: &Cluster) -> Store {
    Store::open(&url(c), Options::default(), Hooks::default()).unwrap()
}

/// The sequences of `events`, in their order.
fn sequences(events: &[ChangeEvent]) -> Vec<i64> {
    events.iter().map(ChangeEvent::sequence).collect()
}

fn input(session: &str, kind: &str, actor: &str) -> RecordInput {
    RecordInput {
        session_key: session.into(),
        kind: kind.into(),
        actor_type: actor.into(),
        summary: format!("{kind} on {session}"),
        ..Default::default()
    }
}

fn human(session: &str) -> RecordInput {
    input(session, "human_direct_message", "human")
}

fn spawned(parent: &str, child: &str) -> RecordInput {
    RecordInput {
        watchers: vec![parent.into()],
        ..input(child, "child_spawned", "agent")
    }
}

fn stored(c: &ChangeEvent) -> &StateEvent {
    match c {
        ChangeEvent::Stored(e) => e,
        other => panic!("{other:?}"),
    }
}

/// The calls of one gateway turn sequence, as one list of groups, run on any store; returns
/// everything the store answers and holds afterwards, for comparison.
fn script(store: &Store) -> Vec<String> {
    let mut seen = Vec::new();
    let mut scoped = Scopes::new();
    scoped.insert(MAIN.into(), "/scope/a".into());
    let groups: Vec<Vec<RecordInput>> = vec![
        vec![spawned(MAIN, CHILD), spawned(MAIN, OTHER)],
        vec![
            human(CHILD),
            human(CHILD),
            RecordInput {
                actor_id: Some(MAIN.into()),
                ..human(OTHER)
            },
        ],
        vec![
            RecordInput {
                dedupe_key: Some("k1".into()),
                ..human(OTHER)
            },
            RecordInput {
                dedupe_key: Some("k1".into()),
                ..human(OTHER)
            },
            RecordInput {
                only_if_watched: true,
                ..human("agent:main:subagent:nobody")
            },
            RecordInput {
                only_if_watched: true,
                ..human(CHILD)
            },
            input(CHILD, "not_a_kind", "human"),
            RecordInput {
                watchers: vec!["agent:ops:main".into()],
                watcher_scopes: scoped.clone(),
                ..human("agent:ops:subagent:x")
            },
            input("global", "human_direct_message", "human"),
        ],
    ];
    for (g, items) in groups.into_iter().enumerate() {
        let items = items.into_iter().map(|i| (i, NOW + g as i64)).collect();
        for r in store.record_group(items) {
            seen.push(match r {
                Ok(Some(e)) => format!("ok {e:?}"),
                Ok(None) => "none".into(),
                Err(e) => format!("err {}", e.code()),
            });
        }
    }
    seen.push(format!("{:?}", store.cursor_rows(None, None).unwrap()));
    for w in [MAIN, "agent:ops:main"] {
        seen.push(format!("{:?}", store.peek(w).unwrap()));
    }
    for s in [CHILD, OTHER, "agent:ops:subagent:x", "global"] {
        seen.push(format!(
            "{:?}",
            store.changes_since(s, 0.0, None, None).unwrap()
        ));
    }
    seen
}

#[test]
fn records_and_reads_as_sqlite_does() {
    let c = cluster("rs-record");
    let pg = open(&c);
    let lite = Store::open(":memory:", Options::default(), Hooks::default()).unwrap();
    let (a, b) = (script(&pg), script(&lite));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x, y);
    }
    // Exact values: the spawns are 1 and 2, the child's two human messages 3 and 4, the
    // self-suppressed one 5, the dedupe key's first row 6 (its repeat returns it and uses up
    // 7, as SQLite's AUTOINCREMENT does), the watched child's onlyIfWatched record 8.
    let d = pg.changes_since(CHILD, 0.0, None, None).unwrap();
    assert_eq!(sequences(&d.events), vec![1, 3, 4, 8]);
    assert_eq!(d.state_version, 8);
    assert_eq!(d.earliest_available_sequence, 1);
    assert!(!d.history_gap && !d.truncated);
    assert_eq!(
        stored(&d.events[1]).summary,
        "human_direct_message on agent:main:subagent:c"
    );
    let page = pg.changes_since(CHILD, 1.0, None, Some(2.0)).unwrap();
    assert_eq!(sequences(&page.events), vec![3, 4]);
    assert!(page.truncated);
    assert_eq!(pg.state_version(OTHER, None).unwrap(), 6);
    assert_eq!(
        pg.state_version("agent:main:subagent:nobody", None)
            .unwrap(),
        0
    );
    let refs = [
        VersionRef {
            session_key: "agent:main:subagent:nobody".into(),
            agent_id: None,
        },
        VersionRef {
            session_key: OTHER.into(),
            agent_id: None,
        },
        VersionRef {
            session_key: CHILD.into(),
            agent_id: None,
        },
    ];
    assert_eq!(
        pg.state_versions(&refs).unwrap(),
        vec![
            (OTHER.to_owned(), "main".to_owned(), 6),
            (CHILD.to_owned(), "main".to_owned(), 8)
        ]
    );
    // The skipped onlyIfWatched record left no head behind; every head is at its session's last event.
    assert_eq!(
        c.sql("SELECT string_agg(session_key || '=' || last_sequence || '/' || pruned_max_sequence, ',' \
               ORDER BY session_key) FROM session_awareness.session_state_heads")
            .unwrap(),
        "agent:main:subagent:c=8/0,agent:main:subagent:d=6/0,agent:ops:subagent:x=9/0,global=10/0"
    );
    // The cursor of the spawn: L = 1, N frozen at 3, M = 8.
    let rows = pg.cursor_rows(Some(MAIN), Some(CHILD)).unwrap();
    assert_eq!(
        (rows[0].last_seen, rows[0].notified, rows[0].material),
        (1, 3, 8)
    );
    let ten_days_later = NOW + 10 * 86_400_000;
    // The skipped onlyIfWatched record drew no sequence: the next is 11, as on SQLite.
    let e = pg.record(human(CHILD), ten_days_later).unwrap().unwrap();
    assert_eq!(e.sequence, 11);
    assert_eq!(e.occurred_at, ten_days_later);
}

#[test]
fn a_dedupe_key_raced_from_two_stores_is_one_row() {
    let c = cluster("rs-dedupe");
    let stores = [open(&c), open(&c)];
    let rounds = 40;
    let barrier = Arc::new(Barrier::new(2));
    let results: Vec<Vec<i64>> = thread::scope(|s| {
        let handles: Vec<_> = stores
            .iter()
            .map(|store| {
                let barrier = Arc::clone(&barrier);
                s.spawn(move || {
                    (0..rounds)
                        .map(|i| {
                            barrier.wait();
                            let r = RecordInput {
                                dedupe_key: Some(format!("key-{i}")),
                                ..human(CHILD)
                            };
                            store.record(r, NOW).unwrap().unwrap().sequence
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        results[0], results[1],
        "both stores answer the first row of each key"
    );
    assert_eq!(
        c.sql("SELECT count(*), count(DISTINCT dedupe_key) FROM session_awareness.session_state_events")
            .unwrap(),
        format!("{rounds}|{rounds}")
    );
    let last = *results[0].iter().max().unwrap();
    assert_eq!(stores[0].state_version(CHILD, None).unwrap(), last);
}

/// Holds the head of `session` locked for `ms` from another connection, until joined.
fn hold_head(c: &Cluster, session: &str, ms: u32) -> thread::JoinHandle<()> {
    let (bin, url) = (c.bin_dir().to_owned(), c.url());
    let sql = format!(
        "BEGIN; SELECT 1 FROM session_awareness.session_state_heads \
         WHERE session_key = '{session}' FOR UPDATE; SELECT pg_sleep({}); COMMIT;",
        f64::from(ms) / 1000.0
    );
    let h = thread::spawn(move || {
        session_awareness_pg_test::psql(&bin, &url, &sql).unwrap();
    });
    thread::sleep(Duration::from_millis(300));
    h
}

#[test]
fn groups_over_the_same_sessions_in_opposite_orders_never_deadlock() {
    let c = cluster("rs-order");
    let stores = [open(&c), open(&c)];
    let sessions: Vec<String> = (0..6)
        .map(|i| format!("agent:main:subagent:s{i}"))
        .collect();
    for k in &sessions {
        stores[0].record(human(k), NOW).unwrap().unwrap();
    }
    let rounds = 3;
    let mut failures = Vec::new();
    for _ in 0..rounds {
        // A head in the middle is held elsewhere: each group stops at it with the heads it
        // locked before, and the first to get it then needs the other's (in opposite orders, a
        // deadlock, which the server breaks by failing one).
        let holder = hold_head(&c, &sessions[3], 1000);
        thread::scope(|s| {
            let handles: Vec<_> = stores
                .iter()
                .enumerate()
                .map(|(n, store)| {
                    let mut order = sessions.clone();
                    if n == 1 {
                        order.reverse();
                    }
                    s.spawn(move || {
                        let group = order.iter().map(|k| (human(k), NOW)).collect();
                        store
                            .record_group(group)
                            .into_iter()
                            .filter_map(|r| match r {
                                Ok(Some(_)) => None,
                                Ok(None) => Some("none".to_owned()),
                                Err(e) => Some(format!("{} {e}", e.code())),
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for h in handles {
                failures.extend(h.join().unwrap());
            }
        });
        holder.join().unwrap();
    }
    assert_eq!(failures, Vec::<String>::new());
    // Every session got both stores' events, and its head is its last sequence.
    for k in &sessions {
        let d = stores[0].changes_since(k, 0.0, None, None).unwrap();
        assert_eq!(d.events.len(), 1 + 2 * rounds);
        assert_eq!(d.state_version, d.events.last().unwrap().sequence());
    }
}

#[test]
fn a_record_in_flight_when_its_backend_is_terminated_is_err_db_and_writes_nothing_without_a_window()
{
    let c = cluster("rs-terminate");
    // No reconnect window: the record settles on the loss (with one, it is written again once
    // connected: crates/core/tests/pg_faults.rs).
    let opts = Options {
        reconnect_window_ms: 0,
        ..Options::default()
    };
    let store = Store::open(&url(&c), opts, Hooks::default()).unwrap();
    assert_eq!(
        store.record(human(CHILD), NOW).unwrap().unwrap().sequence,
        1
    );
    // Another session holds the head row, so the record waits on it with its backend busy.
    let holder = thread::spawn({
        let url = c.url();
        let bin = c.bin_dir().to_owned();
        move || {
            session_awareness_pg_test::psql(
                &bin,
                &url,
                "BEGIN; SELECT 1 FROM session_awareness.session_state_heads FOR UPDATE; \
                 SELECT pg_sleep(3); COMMIT;",
            )
        }
    });
    thread::sleep(Duration::from_millis(500));
    let killer = thread::spawn({
        let url = c.url();
        let bin = c.bin_dir().to_owned();
        move || {
            thread::sleep(Duration::from_millis(700));
            session_awareness_pg_test::psql(
                &bin,
                &url,
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name = 'session-awareness' AND wait_event_type = 'Lock'",
            )
        }
    });
    let r = store.record(human(CHILD), NOW);
    assert_eq!(killer.join().unwrap().unwrap(), "1");
    let e = r.expect_err("the record failed");
    assert_eq!(e.code(), "ERR_DB");
    holder.join().unwrap().ok();
    assert_eq!(
        c.sql("SELECT count(*) FROM session_awareness.session_state_events")
            .unwrap(),
        "1"
    );
    // The next call connects again by itself. The failed record had not drawn a sequence: it
    // was waiting for the head's lock, which comes first.
    assert_eq!(
        store.record(human(CHILD), NOW).unwrap().unwrap().sequence,
        2
    );
    assert_eq!(store.state_version(CHILD, None).unwrap(), 2);
}

#[test]
fn a_record_the_server_refuses_fails_alone_in_its_group() {
    let c = cluster("rs-savepoint");
    let store = open(&c);
    // A check of the server's own that the store does not know of: the server refuses the
    // row, not the store (U+0000, which PostgreSQL's text cannot hold, is refused by the
    // store before anything is sent).
    c.sql(
        "ALTER TABLE session_awareness.session_state_events \
         ADD CONSTRAINT refused CHECK (dedupe_key IS DISTINCT FROM 'refused')",
    )
    .unwrap();
    let refused = || RecordInput {
        dedupe_key: Some("refused".into()),
        ..human(OTHER)
    };
    let out = store.record_group(vec![
        (human(CHILD), NOW),
        (refused(), NOW),
        (spawned(MAIN, OTHER), NOW),
        (refused(), NOW),
        (human(OTHER), NOW),
    ]);
    let seen: Vec<String> = out
        .iter()
        .map(|r| match r {
            Ok(Some(e)) => e.sequence.to_string(),
            Ok(None) => "none".into(),
            Err(e) => e.code().into(),
        })
        .collect();
    // The group drew 1 to 5 before the server refused a row; written again event by event,
    // each record draws its own, and a refused one spends its number (sequences may skip).
    assert_eq!(seen, ["6", "ERR_DB", "8", "ERR_DB", "10"]);
    let rows = store.cursor_rows(Some(MAIN), None).unwrap();
    assert_eq!(
        (rows[0].last_seen, rows[0].notified, rows[0].material),
        (8, 10, 10)
    );
    // Alone, it fails and leaves nothing (it spent 11 and, alone again, 12); the next goes on.
    assert_eq!(store.record(refused(), NOW).unwrap_err().code(), "ERR_DB");
    assert_eq!(
        store.record(human(CHILD), NOW).unwrap().unwrap().sequence,
        13
    );
    assert_eq!(
        c.sql("SELECT string_agg(sequence::text, ',' ORDER BY sequence) FROM session_awareness.session_state_events")
            .unwrap(),
        "6,8,10,13"
    );
}

#[test]
fn history_gap_and_earliest_come_from_the_head_s_watermark() {
    let c = cluster("rs-watermark");
    let store = open(&c);
    for _ in 0..4 {
        store.record(human(CHILD), NOW).unwrap();
    }
    // What a prune leaves: the two oldest events gone, the head's watermark at 2.
    c.sql(
        "DELETE FROM session_awareness.session_state_events WHERE sequence <= 2; \
         UPDATE session_awareness.session_state_heads SET pruned_max_sequence = 2",
    )
    .unwrap();
    let d = store.changes_since(CHILD, 1.0, None, None).unwrap();
    assert!(d.history_gap);
    assert_eq!(d.earliest_available_sequence, 3);
    assert_eq!(d.state_version, 4);
    assert_eq!(sequences(&d.events), vec![3, 4]);
    let d = store.changes_since(CHILD, 2.0, None, None).unwrap();
    assert!(!d.history_gap);
    // Nothing left: earliest is the head + 1; a session never recorded answers zeroes.
    c.sql("DELETE FROM session_awareness.session_state_events")
        .unwrap();
    let d = store.changes_since(CHILD, 4.0, None, None).unwrap();
    assert_eq!((d.earliest_available_sequence, d.history_gap), (5, false));
    let d = store.changes_since(OTHER, 0.0, None, None).unwrap();
    assert_eq!((d.state_version, d.earliest_available_sequence), (0, 0));
}

#[test]
fn a_record_waiting_past_the_statement_timeout_is_err_db() {
    let c = cluster("rs-timeout");
    let store = Store::open(
        &url(&c),
        Options {
            statement_timeout_ms: 300,
            ..Options::default()
        },
        Hooks::default(),
    )
    .unwrap();
    store.record(human(CHILD), NOW).unwrap();
    let holder = hold_head(&c, CHILD, 3000);
    let start = std::time::Instant::now();
    assert_eq!(
        store.record(human(CHILD), NOW).unwrap_err().code(),
        "ERR_DB"
    );
    assert!(
        start.elapsed() < Duration::from_millis(2500),
        "{:?}",
        start.elapsed()
    );
    holder.join().unwrap();
    // It timed out waiting for the head, before drawing a sequence.
    assert_eq!(
        store.record(human(CHILD), NOW).unwrap().unwrap().sequence,
        2
    );
}

#[test]
fn a_per_session_follower_sees_every_event_while_two_stores_write() {
    let c = cluster("rs-follower");
    let writers = [open(&c), open(&c)];
    let reader = open(&c);
    let done = std::sync::atomic::AtomicUsize::new(0);
    let per_writer = 400;
    let seen: Vec<i64> = thread::scope(|s| {
        for w in &writers {
            let done = &done;
            s.spawn(move || {
                for chunk in 0..per_writer / 8 {
                    let group = (0..8).map(|_| (human(CHILD), NOW + chunk)).collect();
                    for r in w.record_group(group) {
                        r.unwrap().unwrap();
                    }
                }
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            });
        }
        let follower = s.spawn(|| {
            // "Everything after the last one I saw", as a gateway's follower asks.
            let mut seen = Vec::new();
            let mut after = 0;
            loop {
                let finished = done.load(std::sync::atomic::Ordering::SeqCst) == 2;
                let d = reader
                    .changes_since(CHILD, after as f64, None, None)
                    .unwrap();
                for e in &d.events {
                    seen.push(e.sequence());
                    after = e.sequence();
                }
                if finished && d.events.is_empty() {
                    return seen;
                }
            }
        });
        follower.join().unwrap()
    });
    let all: Vec<i64> = c
        .sql("SELECT string_agg(sequence::text, ',' ORDER BY sequence) FROM session_awareness.session_state_events")
        .unwrap()
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(all.len(), 2 * per_writer as usize);
    assert_eq!(seen, all, "the follower skipped an event");
}

#[test]
fn a_record_only_if_watched_that_nobody_watches_draws_no_sequence() {
    let c = cluster("pg-record-gated");
    let store = open(&c);
    let gated = || RecordInput {
        only_if_watched: true,
        ..human(CHILD)
    };
    // Alone, then in a group with plain records: the skipped ones use no number.
    assert!(store.record(gated(), NOW).unwrap().is_none());
    assert_eq!(
        store.record(human(CHILD), NOW).unwrap().unwrap().sequence,
        1
    );
    let out: Vec<Option<i64>> = store
        .record_group(vec![(gated(), NOW), (human(OTHER), NOW), (gated(), NOW)])
        .into_iter()
        .map(|r| r.unwrap().map(|e| e.sequence))
        .collect();
    assert_eq!(out, [None, Some(2), None]);
    assert_eq!(
        store.record(human(CHILD), NOW).unwrap().unwrap().sequence,
        3
    );
}

/// A wake sink that drops every wake (the tests read the scheduled ones).
struct NoWakes;
impl session_awareness_core::WakeSink for NoWakes {
    fn wake(&self, _: session_awareness_core::WakeRequest) {}
}

#[test]
fn a_spawn_that_reseeds_a_cursor_drops_the_notice_an_earlier_event_of_its_group_opened() {
    let c = cluster("pg-record-reseed");
    // A minute's coalescing: a scheduled wake stays scheduled while the test reads it.
    let opts = |sync_interval_ms| Options {
        sync_interval_ms,
        wake_coalesce_ms: 60_000,
        ..Options::default()
    };
    let hooks = || Hooks {
        wake: Some(Arc::new(NoWakes)),
        ..Hooks::default()
    };
    let stores = [
        (
            "PostgreSQL",
            Store::open(&url(&c), opts(100), hooks()).unwrap(),
        ),
        (
            "PostgreSQL, no cross-host notices",
            Store::open(&url(&c), opts(0), hooks()).unwrap(),
        ),
        ("SQLite", Store::open(":memory:", opts(0), hooks()).unwrap()),
    ];
    for (i, (name, store)) in stores.iter().enumerate() {
        // Each PostgreSQL store on sessions of its own (they share the schema).
        let child = format!("{CHILD}-{i}");
        let child = child.as_str();
        let first = store.record(spawned(MAIN, child), NOW).unwrap().unwrap();
        assert_eq!(store.scheduled_wakes(), Vec::<String>::new(), "{name}");
        // A change, then a spawn that reseeds the parent's cursor, in one group: as when the
        // two are recorded one by one, the change's notice is dropped with the reseed and its
        // wake stays scheduled (withdrawn when it arrives, semantics.md#wake).
        let out = store.record_group(vec![(human(child), NOW), (spawned(MAIN, child), NOW)]);
        let seqs: Vec<i64> = out
            .iter()
            .map(|r| r.as_ref().unwrap().as_ref().unwrap().sequence)
            .collect();
        assert_eq!(seqs, [first.sequence + 1, first.sequence + 2], "{name}");
        assert!(!store.has_pending(MAIN).unwrap(), "{name}");
        assert_eq!(store.peek(MAIN).unwrap(), [], "{name}");
        assert_eq!(store.scheduled_wakes(), [MAIN], "{name}");
        // The other order: the spawn reseeds, the change after it opens a notice at the spawn.
        let out = store.record_group(vec![(spawned(MAIN, child), NOW), (human(child), NOW)]);
        let spawn = out[0].as_ref().unwrap().as_ref().unwrap().sequence;
        let peeked = store.peek(MAIN).unwrap();
        let at: Vec<(&str, i64)> = peeked
            .iter()
            .map(|n| (n.target_key.as_str(), n.changes_since))
            .collect();
        assert_eq!(at, [(child, spawn)], "{name}");
    }
    for (_, store) in stores {
        store.close();
    }
}
