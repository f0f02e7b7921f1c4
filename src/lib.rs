//! The napi binding of session-awareness: a thin, typed layer over `session-awareness-core`.
//! The public API is the TypeScript layer in `lib/`, which holds the native store.
#![deny(clippy::all)]

mod async_api;
mod calls;
mod entered;
mod error;
mod follow;
mod import;
mod inspect;
mod js_signal;
mod links;
mod metrics;
mod numbers;
mod packed;
mod session_state;
mod signal;
mod types;
mod upstream;
mod versions;
mod writer;

use napi_derive::napi;

pub use async_api::open_native_session_state;
pub use error::native_error_codes;
pub use import::import_state_database;
pub use inspect::{inspect_database, read_events};
pub use metrics::metrics_layout;
pub use packed::packed_layout;
pub use session_state::NativeSessionState;
pub use types::row_shapes;

/// `session-state:` followed by the lowercase hex of the target key's UTF-8 bytes: the
/// context key of the target's notices.
#[napi]
pub fn encode_notice_context_key(target_key: String) -> String {
    session_awareness_core::encode_notice_context_key(&target_key)
}

/// The target key of a notice context key, or null unless it is exactly what
/// `encodeNoticeContextKey` produces.
#[napi]
pub fn decode_notice_context_key(context_key: String) -> Option<String> {
    session_awareness_core::decode_notice_context_key(&context_key)
}
