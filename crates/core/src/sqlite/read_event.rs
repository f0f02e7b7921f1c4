//! The SQLite store's decoding of an event row for a read (semantics.md#reading-foreign-events):
//! a row the store could have written as the event, any other as a [`ForeignEvent`].

use rusqlite::types::ValueRef;
use rusqlite::Row;

use crate::event::{normalize_summary, ActorType, EventKind};
use crate::keys;
use crate::read_event::{ChangeEvent, ForeignEvent, ForeignFields, ForeignPayload};
use crate::sqlite::inert::{self, integer, lossy_opt_text, lossy_text, text};

/// Reads an event row selected as `sequence, session_key, agent_id, kind, actor_type,
/// actor_id, run_id, session_id, occurred_at, summary, payload_json`, for a session whose head
/// is `head`. `None` when the row has no integer sequence: it cannot be answered at all.
pub(crate) fn read(r: &Row<'_>, head: i64) -> rusqlite::Result<Option<ChangeEvent>> {
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
    fn json_objects_with_whitespace_only() {
        assert!(is_json_object("{}"));
        assert!(is_json_object(" \n{\"a\":[1]} "));
        assert!(!is_json_object("[1]"));
        assert!(!is_json_object("\"{}\""));
        assert!(!is_json_object("{\"a\":"));
        assert!(!is_json_object("{} {}"));
    }
}
