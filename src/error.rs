//! The one place where core errors become JavaScript errors: the stable code travels as the
//! napi status, so JS sees it as `err.code`.

use napi::Status;
use napi_derive::napi;
use session_awareness_core::{Error as CoreError, FAILURE_CODES, OPEN_CODES};

/// The `wake` callback threw; reported through `onError`.
pub const ERR_WAKE_CALLBACK: &str = "ERR_WAKE_CALLBACK";
/// The import's `onProgress` callback threw; reported once the import has finished.
pub const ERR_PROGRESS_CALLBACK: &str = "ERR_PROGRESS_CALLBACK";
/// The codes the binding reports itself, besides the core's.
pub const BINDING_CODES: [&str; 2] = [ERR_WAKE_CALLBACK, ERR_PROGRESS_CALLBACK];

/// Every code the addon can give: the core's (`Error::code`: a record's, then those of an
/// open only), then the binding's own. A test checks the TypeScript `ErrorCode` union against
/// them.
#[napi]
pub fn native_error_codes() -> Vec<String> {
    FAILURE_CODES
        .iter()
        .chain(OPEN_CODES.iter())
        .chain(BINDING_CODES.iter())
        .map(|c| (*c).to_owned())
        .collect()
}

/// A stable error code (`ERR_INVALID_ARG`, `ERR_CLOSED`, `ERR_DB`, …), shown to JS as `code`.
#[derive(Debug, Clone)]
pub struct Code(pub String);

impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<Status> for Code {
    // napi's own conversion failures (a wrong argument type) are argument errors to the host.
    fn from(status: Status) -> Self {
        match status {
            Status::InvalidArg
            | Status::ObjectExpected
            | Status::StringExpected
            | Status::NumberExpected
            | Status::BooleanExpected
            | Status::ArrayExpected
            | Status::FunctionExpected
            | Status::BigintExpected => Code("ERR_INVALID_ARG".into()),
            other => Code(other.as_ref().to_owned()),
        }
    }
}

/// A JS error carrying a stable code.
pub type JsError = napi::Error<Code>;
/// The result type of every exported method.
pub type JsResult<T> = std::result::Result<T, JsError>;

/// Builds a coded JS error.
pub fn coded(code: &str, message: impl Into<String>) -> JsError {
    napi::Error::new(Code(code.to_owned()), message.into())
}

/// Maps a core error, keeping its source chain in the message.
pub fn to_js(e: CoreError) -> JsError {
    coded(e.code(), session_awareness_core::with_sources(&e))
}

/// Maps an error raised by napi itself (a value of the wrong type).
pub fn from_napi(e: napi::Error) -> JsError {
    napi::Error::new(Code::from(e.status), e.reason.clone())
}

/// Extension for `?` on core results.
pub trait IntoJs<T> {
    /// Maps the error with [`to_js`].
    fn js(self) -> JsResult<T>;
}

impl<T> IntoJs<T> for session_awareness_core::Result<T> {
    fn js(self) -> JsResult<T> {
        self.map_err(to_js)
    }
}

impl<T> IntoJs<T> for napi::Result<T> {
    fn js(self) -> JsResult<T> {
        self.map_err(from_napi)
    }
}
