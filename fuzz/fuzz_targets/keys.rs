#![no_main]
//! Session keys (semantics.md#keys) and the notice text (semantics.md#cursors).
//!
//! The input is a key, optionally followed by a NUL and an explicit agent id. Checks:
//! classification agrees with the rule of semantics.md#keys written out here independently; parsing refuses
//! exactly the empty key and one over 1024 UTF-8 bytes; agent resolution returns a valid
//! agent, the key's own one for a qualified key, and refuses exactly what semantics.md#keys refuses; the
//! notice text is one line (no control character, no U+0085, U+2028 or U+2029) whose two
//! JSON literals decode back to the key; the context key of the key decodes back to it.

use libfuzzer_sys::fuzz_target;
use serde_json::Deserializer;
use session_awareness_core::keys::{self, SessionKey, MAX_KEY_BYTES};

/// `[a-z0-9][a-z0-9_-]{0,63}`.
fn agent_id_ok(s: &str) -> bool {
    let lower_or_digit = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let mut chars = s.chars();
    chars.next().is_some_and(lower_or_digit)
        && s.len() <= 64
        && chars.all(|c| lower_or_digit(c) || c == '_' || c == '-')
}

/// `agent:<agentId>:<rest>` with a valid agent id and a non-empty rest.
fn qualified(key: &str) -> Option<(&str, &str)> {
    let tail = key.strip_prefix("agent:")?;
    let colon = tail.find(':')?;
    let (agent, rest) = (&tail[..colon], &tail[colon + 1..]);
    (agent_id_ok(agent) && !rest.is_empty()).then_some((agent, rest))
}

/// Reads one JSON string literal at the start of `s`; returns it and what follows.
fn json_literal(s: &str) -> (String, &str) {
    let mut stream = Deserializer::from_str(s).into_iter::<String>();
    let value = stream
        .next()
        .expect("a JSON literal")
        .expect("a valid JSON string");
    (value, &s[stream.byte_offset()..])
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (key, explicit) = match text.split_once('\0') {
        Some((k, a)) => (k, Some(a)),
        None => (text, None),
    };

    let class = SessionKey::classify(key);
    match (class, qualified(key)) {
        (SessionKey::Qualified { agent, rest }, Some(want)) => assert_eq!((agent, rest), want),
        (SessionKey::Bare, None) => {}
        (got, want) => panic!("{key:?}: classified {got:?}, expected {want:?}"),
    }
    let nested = qualified(key).is_some_and(|(_, rest)| rest.starts_with("subagent:"));
    assert_eq!(class.is_nested(), nested);
    assert_eq!(class.is_main_like(), class.is_qualified() && !nested);
    assert_eq!(keys::is_watchable(key), class.is_qualified());
    let refused_key = key.is_empty() || key.len() > MAX_KEY_BYTES;
    assert_eq!(SessionKey::parse(key).is_err(), refused_key);

    match keys::resolve_agent(key, explicit) {
        Ok(agent) => {
            assert!(agent_id_ok(&agent), "{agent:?}");
            assert!(!refused_key);
            if let Some((own, _)) = qualified(key) {
                assert_eq!(agent, own);
            }
            match explicit {
                Some(x) => assert_eq!(agent, x),
                None if qualified(key).is_none() => assert_eq!(agent, "main"),
                None => {}
            }
        }
        Err(e) => {
            assert_eq!(e.code(), "ERR_INVALID_ARG");
            let refused = refused_key
                || explicit.is_some_and(|x| {
                    !agent_id_ok(x) || qualified(key).is_some_and(|(own, _)| own != x)
                });
            assert!(refused, "{key:?} {explicit:?} refused: {e}");
        }
    }

    let since = data
        .iter()
        .fold(0i64, |n, b| n.wrapping_mul(31).wrapping_add(i64::from(*b)));
    let since = since.rem_euclid(1 << 53);
    let notice = keys::notice_text(key, since);
    assert!(
        !notice
            .chars()
            .any(|c| c < ' ' || matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}')),
        "a line break in {notice:?}"
    );
    let after = notice.strip_prefix("Session ").expect("the pinned start");
    let (first, after) = json_literal(after);
    let after = after
        .strip_prefix(" changed (other actor). Reconcile before acting: session_status sessionKey ")
        .expect("the pinned middle");
    let (second, after) = json_literal(after);
    assert_eq!((first.as_str(), second.as_str()), (key, key));
    assert_eq!(after, format!(" changesSince {since}."));

    let context = keys::encode_notice_context_key(key);
    let decoded = keys::decode_notice_context_key(&context);
    assert_eq!(decoded.as_deref(), (!key.is_empty()).then_some(key));
});
