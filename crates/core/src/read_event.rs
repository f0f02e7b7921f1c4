//! An event row as a read answers it (semantics.md#reading-foreign-events): every stored row
//! of a session comes back, the rows the store would not have written itself in one safe,
//! documented form.
//!
//! `changesSince` promises the exact delta or `historyGap`, so it cannot leave out a row that
//! is stored: a watcher reconciling from the answer would believe itself up to date. A row that
//! another writer stored (OpenClaw stores a summary as it is given; a later version adds kinds)
//! is answered as a [`ForeignEvent`], which names the fields that differ from what the store
//! writes. Only a row without an integer sequence cannot be placed in the session's order;
//! it makes the answer say `historyGap`.

use rusqlite::types::ValueRef;
use rusqlite::Row;

use crate::event::{normalize_summary, ActorType, EventKind, StateEvent};
use crate::keys;
use crate::sqlite::inert::{self, integer, lossy_opt_text, lossy_text, text};

/// One event row of a read, in sequence order.
#[derive(Debug, Clone, PartialEq)]
pub enum ChangeEvent {
    /// A row the store could have written, exactly as `record` returned it.
    Stored(StateEvent),
    /// A row the store would not write itself, in its safe form.
    Foreign(ForeignEvent),
}

impl ChangeEvent {
    /// The row's sequence.
    pub fn sequence(&self) -> i64 {
        match self {
            ChangeEvent::Stored(e) => e.sequence,
            ChangeEvent::Foreign(e) => e.sequence,
        }
    }

    /// The event, when the store could have written the row.
    pub fn stored(&self) -> Option<&StateEvent> {
        match self {
            ChangeEvent::Stored(e) => Some(e),
            ChangeEvent::Foreign(_) => None,
        }
    }

    /// The foreign row, when the store would not have written it.
    pub fn foreign(&self) -> Option<&ForeignEvent> {
        match self {
            ChangeEvent::Stored(_) => None,
            ChangeEvent::Foreign(e) => Some(e),
        }
    }

    /// The row's summary, as answered.
    pub fn summary(&self) -> &str {
        match self {
            ChangeEvent::Stored(e) => &e.summary,
            ChangeEvent::Foreign(e) => &e.summary,
        }
    }
}

/// A read's row equals an event when the row is that event, as the store wrote it.
impl PartialEq<StateEvent> for ChangeEvent {
    fn eq(&self, other: &StateEvent) -> bool {
        self.stored() == Some(other)
    }
}

/// The fields of an event row that differ from what the store writes, as a set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ForeignFields(u16);

impl ForeignFields {
    /// The sequence is above the session's head.
    pub const SEQUENCE: Self = Self(1);
    /// The kind is not one this version knows, or not text.
    pub const KIND: Self = Self(1 << 1);
    /// The actor type is not one this version knows, or not text.
    pub const ACTOR_TYPE: Self = Self(1 << 2);
    /// The actor id is empty, over-long, not valid UTF-8 or not text.
    pub const ACTOR_ID: Self = Self(1 << 3);
    /// The run id, likewise.
    pub const RUN_ID: Self = Self(1 << 4);
    /// The session id, likewise.
    pub const SESSION_ID: Self = Self(1 << 5);
    /// `occurred_at` is not an integer.
    pub const OCCURRED_AT: Self = Self(1 << 6);
    /// The summary is not one line of at most 240 characters of valid UTF-8 text.
    pub const SUMMARY: Self = Self(1 << 7);
    /// The payload is not a JSON object of at most 4,096 bytes, as compact text.
    pub const PAYLOAD: Self = Self(1 << 8);

    /// Every field, with its name in the API (`foreign` of a `ForeignStateEvent`), in order.
    pub const NAMES: [(Self, &'static str); 9] = [
        (Self::SEQUENCE, "sequence"),
        (Self::KIND, "kind"),
        (Self::ACTOR_TYPE, "actorType"),
        (Self::ACTOR_ID, "actorId"),
        (Self::RUN_ID, "runId"),
        (Self::SESSION_ID, "sessionId"),
        (Self::OCCURRED_AT, "occurredAt"),
        (Self::SUMMARY, "summary"),
        (Self::PAYLOAD, "payload"),
    ];

    /// True when no field differs.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// True when every field of `other` is in the set.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// The set as a bit mask (what crosses into JavaScript).
    pub fn bits(self) -> u16 {
        self.0
    }

    /// The names of the fields in the set, in [`Self::NAMES`] order.
    pub fn names(self) -> Vec<&'static str> {
        Self::NAMES
            .iter()
            .filter(|(f, _)| self.contains(*f))
            .map(|(_, n)| *n)
            .collect()
    }

    fn insert(&mut self, other: Self) {
        self.0 |= other.0;
    }
}

/// The payload of a foreign row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForeignPayload {
    /// `payload_json` is NULL.
    None,
    /// A JSON object (over the size limit, or not compact): its stored text, valid JSON.
    Object(String),
    /// Anything else (a JSON array or scalar, text that is not JSON, a blob, a number): its
    /// stored text as [`inert::lossy_text`] shows it. It is never parsed into a `payload`.
    Text(String),
}

/// An event row the store would not write itself, answered in a safe form: text that is not
/// valid UTF-8 decoded lossily (U+FFFD), the summary made one line and cut as `record` cuts
/// it, an unknown kind or actor type kept as stored, an empty identifier left out, a
/// non-integer `occurred_at` truncated (0 when it is not a number), and a payload that is not a
/// JSON object kept as text.
#[derive(Debug, Clone, PartialEq)]
pub struct ForeignEvent {
    /// The global sequence.
    pub sequence: i64,
    /// The session.
    pub session_key: String,
    /// The agent.
    pub agent_id: String,
    /// The kind as stored (one of [`EventKind`]'s names when only other fields differ).
    pub kind: String,
    /// The actor type as stored.
    pub actor_type: String,
    /// The actor id, if present and not empty.
    pub actor_id: Option<String>,
    /// The run id, likewise.
    pub run_id: Option<String>,
    /// The session id, likewise.
    pub session_id: Option<String>,
    /// When it happened (epoch ms).
    pub occurred_at: i64,
    /// One line of at most 240 characters.
    pub summary: String,
    /// The payload.
    pub payload: ForeignPayload,
    /// The fields that differ from what the store writes; never empty.
    pub foreign: ForeignFields,
}

/// Reads an event row selected as `sequence, session_key, agent_id, kind, actor_type,
/// actor_id, run_id, session_id, occurred_at, summary, payload_json`, for a session whose head
/// is `head`. `None` when the row has no integer sequence: it cannot be answered at all.
pub fn read(r: &Row<'_>, head: i64) -> rusqlite::Result<Option<ChangeEvent>> {
    let raw = |i: usize| r.get_ref(i);
    let Some(sequence) = integer(raw(0)?) else {
        return Ok(None);
    };
    if sequence <= head {
        if let Some(e) = inert::event_of(r)? {
            return Ok(Some(ChangeEvent::Stored(e)));
        }
    }
    let mut foreign = ForeignFields::default();
    if sequence > head {
        foreign.insert(ForeignFields::SEQUENCE);
    }
    let known = |v: ValueRef<'_>, ok: fn(&str) -> bool, field, foreign: &mut ForeignFields| {
        if !text(v).is_some_and(ok) {
            foreign.insert(field);
        }
        lossy_text(v)
    };
    let kind = known(
        raw(3)?,
        |k| EventKind::parse(k).is_ok(),
        ForeignFields::KIND,
        &mut foreign,
    );
    let actor_type = known(
        raw(4)?,
        |a| ActorType::parse(a).is_ok(),
        ForeignFields::ACTOR_TYPE,
        &mut foreign,
    );
    let mut ids = [None, None, None];
    for (slot, (i, field)) in ids.iter_mut().zip([
        (5, ForeignFields::ACTOR_ID),
        (6, ForeignFields::RUN_ID),
        (7, ForeignFields::SESSION_ID),
    ]) {
        let v = raw(i)?;
        let written = match v {
            ValueRef::Null => true,
            v => text(v).is_some_and(|s| !s.is_empty() && s.len() <= keys::MAX_KEY_BYTES),
        };
        if !written {
            foreign.insert(field);
        }
        *slot = lossy_opt_text(v).filter(|s| !s.is_empty());
    }
    let [actor_id, run_id, session_id] = ids;
    let occurred_at = match raw(8)? {
        ValueRef::Integer(i) => i,
        v => {
            foreign.insert(ForeignFields::OCCURRED_AT);
            inert::lossy_integer(v)
        }
    };
    let stored_summary = raw(9)?;
    if !text(stored_summary).is_some_and(inert::is_summary) {
        foreign.insert(ForeignFields::SUMMARY);
    }
    let summary = normalize_summary(&lossy_text(stored_summary));
    let payload = match raw(10)? {
        ValueRef::Null => ForeignPayload::None,
        v => {
            if !text(v).is_some_and(inert::is_payload) {
                foreign.insert(ForeignFields::PAYLOAD);
            }
            match text(v) {
                Some(s) if is_json_object(s) => ForeignPayload::Object(s.to_owned()),
                _ => ForeignPayload::Text(lossy_text(v)),
            }
        }
    };
    Ok(Some(ChangeEvent::Foreign(ForeignEvent {
        sequence,
        session_key: lossy_text(raw(1)?),
        agent_id: lossy_text(raw(2)?),
        kind,
        actor_type,
        actor_id,
        run_id,
        session_id,
        occurred_at,
        summary,
        payload,
        foreign,
    })))
}

/// True when `s` is one JSON object, surrounded by nothing but JSON whitespace.
fn is_json_object(s: &str) -> bool {
    s.trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
        && serde_json::from_str::<&serde_json::value::RawValue>(s).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names_follow_the_mask() {
        let mut f = ForeignFields::default();
        assert!(f.is_empty());
        f.insert(ForeignFields::PAYLOAD);
        f.insert(ForeignFields::KIND);
        assert_eq!(f.names(), ["kind", "payload"]);
        assert_eq!(f.bits(), 0b1_0000_0010);
        let all: Vec<u16> = ForeignFields::NAMES.iter().map(|(f, _)| f.bits()).collect();
        assert_eq!(all, [1, 2, 4, 8, 16, 32, 64, 128, 256]);
    }

    #[test]
    fn json_objects_with_whitespace_only() {
        assert!(is_json_object("{}"));
        assert!(is_json_object(" \n{\"a\":[1]} "));
        assert!(!is_json_object("[1]"));
        assert!(!is_json_object("\"{}\""));
        assert!(!is_json_object("{\"a\":"));
        assert!(!is_json_object("{} {}"));
    }
}
