//! The PostgreSQL store's throughput, for comparison with the node-postgres baseline
//! (`npm run bench:pg-baseline`, bench/postgres/baseline.js; BENCHMARKS.md): the same input (a
//! `human_direct_message` naming one watcher, payload `{"channel":"telegram"}`), 2,000 records
//! per round at 1, 8 and 64 in flight, in one session and spread over 64 sessions, on a
//! throwaway cluster with fsync on (`--no-fsync` turns it off). Records in flight reach the
//! store as the Promise API's writer thread hands them over: `k` in flight become groups of `k`
//! (one `record` at 1). Then `changesSince` of 200 events and `stateVersions` of 500 keys, one
//! call at a time. Medians of 5 rounds, every round listed.
//!
//! `cargo bench -p session-awareness-core --bench pg_record [-- --no-fsync]`

use std::time::Instant;

use session_awareness_core::{Hooks, Options, RecordInput, Store, VersionRef};
use session_awareness_pg_test::Cluster;

const RECORDS: usize = 2_000;
const ROUNDS: usize = 5;
const WATCHER: &str = "agent:main:main";
const NOW: i64 = 1_700_000_000_000;

fn input(key: &str, n: usize, watchers: bool) -> RecordInput {
    RecordInput {
        session_key: key.into(),
        kind: "human_direct_message".into(),
        actor_type: "human".into(),
        summary: format!("human message via telegram {n}"),
        payload: Some(serde_json::json!({ "channel": "telegram" })),
        watchers: if watchers {
            vec![WATCHER.into()]
        } else {
            Vec::new()
        },
        ..Default::default()
    }
}

/// Records per second for `RECORDS` records, `k` in flight, over `sessions` sessions.
fn throughput(store: &Store, k: usize, sessions: usize, tag: &str) -> f64 {
    let start = Instant::now();
    let mut n = 0;
    while n < RECORDS {
        let group: Vec<(RecordInput, i64)> = (n..(n + k).min(RECORDS))
            .map(|i| {
                (
                    input(
                        &format!("agent:main:subagent:{tag}-{}", i % sessions),
                        i,
                        true,
                    ),
                    NOW,
                )
            })
            .collect();
        n += group.len();
        if k == 1 {
            let (i, now) = group.into_iter().next().unwrap();
            store.record(i, now).unwrap().unwrap();
        } else {
            for r in store.record_group(group) {
                r.unwrap().unwrap();
            }
        }
    }
    RECORDS as f64 / start.elapsed().as_secs_f64()
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

fn main() {
    let fsync = !std::env::args().any(|a| a == "--no-fsync");
    let c = Cluster::start_with(session_awareness_pg_test::Options {
        name: "bench".into(),
        durable: fsync,
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let store = Store::open(
        &format!("{}?sslmode=disable", c.url()),
        Options::default(),
        Hooks::default(),
    )
    .unwrap();
    // Fixtures of the reads: 200 events in one session, 500 sessions with a head each.
    let changes_key = "agent:main:subagent:changes";
    for i in 0..200 {
        store.record(input(changes_key, i, false), NOW).unwrap();
    }
    let keys: Vec<String> = (0..500)
        .map(|i| format!("agent:main:subagent:v{i}"))
        .collect();
    for group in keys.chunks(100) {
        let items = group.iter().map(|k| (input(k, 0, false), NOW)).collect();
        store.record_group(items);
    }
    let refs: Vec<VersionRef> = keys
        .iter()
        .map(|k| VersionRef {
            session_key: k.clone(),
            agent_id: None,
        })
        .collect();
    let mut rows: Vec<(String, Vec<f64>)> = Vec::new();
    let mut put = |label: String, v: f64| match rows.iter_mut().find(|(l, _)| *l == label) {
        Some((_, vs)) => vs.push(v),
        None => rows.push((label, vec![v])),
    };
    for r in 0..ROUNDS {
        let mut levels = vec![1, 8, 64];
        if r % 2 == 1 {
            levels.reverse();
        }
        for (label, sessions) in [("one session", 1), ("64 sessions", 64)] {
            for &k in &levels {
                let tag = format!("r{r}k{k}s{sessions}");
                put(
                    format!("record, {k} in flight, {label} (/s)"),
                    throughput(&store, k, sessions, &tag),
                );
            }
        }
        let start = Instant::now();
        for _ in 0..200 {
            let d = store.changes_since(changes_key, 0.0, None, None).unwrap();
            assert_eq!(d.events.len(), 200);
        }
        put(
            "changesSince of 200 events, per call (µs)".into(),
            start.elapsed().as_secs_f64() * 1e6 / 200.0,
        );
        let start = Instant::now();
        for _ in 0..200 {
            assert_eq!(store.state_versions(&refs).unwrap().len(), 500);
        }
        put(
            "stateVersions of 500 keys, per call (µs)".into(),
            start.elapsed().as_secs_f64() * 1e6 / 200.0,
        );
    }
    println!(
        "PostgreSQL store, fsync {}",
        if fsync { "on" } else { "off" }
    );
    for (label, vs) in &rows {
        let list: Vec<String> = vs.iter().map(|v| format!("{v:.0}")).collect();
        println!("{label}: median {:.0} [{}]", median(vs), list.join(", "));
    }
    store.close();
}
