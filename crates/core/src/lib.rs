//! The pure-Rust core of `session-awareness`: session state awareness for agent gateways.
//!
//! A durable signal log of typed events per session (with a state version per session),
//! watch cursors that produce one coalesced stale-state notice per (watcher, target), and
//! reconciliation through `changes_since`. No Node.js here: the napi binding is a thin layer
//! over [`Store`].
//!
//! ```
//! use session_awareness_core::{Hooks, Options, Provenance, RecordInput, Store};
//!
//! let store = Store::open(":memory:", Options::default(), Hooks::default())?;
//! let now = 1_700_000_000_000;
//! assert!(store.watch("agent:main:main", "agent:main:subagent:c", Provenance::Explicit, now)?);
//! let event = store
//!     .record(
//!         RecordInput {
//!             session_key: "agent:main:subagent:c".into(),
//!             kind: "human_direct_message".into(),
//!             actor_type: "human".into(),
//!             summary: "human message via telegram".into(),
//!             ..Default::default()
//!         },
//!         now,
//!     )?
//!     .expect("recorded");
//! let notices = store.drain("agent:main:main", now)?;
//! assert_eq!(notices.len(), 1);
//! assert_eq!(notices[0].changes_since, 0);
//! let delta = store.changes_since("agent:main:subagent:c", 0.0, None, None)?;
//! assert_eq!(delta.events[0].sequence(), event.sequence);
//! # Ok::<(), session_awareness_core::Error>(())
//! ```
#![warn(missing_docs)]

// The store's parts, each with one job (docs/architecture.md lists them). The public API is
// what this file re-exports, plus the `import`, `inspect`, `keys` and `upstream` modules.
// With the `test-hooks` feature (the workspace's tests and benches turn it on) the modules
// that benchmarks and integration tests open directly are public too.
pub(crate) mod delivery;
pub(crate) mod engine;
mod error;
pub(crate) mod event;
pub(crate) mod follow;
pub(crate) mod group;
pub(crate) mod hooks;
/// Importing a SQLite file (OpenClaw's or a store's) into a PostgreSQL store.
pub use postgres::import as pg_import;
/// Read-only inspection of a PostgreSQL store (the CLI's `inspect` and `events` on a URL).
pub use postgres::inspect as pg_inspect;
pub use sqlite::import;
pub use sqlite::inspect;
pub mod keys;
pub(crate) mod lease;
pub(crate) mod log;
pub(crate) mod metrics;
pub(crate) mod options;
#[cfg(any(test, feature = "test-hooks"))]
pub(crate) mod pause;
pub(crate) mod postgres;
pub(crate) mod prune;
pub(crate) mod queue;
pub(crate) mod read_event;
pub(crate) mod record;
pub(crate) mod rows;
pub(crate) mod rules;
pub(crate) mod runtime;
pub(crate) mod shapes;
pub(crate) mod sqlite;
pub(crate) mod store;
pub(crate) mod tail;
pub mod upstream;
pub(crate) mod wake;
pub(crate) mod writer;

#[cfg(feature = "test-hooks")]
pub use sqlite::checkpoint;
#[cfg(feature = "test-hooks")]
pub mod cursors;
#[cfg(not(feature = "test-hooks"))]
pub(crate) mod cursors;
#[cfg(feature = "test-hooks")]
pub use sqlite::exclusive;
#[cfg(feature = "test-hooks")]
pub use sqlite::schema;
#[cfg(feature = "test-hooks")]
pub use sqlite::tx;

pub use cursors::{Cursor, Provenance, WatchOptions};
pub use error::{with_sources, DbFailure, Error, Result, OPEN_CODES};
pub use event::{ActorType, EventKind, NotifyKinds, RecordInput, Scopes, StateEvent};
pub use follow::FollowSignal;
pub use hooks::{mark_caller_thread, system_now, Clock, ErrorSink, Hooks, NoticeSignal, Task};
pub use keys::{decode_notice_context_key, encode_notice_context_key, MAX_SCOPE_BYTES};
pub use log::{Changes, ChangesRef, EventRef, EventRefs};
pub use metrics::{Hist, HistogramTotals, MetricsSnapshot, FAILURE_CODES, HISTOGRAMS, SAMPLE_RING};
pub use options::{
    HostName, Options, SchemaName, MAX_HOST_NAME_BYTES, MAX_READ_CACHE_BYTES, MAX_RETENTION_MS,
    MAX_SCHEMA_BYTES, MAX_SYNC_INTERVAL_MS, MAX_WAKE_COALESCE_MS,
};
#[cfg(any(test, feature = "test-hooks"))]
pub use pause::Pause;
pub use prune::PruneReport;
pub use prune::SweepReport;
pub use queue::{Notice, QueueSignal, QueuedNotice};
pub use read_event::{ChangeEvent, ForeignEvent, ForeignFields, ForeignPayload};
pub use shapes::CursorRow;
pub use store::{Store, VersionRef};
pub use tail::DEFAULT_READ_CACHE_BYTES;
pub use wake::{WakeRequest, WakeSink};
pub use writer::{Done, Gate, Job, Sink, Writer};
