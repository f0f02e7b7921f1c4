//! The model's rules for single values, from the SPEC's words: the kinds, keys and agents,
//! the one-line summary, and the notice text and its context key.

use serde_json::Value;

/// semantics.md#recording: "When more than an hour (on `clock`) has passed since this instance last pruned".
pub const HOUR: i64 = 60 * 60 * 1000;
/// semantics.md#api `occurredAt`: "clamped to [now - 24h, now]".
pub const DAY: i64 = 24 * HOUR;

pub const INVALID: &str = "ERR_INVALID_ARG";

pub const NOTIFY: [&str; 3] = ["human_direct_message", "goal_changed", "upstream_missing"];
pub const LOG_ONLY: [&str; 5] = [
    "run_completed",
    "run_failed",
    "compacted",
    "adopted",
    "created",
];

/// semantics.md#keys: `[a-z0-9][a-z0-9_-]{0,63}`.
pub fn is_agent_id(s: &str) -> bool {
    let ok_first = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ok_rest = |c: char| ok_first(c) || c == '_' || c == '-';
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if ok_first(c) => {}
        _ => return false,
    }
    let rest: Vec<char> = chars.collect();
    rest.len() <= 63 && rest.into_iter().all(ok_rest)
}

/// semantics.md#keys: the agent of an agent-qualified key `agent:<agentId>:<rest>`, else `None` (bare).
pub fn own_agent(key: &str) -> Option<&str> {
    let tail = key.strip_prefix("agent:")?;
    let colon = tail.find(':')?;
    let (agent, rest) = (&tail[..colon], &tail[colon + 1..]);
    (is_agent_id(agent) && !rest.is_empty()).then_some(agent)
}

/// semantics.md#keys: a qualified key whose rest starts with `subagent:` in any ASCII case.
pub fn is_nested(key: &str) -> bool {
    own_agent(key).is_some_and(|a| {
        key["agent:".len() + a.len() + 1..]
            .to_ascii_lowercase()
            .starts_with("subagent:")
    })
}

/// semantics.md#keys: a blank string (empty or only whitespace) is no key.
pub fn blank(key: &str) -> bool {
    key.trim().is_empty()
}

/// semantics.md#keys: explicit agent validated (and equal to a qualified key's own), else the key's, else `main`.
pub fn resolve_agent(key: &str, explicit: Option<&str>) -> Result<String, &'static str> {
    if blank(key) {
        return Err(INVALID);
    }
    match (explicit, own_agent(key)) {
        (Some(a), _) if !is_agent_id(a) => Err(INVALID),
        (Some(a), Some(own)) if a != own => Err(INVALID),
        (Some(a), _) => Ok(a.to_owned()),
        (None, Some(own)) => Ok(own.to_owned()),
        (None, None) => Ok("main".to_owned()),
    }
}

/// semantics.md#api `summary`: CRLF, CR, LF, U+2028, U+2029 each become one space; 240 scalars kept.
pub fn one_line(s: &str) -> String {
    let replaced = s
        .replace("\r\n", " ")
        .replace(['\r', '\n', '\u{2028}', '\u{2029}'], " ");
    replaced.chars().take(240).collect()
}

/// semantics.md#cursors text, with the key as a JSON string literal.
pub fn notice_text(target: &str, l: i64) -> String {
    let t = Value::String(target.to_owned()).to_string();
    format!(
        "Session {t} changed (other actor). Reconcile before acting: session_status sessionKey {t} changesSince {l}."
    )
}

/// semantics.md#cursors contextKey.
pub fn context_key(target: &str) -> String {
    let hex: String = target.bytes().map(|b| format!("{b:02x}")).collect();
    format!("session-state:{hex}")
}
