//! What the detection of other SQLite libraries in the process
//! (`session_awareness_core::exclusive`) adds to `record`: the store's whole `Store::record`
//! on a file, with the detection on and off (the internal switch), in alternating rounds so
//! both see the same disk and the same WAL sizes; and the guard's check alone, which on Linux
//! is one non-blocking `read` of the process's inotify descriptor.
//!
//! `cargo bench -p session-awareness-core --bench exclusive` prints the medians.

use std::time::Instant;

use session_awareness_core::exclusive::{self, FileGuard};
use session_awareness_core::{Hooks, Options, RecordInput, Result, Store};

/// Records per round, and rounds per setting (after one thrown away).
const OPS: usize = 2_000;
const ROUNDS: usize = 15;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median µs per record over one round of `OPS` records.
fn round(store: &Store, now: &mut i64) -> Result<f64> {
    let mut each = Vec::with_capacity(OPS);
    for _ in 0..OPS {
        *now += 1;
        let input = RecordInput {
            session_key: "agent:main:subagent:bench".into(),
            kind: "run_completed".into(),
            actor_type: "agent".into(),
            summary: "bench".into(),
            ..Default::default()
        };
        let t = Instant::now();
        store.record(input, *now)?;
        each.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(median(each))
}

fn main() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bench.sqlite");
    let store = Store::open(path.to_str().unwrap(), Options::default(), Hooks::default())?;
    let mut now = 1_700_000_000_000;
    round(&store, &mut now)?;
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        exclusive::set_enabled(true);
        on.push(round(&store, &mut now)?);
        exclusive::set_enabled(false);
        off.push(round(&store, &mut now)?);
    }
    exclusive::set_enabled(true);
    store.close();

    let guard = FileGuard::open(&path)?;
    let mut checks = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        for _ in 0..OPS {
            guard.check()?;
        }
        checks.push(t.elapsed().as_secs_f64() * 1e9 / OPS as f64);
    }
    let family = guard.family().clone();
    let mut scans = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        for _ in 0..100 {
            exclusive::check(&family)?;
        }
        scans.push(t.elapsed().as_secs_f64() * 1e6 / 100.0);
    }
    let (on, off) = (median(on), median(off));
    println!("record, detection on:  {on:.2} µs median");
    println!("record, detection off: {off:.2} µs median");
    println!("added by the detection: {:.2} µs", on - off);
    println!("guard check alone: {:.0} ns", median(checks));
    println!("full scan (fired trigger): {:.1} µs", median(scans));
    Ok(())
}
