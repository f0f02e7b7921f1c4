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

use crate::event::StateEvent;

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

    pub(crate) fn insert(&mut self, other: Self) {
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
    /// stored text shown lossily (as `sqlite/inert.rs` shows it). It is never parsed into a `payload`.
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
    /// The kind as stored (one of [`crate::EventKind`]'s names when only other fields differ).
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
}
