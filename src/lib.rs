//! The napi binding of session-awareness: a thin layer over `session-awareness-core`.
#![deny(clippy::all)]

mod convert;
mod error;
mod import;
mod inspect;
mod js_out;
mod session_state;
mod types;
mod upstream;

use napi::bindgen_prelude::{JsObjectValue, Unknown};
use napi_derive::napi;

use crate::error::{Code, IntoJs};

pub use import::import_state_database;
pub use inspect::{inspect_database, read_events};

/// Installs the JS side of `SessionState.prototype.record` and `drain` once the classes are
/// registered.
#[napi(module_exports)]
pub fn install_js(exports: napi::bindgen_prelude::Object<'_>, env: napi::Env) -> napi::Result<()> {
    let class: Unknown<'_> = exports.get_named_property("SessionState")?;
    let install: napi::bindgen_prelude::Function<'_, Unknown<'_>, ()> =
        env.run_script(js_out::INSTALL_JS)?;
    install.call(class)
}
pub use session_state::SessionState;

/// `session-state:` followed by the lowercase hex of the target key's UTF-8 bytes: the
/// context key of the target's notices.
#[napi(ts_args_type = "targetKey: string")]
pub fn encode_notice_context_key(target_key: Unknown<'_>) -> napi::Result<String, Code> {
    let target_key = convert::string(target_key, "targetKey").js()?;
    Ok(session_awareness_core::encode_notice_context_key(
        &target_key,
    ))
}

/// The target key of a notice context key, or null unless it is exactly what
/// `encodeNoticeContextKey` produces (prefix, non-empty even-length lowercase hex, valid
/// UTF-8; a leading U+FEFF is kept).
#[napi(ts_args_type = "contextKey: string")]
pub fn decode_notice_context_key(context_key: Unknown<'_>) -> napi::Result<Option<String>, Code> {
    let context_key = convert::string(context_key, "contextKey").js()?;
    Ok(session_awareness_core::decode_notice_context_key(
        &context_key,
    ))
}
