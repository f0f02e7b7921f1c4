//! Event kinds, actors, the stored event, and the validation of a record input (semantics.md#api, semantics.md#recording-validation).

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::keys;

/// How long before `now` an `occurredAt` may lie; earlier values are clamped to it.
pub const OCCURRED_AT_WINDOW_MS: i64 = 24 * 60 * 60 * 1000;
/// Unicode scalar values kept of a summary.
pub const SUMMARY_MAX_CHARS: usize = 240;
/// The largest payload, as compact JSON in UTF-8 bytes.
pub const PAYLOAD_MAX_BYTES: usize = 4096;

/// The kind of a state event (semantics.md#api).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A human sent a turn straight into the session (notifies).
    HumanDirectMessage,
    /// The session's goal was created, updated or cleared (notifies).
    GoalChanged,
    /// An adopted session's upstream disappeared (notifies).
    UpstreamMissing,
    /// A child session was spawned: seeds the producer-named watchers' cursors.
    ChildSpawned,
    /// A run ended successfully (log only).
    RunCompleted,
    /// A run failed, timed out or was cancelled (log only).
    RunFailed,
    /// The session's history was compacted (log only).
    Compacted,
    /// The session was adopted from another tool's catalog (log only).
    Adopted,
    /// The session was created (log only).
    Created,
}

impl EventKind {
    /// Every kind, in the order of semantics.md#api.
    pub const ALL: [EventKind; 9] = [
        EventKind::HumanDirectMessage,
        EventKind::GoalChanged,
        EventKind::UpstreamMissing,
        EventKind::ChildSpawned,
        EventKind::RunCompleted,
        EventKind::RunFailed,
        EventKind::Compacted,
        EventKind::Adopted,
        EventKind::Created,
    ];

    /// The wire name (`human_direct_message`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::HumanDirectMessage => "human_direct_message",
            EventKind::GoalChanged => "goal_changed",
            EventKind::UpstreamMissing => "upstream_missing",
            EventKind::ChildSpawned => "child_spawned",
            EventKind::RunCompleted => "run_completed",
            EventKind::RunFailed => "run_failed",
            EventKind::Compacted => "compacted",
            EventKind::Adopted => "adopted",
            EventKind::Created => "created",
        }
    }

    /// Parses a wire name; anything else is `ERR_INVALID_ARG`.
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| Error::invalid(format!("unknown kind {}", keys::json_string(s))))
    }

    /// True for the kinds that notify watchers by default ([`NotifyKinds::default`]).
    pub fn notifies(self) -> bool {
        matches!(
            self,
            EventKind::HumanDirectMessage | EventKind::GoalChanged | EventKind::UpstreamMissing
        )
    }
}

/// Who caused an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActorType {
    /// A person.
    Human,
    /// An agent session.
    Agent,
    /// The gateway itself.
    System,
}

impl ActorType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ActorType::Human => "human",
            ActorType::Agent => "agent",
            ActorType::System => "system",
        }
    }

    /// Parses a wire name; anything else is `ERR_INVALID_ARG`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "human" => Ok(ActorType::Human),
            "agent" => Ok(ActorType::Agent),
            "system" => Ok(ActorType::System),
            _ => Err(Error::invalid(format!(
                "unknown actorType {}",
                keys::json_string(s)
            ))),
        }
    }
}

/// A stored event, as returned by `record` and `changesSince`.
#[derive(Debug, Clone, PartialEq)]
pub struct StateEvent {
    /// The global sequence.
    pub sequence: i64,
    /// The session the event belongs to.
    pub session_key: String,
    /// The agent the event belongs to.
    pub agent_id: String,
    /// The kind.
    pub kind: EventKind,
    /// Who caused it.
    pub actor_type: ActorType,
    /// The causing session or person, if known.
    pub actor_id: Option<String>,
    /// The run that produced it, if any.
    pub run_id: Option<String>,
    /// The session id (transcript) of the session, if known.
    pub session_id: Option<String>,
    /// When it happened (epoch ms, clamped).
    pub occurred_at: i64,
    /// One line of at most 240 characters.
    pub summary: String,
    /// Compact JSON metadata, if any.
    pub payload_json: Option<String>,
}

/// The scope a record gives each watcher it knows of (`watcherScopes`), by watcher key.
pub type Scopes = std::collections::HashMap<String, String>;

/// The event kinds that notify watchers (semantics.md#api-options, `notifyKinds`): a small
/// set, by default the three notify kinds of semantics.md#api-shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotifyKinds(u16);

impl NotifyKinds {
    /// The set of `kinds` (repeats allowed). `child_spawned` is a seed kind and is refused
    /// with `ERR_INVALID_ARG`.
    pub fn of(kinds: &[EventKind]) -> Result<Self> {
        let mut bits = 0;
        for &k in kinds {
            if k == EventKind::ChildSpawned {
                return Err(Error::invalid(
                    "notifyKinds cannot hold child_spawned: it seeds cursors",
                ));
            }
            bits |= Self::bit(k);
        }
        Ok(NotifyKinds(bits))
    }

    fn bit(k: EventKind) -> u16 {
        1 << EventKind::ALL.iter().position(|&a| a == k).unwrap_or(0)
    }

    /// True when `kind` notifies.
    pub fn contains(self, kind: EventKind) -> bool {
        self.0 & Self::bit(kind) != 0
    }
}

impl Default for NotifyKinds {
    fn default() -> Self {
        let kinds = EventKind::ALL.into_iter().filter(|k| k.notifies());
        NotifyKinds(kinds.map(Self::bit).fold(0, |a, b| a | b))
    }
}

/// What a caller asks `record` to store (semantics.md#api), before validation.
#[derive(Debug, Clone, Default)]
pub struct RecordInput {
    /// The session the event belongs to (non-empty).
    pub session_key: String,
    /// Defaults to the key's agent, else `main`.
    pub agent_id: Option<String>,
    /// The session id, if known.
    pub session_id: Option<String>,
    /// The wire name of the kind.
    pub kind: String,
    /// The wire name of the actor type.
    pub actor_type: String,
    /// The causing session; a watcher equal to it is not notified (self-suppression).
    pub actor_id: Option<String>,
    /// The run, if any.
    pub run_id: Option<String>,
    /// Normalised to one line of at most 240 characters.
    pub summary: String,
    /// A JSON object of at most 4096 bytes as compact JSON.
    pub payload: Option<Value>,
    /// Epoch ms; floored, clamped to `[now - 24h, now]`; `None` or non-finite is `now`.
    pub occurred_at: Option<f64>,
    /// A second record with the same key returns the first row and changes nothing.
    pub dedupe_key: Option<String>,
    /// Producer-named watchers.
    pub watchers: Vec<String>,
    /// Write nothing unless someone watches the session.
    pub only_if_watched: bool,
    /// The watcher scope of each watcher the caller knows (`watcherScopes`,
    /// semantics.md#cursors-scope), by watcher key.
    pub watcher_scopes: Scopes,
}

/// A record input that passed validation.
#[derive(Debug, Clone)]
pub struct ValidEvent {
    /// The event as it will be stored (`sequence` is 0 until inserted).
    pub event: StateEvent,
    /// The dedupe key, if any.
    pub dedupe_key: Option<String>,
    /// Producer-named watchers that may hold a cursor (qualified, not the target), deduplicated.
    pub watchers: Vec<String>,
    /// See [`RecordInput::only_if_watched`].
    pub only_if_watched: bool,
    /// See [`RecordInput::watcher_scopes`].
    pub watcher_scopes: Scopes,
}

/// Validates and normalises a record input at `now` (semantics.md#recording-validation).
pub fn validate(input: RecordInput, now: i64) -> Result<ValidEvent> {
    let kind = EventKind::parse(&input.kind)?;
    let actor_type = ActorType::parse(&input.actor_type)?;
    let agent_id = keys::resolve_agent(&input.session_key, input.agent_id.as_deref())?;
    for (value, name) in [
        (&input.actor_id, "actorId"),
        (&input.run_id, "runId"),
        (&input.session_id, "sessionId"),
        (&input.dedupe_key, "dedupeKey"),
    ] {
        if let Some(v) = value {
            keys::check_len(v, name)?;
        }
    }
    for (i, w) in input.watchers.iter().enumerate() {
        keys::check_entry(w, "watchers", i)?;
    }
    for (w, scope) in &input.watcher_scopes {
        if keys::is_blank(w) || w.len() > keys::MAX_KEY_BYTES {
            keys::SessionKey::check_named(w, "a key of watcherScopes")?;
        }
        keys::check_scope(scope)?;
    }
    let payload_json = match input.payload {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(payload_to_json(&map)?),
        Some(_) => return Err(Error::invalid("payload must be a JSON object")),
    };
    let target_watchable = keys::is_watchable(&input.session_key);
    let mut watchers: Vec<String> = Vec::new();
    if target_watchable {
        for w in input.watchers {
            if w != input.session_key && keys::is_watchable(&w) && !watchers.contains(&w) {
                watchers.push(w);
            }
        }
    }
    Ok(ValidEvent {
        event: StateEvent {
            sequence: 0,
            session_key: input.session_key,
            agent_id,
            kind,
            actor_type,
            actor_id: non_empty(input.actor_id),
            run_id: non_empty(input.run_id),
            session_id: non_empty(input.session_id),
            occurred_at: clamp_occurred_at(input.occurred_at, now),
            summary: normalize_summary(&input.summary),
            payload_json,
        },
        dedupe_key: non_empty(input.dedupe_key),
        watchers,
        only_if_watched: input.only_if_watched,
        watcher_scopes: input.watcher_scopes,
    })
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

fn payload_to_json(map: &Map<String, Value>) -> Result<String> {
    let json = serde_json::to_string(map)
        .map_err(|e| Error::invalid(format!("payload is not serialisable: {e}")))?;
    if json.len() > PAYLOAD_MAX_BYTES {
        return Err(Error::invalid(format!(
            "payload is {} bytes as compact JSON; the limit is {PAYLOAD_MAX_BYTES}",
            json.len()
        )));
    }
    Ok(json)
}

/// Floors and clamps an `occurredAt` to `[now - 24h, now]`; `None` or non-finite is `now`.
pub fn clamp_occurred_at(occurred_at: Option<f64>, now: i64) -> i64 {
    match occurred_at {
        Some(v) if v.is_finite() => {
            let floored = v.floor();
            let lo = now - OCCURRED_AT_WINDOW_MS;
            if floored >= now as f64 {
                now
            } else if floored <= lo as f64 {
                lo
            } else {
                floored as i64
            }
        }
        _ => now,
    }
}

/// One line: CRLF, CR, LF, U+2028 and U+2029 each become one space; the first 240 Unicode
/// scalar values are kept; no trim.
pub fn normalize_summary(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(SUMMARY_MAX_CHARS * 4));
    let mut count = 0;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if count == SUMMARY_MAX_CHARS {
            break;
        }
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push(' ');
            }
            '\n' | '\u{2028}' | '\u{2029}' => out.push(' '),
            c => out.push(c),
        }
        count += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> RecordInput {
        RecordInput {
            session_key: "agent:main:subagent:c".into(),
            kind: "goal_changed".into(),
            actor_type: "human".into(),
            summary: "s".into(),
            ..Default::default()
        }
    }

    #[test]
    fn kinds_round_trip_and_classify() {
        for k in EventKind::ALL {
            assert_eq!(EventKind::parse(k.as_str()).unwrap(), k);
        }
        let notify: Vec<_> = EventKind::ALL
            .into_iter()
            .filter(|k| k.notifies())
            .map(|k| k.as_str())
            .collect();
        assert_eq!(
            notify,
            ["human_direct_message", "goal_changed", "upstream_missing"]
        );
        assert_eq!(
            EventKind::parse("GOAL_CHANGED").unwrap_err().code(),
            "ERR_INVALID_ARG"
        );
        assert_eq!(
            ActorType::parse("bot").unwrap_err().code(),
            "ERR_INVALID_ARG"
        );
    }

    #[test]
    fn summary_is_one_line_of_240_scalars() {
        assert_eq!(
            normalize_summary("a\r\nb\rc\nd\u{2028}e\u{2029}f"),
            "a b c d e f"
        );
        assert_eq!(normalize_summary("\r\n\r\n"), "  ");
        assert_eq!(normalize_summary("  x  "), "  x  ");
        let long: String = "é".repeat(300);
        assert_eq!(normalize_summary(&long).chars().count(), 240);
        let emoji: String = "😀".repeat(241);
        assert_eq!(normalize_summary(&emoji), "😀".repeat(240));
        // A CRLF counts as one scalar once it is one space.
        let s = format!("{}\r\nxyz", "a".repeat(238));
        assert_eq!(normalize_summary(&s), format!("{} x", "a".repeat(238)));
    }

    #[test]
    fn occurred_at_is_floored_and_clamped() {
        let now = 1_000_000_000_000;
        assert_eq!(clamp_occurred_at(None, now), now);
        assert_eq!(clamp_occurred_at(Some(f64::NAN), now), now);
        assert_eq!(clamp_occurred_at(Some(f64::INFINITY), now), now);
        assert_eq!(clamp_occurred_at(Some(f64::NEG_INFINITY), now), now);
        assert_eq!(clamp_occurred_at(Some((now + 5) as f64), now), now);
        assert_eq!(
            clamp_occurred_at(Some((now - 10) as f64 + 0.9), now),
            now - 10
        );
        assert_eq!(
            clamp_occurred_at(Some(0.0), now),
            now - OCCURRED_AT_WINDOW_MS
        );
        assert_eq!(
            clamp_occurred_at(Some(-1e300), now),
            now - OCCURRED_AT_WINDOW_MS
        );
    }

    #[test]
    fn payload_must_be_a_small_object() {
        let mut i = input();
        i.payload = Some(serde_json::json!([1]));
        assert_eq!(validate(i, 0).unwrap_err().code(), "ERR_INVALID_ARG");
        let mut i = input();
        i.payload = Some(Value::Null);
        assert_eq!(validate(i, 0).unwrap().event.payload_json, None);
        // {"a":"xxx…"} is 8 bytes of framing plus the string.
        let mut i = input();
        i.payload = Some(serde_json::json!({ "a": "x".repeat(PAYLOAD_MAX_BYTES - 8) }));
        assert_eq!(
            validate(i, 0).unwrap().event.payload_json.unwrap().len(),
            PAYLOAD_MAX_BYTES
        );
        let mut i = input();
        i.payload = Some(serde_json::json!({ "a": "x".repeat(PAYLOAD_MAX_BYTES - 7) }));
        assert_eq!(validate(i, 0).unwrap_err().code(), "ERR_INVALID_ARG");
    }

    #[test]
    fn watchers_drop_bare_self_and_duplicates() {
        let mut i = input();
        i.watchers = vec![
            "agent:main:main".into(),
            "global".into(),
            "agent:main:subagent:c".into(),
            "agent:main:main".into(),
        ];
        assert_eq!(validate(i, 0).unwrap().watchers, ["agent:main:main"]);
        // A blank entry is no key at all: refused, naming its place.
        for blank in ["", "   "] {
            let mut i = input();
            i.watchers = vec!["agent:main:main".into(), blank.into()];
            let e = validate(i, 0).unwrap_err();
            assert_eq!(e.code(), "ERR_INVALID_ARG");
            assert!(e.to_string().contains("watchers[1]"), "{e}");
        }
        let mut i = input();
        i.session_key = "global".into();
        i.watchers = vec!["agent:main:main".into()];
        assert!(validate(i, 0).unwrap().watchers.is_empty());
    }

    #[test]
    fn identifiers_are_bounded() {
        let long = "x".repeat(keys::MAX_KEY_BYTES + 1);
        let fits = "x".repeat(keys::MAX_KEY_BYTES);
        for set in [
            |i: &mut RecordInput, v: &str| i.actor_id = Some(v.into()),
            |i: &mut RecordInput, v: &str| i.run_id = Some(v.into()),
            |i: &mut RecordInput, v: &str| i.session_id = Some(v.into()),
            |i: &mut RecordInput, v: &str| i.dedupe_key = Some(v.into()),
            |i: &mut RecordInput, v: &str| i.watchers = vec![v.into()],
            |i: &mut RecordInput, v: &str| i.session_key = format!("agent:main:{}", &v[11..]),
        ] {
            let mut i = input();
            set(&mut i, &fits);
            assert!(validate(i, 0).is_ok());
            let mut i = input();
            set(&mut i, &long);
            assert_eq!(validate(i, 0).unwrap_err().code(), "ERR_INVALID_ARG");
        }
    }

    #[test]
    fn empty_optionals_are_absent() {
        let mut i = input();
        i.dedupe_key = Some(String::new());
        i.actor_id = Some(String::new());
        let v = validate(i, 0).unwrap();
        assert_eq!(v.dedupe_key, None);
        assert_eq!(v.event.actor_id, None);
    }
}
