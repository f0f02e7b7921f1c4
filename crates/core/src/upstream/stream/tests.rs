//! Unit tests of `upstream::stream`.

use super::super::classify::{classify_line_capped, HUMAN_TEXT_CAP};
use super::*;

fn streamed(line: &[u8], text_cap: usize, chunk: usize) -> Result<LineClass, MalformedLine> {
    let mut c = StreamClassifier::new(text_cap);
    for piece in line.chunks(chunk.max(1)) {
        c.push(piece);
    }
    c.finish()
}

/// Classifies `line` buffered and streamed in several chunkings, asserts they agree and
/// returns the class.
fn same(line: &[u8], text_cap: usize) -> Result<LineClass, MalformedLine> {
    let buffered = classify_line_capped(line, text_cap);
    for chunk in [1, 2, 3, 5, 8, line.len()] {
        assert_eq!(
            streamed(line, text_cap, chunk),
            buffered,
            "chunk {chunk}, cap {text_cap}, line {:?}",
            String::from_utf8_lossy(line)
        );
    }
    buffered
}

fn human(text: &str) -> Result<LineClass, MalformedLine> {
    Ok(LineClass::HumanTurn {
        text: text.to_owned(),
        truncated: false,
    })
}

#[test]
fn rows_with_exact_classes() {
    let cases: &[(&str, Result<LineClass, MalformedLine>)] = &[
        (
            r#"{"type":"user","message":{"role":"user","content":"plain"}}"#,
            human("plain"),
        ),
        (
            r#"{"message":{"content":[{"text":"x","type":"text"},{"type":"text","text":"y"}],"role":"user"},"type":"user"}"#,
            human("x\ny"),
        ),
        (
            r#"{"type":"user","toolUseResult":{"a":[1,2,{"type":"assistant","message":{"role":"user"}}],"b":{"c":{"d":[[[]]]}}},"message":{"role":"user","content":"hi","extra":{"content":"no","role":"x"}},"cwd":"/x"}"#,
            human("hi"),
        ),
        (
            r#"{"typ\u0065":"us\u0065r","message":{"r\u006fle":"user","c\u006fntent":"escaped keys"}}"#,
            human("escaped keys"),
        ),
        (
            r#"{"type":"user","message":{"role":"user","content":"q \"x\" \\ \/ \b\f\n\r\t \u00e9\u00E9 \ud83d\ude00 é 😀"}}"#,
            human("q \"x\" \\ / \u{8}\u{c}\n\r\t éé 😀 é 😀"),
        ),
        (
            r#"{"type":"assistant","type":"user","message":{"role":"user","content":"first"},"message":{"role":"user","content":[{"type":"text","text":"second"}]}}"#,
            human("second"),
        ),
        (
            r#"{"type":"user","message":{"role":"user","content":"a","content":[{"type":"tool_result","content":"x"}]}}"#,
            Ok(LineClass::ToolResult),
        ),
        (
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"a","text":"b"},{"type":"text","text":"c","text":1},{"text":"d","type":"text","type":"image"}]}}"#,
            human("b"),
        ),
        (
            "{ \"isMeta\" :\ttrue ,\r\"type\" : \"user\" , \"message\":{\"role\":\"user\",\"content\":\"m\"} }",
            Ok(LineClass::Meta),
        ),
        (
            r#"{"isMeta":true,"isMeta":null,"type":"user","message":{"role":"user","content":"m"}}"#,
            human("m"),
        ),
        (
            r#"{"type":"user","isSidechain":true,"message":{"role":"user","content":"s"}}"#,
            Ok(LineClass::Sidechain),
        ),
        (
            r#"{"type":"summary","summary":"s","leafUuid":"l"}"#,
            Ok(LineClass::Summary),
        ),
        (
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"t"}]}}"#,
            Ok(LineClass::Assistant),
        ),
        (r#"{"type":"userx"}"#, Ok(LineClass::Other)),
        (
            r#"{"type":"a-type-name-longer-than-sixteen-bytes"}"#,
            Ok(LineClass::Other),
        ),
        (
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"t"}],"content":7}}"#,
            Ok(LineClass::Other),
        ),
        (
            r#"{"type":"user","message":{"role":"user","content":"x"},"message":[1]}"#,
            Ok(LineClass::Other),
        ),
        (
            r#"{"n":[0,-0,1.5e10,-2E-3,1e308,12345678901234567890123,0.1234567890123456789012345,1e-400,0e999999999999,18446744073709551615,18446744073709551616,-9223372036854775809]}"#,
            Ok(LineClass::Other),
        ),
        ("", Ok(LineClass::Blank)),
        (" \t\r ", Ok(LineClass::Blank)),
        ("\"str\"", Err(MalformedLine::NotAnObject)),
        ("123", Err(MalformedLine::NotAnObject)),
        ("-0.5e3", Err(MalformedLine::NotAnObject)),
        ("true", Err(MalformedLine::NotAnObject)),
        ("null", Err(MalformedLine::NotAnObject)),
        ("[{\"type\":\"user\"}]", Err(MalformedLine::NotAnObject)),
    ];
    for (line, want) in cases {
        assert_eq!(&same(line.as_bytes(), HUMAN_TEXT_CAP), want, "{line}");
    }
}

#[test]
fn invalid_json_is_rejected_by_both_paths() {
    let lines: &[&[u8]] = &[
        b"{\"type\":\"user\"} x",
        b"{\"a\":1}}",
        b"{\"a\":1,}",
        b"{\"a\":[1,]}",
        b"{,}",
        b"{\"a\"}",
        b"{\"a\":}",
        b"{\"a\" 1}",
        b"{1:2}",
        b"{\"a\":tru}",
        b"{\"a\":truex}",
        b"{\"a\":01}",
        b"{\"a\":1.}",
        b"{\"a\":1e309}",
        b"{\"a\":1.7976931348623158e308}",
        b"{\"a\":\"\\ud83d\"}",
        b"{\"a\":\"\\ud83d\\u0041\"}",
        b"{\"a\":\"\\x\"}",
        b"{\"a\":\"tab\there\"}",
        b"{\"a\":\"\xff\"}",
        b"{\"a\":\"\xed\xa0\x80\"}",
        b"{\"a\":\"\xe2\x82\"}",
        b"{\"\xff\":1}",
        b"\xef\xbb\xbf{}",
        b"{\"a\":1",
        b"{\"a\":\"unterminated",
        b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"ok\"}",
        b"tru",
        b"-",
        b"{}{}",
    ];
    for line in lines {
        assert_eq!(
            same(line, HUMAN_TEXT_CAP),
            Err(MalformedLine::InvalidJson),
            "{:?}",
            String::from_utf8_lossy(line)
        );
    }
}

#[test]
fn nesting_limit_matches_serde_json() {
    // The row object is one level, so 126 nested arrays make 127 levels.
    let nested = |n: usize| format!("{{\"a\":{}{}}}", "[".repeat(n), "]".repeat(n));
    assert_eq!(same(nested(126).as_bytes(), 64), Ok(LineClass::Other));
    assert_eq!(
        same(nested(127).as_bytes(), 64),
        Err(MalformedLine::InvalidJson)
    );
    let top = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert_eq!(
        same(top(127).as_bytes(), 64),
        Err(MalformedLine::NotAnObject)
    );
    assert_eq!(
        same(top(128).as_bytes(), 64),
        Err(MalformedLine::InvalidJson)
    );
}

#[test]
fn text_cap_cuts_at_the_same_place() {
    let blocks = r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"ab"},{"type":"text","text":"é😀c"},{"text":"zz","type":"image"},{"type":"tool_use_not","text":"q"},{"type":"text","text":""},{"type":"text","text":"\u00e9\ud83d\ude00"}]}}"#;
    let string = r#"{"type":"user","message":{"role":"user","content":"ab\u00e9😀\ncd"}}"#;
    for cap in 0..20 {
        for line in [blocks, string] {
            let class = same(line.as_bytes(), cap);
            assert!(matches!(class, Ok(LineClass::HumanTurn { .. })), "{cap}");
        }
    }
    let cut = |text: &str| {
        Ok(LineClass::HumanTurn {
            text: text.to_owned(),
            truncated: true,
        })
    };
    assert_eq!(same(blocks.as_bytes(), 5), cut("ab\né"));
    assert_eq!(same(blocks.as_bytes(), 3), cut("ab\n"));
    assert_eq!(same(blocks.as_bytes(), 2), cut("ab"));
    assert_eq!(same(blocks.as_bytes(), 100), human("ab\né😀c\n\né😀"));
    assert_eq!(same(string.as_bytes(), 4), cut("abé"));
    assert_eq!(same(string.as_bytes(), 0), cut(""));
}

#[test]
fn memory_stays_bounded_on_a_long_line() {
    let mut c = StreamClassifier::new(1024);
    c.push(br#"{"type":"user","message":{"role":"user","content":""#);
    let piece = "é\\u00e9x\\\"".repeat(10_000);
    for _ in 0..50 {
        c.push(piece.as_bytes());
        assert!(c.heap_capacity() <= 1024 + 1024, "{}", c.heap_capacity());
    }
    c.push(br#""}}"#);
    match c.finish() {
        Ok(LineClass::HumanTurn { text, truncated }) => {
            assert!(truncated);
            assert!(text.len() <= 1024 && text.len() > 1020);
            assert!(text.starts_with("ééx\"éé"));
        }
        other => panic!("{other:?}"),
    }
}
