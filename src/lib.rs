//! The napi binding of session-awareness: a thin layer over `session-awareness-core`.
#![deny(clippy::all)]

mod convert;
mod error;
mod session_state;
mod types;
mod upstream;

use napi_derive::napi;

pub use session_state::SessionState;

/// `session-state:` followed by the lowercase hex of the target key's UTF-8 bytes: the
/// context key of the target's notices.
#[napi]
pub fn encode_notice_context_key(target_key: String) -> String {
    session_awareness_core::encode_notice_context_key(&target_key)
}

/// The target key of a notice context key, or null unless it is exactly what
/// `encodeNoticeContextKey` produces (prefix, non-empty even-length lowercase hex, valid
/// UTF-8; a leading U+FEFF is kept).
#[napi]
pub fn decode_notice_context_key(context_key: String) -> Option<String> {
    session_awareness_core::decode_notice_context_key(&context_key)
}
