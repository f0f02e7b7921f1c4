//! Upstream monitoring, the pure part: deciding which rows of an adopted session's
//! transcript are turns typed directly by a human.
//!
//! An adopted session lives in another tool's catalog: a local JSONL transcript (one JSON
//! object per line), or a session on a paired node whose transcript rows arrive as JSON
//! objects. Both carry the same rows, and the same rules classify them
//! ([`LineClass`] documents them):
//! - [`classify_value`] classifies one row already parsed (a remote item);
//! - [`classify_line`] classifies one line of a JSONL file;
//! - [`LineScanner`] classifies a JSONL file fed in chunks from a durable offset, resuming
//!   across chunks, holding back a partial last line, and classifying a line of any length
//!   in bounded memory;
//! - [`normalize_text`] and [`is_self_echo`] tell a human turn from an echo of a message the
//!   gateway itself sent into the session.
//!
//! Nothing here does I/O: reading files, keeping offsets and recording events belong to the
//! caller.

mod classify;
mod normalize;
mod scanner;
mod stream;
mod token;

pub use classify::{
    cap_text, classify_line, classify_value, LineClass, MalformedLine, HUMAN_TEXT_CAP,
};
pub use normalize::{is_self_echo, normalize_text};
pub use scanner::{LineScanner, ScannedLine, DEFAULT_LINE_CAP};

pub(crate) mod link_store;
#[cfg(feature = "test-hooks")]
pub mod links;
#[cfg(not(feature = "test-hooks"))]
pub(crate) mod links;
pub(crate) mod monitor;
mod rows;

pub use links::Link;
pub use monitor::{
    AdoptInput, RemoteCheck, DEFAULT_INTERVAL_MS, MISSING_AFTER_FAILURES, REMOTE_WINDOW,
    SCAN_CAP_BYTES,
};
pub use rows::LinkRow;
