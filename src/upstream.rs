//! Upstream monitoring (§11) on `SessionState`: adopted sessions, the gateway's own
//! messages, remote probe results and the background transcript scan.

use napi::bindgen_prelude::{Env, JsObjectValue, JsValue, Object, Unknown};
use napi::{Result, ValueType};
use napi_derive::napi;
use session_awareness_core::upstream::monitor::DEFAULT_INTERVAL_MS;
use session_awareness_core::upstream::{AdoptInput, RemoteCheck};
use session_awareness_core::{Error as CoreError, StateEvent as CoreEvent};

use crate::convert;
use crate::error::{to_js, Code, IntoJs};
use crate::session_state::SessionState;
use crate::types::StateEvent;

/// Where an adopted session lives upstream.
#[napi(object, object_to_js = false)]
// Only its type is used: `adopt` reads the object member by member (convert.rs).
#[allow(dead_code)]
pub struct UpstreamLink {
    /// The catalog it came from, such as `claude`; used in summaries (`human message via claude`).
    pub source: String,
    /// A local JSONL transcript, scanned by the upstream monitor.
    pub transcript_path: Option<String>,
    /// A session on a paired node, checked by the host and reported with `checkUpstream`.
    pub remote_id: Option<String>,
    /// The agent of the session; defaults to the key's own, else `main`.
    pub agent_id: Option<String>,
    /// Where the upstream session lives, in OpenClaw's terms: `gateway:local` (the default with
    /// `transcriptPath`) or `node:<id>` for a paired node (`remote` when not given).
    pub host_id: Option<String>,
}

/// Options of `startUpstreamMonitor`.
#[napi(object, object_to_js = false)]
// Only its type is used: the method reads the object member by member (convert.rs).
#[allow(dead_code)]
pub struct UpstreamMonitorOptions {
    /// How often watched adopted sessions are scanned. Default 5000; a positive integer up to 2^31 - 1.
    pub interval_ms: Option<f64>,
}

fn parse_link(link: Unknown<'_>) -> session_awareness_core::Result<AdoptInput> {
    let obj = convert::options(Some(link), "link")?
        .ok_or_else(|| CoreError::invalid("link must be an object"))?;
    Ok(AdoptInput {
        source: convert::req_string(&obj, "source")?,
        transcript_path: convert::opt_string(&obj, "transcriptPath")?,
        remote_id: convert::opt_string(&obj, "remoteId")?,
        agent_id: convert::opt_string(&obj, "agentId")?,
        host_id: convert::opt_string(&obj, "hostId")?,
    })
}

fn parse_check(result: Unknown<'_>) -> session_awareness_core::Result<RemoteCheck> {
    let bad = || {
        CoreError::invalid(
            "result must be { found: true, items } | { found: false } | { found: 'unknown' }",
        )
    };
    if result.get_type().map_err(|_| bad())? != ValueType::Object {
        return Err(bad());
    }
    #[allow(unsafe_code)]
    // SAFETY: the type was checked just above.
    let obj = unsafe { result.cast::<Object<'_>>() }.map_err(|_| bad())?;
    let found: Option<Unknown<'_>> = obj.get("found").map_err(|_| bad())?;
    let found = found.ok_or_else(bad)?;
    match found.get_type().map_err(|_| bad())? {
        ValueType::Boolean => {
            #[allow(unsafe_code)]
            // SAFETY: the type was checked just above.
            let yes = unsafe { found.cast::<bool>() }.map_err(|_| bad())?;
            if !yes {
                return Ok(RemoteCheck::Missing);
            }
            let items: Option<Unknown<'_>> = obj.get("items").map_err(|_| bad())?;
            let items = items.ok_or_else(bad)?;
            #[allow(unsafe_code)]
            // SAFETY: `is_array` is checked on a value whose type is object.
            let arr = (items.get_type().map_err(|_| bad())? == ValueType::Object)
                .then(|| unsafe { items.cast::<Object<'_>>() }.ok())
                .flatten()
                .filter(|a| a.is_array().unwrap_or(false))
                .ok_or_else(bad)?;
            let len = arr.get_array_length().map_err(|_| bad())?;
            let mut out = Vec::with_capacity(len as usize);
            for i in 0..len {
                let item: Unknown<'_> = arr.get_element(i).map_err(|_| bad())?;
                out.push(convert::payload(item, 0)?);
            }
            Ok(RemoteCheck::Found(out))
        }
        ValueType::String => {
            #[allow(unsafe_code)]
            // SAFETY: the type was checked just above.
            let s = unsafe { found.cast::<String>() }.map_err(|_| bad())?;
            if s == "unknown" {
                Ok(RemoteCheck::Unknown)
            } else {
                Err(bad())
            }
        }
        _ => Err(bad()),
    }
}

impl SessionState {
    /// Best-effort like `record`: a failure is null plus one `onError` call, or a throw with `strict`.
    fn best_effort(
        &self,
        env: &Env,
        r: session_awareness_core::Result<Option<CoreEvent>>,
    ) -> Result<Option<StateEvent>, Code> {
        match r {
            Ok(e) => Ok(e.map(Into::into)),
            Err(e) if self.strict => Err(to_js(e)),
            Err(e) => {
                let js = to_js(e);
                self.reporter
                    .report_sync(env, js.status.as_ref(), js.reason.clone());
                Ok(None)
            }
        }
    }
}

#[napi]
impl SessionState {
    /// Adopts a session from another tool's catalog (§11): records `adopted` (log only) and
    /// stores its upstream link, replacing any earlier one. A local transcript is scanned from
    /// its current end. Best-effort like `record`: null plus one `onError` call on failure.
    #[napi(ts_args_type = "sessionKey: string, link: UpstreamLink")]
    pub fn adopt(
        &self,
        env: Env,
        session_key: Unknown<'_>,
        link: Unknown<'_>,
    ) -> Result<Option<StateEvent>, Code> {
        // Argument errors are best-effort failures too: null and onError, never a throw.
        let r = self.now(&env).and_then(|now| {
            let key = convert::string(session_key, "sessionKey")?;
            self.store.adopt(&key, parse_link(link)?, now)
        });
        self.best_effort(&env, r)
    }

    /// Tells the monitor about a user message the gateway itself sent into an adopted
    /// session, so its echo upstream is not taken for a human. The last 10 per session are
    /// kept (across restarts); compared after trimming, collapsing whitespace and Unicode NFC.
    /// Does nothing for a session that is not adopted.
    #[napi(ts_args_type = "sessionKey: string, text: string")]
    pub fn note_own_user_message(
        &self,
        env: Env,
        session_key: Unknown<'_>,
        text: Unknown<'_>,
    ) -> Result<(), Code> {
        let session_key = convert::string(session_key, "sessionKey").js()?;
        let text = convert::string(text, "text").js()?;
        let now = self.now(&env).js()?;
        self.store
            .note_own_user_message(&session_key, &text, now)
            .js()
    }

    /// The result of the host's probe of a remote upstream. `found: true` with the newest
    /// transcript rows (the last 50 are classified; the first check sets the baseline);
    /// `found: false` is a failed check (the third in a row records `upstream_missing` and
    /// drops the link); `found: 'unknown'` changes nothing. Returns the event recorded, if any.
    #[napi(
        ts_args_type = "sessionKey: string, result: { found: true; items: Array<Record<string, unknown>> } | { found: false } | { found: 'unknown' }"
    )]
    pub fn check_upstream(
        &self,
        env: Env,
        session_key: Unknown<'_>,
        result: Unknown<'_>,
    ) -> Result<Option<StateEvent>, Code> {
        let r = self.now(&env).and_then(|now| {
            let key = convert::string(session_key, "sessionKey")?;
            self.store.check_upstream(&key, parse_check(result)?, now)
        });
        self.best_effort(&env, r)
    }

    /// Scans every watched adopted session's local transcript once, now; returns the events
    /// recorded. The monitor does the same on its interval.
    #[napi]
    pub fn scan_upstream(&self, env: Env) -> Result<Vec<StateEvent>, Code> {
        let now = self.now(&env).js()?;
        Ok(self
            .store
            .scan_upstream(now)
            .js()?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    /// Starts scanning watched adopted sessions' local transcripts in the background every
    /// `intervalMs` (default 5000), restarting the scan if it runs. It never keeps the process
    /// alive; failures go to `onError`.
    #[napi(ts_args_type = "options?: UpstreamMonitorOptions | undefined | null")]
    pub fn start_upstream_monitor(&self, options: Option<Unknown<'_>>) -> Result<(), Code> {
        let interval_ms = match convert::options(options, "options").js()? {
            Some(o) => convert::opt_number(&o, "intervalMs").js()?,
            None => None,
        };
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
