#![no_main]
//! Notice context keys (semantics.md#cursors): `session-state:` + lowercase hex of the target key's UTF-8.
//!
//! The input, as a string, is tried both ways. As a context key: decoding never panics, it
//! accepts exactly the prefix followed by non-empty, even-length lowercase hex of valid UTF-8
//! (the rule written out here independently), and whatever it accepts re-encodes to the
//! input. As a target key: its encoding is the prefix and two lowercase hex digits per byte,
//! and decodes back to it (the empty key has no context key).

use libfuzzer_sys::fuzz_target;
use session_awareness_core::{decode_notice_context_key, encode_notice_context_key};

const PREFIX: &str = "session-state:";

fn expected_decoding(s: &str) -> Option<String> {
    let hex = s.strip_prefix(PREFIX)?;
    let lower_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    if hex.is_empty() || hex.len() % 2 != 0 || !hex.bytes().all(lower_hex) {
        return None;
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    String::from_utf8(bytes).ok()
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };

    let decoded = decode_notice_context_key(s);
    assert_eq!(decoded, expected_decoding(s), "{s:?}");
    if let Some(key) = &decoded {
        assert_eq!(encode_notice_context_key(key), s);
    }

    let encoded = encode_notice_context_key(s);
    let hex = encoded.strip_prefix(PREFIX).expect("the prefix");
    assert_eq!(hex.len(), 2 * s.len());
    assert!(hex
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    assert_eq!(
        decode_notice_context_key(&encoded).as_deref(),
        (!s.is_empty()).then_some(s)
    );
});
