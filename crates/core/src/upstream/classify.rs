//! Classification rules for transcript rows, and the buffered (whole-value) classifier.
//!
//! The rules live in [`RowShape`] and `decide`, shared by this buffered path and the
//! streaming path in `stream.rs`; each path only extracts the shape (and the human text)
//! its own way.

use std::fmt;

use serde_json::{Map, Value};

/// Most bytes of human text kept in a [`LineClass::HumanTurn`]; longer texts are cut at a
/// character boundary (see [`cap_text`]) and flagged `truncated`.
pub const HUMAN_TEXT_CAP: usize = 64 * 1024;

/// What one transcript row is.
///
/// Only [`LineClass::HumanTurn`] matters to upstream monitoring; every other class is passed
/// over. The rules, in order (a "row" is a JSON object):
/// 1. `"isSidechain": true` → [`Sidechain`](LineClass::Sidechain);
/// 2. `"isMeta": true` → [`Meta`](LineClass::Meta);
/// 3. top-level `"type"`: `"assistant"` → [`Assistant`](LineClass::Assistant), `"summary"` →
///    [`Summary`](LineClass::Summary), `"user"` → rule 4, anything else (or absent, or not a
///    string) → [`Other`](LineClass::Other);
/// 4. a `"user"` row whose `message` is an object with `"role": "user"`: a string `content` is
///    a human turn with that text; an array `content` is a tool result when it holds a block
///    `{"type": "tool_result", ...}` or no text block at all, and otherwise a human turn whose
///    text is its text blocks' `text` values (`{"type": "text", "text": "..."}`) joined with
///    `"\n"`; any other `message`, `role` or `content` → [`Other`](LineClass::Other).
///
/// Only the JSON value `true` sets a flag; a repeated key counts with its last value, as in a
/// parsed JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineClass {
    /// A turn typed by a human.
    HumanTurn {
        /// The human text: at most [`HUMAN_TEXT_CAP`] bytes, cut at a character boundary.
        text: String,
        /// Whether `text` was cut; compare with [`is_self_echo`](super::is_self_echo).
        truncated: bool,
    },
    /// A row written for the model's side of the conversation (`"type": "assistant"`).
    Assistant,
    /// A user-role row that carries no human text: tool results, or blocks with no text.
    ToolResult,
    /// A row flagged `"isMeta": true` (injected context, not typed by a human).
    Meta,
    /// A row flagged `"isSidechain": true` (a delegated side conversation).
    Sidechain,
    /// A `"type": "summary"` row.
    Summary,
    /// Any other JSON object: unknown type, or a user row of an unknown shape.
    Other,
    /// An empty line, or one of JSON whitespace only (space, tab, CR): skipped silently.
    Blank,
}

/// Why a transcript line could not be classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MalformedLine {
    /// The line is not valid JSON (as `serde_json` parses it: strict UTF-8, nesting of at
    /// most 127 levels, numbers within `f64` range).
    InvalidJson,
    /// The line is valid JSON but not an object.
    NotAnObject,
}

impl fmt::Display for MalformedLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MalformedLine::InvalidJson => "transcript line is not valid JSON",
            MalformedLine::NotAnObject => "transcript line is not a JSON object",
        })
    }
}

impl std::error::Error for MalformedLine {}

/// Classifies a transcript row already parsed as JSON (a remote transcript item).
///
/// A value that is not an object is [`LineClass::Other`]. Never returns
/// [`LineClass::Blank`].
pub fn classify_value(v: &Value) -> LineClass {
    classify_value_capped(v, HUMAN_TEXT_CAP)
}

/// Classifies one JSONL line: its bytes without the `'\n'` (a trailing `'\r'` is fine, it is
/// JSON whitespace).
///
/// A blank line is `Ok(LineClass::Blank)`; a line that is not a JSON object is an `Err` the
/// caller can report before moving on.
pub fn classify_line(line: &[u8]) -> Result<LineClass, MalformedLine> {
    classify_line_capped(line, HUMAN_TEXT_CAP)
}

/// The longest prefix of `s` that is at most `cap` bytes and ends at a character boundary.
pub fn cap_text(s: &str, cap: usize) -> &str {
    if s.len() <= cap {
        return s;
    }
    let mut end = cap;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Whether `line` holds only JSON whitespace other than `'\n'`.
pub(crate) fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r'))
}

pub(crate) fn classify_line_capped(
    line: &[u8],
    text_cap: usize,
) -> Result<LineClass, MalformedLine> {
    if is_blank(line) {
        return Ok(LineClass::Blank);
    }
    let value: Value = serde_json::from_slice(line).map_err(|_| MalformedLine::InvalidJson)?;
    if !value.is_object() {
        return Err(MalformedLine::NotAnObject);
    }
    Ok(classify_value_capped(&value, text_cap))
}

pub(crate) fn classify_value_capped(v: &Value, text_cap: usize) -> LineClass {
    let Some(row) = v.as_object() else {
        return LineClass::Other;
    };
    match decide(&RowShape::of_row(row)) {
        Verdict::Passed(class) => class,
        Verdict::Human => {
            let full = human_text(row);
            let text = cap_text(&full, text_cap);
            LineClass::HumanTurn {
                truncated: text.len() < full.len(),
                text: text.to_owned(),
            }
        }
    }
}

/// The full, uncapped human text of a row that `decide` called human.
fn human_text(row: &Map<String, Value>) -> String {
    let content = row.get("message").and_then(|m| m.get("content"));
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter_map(Value::as_object)
                .filter(|b| BlockKind::of(b.get("type")) == BlockKind::Text)
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            texts.join("\n")
        }
        _ => String::new(),
    }
}

/// The top-level `type` of a row, as far as the rules care.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum RowType {
    User,
    Assistant,
    Summary,
    #[default]
    Other,
}

impl RowType {
    pub(crate) fn from_name(name: &str) -> Self {
        match name {
            "user" => RowType::User,
            "assistant" => RowType::Assistant,
            "summary" => RowType::Summary,
            _ => RowType::Other,
        }
    }
}

/// The `type` of one element of a `content` array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum BlockKind {
    Text,
    ToolResult,
    #[default]
    Other,
}

impl BlockKind {
    pub(crate) fn from_name(name: &str) -> Self {
        match name {
            "text" => BlockKind::Text,
            "tool_result" => BlockKind::ToolResult,
            _ => BlockKind::Other,
        }
    }

    fn of(v: Option<&Value>) -> Self {
        v.and_then(Value::as_str)
            .map_or(BlockKind::Other, BlockKind::from_name)
    }
}

/// The shape of `message.content`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ContentShape {
    /// Absent, or neither a string nor an array.
    #[default]
    Unusable,
    /// A string.
    Text,
    /// An array: whether any block is a `tool_result`, and whether any is a text block (an
    /// object with `"type": "text"` and a string `text`).
    Blocks { tool_result: bool, has_text: bool },
}

/// Everything the rules look at in a row, except the human text itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RowShape {
    pub(crate) row_type: RowType,
    pub(crate) is_meta: bool,
    pub(crate) is_sidechain: bool,
    /// Whether `message` is an object.
    pub(crate) has_message: bool,
    /// Whether `message.role` is the string `"user"`.
    pub(crate) role_is_user: bool,
    pub(crate) content: ContentShape,
}

impl RowShape {
    fn of_row(row: &Map<String, Value>) -> Self {
        let mut shape = RowShape {
            row_type: row
                .get("type")
                .and_then(Value::as_str)
                .map_or(RowType::Other, RowType::from_name),
            is_meta: row.get("isMeta") == Some(&Value::Bool(true)),
            is_sidechain: row.get("isSidechain") == Some(&Value::Bool(true)),
            ..RowShape::default()
        };
        if let Some(message) = row.get("message").and_then(Value::as_object) {
            shape.has_message = true;
            shape.role_is_user = message.get("role").and_then(Value::as_str) == Some("user");
            shape.content = match message.get("content") {
                Some(Value::String(_)) => ContentShape::Text,
                Some(Value::Array(blocks)) => {
                    let objects = || blocks.iter().filter_map(Value::as_object);
                    ContentShape::Blocks {
                        tool_result: objects()
                            .any(|b| BlockKind::of(b.get("type")) == BlockKind::ToolResult),
                        has_text: objects().any(|b| {
                            BlockKind::of(b.get("type")) == BlockKind::Text
                                && b.get("text").is_some_and(Value::is_string)
                        }),
                    }
                }
                _ => ContentShape::Unusable,
            };
        }
        shape
    }
}

/// The outcome of the rules before the human text is attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A human turn; its text is the content string or the joined text blocks.
    Human,
    /// Any other class, passed over.
    Passed(LineClass),
}

/// Applies the rules documented on [`LineClass`].
pub(crate) fn decide(shape: &RowShape) -> Verdict {
    if shape.is_sidechain {
        return Verdict::Passed(LineClass::Sidechain);
    }
    if shape.is_meta {
        return Verdict::Passed(LineClass::Meta);
    }
    match shape.row_type {
        RowType::Assistant => Verdict::Passed(LineClass::Assistant),
        RowType::Summary => Verdict::Passed(LineClass::Summary),
        RowType::Other => Verdict::Passed(LineClass::Other),
        RowType::User if !shape.has_message || !shape.role_is_user => {
            Verdict::Passed(LineClass::Other)
        }
        RowType::User => match shape.content {
            ContentShape::Unusable => Verdict::Passed(LineClass::Other),
            ContentShape::Text => Verdict::Human,
            ContentShape::Blocks {
                tool_result: false,
                has_text: true,
            } => Verdict::Human,
            ContentShape::Blocks { .. } => Verdict::Passed(LineClass::ToolResult),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn human(text: &str) -> LineClass {
        LineClass::HumanTurn {
            text: text.to_owned(),
            truncated: false,
        }
    }

    fn line(s: &str) -> Result<LineClass, MalformedLine> {
        classify_line(s.as_bytes())
    }

    #[test]
    fn human_string_content() {
        let l = r#"{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":"fix the failing test"},"uuid":"u1","timestamp":"2026-07-01T10:00:00Z"}"#;
        assert_eq!(line(l), Ok(human("fix the failing test")));
    }

    #[test]
    fn human_text_blocks_are_joined_with_newlines() {
        let l = r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"first"},{"type":"image","source":{"type":"base64","data":"AAAA"}},{"type":"text","text":"second"},{"type":"text","text":""}]}}"#;
        assert_eq!(line(l), Ok(human("first\nsecond\n")));
    }

    #[test]
    fn tool_results_are_not_human_turns() {
        let l = r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]},"toolUseResult":{"stdout":"ok"}}"#;
        assert_eq!(line(l), Ok(LineClass::ToolResult));
        let mixed = r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"out"}]},{"type":"text","text":"note"}]}}"#;
        assert_eq!(line(mixed), Ok(LineClass::ToolResult));
        let no_text = r#"{"type":"user","message":{"role":"user","content":[{"type":"image"},{"type":"text","text":7},{"type":"text"},"loose string"]}}"#;
        assert_eq!(line(no_text), Ok(LineClass::ToolResult));
        let empty = r#"{"type":"user","message":{"role":"user","content":[]}}"#;
        assert_eq!(line(empty), Ok(LineClass::ToolResult));
    }

    #[test]
    fn flagged_rows_are_passed_over() {
        let meta = r#"{"type":"user","isMeta":true,"message":{"role":"user","content":"<command-name>/clear</command-name>"}}"#;
        assert_eq!(line(meta), Ok(LineClass::Meta));
        let side =
            r#"{"type":"user","isSidechain":true,"message":{"role":"user","content":"sub task"}}"#;
        assert_eq!(line(side), Ok(LineClass::Sidechain));
        let both = r#"{"isMeta":true,"isSidechain":true,"type":"assistant"}"#;
        assert_eq!(line(both), Ok(LineClass::Sidechain));
        let not_true = r#"{"type":"user","isMeta":"true","isSidechain":1,"message":{"role":"user","content":"hi"}}"#;
        assert_eq!(line(not_true), Ok(human("hi")));
        let last_wins = r#"{"type":"user","isMeta":true,"isMeta":false,"message":{"role":"user","content":"hi"}}"#;
        assert_eq!(line(last_wins), Ok(human("hi")));
    }

    #[test]
    fn assistant_summary_and_unknown_rows() {
        let a = r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"done"}]}}"#;
        assert_eq!(line(a), Ok(LineClass::Assistant));
        let s = r#"{"type":"summary","summary":"Fixing tests","leafUuid":"x"}"#;
        assert_eq!(line(s), Ok(LineClass::Summary));
        assert_eq!(
            line(r#"{"type":"system","content":"compacted"}"#),
            Ok(LineClass::Other)
        );
        assert_eq!(line(r#"{"type":7}"#), Ok(LineClass::Other));
        assert_eq!(line("{}"), Ok(LineClass::Other));
    }

    #[test]
    fn user_rows_of_unknown_shape_are_other() {
        for l in [
            r#"{"type":"user"}"#,
            r#"{"type":"user","message":"hi"}"#,
            r#"{"type":"user","message":{"content":"hi"}}"#,
            r#"{"type":"user","message":{"role":"assistant","content":"hi"}}"#,
            r#"{"type":"user","message":{"role":"user"}}"#,
            r#"{"type":"user","message":{"role":"user","content":{"text":"hi"}}}"#,
            r#"{"type":"user","message":{"role":"user","content":null}}"#,
        ] {
            assert_eq!(line(l), Ok(LineClass::Other), "{l}");
        }
    }

    #[test]
    fn malformed_and_blank_lines() {
        assert_eq!(line(r#"{"type":"user""#), Err(MalformedLine::InvalidJson));
        assert_eq!(line("not json"), Err(MalformedLine::InvalidJson));
        assert_eq!(line(r#"{"a":1} x"#), Err(MalformedLine::InvalidJson));
        assert_eq!(line(r#"["user"]"#), Err(MalformedLine::NotAnObject));
        assert_eq!(line("42"), Err(MalformedLine::NotAnObject));
        assert_eq!(
            classify_line(b"{\"a\":\"\xff\"}"),
            Err(MalformedLine::InvalidJson)
        );
        assert_eq!(line(""), Ok(LineClass::Blank));
        assert_eq!(line(" \t\r"), Ok(LineClass::Blank));
        assert_eq!(
            line("{\"type\":\"summary\"}\r"),
            Ok(LineClass::Summary),
            "a trailing CR is whitespace"
        );
    }

    #[test]
    fn escaped_text_is_decoded() {
        let l = r#"{"type":"user","message":{"role":"user","content":"say \"hi\" \\ caf\u00e9 \ud83d\ude00\n"}}"#;
        assert_eq!(line(l), Ok(human("say \"hi\" \\ café 😀\n")));
    }

    #[test]
    fn long_text_is_capped_at_a_char_boundary() {
        let text = format!("{}é", "a".repeat(HUMAN_TEXT_CAP - 1));
        let v = json!({"type":"user","message":{"role":"user","content":text}});
        assert_eq!(
            classify_value(&v),
            LineClass::HumanTurn {
                text: "a".repeat(HUMAN_TEXT_CAP - 1),
                truncated: true
            }
        );
        let exact = "b".repeat(HUMAN_TEXT_CAP);
        let v = json!({"type":"user","message":{"role":"user","content":exact}});
        assert_eq!(classify_value(&v), human(&exact));
    }

    #[test]
    fn classify_value_matches_remote_items() {
        let v = json!({"type":"user","message":{"role":"user","content":[{"type":"text","text":"from the node"}]}});
        assert_eq!(classify_value(&v), human("from the node"));
        assert_eq!(classify_value(&json!(["x"])), LineClass::Other);
        assert_eq!(
            classify_value(&json!({"type":"assistant"})),
            LineClass::Assistant
        );
    }

    #[test]
    fn cap_text_keeps_whole_characters() {
        assert_eq!(cap_text("héllo", 2), "h");
        assert_eq!(cap_text("héllo", 3), "hé");
        assert_eq!(cap_text("😀", 3), "");
        assert_eq!(cap_text("abc", 10), "abc");
        assert_eq!(cap_text("abc", 0), "");
    }

    #[test]
    fn malformed_line_displays_a_reason() {
        assert_eq!(
            MalformedLine::NotAnObject.to_string(),
            "transcript line is not a JSON object"
        );
    }
}
