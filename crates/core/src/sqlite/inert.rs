//! Rows the store would never write itself are inert (semantics.md#storage): a cursor with a bare or empty
//! watcher or target, a cursor whose watcher equals its target, an unknown provenance, NULL
//! where the store writes a value, text that is not valid UTF-8, a sequence above the head, a
//! summary or payload the store would not accept, `payload_json` that is not a JSON object.
//!
//! They are never notified, advanced, acknowledged or re-queued, and no read fails on them.
//! Cursor rows are filtered in SQL by a function registered on each connection
//! ([`register`], [`live_cursor!`]), or read as raw values and checked with [`live`]; event
//! rows are read as raw values and checked with [`event_of`].

use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, Row};

use crate::event::{ActorType, EventKind, StateEvent, PAYLOAD_MAX_BYTES, SUMMARY_MAX_CHARS};
use crate::keys;
use crate::rules;

/// The SQL function `session_state_watchable(key)`: 1 when `key` is valid UTF-8 text that may
/// hold a cursor (agent-qualified, semantics.md#keys), else 0 (bare, empty, NULL, a number or a blob).
pub const WATCHABLE_FN: &str = "session_state_watchable";

/// The SQL function `session_state_live(watcher, target, L, N, M, provenance, updated_at,
/// bound)`: 1 when a cursor row is one the store could have written (see [`live`]), else 0.
pub const LIVE_FN: &str = "session_state_live";

/// The start of a call of [`LIVE_FN`] on the columns of `session_watch_cursors`
/// (unqualified), for `concat!` into the store's cached statements: the caller appends the
/// bound and the closing parenthesis, as [`within_head!`] does.
macro_rules! live_cursor {
    () => {
        "session_state_live(watcher_session_key, target_session_key, last_seen_sequence, \
         notified_sequence, material_sequence, provenance, updated_at, "
    };
}
pub(crate) use live_cursor;

/// The bound of [`live_cursor!`] that most paths use, and the closing parenthesis: the
/// target's head under the target key's own agent (the text between `agent:` and the next
/// colon), 0 when it has none.
macro_rules! within_head {
    () => {
        "coalesce((SELECT h.last_sequence FROM session_state_heads h \
         WHERE h.session_key = target_session_key \
         AND h.agent_id = substr(target_session_key, 7, instr(substr(target_session_key, 7), ':') - 1) \
         AND typeof(h.last_sequence) = 'integer'), 0))"
    };
}
pub(crate) use within_head;

/// The SQL function `session_state_notified_after(L, N, S)`: a cursor's N after a material event
/// at S, as [`crate::rules::notified_after_material`] decides it, so the material update's one
/// `UPDATE` moves columns and the rule is not spelled again in SQL.
pub const NOTIFIED_AFTER_FN: &str = "session_state_notified_after";

/// Registers [`WATCHABLE_FN`], [`LIVE_FN`] and [`NOTIFIED_AFTER_FN`] on `conn`. Every connection
/// that runs the store's cursor queries needs them.
pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8
        | FunctionFlags::SQLITE_DETERMINISTIC
        | FunctionFlags::SQLITE_INNOCUOUS;
    conn.create_scalar_function(WATCHABLE_FN, 1, flags, |ctx| Ok(watchable(ctx.get_raw(0))))?;
    conn.create_scalar_function(LIVE_FN, 8, flags, |ctx| {
        let v = |i| ctx.get_raw(i);
        let bound = integer(v(7)).unwrap_or(-1);
        Ok(live([v(0), v(1)], [v(2), v(3), v(4)], v(5), v(6), bound))
    })?;
    conn.create_scalar_function(NOTIFIED_AFTER_FN, 3, flags, |ctx| {
        Ok(rules::notified_after_material(
            ctx.get(0)?,
            ctx.get(1)?,
            ctx.get(2)?,
        ))
    })
}

/// True when a cursor row is one the store could have written: two different
/// agent-qualified UTF-8 keys, integer positions in `[0, bound]`, a known provenance and an
/// integer `updated_at`.
pub fn live(
    keys: [ValueRef<'_>; 2],
    positions: [ValueRef<'_>; 3],
    provenance: ValueRef<'_>,
    updated_at: ValueRef<'_>,
    bound: i64,
) -> bool {
    live_fields(positions, provenance, updated_at, bound)
        && keys[0] != keys[1]
        && keys.into_iter().all(watchable)
}

/// The checks of [`live`] but the keys': integer positions in `[0, bound]`, a known
/// provenance and an integer `updated_at`. For a reader that checks each key once for many
/// rows.
pub fn live_fields(
    positions: [ValueRef<'_>; 3],
    provenance: ValueRef<'_>,
    updated_at: ValueRef<'_>,
    bound: i64,
) -> bool {
    let in_range = |p: ValueRef<'_>| integer(p).is_some_and(|p| (0..=bound).contains(&p));
    positions.into_iter().all(in_range)
        && matches!(provenance, ValueRef::Text(b"explicit" | b"ambient-group"))
        && matches!(updated_at, ValueRef::Integer(_))
}

/// True when a stored key may hold a cursor: valid UTF-8 text, agent-qualified.
pub fn watchable(v: ValueRef<'_>) -> bool {
    text(v).is_some_and(keys::is_watchable)
}

/// The value as text, when it is text and valid UTF-8.
pub fn text(v: ValueRef<'_>) -> Option<&str> {
    match v {
        ValueRef::Text(b) => std::str::from_utf8(b).ok(),
        _ => None,
    }
}

/// The value as an integer, when it is one.
pub fn integer(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(i) => Some(i),
        _ => None,
    }
}

/// The value shown as text, whatever it is: invalid UTF-8 becomes U+FFFD, NULL is empty, a
/// number is written out, a blob is lowercase hex prefixed `x'`…`'` as SQL writes it.
pub fn lossy_text(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => String::new(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => f.to_string(),
        ValueRef::Text(b) => String::from_utf8_lossy(b).into_owned(),
        ValueRef::Blob(b) => {
            let hex: String = b.iter().map(|c| format!("{c:02x}")).collect();
            format!("x'{hex}'")
        }
    }
}

/// The value shown as optional text: NULL is `None`, anything else as [`lossy_text`].
pub fn lossy_opt_text(v: ValueRef<'_>) -> Option<String> {
    (!matches!(v, ValueRef::Null)).then(|| lossy_text(v))
}

/// The value shown as an integer: a real is truncated, anything else is 0.
pub fn lossy_integer(v: ValueRef<'_>) -> i64 {
    match v {
        ValueRef::Integer(i) => i,
        ValueRef::Real(f) => f as i64,
        _ => 0,
    }
}

/// An optional identifier as the store writes it: NULL, or non-empty UTF-8 text of at most
/// [`keys::MAX_KEY_BYTES`] bytes. `Err` for anything else.
fn identifier(v: ValueRef<'_>) -> Result<Option<String>, ()> {
    match v {
        ValueRef::Null => Ok(None),
        v => match text(v) {
            Some(s) if !s.is_empty() && s.len() <= keys::MAX_KEY_BYTES => Ok(Some(s.to_owned())),
            _ => Err(()),
        },
    }
}

/// True when `s` is a summary the store could have written: one line of at most
/// [`SUMMARY_MAX_CHARS`] scalar values.
pub fn is_summary(s: &str) -> bool {
    s.chars().count() <= SUMMARY_MAX_CHARS && !s.contains(['\r', '\n', '\u{2028}', '\u{2029}'])
}

/// True when `s` is a payload the store could have written: a JSON object of at most
/// [`PAYLOAD_MAX_BYTES`] bytes.
pub fn is_payload(s: &str) -> bool {
    s.len() <= PAYLOAD_MAX_BYTES
        && s.starts_with('{')
        && serde_json::from_str::<&serde_json::value::RawValue>(s).is_ok()
}

/// Reads an event row selected as `sequence, session_key, agent_id, kind, actor_type,
/// actor_id, run_id, session_id, occurred_at, summary, payload_json`. `None` when the row is
/// one the store would never write (it is left out of reads, not reported as an error).
pub fn event_of(r: &Row<'_>) -> rusqlite::Result<Option<StateEvent>> {
    let raw = |i: usize| r.get_ref(i);
    let Some(sequence) = integer(raw(0)?) else {
        return Ok(None);
    };
    let (Some(session_key), Some(agent_id)) = (text(raw(1)?), text(raw(2)?)) else {
        return Ok(None);
    };
    let kind = text(raw(3)?).and_then(|k| EventKind::parse(k).ok());
    let actor_type = text(raw(4)?).and_then(|a| ActorType::parse(a).ok());
    let (Some(kind), Some(actor_type)) = (kind, actor_type) else {
        return Ok(None);
    };
    let ids = (
        identifier(raw(5)?),
        identifier(raw(6)?),
        identifier(raw(7)?),
    );
    let (Ok(actor_id), Ok(run_id), Ok(session_id)) = ids else {
        return Ok(None);
    };
    let Some(occurred_at) = integer(raw(8)?) else {
        return Ok(None);
    };
    let Some(summary) = text(raw(9)?).filter(|s| is_summary(s)) else {
        return Ok(None);
    };
    let payload_json = match raw(10)? {
        ValueRef::Null => None,
        v => match text(v).filter(|s| is_payload(s)) {
            Some(p) => Some(p.to_owned()),
            None => return Ok(None),
        },
    };
    if session_key.is_empty() || !keys::is_agent_id(agent_id) {
        return Ok(None);
    }
    Ok(Some(StateEvent {
        sequence,
        session_key: session_key.to_owned(),
        agent_id: agent_id.to_owned(),
        kind,
        actor_type,
        actor_id,
        run_id,
        session_id,
        occurred_at,
        summary: summary.to_owned(),
        payload_json,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_function_accepts_only_qualified_utf8_text() -> rusqlite::Result<()> {
        let conn = Connection::open_in_memory()?;
        register(&conn)?;
        let ask = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0));
        assert_eq!(ask("SELECT session_state_watchable('agent:main:x')")?, 1);
        for bad in [
            "'global'",
            "''",
            "NULL",
            "7",
            "'agent:MAIN:x'",
            "'agent:main:'",
            "CAST(x'6167656e743a6d61696e3a78ff' AS TEXT)",
            "x'6167656e743a6d61696e3a78'",
        ] {
            assert_eq!(
                ask(&format!("SELECT session_state_watchable({bad})"))?,
                0,
                "{bad}"
            );
        }
        Ok(())
    }

    #[test]
    fn summaries_and_payloads_the_store_writes() {
        assert!(is_summary(&"é".repeat(240)));
        assert!(!is_summary(&"é".repeat(241)));
        assert!(!is_summary("a\nb"));
        assert!(!is_summary("a\u{2028}b"));
        assert!(is_payload("{\"a\":1}"));
        assert!(!is_payload("[1]"));
        assert!(!is_payload("{\"a\":"));
        assert!(!is_payload(" {}"));
        assert!(!is_payload(&format!("{{\"a\":\"{}\"}}", "x".repeat(4096))));
    }

    #[test]
    fn lossy_views_never_fail() {
        assert_eq!(lossy_text(ValueRef::Text(b"a\xffb")), "a\u{fffd}b");
        assert_eq!(lossy_text(ValueRef::Blob(&[1, 0xab])), "x'01ab'");
        assert_eq!(lossy_text(ValueRef::Null), "");
        assert_eq!(lossy_opt_text(ValueRef::Null), None);
        assert_eq!(lossy_integer(ValueRef::Text(b"9")), 0);
        assert_eq!(lossy_integer(ValueRef::Real(2.7)), 2);
    }
}
