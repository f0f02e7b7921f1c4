//! SQLite's own parts of the store: the connection and its pragmas, the transactions, the
//! schema and OpenClaw's generations, the same-process guard, the WAL checkpointer, the
//! inert-row SQL functions, the version cache with its `data_version` stamp, the readers of
//! raw rows (cursor rows, inspect, import), the conversion of SQLite's errors, the store's
//! [`crate::rows::Rows`] (`rows.rs`, `rows_cursors.rs`) and its reads of the log (`log.rs`,
//! `read_event.rs`). A second store provides its own connection, transactions, schema, `Rows`
//! and reads, and may leave the rest out (docs/architecture.md, "The storage seam").

pub(crate) mod changes;
#[cfg(feature = "test-hooks")]
pub mod checkpoint;
#[cfg(not(feature = "test-hooks"))]
pub(crate) mod checkpoint;
pub(crate) mod conn;
pub(crate) mod cursor_rows;
pub(crate) mod engine;
mod error;
#[cfg(feature = "test-hooks")]
pub mod exclusive;
#[cfg(not(feature = "test-hooks"))]
pub(crate) mod exclusive;
pub(crate) mod heads;
pub mod import;
pub(crate) mod inert;
pub mod inspect;
pub(crate) mod lease;
pub(crate) mod link_rows;
pub(crate) mod links;
pub(crate) mod log;
pub(crate) mod maintenance;
pub(crate) mod poll;
pub(crate) mod prune;
pub(crate) mod read_cache;
pub(crate) mod read_event;
pub(crate) mod recorder;
pub(crate) mod reread;
pub(crate) mod rows;
mod rows_cursors;
#[cfg(feature = "test-hooks")]
pub mod schema;
#[cfg(not(feature = "test-hooks"))]
pub(crate) mod schema;
pub(crate) mod sync;
#[cfg(feature = "test-hooks")]
pub mod tx;
#[cfg(not(feature = "test-hooks"))]
pub(crate) mod tx;
