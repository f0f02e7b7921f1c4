//! SQLite's own parts of the store: the connection and its pragmas, the transactions, the
//! schema and OpenClaw's generations, the same-process guard, the WAL checkpointer, the
//! inert-row SQL functions, the version cache with its `data_version` stamp, the readers of
//! raw rows (cursor rows, inspect, import) and the conversion of SQLite's errors. A second
//! store provides its own connection, transactions and schema, and may leave the rest out
//! (docs/architecture.md, "The storage seam").

#[cfg(feature = "test-hooks")]
pub mod checkpoint;
#[cfg(not(feature = "test-hooks"))]
pub(crate) mod checkpoint;
pub(crate) mod conn;
pub(crate) mod cursor_rows;
mod error;
#[cfg(feature = "test-hooks")]
pub mod exclusive;
#[cfg(not(feature = "test-hooks"))]
pub(crate) mod exclusive;
pub(crate) mod heads;
pub mod import;
pub(crate) mod inert;
pub mod inspect;
pub(crate) mod rows;
#[cfg(feature = "test-hooks")]
pub mod schema;
#[cfg(not(feature = "test-hooks"))]
pub(crate) mod schema;
#[cfg(feature = "test-hooks")]
pub mod tx;
#[cfg(not(feature = "test-hooks"))]
pub(crate) mod tx;
