//! The Promise API's writer thread in the model-based test (semantics.md#promise-api): the
//! calls it can run, what each returned on the store and by the model, and a writer thread
//! that the test holds while it queues calls, so that they are taken in one batch.

use std::sync::mpsc::{self, Receiver, Sender};

use session_awareness_core::{Done, Job, Notice, Provenance, StateEvent, Store, Writer};

use crate::ops::Op;
use crate::spec::Model;
use crate::{code, core_input, event, input, notices};

/// What one call returned, comparable between the store and the model.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    Record(Result<Option<StateEvent>, &'static str>),
    Flag(Result<bool, &'static str>),
    Count(Result<u64, &'static str>),
    Notices(Result<Vec<Notice>, &'static str>),
    /// The job that held the writer thread.
    Held,
    /// The job panicked: never expected.
    Lost(&'static str),
}

/// Makes `op` (a record, watch, drain or acknowledge) on the store.
pub fn call(s: &Store, op: &Op, now: i64) -> Outcome {
    match op {
        Op::Record(r) => Outcome::Record(code(s.record(core_input(&input(r, now)), now))),
        Op::Watch(w, t, ambient) => {
            let p = if *ambient {
                Provenance::AmbientGroup
            } else {
                Provenance::Explicit
            };
            Outcome::Flag(code(s.watch(w, t, p, now)))
        }
        Op::Drain(w) => Outcome::Notices(code(s.drain(w, now))),
        Op::Acknowledge(w, targets) => {
            let targets: Vec<String> = targets.iter().map(|t| (*t).into()).collect();
            Outcome::Count(code(s.acknowledge(w, &targets, now)))
        }
        _ => unreachable!("not a call: {op:?}"),
    }
}

/// What `op` (a record, watch, drain or acknowledge) returns by the model, which it updates.
pub fn expect(m: &mut Model, op: &Op) -> Outcome {
    match op {
        Op::Record(r) => Outcome::Record(m.record(&input(r, m.now)).map(|e| e.as_ref().map(event))),
        Op::Watch(w, t, ambient) => Outcome::Flag(m.watch(w, t, !ambient)),
        Op::Drain(w) => Outcome::Notices(m.drain(w).map(|q| notices(&q))),
        Op::Acknowledge(w, targets) => {
            let targets: Vec<String> = targets.iter().map(|t| (*t).into()).collect();
            Outcome::Count(m.acknowledge(w, &targets))
        }
        _ => unreachable!("not a call: {op:?}"),
    }
}

/// The store's writer thread, where its results arrive, and the hold in place.
pub struct Queue {
    pub writer: Writer<Outcome>,
    results: Receiver<Vec<Done<Outcome>>>,
    pub held: Option<Held>,
}

/// A held writer thread: what releases it, and the calls queued behind it.
pub struct Held {
    release: Sender<()>,
    jobs: Vec<Op>,
}

impl Queue {
    pub fn start(store: &Store) -> Self {
        let (tx, results) = mpsc::channel();
        let writer = Writer::start(
            store.clone(),
            Box::new(move |done| {
                let _ = tx.send(done);
            }),
        )
        .expect("the writer thread starts");
        Queue {
            writer,
            results,
            held: None,
        }
    }

    /// Parks the writer thread on a job that waits for the release; returns once the thread
    /// runs it, so every job queued from now on is taken in one batch after it.
    pub fn hold(&mut self) {
        let (release, wait) = mpsc::channel::<()>();
        let (running, started) = mpsc::channel::<()>();
        self.writer
            .push(Job::Task(Box::new(move |_| {
                let _ = running.send(());
                let _ = wait.recv();
                Outcome::Held
            })))
            .expect("queued");
        started.recv().expect("the holding job runs");
        self.held = Some(Held {
            release,
            jobs: Vec::new(),
        });
    }

    /// Queues `op` behind the hold.
    pub fn queue(&mut self, op: &Op, now: i64) {
        let held = self.held.as_mut().expect("a held writer");
        let job = match op {
            Op::Record(r) => Job::Record(Box::new(core_input(&input(r, now))), now),
            other => {
                let other = other.clone();
                Job::Task(Box::new(move |s: &Store| call(s, &other, now)))
            }
        };
        self.writer.push(job).expect("queued");
        held.jobs.push(op.clone());
    }

    /// Releases the hold and waits for every result: the calls queued, and their results in
    /// call order.
    pub fn release(&mut self) -> (Vec<Op>, Vec<Outcome>) {
        let held = self.held.take().expect("a held writer");
        drop(held.release);
        self.writer.settle();
        let mut got: Vec<Outcome> = self
            .results
            .try_iter()
            .flatten()
            .map(|d| match d {
                Done::Recorded(r) => Outcome::Record(code(r)),
                Done::Ran(o) => o,
                Done::Lost(e) => Outcome::Lost(e.code()),
            })
            .collect();
        assert_eq!(got.first(), Some(&Outcome::Held), "the holding job first");
        got.remove(0);
        (held.jobs, got)
    }
}
