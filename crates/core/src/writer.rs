//! The writer thread of a store (semantics.md#promise-api): the Promise API's calls become
//! jobs in one queue, run in call order on a thread of their own, so the JS thread never waits
//! on the disk. The thread takes every queued job at once; records next to each other in
//! the queue are written as one group ([`crate::group`]), one transaction and one commit for
//! all of them, and every other job runs alone in its turn. The results of everything taken
//! go to the sink in one call, in call order.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use crate::error::{DbFailure, Error, Result};
use crate::event::{RecordInput, StateEvent};
use crate::group::GroupItem;
use crate::store::Store;

/// A call waiting for the writer thread.
pub enum Job<O> {
    /// A record, with the caller's clock at the call; grouped with the records next to it.
    Record(Box<RecordInput>, i64),
    /// Any other call: run alone, in its turn, with the store.
    Task(Box<dyn FnOnce(&Store) -> O + Send>),
}

/// The result of one [`Job`].
pub enum Done<O> {
    /// What [`Store::record`] would have returned.
    Recorded(Result<Option<StateEvent>>),
    /// What the task returned.
    Ran(O),
    /// The job panicked (a bug): nothing of it was committed, and the writer went on. Its
    /// code is `ERR_DB`.
    Lost(Error),
}

/// Given how many jobs wait in the queue, the failure a new job settles with at once instead
/// of waiting (a PostgreSQL store whose connection is down, `maxWaitingCalls`).
pub type Gate = Arc<dyn Fn(usize) -> Option<Error> + Send + Sync>;

/// Where the results of each batch go, in call order. Called on the writer thread: it must
/// not wait for the thread that pushes jobs.
pub type Sink<O> = Box<dyn FnMut(Vec<Done<O>>) + Send>;

struct State<O> {
    /// With the moment each was queued (`session_awareness.record.duration`, `api: async`).
    jobs: Vec<(Job<O>, Instant)>,
    /// A batch taken from `jobs` has not finished yet.
    busy: bool,
    /// No more jobs are taken; the thread ends once `jobs` is empty.
    stopped: bool,
}

struct Shared<O> {
    state: Mutex<State<O>>,
    /// Signalled when a job arrives or the writer stops.
    work: Condvar,
    /// Signalled when the queue is empty and no batch runs.
    idle: Condvar,
}

/// The writer thread of one store and its queue. Dropping it stops the thread once the
/// jobs already queued have run.
pub struct Writer<O: Send + 'static> {
    shared: Arc<Shared<O>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    gate: Option<Gate>,
}

impl<O: Send + 'static> Writer<O> {
    /// Starts the writer thread of `store`, delivering results to `sink`.
    pub fn start(store: Store, sink: Sink<O>) -> Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                jobs: Vec::new(),
                busy: false,
                stopped: false,
            }),
            work: Condvar::new(),
            idle: Condvar::new(),
        });
        let theirs = Arc::clone(&shared);
        let gate = store.waiting_gate();
        let thread = std::thread::Builder::new()
            .name("session-awareness-writer".into())
            .spawn(move || run(&theirs, &store, sink))
            .map_err(Error::Io)?;
        Ok(Writer {
            shared,
            thread: Mutex::new(Some(thread)),
            gate,
        })
    }

    /// Queues `job` behind every job queued before it. `Error::Closed` once stopped; the
    /// gate's failure (`ERR_DB`) when a PostgreSQL store's connection is down and
    /// `maxWaitingCalls` jobs wait already.
    pub fn push(&self, job: Job<O>) -> Result<()> {
        let mut s = self.shared.state.lock();
        if s.stopped {
            return Err(Error::Closed);
        }
        if let Some(refused) = self.gate.as_ref().and_then(|g| g(s.jobs.len())) {
            return Err(refused);
        }
        s.jobs.push((job, Instant::now()));
        if s.jobs.len() == 1 && !s.busy {
            // The thread only sleeps with an empty queue and no batch running.
            self.shared.work.notify_one();
        }
        Ok(())
    }

    /// True when no job is queued or running: a call made now runs after all of them.
    pub fn is_idle(&self) -> bool {
        let s = self.shared.state.lock();
        s.jobs.is_empty() && !s.busy
    }

    /// Waits until every job queued so far has run (their results handed to the sink).
    pub fn settle(&self) {
        let mut s = self.shared.state.lock();
        while !s.jobs.is_empty() || s.busy {
            self.shared.idle.wait(&mut s);
        }
    }

    /// Takes no more jobs; the thread ends once those already queued have run. Idempotent.
    pub fn stop(&self) {
        self.shared.state.lock().stopped = true;
        self.shared.work.notify_one();
    }

    /// [`Writer::stop`], then waits for the thread to end.
    pub fn join(&self) {
        self.stop();
        if let Some(t) = self.thread.lock().take() {
            // A panic on the writer thread was already reported by the panic hook.
            let _ = t.join();
        }
    }
}

impl<O: Send + 'static> Drop for Writer<O> {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run<O>(shared: &Shared<O>, store: &Store, mut sink: Sink<O>) {
    // The host hears of each batch's notices before its promises settle (the sink).
    crate::hooks::mark_caller_thread();
    loop {
        let jobs = {
            let mut s = shared.state.lock();
            while s.jobs.is_empty() && !s.stopped {
                shared.work.wait(&mut s);
            }
            if s.jobs.is_empty() {
                shared.idle.notify_all();
                return;
            }
            s.busy = true;
            std::mem::take(&mut s.jobs)
        };
        let mut done = Vec::with_capacity(jobs.len());
        let mut group: Vec<GroupItem> = Vec::new();
        let mut queued: Vec<Instant> = Vec::new();
        for (job, at) in jobs {
            match job {
                Job::Record(input, now) => {
                    group.push((*input, now));
                    queued.push(at);
                }
                Job::Task(f) => {
                    flush(store, &mut group, &mut queued, &mut done);
                    done.push(guarded(1, || vec![Done::Ran(f(store))]).remove(0));
                }
            }
        }
        flush(store, &mut group, &mut queued, &mut done);
        // A panicking sink must not stop the thread either: the callers would wait forever.
        let _ = catch_unwind(AssertUnwindSafe(|| sink(done)));
        let mut s = shared.state.lock();
        s.busy = false;
        if s.jobs.is_empty() {
            shared.idle.notify_all();
        }
    }
}

/// Writes the records gathered so far as one group; `queued` holds when each was queued.
fn flush<O>(
    store: &Store,
    group: &mut Vec<GroupItem>,
    queued: &mut Vec<Instant>,
    done: &mut Vec<Done<O>>,
) {
    if !group.is_empty() {
        let items = std::mem::take(group);
        let queued = std::mem::take(queued);
        let n = items.len();
        done.extend(guarded(n, || {
            store
                .record_group(items)
                .into_iter()
                .zip(queued)
                .map(|(r, at)| {
                    store.recorded_async(&r, at);
                    Done::Recorded(r)
                })
                .collect()
        }));
    }
}

/// Runs `f`, which settles `n` jobs; if it panics, each of them is [`Done::Lost`]. A panic
/// unwinds through the open transaction's guard, which rolls it back.
fn guarded<O>(n: usize, f: impl FnOnce() -> Vec<Done<O>>) -> Vec<Done<O>> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        (0..n)
            .map(|_| {
                Done::Lost(Error::db(
                    DbFailure::Other,
                    "the call panicked inside the store",
                ))
            })
            .collect()
    })
}
