//! `record` on a file OpenClaw created versus a file the store created (semantics.md#storage): the same tables
//! and indexes, so the same cost. A third bed adds the three duplicate indexes an earlier
//! version of the store created beside OpenClaw's, which every write then maintained twice.
//!
//! `cargo bench -p session-awareness-core --bench openclaw_file` prints the median µs per
//! record of each bed (notify kind, one watcher), rounds interleaved: wall time, and the CPU
//! time of the recording thread (Linux; steadier on a loaded machine, as a record's work is
//! all on the calling thread).

use std::path::Path;
use std::time::Instant;

use rusqlite::Connection;
use session_awareness_core::{Hooks, Options, Provenance, RecordInput, Store};

const OPS: usize = 2_000;
const ROUNDS: usize = 9;
const WATCHER: &str = "agent:main:main";

/// The statements of OpenClaw 2026.9.6 for the shared tables.
const OPENCLAW: &str = include_str!("../tests/fixtures/openclaw-schema/5-openclaw-2026.9.6.sql");

/// The indexes an earlier store version added beside OpenClaw's.
const FORMER: &str = "
CREATE INDEX session_state_events_session_sequence
    ON session_state_events (session_key, sequence DESC);
CREATE INDEX session_state_events_occurred
    ON session_state_events (occurred_at DESC, sequence DESC);
CREATE INDEX session_watch_cursors_target ON session_watch_cursors (target_session_key);
";

#[derive(Clone, Copy, Debug)]
enum Bed {
    Fresh,
    OpenClaw,
    OpenClawWithFormerIndexes,
}

fn open(dir: &Path, bed: Bed, round: usize) -> Store {
    let path = dir.join(format!("{bed:?}-{round}.sqlite"));
    if !matches!(bed, Bed::Fresh) {
        Connection::open(&path)
            .unwrap()
            .execute_batch(OPENCLAW)
            .unwrap();
    }
    let store = Store::open(path.to_str().unwrap(), Options::default(), Hooks::default()).unwrap();
    if matches!(bed, Bed::OpenClawWithFormerIndexes) {
        // After the store opened, so its upgrade cannot drop them: the state a file was left in.
        Connection::open(&path)
            .unwrap()
            .execute_batch(FORMER)
            .unwrap();
    }
    store
}

/// CPU time of the calling thread in ns (`/proc/thread-self/schedstat`), 0 elsewhere.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn round(dir: &Path, bed: Bed, round: usize) -> (f64, f64) {
    let store = open(dir, bed, round);
    let target = "agent:main:subagent:child";
    let now = 1_700_000_000_000;
    store
        .watch(WATCHER, target, Provenance::Explicit, now)
        .unwrap();
    let input = |i: usize| RecordInput {
        session_key: target.into(),
        kind: "human_direct_message".into(),
        actor_type: "human".into(),
        summary: format!("human message {i}"),
        ..Default::default()
    };
    // Warm the statement cache and the first prune outside the timed loop.
    for i in 0..50 {
        store.record(input(i), now).unwrap();
    }
    while store.is_pruning() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let start = Instant::now();
    let cpu = thread_cpu_ns();
    for i in 0..OPS {
        store.record(input(i), now).unwrap().expect("recorded");
        if i % 64 == 0 {
            store.drain(WATCHER, now).unwrap();
        }
    }
    let cpu_us = (thread_cpu_ns() - cpu) as f64 / 1e3 / OPS as f64;
    let us = start.elapsed().as_secs_f64() * 1e6 / OPS as f64;
    store.close();
    (us, cpu_us)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let beds = [Bed::Fresh, Bed::OpenClaw, Bed::OpenClawWithFormerIndexes];
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); beds.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); beds.len()];
    for r in 0..ROUNDS + 1 {
        for (i, bed) in beds.iter().enumerate() {
            let (us, cpu_us) = round(dir.path(), *bed, r);
            if r > 0 {
                wall[i].push(us);
                cpu[i].push(cpu_us);
            }
        }
    }
    let (fresh_wall, fresh_cpu) = (median(wall[0].clone()), median(cpu[0].clone()));
    for (i, bed) in beds.iter().enumerate() {
        let (w, c) = (median(wall[i].clone()), median(cpu[i].clone()));
        println!(
            "{:<26} wall {w:>6.1} µs ({:+4.0}%)   cpu {c:>6.1} µs ({:+4.0}%)",
            format!("{bed:?}"),
            (w / fresh_wall - 1.0) * 100.0,
            (c / fresh_cpu - 1.0) * 100.0
        );
    }
}
