//! The physical limit of a `record` on this machine: the bare SQL transaction the store runs
//! per event (insert, head upsert, cursor update), through prepared cached statements, with
//! no validation, no queue and no binding in the way.
//!
//! Each workload runs twice: with SQLite's automatic checkpoint (every 1,000 WAL pages, inside
//! the commit that crosses the threshold: on the hot path) and with the store's background
//! checkpointer (`session_awareness_core::checkpoint`: `wal_autocheckpoint=0`, checkpoints on a
//! connection and thread of their own).
//!
//! A third bed runs the core's whole `Store::record` (validation, the same transaction, the
//! notice queue and wake scheduling) with no binding: `npm run bench` shows it beside the raw
//! transaction and the addon, so the cost of each layer can be read off one run.
//!
//! `cargo bench -p session-awareness-core --bench raw_record` prints one line per workload and
//! a last line `RAW_RESULTS <json>` that `npm run bench` reads.

use std::time::Instant;

use rusqlite::{params, Connection};
use session_awareness_core::checkpoint::Checkpointer;
use session_awareness_core::schema;
use session_awareness_core::tx::Tx;
use session_awareness_core::{Hooks, Options, Provenance, RecordInput, Result, Store};

/// Records per round, rounds measured, and rounds thrown away first.
const OPS: usize = 2_000;
const ROUNDS: usize = 9;
const WARMUP: usize = 1;

const INSERT: &str =
    "INSERT INTO session_state_events (dedupe_key, session_key, session_id, agent_id, kind, \
     actor_type, actor_id, run_id, occurred_at, summary, payload_json) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
     ON CONFLICT (dedupe_key) DO NOTHING RETURNING sequence";
const HEAD: &str = "INSERT INTO session_state_heads (session_key, agent_id, last_sequence, pruned_max_sequence, updated_at) \
     VALUES (?1, ?2, ?3, 0, ?4) \
     ON CONFLICT (session_key, agent_id) DO UPDATE SET \
     last_sequence = max(last_sequence, excluded.last_sequence), updated_at = excluded.updated_at";
const CURSORS: &str = "UPDATE session_watch_cursors SET \
     notified_sequence = CASE WHEN notified_sequence = last_seen_sequence THEN ?2 ELSE notified_sequence END, \
     material_sequence = ?2, updated_at = ?4 \
     WHERE target_session_key = ?1 AND watcher_session_key IS NOT ?3 \
     RETURNING watcher_session_key, last_seen_sequence, notified_sequence, provenance";

#[derive(Clone, Copy, PartialEq, Debug)]
enum Checkpoint {
    /// SQLite's default: the committing call runs it.
    HotPath,
    /// The store's background checkpointer.
    Background,
}

struct Workload {
    name: &'static str,
    kind: &'static str,
    watchers: usize,
}

const WORKLOADS: [Workload; 3] = [
    Workload {
        name: "record notify, 1 watcher",
        kind: "human_direct_message",
        watchers: 1,
    },
    Workload {
        name: "record notify, 100 watchers",
        kind: "human_direct_message",
        watchers: 100,
    },
    Workload {
        name: "record log-only",
        kind: "run_completed",
        watchers: 0,
    },
];

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// One record: the transaction the store commits for it.
fn record(conn: &mut Connection, target: &str, kind: &str, now: i64) -> Result<usize> {
    let tx = Tx::immediate(conn)?;
    let seq: i64 = tx.prepare_cached(INSERT)?.query_row(
        params![
            None::<&str>,
            target,
            None::<&str>,
            "main",
            kind,
            "human",
            Some("telegram:42"),
            None::<&str>,
            now,
            "human message via telegram",
            Some(r#"{"channel":"telegram"}"#),
        ],
        |r| r.get(0),
    )?;
    tx.prepare_cached(HEAD)?
        .execute(params![target, "main", seq, now])?;
    let mut pending = 0;
    if kind == "human_direct_message" {
        let mut stmt = tx.prepare_cached(CURSORS)?;
        let mut rows = stmt.query(params![target, seq, Some("telegram:42"), now])?;
        while let Some(r) = rows.next()? {
            let watcher: String = r.get(0)?;
            let l: i64 = r.get(1)?;
            let n: i64 = r.get(2)?;
            let provenance: String = r.get(3)?;
            if n != l && !watcher.is_empty() && !provenance.is_empty() {
                pending += 1;
            }
        }
    }
    tx.commit()?;
    Ok(pending)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One workload in one checkpoint mode, on its own database file.
struct Bed {
    conn: Connection,
    kind: &'static str,
    checkpointer: Option<Checkpointer>,
}

const TARGET: &str = "agent:main:subagent:target";

impl Bed {
    fn new(dir: &std::path::Path, w: &Workload, mode: Checkpoint) -> Bed {
        let tag = match mode {
            Checkpoint::HotPath => "hot",
            Checkpoint::Background => "bg",
        };
        let path = dir.join(format!("raw-{}-{}-{tag}.sqlite", w.kind, w.watchers));
        let path = path.to_str().unwrap().to_owned();
        let mut conn = schema::open(&path, 30_000).unwrap();
        for i in 0..w.watchers {
            conn.execute(
                "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, \
                 updated_at) VALUES (?1, ?2, ?3)",
                params![format!("agent:w{i}:main"), TARGET, now_ms()],
            )
            .unwrap();
        }
        let checkpointer = match mode {
            Checkpoint::HotPath => None,
            Checkpoint::Background => Checkpointer::install(&mut conn, 30_000, None, None).unwrap(),
        };
        Bed {
            conn,
            kind: w.kind,
            checkpointer,
        }
    }

    /// Runs `ops` records; returns nanoseconds per record.
    fn round(&mut self, ops: usize) -> f64 {
        let now = now_ms();
        let start = Instant::now();
        for _ in 0..ops {
            std::hint::black_box(record(&mut self.conn, TARGET, self.kind, now).unwrap());
        }
        start.elapsed().as_nanos() as f64 / ops as f64
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        if let Some(c) = &self.checkpointer {
            c.close();
        }
    }
}

const MODES: [Checkpoint; 2] = [Checkpoint::HotPath, Checkpoint::Background];

/// The core's `Store::record` on one workload, on its own database file, with its defaults
/// (background checkpoints, the cross-process poll) as the addon opens it.
struct CoreBed {
    store: Store,
    input: RecordInput,
}

impl CoreBed {
    fn new(dir: &std::path::Path, w: &Workload) -> CoreBed {
        let path = dir.join(format!("core-{}-{}.sqlite", w.kind, w.watchers));
        let store =
            Store::open(path.to_str().unwrap(), Options::default(), Hooks::default()).unwrap();
        for i in 0..w.watchers {
            store
                .watch(
                    &format!("agent:w{i}:main"),
                    TARGET,
                    Provenance::Explicit,
                    now_ms(),
                )
                .unwrap();
        }
        let input = RecordInput {
            session_key: TARGET.to_owned(),
            kind: w.kind.to_owned(),
            actor_type: "human".to_owned(),
            actor_id: Some("telegram:42".to_owned()),
            summary: "human message via telegram".to_owned(),
            payload: Some(serde_json::json!({ "channel": "telegram" })),
            ..RecordInput::default()
        };
        CoreBed { store, input }
    }

    /// Runs `ops` records; returns nanoseconds per record. The input is cloned per call, as
    /// the binding builds a fresh one from each JS object.
    fn round(&mut self, ops: usize) -> f64 {
        let start = Instant::now();
        for _ in 0..ops {
            let event = self.store.record(self.input.clone(), now_ms()).unwrap();
            std::hint::black_box(event);
        }
        start.elapsed().as_nanos() as f64 / ops as f64
    }
}

impl Drop for CoreBed {
    fn drop(&mut self) {
        self.store.close();
    }
}

/// `--serve`: builds every bed, prints `ready`, then answers each stdin line
/// `<workload index> <hot|bg|core> <ops>` with one line: nanoseconds per record of one round.
/// `npm run bench` uses it to interleave these rounds with the addon's in time.
fn serve(dir: &std::path::Path) {
    let mut beds: Vec<Vec<Bed>> = WORKLOADS
        .iter()
        .map(|w| MODES.iter().map(|&m| Bed::new(dir, w, m)).collect())
        .collect();
    let mut cores: Vec<CoreBed> = WORKLOADS.iter().map(|w| CoreBed::new(dir, w)).collect();
    println!("ready");
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [w, mode, ops] = parts[..] else {
            break;
        };
        let w: usize = w.parse().unwrap();
        let ops: usize = ops.parse().unwrap();
        let ns = match mode {
            "core" => cores[w].round(ops),
            "bg" => beds[w][1].round(ops),
            _ => beds[w][0].round(ops),
        };
        println!("{ns:.0}");
    }
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    if std::env::args().any(|a| a == "--serve") {
        serve(dir.path());
        return;
    }
    let mut json = Vec::new();
    for w in &WORKLOADS {
        let mut beds: Vec<Bed> = MODES.iter().map(|&m| Bed::new(dir.path(), w, m)).collect();
        let mut samples = [Vec::new(), Vec::new()];
        // Alternate the two modes round by round so both see the same machine load.
        for round in 0..WARMUP + ROUNDS {
            for (i, bed) in beds.iter_mut().enumerate() {
                let ns = bed.round(OPS);
                if round >= WARMUP {
                    samples[i].push(ns);
                }
            }
        }
        let [hot, bg] = samples.map(median);
        println!(
            "{:<30} checkpoint on the hot path {:>8.2} µs/record   in the background {:>8.2} µs/record",
            w.name,
            hot / 1e3,
            bg / 1e3
        );
        json.push(format!(
            r#""{}":{{"hotNs":{hot:.0},"backgroundNs":{bg:.0}}}"#,
            w.name
        ));
    }
    println!("RAW_RESULTS {{{}}}", json.join(","));
}
