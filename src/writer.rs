//! The writer thread of one native store (the Promise API's queue) and the values its jobs
//! settle with. The store holds it; `async_api.rs` starts it and queues the jobs.

use std::sync::OnceLock;

use napi::bindgen_prelude::{Either3, Either7};
use session_awareness_core::{self as core, Error as CoreError, Job, Writer};

use crate::error::{to_js, IntoJs, JsResult};
use crate::packed::{PackedChanges, PackedEvent, PackedRows};
use crate::types::{CursorRow, PruneReport, SweepReport};

/// A settled job's value, packed for the TypeScript layer, which knows what each job returns:
/// an event or null, a flag, a count, packed rows, a packed delta, a report or cursor rows, or
/// watcher keys.
pub type Value = Either7<
    Option<PackedEvent>,
    bool,
    i64,
    PackedRows,
    PackedChanges,
    Either3<SweepReport, PruneReport, Vec<CursorRow>>,
    Vec<String>,
>;
/// What a job gives back.
pub(crate) type Out = core::Result<Value>;

/// The writer thread of one native store, started by the first call of the Promise API.
#[derive(Default)]
pub(crate) struct Lane {
    pub(crate) writer: OnceLock<Writer<Out>>,
}

impl Lane {
    /// Queues `job`; `ERR_CLOSED` when the writer never started.
    pub(crate) fn push(&self, job: Job<Out>) -> JsResult<()> {
        match self.writer.get() {
            Some(w) => w.push(job).js(),
            None => Err(to_js(CoreError::Closed)),
        }
    }

    /// Waits until the jobs queued so far have run.
    pub(crate) fn settle(&self) {
        if let Some(w) = self.writer.get() {
            w.settle();
        }
    }

    /// Waits for the jobs queued so far, then takes no more: the thread ends.
    pub(crate) fn finish(&self) {
        if let Some(w) = self.writer.get() {
            w.settle();
            w.stop();
        }
    }
}
