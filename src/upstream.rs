//! Upstream monitoring (semantics.md#upstream) on the native store: adopted sessions, the gateway's own
//! messages, remote probe results and the background transcript scan.

use napi::bindgen_prelude::Env;
use napi::Result;
use napi_derive::napi;
use session_awareness_core::upstream::DEFAULT_INTERVAL_MS;
use session_awareness_core::Error as CoreError;

use crate::calls::{adopt_input, remote_check, UpstreamLink};
use crate::error::{to_js, Code, IntoJs};
use crate::packed::{self, PackedEvent, PackedRows};
use crate::session_state::NativeSessionState;

#[napi]
impl NativeSessionState {
    /// Adopts a session (semantics.md#upstream): records `adopted` (log only) and stores its upstream link.
    /// Returns the event packed; throws every failure (the TypeScript layer reports it).
    #[napi(ts_return_type = "string | PackedRows | null")]
    pub fn adopt(
        &self,
        env: Env,
        session_key: String,
        link: UpstreamLink,
    ) -> Result<Option<PackedEvent>, Code> {
        let now = self.now(&env).js()?;
        let event = self
            .store
            .adopt(&session_key, adopt_input(link), now)
            .js()?;
        Ok(event.as_ref().map(packed::event))
    }

    /// Tells the monitor about a user message the gateway itself sent into an adopted session.
    #[napi]
    pub fn note_own_user_message(
        &self,
        env: Env,
        session_key: String,
        text: String,
    ) -> Result<(), Code> {
        let now = self.now(&env).js()?;
        self.store
            .note_own_user_message(&session_key, &text, now)
            .js()
    }

    /// The result of the host's probe of a remote upstream: `found` is `true`, `false` or
    /// `unknown`; with `true`, `itemsJson` is the JSON array of the newest transcript rows.
    /// Returns the event recorded, packed; throws every failure.
    #[napi(ts_return_type = "string | PackedRows | null")]
    pub fn check_upstream(
        &self,
        env: Env,
        session_key: String,
        found: String,
        items_json: Option<String>,
    ) -> Result<Option<PackedEvent>, Code> {
        let now = self.now(&env).js()?;
        let check = remote_check(&found, items_json)?;
        let event = self.store.check_upstream(&session_key, check, now).js()?;
        Ok(event.as_ref().map(packed::event))
    }

    /// Scans every watched adopted session's local transcript once, now; returns the events
    /// recorded, packed.
    #[napi]
    pub fn scan_upstream(&self, env: Env) -> Result<PackedRows, Code> {
        let now = self.now(&env).js()?;
        Ok(packed::stored_events(&self.store.scan_upstream(now).js()?))
    }

    /// Starts the background scan every `intervalMs` (default 5000; a positive integer up to
    /// 2^31 - 1).
    #[napi]
    pub fn start_upstream_monitor(&self, interval_ms: Option<f64>) -> Result<(), Code> {
        let interval = match interval_ms {
            None => DEFAULT_INTERVAL_MS,
            Some(v)
                if v.is_finite() && v.fract() == 0.0 && v >= 1.0 && v <= f64::from(i32::MAX) =>
            {
                v as u32
            }
            Some(_) => {
                return Err(to_js(CoreError::invalid(
                    "intervalMs must be a positive integer",
                )))
            }
        };
        self.store.start_upstream_monitor(interval).js()
    }

    /// Stops the background scan. Idempotent.
    #[napi]
    pub fn stop_upstream_monitor(&self) {
        self.store.stop_upstream_monitor();
    }
}
