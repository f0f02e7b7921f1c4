//! Text normalisation for self-echo detection.
//!
//! A human turn seen upstream is a self-echo when its normalised text equals the normalised
//! text of one of the last user messages the gateway itself sent into that session. The
//! normalisation forgives the differences a transcript writer may introduce: surrounding
//! whitespace, changed line endings or indentation, and canonically equivalent Unicode
//! spellings.

use unicode_normalization::UnicodeNormalization;

use super::classify::{cap_text, HUMAN_TEXT_CAP};

/// Normalises `s` for self-echo comparison: Unicode NFC, then every run of Unicode
/// whitespace (`char::is_whitespace`) becomes one ASCII space, and leading and trailing
/// whitespace is removed.
///
/// `normalize_text(" a\r\n\tb ")` is `"a b"`; `"e\u{301}"` becomes `"\u{e9}"`.
pub fn normalize_text(s: &str) -> String {
    let composed: String = s.nfc().collect();
    let mut out = String::with_capacity(composed.len());
    for word in composed.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Tells whether an upstream human turn is an echo of `own`, a user message the gateway
/// sent into the session itself.
///
/// `turn_text` and `turn_truncated` are the fields of
/// [`LineClass::HumanTurn`](super::LineClass::HumanTurn). A truncated turn holds only the
/// first [`HUMAN_TEXT_CAP`] bytes of the upstream text, so `own` is cut the same way (with
/// [`cap_text`]) before both are normalised and compared. When the two raw texts are
/// identical this always matches; when they differ only in whitespace or Unicode spelling
/// before the cut, the cut may land on different characters and the turn is then reported as
/// a human message rather than silently dropped.
pub fn is_self_echo(turn_text: &str, turn_truncated: bool, own: &str) -> bool {
    let own = if turn_truncated {
        cap_text(own, HUMAN_TEXT_CAP)
    } else {
        own
    };
    normalize_text(turn_text) == normalize_text(own)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_and_collapses_whitespace() {
        assert_eq!(normalize_text("  hello   world  "), "hello world");
        assert_eq!(normalize_text("a\r\n\tb\n\nc"), "a b c");
        assert_eq!(normalize_text("\u{a0}x\u{2003}\u{3000}y\u{2028}"), "x y");
        assert_eq!(normalize_text(""), "");
        assert_eq!(normalize_text(" \t\r\n "), "");
    }

    #[test]
    fn composes_to_nfc() {
        assert_eq!(normalize_text("Cafe\u{301}"), "Caf\u{e9}");
        assert_eq!(normalize_text("Caf\u{e9}"), "Caf\u{e9}");
        assert_eq!(normalize_text("A\u{30a}"), "\u{c5}");
        // Hangul jamo compose into one syllable.
        assert_eq!(normalize_text("\u{1100}\u{1161}"), "\u{ac00}");
    }

    #[test]
    fn keeps_other_characters() {
        assert_eq!(normalize_text("سلام  دنیا 😀"), "سلام دنیا 😀");
        assert_eq!(normalize_text("a\u{200b}b"), "a\u{200b}b");
    }

    #[test]
    fn self_echo_compares_normalised_texts() {
        assert!(is_self_echo("fix the bug", false, "  fix the\nbug "));
        assert!(is_self_echo("Caf\u{e9}", false, "Cafe\u{301}"));
        assert!(!is_self_echo("fix the bug", false, "fix the bugs"));
        assert!(!is_self_echo("", false, "x"));
    }

    #[test]
    fn self_echo_cuts_own_text_when_the_turn_was_truncated() {
        let own = "é".repeat(HUMAN_TEXT_CAP);
        let seen = cap_text(&own, HUMAN_TEXT_CAP);
        assert!(seen.len() < own.len());
        assert!(is_self_echo(seen, true, &own));
        assert!(!is_self_echo(seen, false, &own));
        assert!(!is_self_echo(seen, true, "é"));
    }
}
