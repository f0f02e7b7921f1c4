//! The driver of the fault tests (`pg_faults.rs`, `pg_failover.rs`): a Promise API writer
//! kept at 64 records in flight on 8 sessions, each record's answer kept by the `id` of its
//! payload, and the tally of a run against the rows (docs/postgres.md#faults).
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use session_awareness_core::{Done, Job, Options, RecordInput, Store, Writer};
use session_awareness_pg_test::Cluster;

pub const SESSIONS: u64 = 8;
pub const IN_FLIGHT: usize = 64;
/// Records made after the fault is over, all of which must be stored.
pub const AFTER: u64 = 256;
/// The longest wait between two reconnection attempts (`postgres/outage.rs`).
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);

pub type Out = session_awareness_core::Result<()>;

/// What became of every record of a run.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Resolved with its event, and its row is there once.
    pub ok: usize,
    /// Resolved `null` (`ERR_DB`).
    pub null: usize,
    /// Resolved `null` with `ERR_OUTCOME_UNKNOWN`.
    pub unknown: usize,
    /// Refused before it was queued (`maxWaitingCalls`).
    pub rejected: usize,
    /// Resolved with its event and not in the table, or another sequence there.
    pub lost: usize,
    /// In the table more than once.
    pub duplicated: usize,
    /// Resolved `null` with `ERR_DB` and in the table all the same.
    pub null_but_stored: usize,
}

pub fn input(id: u64) -> RecordInput {
    RecordInput {
        session_key: format!("agent:main:subagent:f{}", id % SESSIONS),
        kind: "human_direct_message".into(),
        actor_type: "human".into(),
        summary: format!("r{id}"),
        payload: Some(serde_json::json!({ "id": id })),
        ..Default::default()
    }
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The writer of one store, kept at [`IN_FLIGHT`] records.
pub struct Driver {
    pub writer: Writer<Out>,
    /// Each group's answers, stamped on the writer's thread as the group settles.
    pub done: Receiver<(Done<Out>, Instant)>,
    /// The ids of the queued jobs, in call order (`None`: a task).
    pub queued: VecDeque<Option<u64>>,
    pub next: u64,
    /// Each record's answer: its sequence, or its code.
    pub answers: HashMap<u64, std::result::Result<i64, String>>,
    /// When the writer had each answer, in call order.
    pub answered_at: Vec<Instant>,
    /// The answers of the tasks, in order.
    pub tasks: Vec<std::result::Result<(), String>>,
}

impl Driver {
    pub fn new(store: &Store) -> Driver {
        let (tx, rx) = channel();
        let sink = Box::new(move |done: Vec<Done<Out>>| {
            // When the writer had the answer, not when this test's loop got round to it.
            let at = Instant::now();
            for d in done {
                let _ = tx.send((d, at));
            }
        });
        Driver {
            writer: Writer::start(store.clone(), sink).unwrap(),
            done: rx,
            queued: VecDeque::new(),
            next: 0,
            answers: HashMap::new(),
            answered_at: Vec::new(),
            tasks: Vec::new(),
        }
    }

    pub fn push_record(&mut self) {
        let id = self.next;
        self.next += 1;
        match self.writer.push(Job::Record(Box::new(input(id)), now_ms())) {
            Ok(()) => self.queued.push_back(Some(id)),
            Err(e) => {
                self.answers
                    .insert(id, Err(format!("rejected:{}", e.code())));
            }
        }
    }

    /// Queues a read of one session (a call that is not a record).
    pub fn push_task(&mut self) {
        let job = Job::Task(Box::new(|s: &Store| {
            s.changes_since("agent:main:subagent:f0", 0.0, None, None)
                .map(|_| ())
        }));
        match self.writer.push(job) {
            Ok(()) => self.queued.push_back(None),
            Err(e) => self.tasks.push(Err(format!("rejected:{}", e.code()))),
        }
    }

    /// Keeps [`IN_FLIGHT`] records queued until `fault` has ended and [`AFTER`] more were
    /// made, a task queued whenever `task` is raised; then waits for every answer.
    pub fn run(&mut self, fault: &AtomicBool, task: &AtomicBool) {
        let mut ended_at = None;
        loop {
            if ended_at.is_none() && fault.load(Ordering::Acquire) {
                ended_at = Some(self.next);
            }
            let more = ended_at.is_none_or(|at| self.next < at + AFTER);
            if task.swap(false, Ordering::AcqRel) {
                self.push_task();
            }
            while more && self.queued.len() < IN_FLIGHT {
                let before = self.queued.len();
                self.push_record();
                if self.queued.len() == before {
                    // Refused at once: do not spin on a full gate.
                    thread::sleep(Duration::from_millis(2));
                    break;
                }
            }
            let Some(id) = self.queued.pop_front() else {
                if more {
                    continue;
                }
                return;
            };
            let (d, at) = self
                .done
                .recv_timeout(Duration::from_secs(120))
                .expect("an answer within 2 minutes");
            match (id, d) {
                (Some(id), Done::Recorded(r)) => {
                    let a = match r {
                        Ok(Some(e)) => Ok(e.sequence),
                        Ok(None) => Err("none".into()),
                        Err(e) => Err(e.code().to_owned()),
                    };
                    self.answers.insert(id, a);
                    self.answered_at.push(at);
                }
                (None, Done::Ran(r)) => self.tasks.push(r.map_err(|e| e.code().to_owned())),
                (_, Done::Lost(e)) => panic!("a job panicked: {e}"),
                (id, _) => panic!("answers out of call order at {id:?}"),
            }
        }
    }

    /// The tally of the run against the rows of `schema` on `c`.
    pub fn tally(&self, c: &Cluster, schema: &str) -> Tally {
        self.tally_with_lost(c, schema).0
    }

    /// [`Driver::tally`], and the ids of the records answered with an event that is not
    /// there, in call order.
    pub fn tally_with_lost(&self, c: &Cluster, schema: &str) -> (Tally, Vec<u64>) {
        let rows = c
            .sql(&format!(
                "SELECT payload_json::json->>'id', count(*), min(sequence) \
                 FROM {schema}.session_state_events GROUP BY 1"
            ))
            .unwrap();
        let mut stored: HashMap<u64, (usize, i64)> = HashMap::new();
        for line in rows.lines().filter(|l| !l.is_empty()) {
            let f: Vec<&str> = line.split('|').collect();
            stored.insert(
                f[0].parse().unwrap(),
                (f[1].parse().unwrap(), f[2].parse().unwrap()),
            );
        }
        let mut t = Tally::default();
        let mut lost = Vec::new();
        for (id, a) in &self.answers {
            let row = stored.get(id);
            match a {
                Ok(seq) if row.is_some_and(|(_, s)| s == seq) => t.ok += 1,
                Ok(_) => {
                    t.lost += 1;
                    lost.push(*id);
                }
                Err(code) if code.starts_with("rejected:") => t.rejected += 1,
                Err(code) if code == "ERR_OUTCOME_UNKNOWN" => t.unknown += 1,
                Err(_) => {
                    t.null += 1;
                    if row.is_some() {
                        t.null_but_stored += 1;
                    }
                }
            }
        }
        t.duplicated = stored.values().filter(|(n, _)| *n > 1).count();
        lost.sort_unstable();
        (t, lost)
    }
}

/// The options of a store under a fault: short timeouts, so the tests stay short.
pub fn options(window_ms: u32) -> Options {
    Options {
        statement_timeout_ms: 2_000,
        connect_timeout_ms: 2_000,
        reconnect_window_ms: window_ms,
        ..Options::default()
    }
}
