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
//! assert_eq!(delta.events[0].sequence, event.sequence);
//! # Ok::<(), session_awareness_core::Error>(())
//! ```
#![warn(missing_docs)]

pub mod checkpoint;
pub mod cursors;
pub mod error;
pub mod event;
pub mod exclusive;
pub mod import;
pub mod inert;
pub mod inspect;
pub mod keys;
pub mod log;
pub mod prune;
pub mod queue;
pub mod runtime;
pub mod schema;
pub mod store;
pub mod sync;
pub mod tx;
pub mod upstream;
pub mod wake;

pub use cursors::{Cursor, Provenance};
pub use error::{Error, Result};
pub use event::{ActorType, EventKind, RecordInput, StateEvent};
pub use keys::{decode_notice_context_key, encode_notice_context_key};
pub use log::Changes;
pub use prune::PruneReport;
pub use queue::Notice;
pub use store::{ErrorSink, Hooks, Options, Store, SweepReport, VersionRef};
pub use wake::{WakeRequest, WakeSink};
