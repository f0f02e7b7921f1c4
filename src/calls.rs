//! The arguments of the native calls, checked and converted once: each synchronous method and
//! its Promise twin (`async_api.rs`) take them through the same function, so a call's
//! argument rules are written in one place.

use std::collections::HashMap;

use napi_derive::napi;
use serde_json::Value;
use session_awareness_core::upstream::{AdoptInput, RemoteCheck};
use session_awareness_core::{Error as CoreError, Provenance, RecordInput, WatchOptions};

use crate::error::{IntoJs, JsResult};
use crate::packed::RECORD_STRINGS;
use crate::versions::decode_into;

/// The record input of `record` and `recordAsync`, checked by the TypeScript layer
/// (`recordArgs` in `lib/call-args.ts`) and packed there: its string fields as one string (per
/// field two UTF-16 units, high 16 bits then low, 0 when absent, else the length + 1; then the
/// fields present, back to back; each lone surrogate reads as U+FFFD, as in every other
/// call), then its number, flag and lists. Reading one string is cheaper through Node-API
/// than ten strings or the fields of an object (`BENCHMARKS.md`).
pub(crate) fn record_input(
    text: &[u16],
    occurred_at: Option<f64>,
    only_if_watched: bool,
    watchers: Option<Vec<String>>,
    watcher_scopes: Option<HashMap<String, String>>,
) -> JsResult<RecordInput> {
    let bad = || CoreError::invalid("record: not a packed record input");
    let n = 2 * RECORD_STRINGS as usize;
    let head = text.get(..n).ok_or_else(bad).js()?;
    let mut at = n;
    let mut fields: [Option<String>; RECORD_STRINGS as usize] = Default::default();
    for (i, field) in fields.iter_mut().enumerate() {
        let tag = (usize::from(head[2 * i]) << 16) | usize::from(head[2 * i + 1]);
        if tag == 0 {
            continue;
        }
        let units = text.get(at..at + tag - 1).ok_or_else(bad).js()?;
        at += tag - 1;
        let mut s = String::with_capacity(units.len());
        decode_into(&mut s, units);
        *field = Some(s);
    }
    if at != text.len() {
        return Err(bad()).js();
    }
    let [session_key, agent_id, session_id, kind, actor_type, actor_id, run_id, summary, payload_json, dedupe_key] =
        fields;
    let payload = payload_json
        .map(|j| {
            serde_json::from_str(&j)
                .map_err(|e| CoreError::invalid(format!("payload is not JSON: {e}")))
        })
        .transpose()
        .js()?;
    Ok(RecordInput {
        session_key: session_key.ok_or_else(bad).js()?,
        agent_id,
        session_id,
        kind: kind.ok_or_else(bad).js()?,
        actor_type: actor_type.ok_or_else(bad).js()?,
        actor_id,
        run_id,
        summary: summary.ok_or_else(bad).js()?,
        payload,
        occurred_at,
        dedupe_key,
        watchers: watchers.unwrap_or_default(),
        only_if_watched,
        watcher_scopes: watcher_scopes.unwrap_or_default(),
    })
}

/// The options of `watch` and `watchAsync`: `provenance` default `explicit`, `refresh`
/// default true.
pub(crate) fn watch_options(
    provenance: Option<String>,
    scope: Option<String>,
    refresh: Option<bool>,
) -> JsResult<WatchOptions> {
    let p = provenance.map_or(Ok(Provenance::Explicit), |p| Provenance::parse(&p));
    Ok(WatchOptions {
        provenance: p.js()?,
        scope,
        refresh: refresh.unwrap_or(true),
    })
}

/// Where an adopted session lives upstream.
#[napi(object, object_to_js = false)]
pub struct UpstreamLink {
    /// The catalog it came from, such as `claude`.
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

/// The adopt input of `adopt` and `adoptAsync`.
pub(crate) fn adopt_input(link: UpstreamLink) -> AdoptInput {
    AdoptInput {
        source: link.source,
        transcript_path: link.transcript_path,
        remote_id: link.remote_id,
        agent_id: link.agent_id,
        host_id: link.host_id,
    }
}

/// The probe result of `checkUpstream` and `checkUpstreamAsync`: `found` is `true`, `false`
/// or `unknown`; with `true`, `items_json` is the JSON array of the newest transcript rows.
pub(crate) fn remote_check(found: &str, items_json: Option<String>) -> JsResult<RemoteCheck> {
    match found {
        "false" => Ok(RemoteCheck::Missing),
        "unknown" => Ok(RemoteCheck::Unknown),
        "true" => {
            let json = items_json
                .ok_or_else(|| CoreError::invalid("items are required"))
                .js()?;
            let items: Vec<Value> = serde_json::from_str(&json)
                .map_err(|e| CoreError::invalid(format!("items are not a JSON array: {e}")))
                .js()?;
            Ok(RemoteCheck::Found(items))
        }
        _ => Err(CoreError::invalid("found must be true, false or 'unknown'")).js(),
    }
}
