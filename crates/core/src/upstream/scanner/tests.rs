//! Unit tests of `upstream::scanner`.

use super::super::classify::classify_line;
use super::*;

const MIB: usize = 1024 * 1024;

fn human(text: &str) -> Result<LineClass, MalformedLine> {
    Ok(LineClass::HumanTurn {
        text: text.to_owned(),
        truncated: false,
    })
}

/// A transcript with one row of each kind, a blank line and a malformed line.
const FIXTURE: &str = concat!(
    r#"{"type":"summary","summary":"Fix tests","leafUuid":"a"}"#,
    "\n",
    r#"{"type":"user","message":{"role":"user","content":"run the tests"},"uuid":"1"}"#,
    "\n",
    r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{"command":"cargo test"}}]}}"#,
    "\n",
    r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}}"#,
    "\n",
    "\n",
    r#"{"type":"user","isMeta":true,"message":{"role":"user","content":"<local-command-stdout></local-command-stdout>"}}"#,
    "\n",
    "{not json\n",
    r#"{"type":"user","isSidechain":true,"message":{"role":"user","content":"sub"}}"#,
    "\n",
    r#"{"message":{"content":[{"text":"a\"b","type":"text"},{"type":"text","text":"caf\u00e9 \ud83d\ude00"}],"role":"user"},"type":"user"}"#,
    "\n",
    r#"{"type":"progress","data":{"nested":[1,{"type":"user"}]}}"#,
    "\n",
);

fn fixture_classes() -> Vec<Result<LineClass, MalformedLine>> {
    vec![
        Ok(LineClass::Summary),
        human("run the tests"),
        Ok(LineClass::Assistant),
        Ok(LineClass::ToolResult),
        Ok(LineClass::Meta),
        Err(MalformedLine::InvalidJson),
        Ok(LineClass::Sidechain),
        human("a\"b\ncafé 😀"),
        Ok(LineClass::Other),
    ]
}

/// The expected lines of `text`: every non-blank line with its offsets.
fn expected(text: &str, classes: Vec<Result<LineClass, MalformedLine>>) -> Vec<ScannedLine> {
    let mut out = Vec::new();
    let mut start = 0u64;
    let mut classes = classes.into_iter();
    for line in text.split_inclusive('\n') {
        let end = start + line.len() as u64;
        if !line.trim_end_matches(['\n', '\r']).is_empty() {
            out.push(ScannedLine {
                start,
                end,
                class: classes.next().unwrap_or(Ok(LineClass::Other)),
            });
        }
        start = end;
    }
    assert!(classes.next().is_none());
    out
}

fn scan_in_chunks(scanner: &mut LineScanner, data: &[u8], chunk: usize) -> Vec<ScannedLine> {
    data.chunks(chunk.max(1))
        .flat_map(|piece| scanner.feed(piece))
        .collect()
}

#[test]
fn classifies_a_transcript_fed_whole() {
    let mut s = LineScanner::default();
    let lines = s.feed(FIXTURE.as_bytes());
    assert_eq!(lines, expected(FIXTURE, fixture_classes()));
    assert_eq!(lines[0].start, 0);
    assert_eq!(lines[1].start, lines[0].end);
    assert_eq!(s.committed(), FIXTURE.len() as u64);
    assert_eq!(s.pending_bytes(), 0);
}

#[test]
fn every_chunking_and_line_cap_gives_the_same_lines() {
    let want = expected(FIXTURE, fixture_classes());
    for line_cap in [0, 16, 100, DEFAULT_LINE_CAP] {
        for chunk in [1, 2, 7, 64, FIXTURE.len()] {
            let mut s = LineScanner::new(line_cap);
            let got = scan_in_chunks(&mut s, FIXTURE.as_bytes(), chunk);
            assert_eq!(got, want, "line cap {line_cap}, chunk {chunk}");
        }
    }
}

#[test]
fn a_split_at_every_byte_position_gives_the_same_lines() {
    let want = expected(FIXTURE, fixture_classes());
    let data = FIXTURE.as_bytes();
    for line_cap in [0, 40, DEFAULT_LINE_CAP] {
        for at in 0..=data.len() {
            let mut s = LineScanner::new(line_cap);
            let mut got = s.feed(&data[..at]);
            assert_eq!(s.committed() + s.pending_bytes(), at as u64);
            got.extend(s.feed(&data[at..]));
            assert_eq!(got, want, "line cap {line_cap}, split at {at}");
        }
    }
}

#[test]
fn crlf_line_endings() {
    let text = FIXTURE.replace('\n', "\r\n");
    let want = expected(&text, fixture_classes());
    let first = text.find('\n').map_or(0, |i| i + 1);
    assert!(text[..first].ends_with("}\r\n"));
    assert_eq!(want[0].end, first as u64);
    for line_cap in [0, DEFAULT_LINE_CAP] {
        for chunk in [1, 3, text.len()] {
            let mut s = LineScanner::new(line_cap);
            assert_eq!(scan_in_chunks(&mut s, text.as_bytes(), chunk), want);
            assert_eq!(s.committed(), text.len() as u64);
        }
    }
}

#[test]
fn partial_last_line_waits_for_its_newline() {
    let first = "{\"type\":\"summary\"}\n";
    let second = r#"{"type":"user","message":{"role":"user","content":"later"}}"#;
    for line_cap in [0, DEFAULT_LINE_CAP] {
        let mut s = LineScanner::new(line_cap);
        let (head, tail) = second.split_at(20);
        let lines = s.feed(format!("{first}{head}").as_bytes());
        assert_eq!(lines.len(), 1);
        assert_eq!(s.committed(), first.len() as u64);
        assert_eq!(s.pending_bytes(), 20);
        assert!(s.feed(&tail.as_bytes()[..5]).is_empty());
        assert_eq!(s.pending_bytes(), 25);
        let lines = s.feed(format!("{}\n", &tail[5..]).as_bytes());
        assert_eq!(
            lines,
            vec![ScannedLine {
                start: first.len() as u64,
                end: (first.len() + second.len() + 1) as u64,
                class: human("later"),
            }]
        );
        assert_eq!(s.pending_bytes(), 0);
        assert_eq!(s.consumed(), s.committed());
    }
}

#[test]
fn blank_lines_are_skipped_but_committed() {
    let mut s = LineScanner::default();
    let lines = s.feed(b"\n  \r\n{\"type\":\"summary\"}\n\t\n\n");
    assert_eq!(
        lines,
        vec![ScannedLine {
            start: 5,
            end: 24,
            class: Ok(LineClass::Summary)
        }]
    );
    assert_eq!(s.committed(), 27);
    assert_eq!(s.pending_bytes(), 0);
}

#[test]
fn malformed_lines_are_reported_and_scanning_goes_on() {
    let mut s = LineScanner::new(4);
    let lines = s.feed(b"[1,2]\n{\"a\":\n{\"type\":\"assistant\"}\n");
    let classes: Vec<_> = lines
        .into_iter()
        .map(|l| (l.start, l.end, l.class))
        .collect();
    assert_eq!(
        classes,
        vec![
            (0, 6, Err(MalformedLine::NotAnObject)),
            (6, 12, Err(MalformedLine::InvalidJson)),
            (12, 33, Ok(LineClass::Assistant)),
        ]
    );
}

#[test]
fn reset_starts_offsets_again() {
    let mut s = LineScanner::default();
    s.feed(b"{\"type\":\"summary\"}\n{\"type\":");
    assert!(s.pending_bytes() > 0);
    s.reset();
    assert_eq!((s.consumed(), s.committed(), s.pending_bytes()), (0, 0, 0));
    let lines = s.feed(b"{\"type\":\"assistant\"}\n");
    assert_eq!(lines[0].start, 0);
    assert_eq!(lines[0].class, Ok(LineClass::Assistant));
}

/// Feeds `line` + '\n' in 1 MiB chunks, checking the memory bound after every chunk.
fn scan_huge(line: &[u8]) -> Vec<ScannedLine> {
    let bound = DEFAULT_LINE_CAP + HUMAN_TEXT_CAP + 1024;
    let mut s = LineScanner::default();
    let mut data = line.to_vec();
    data.push(b'\n');
    let mut lines = Vec::new();
    for piece in data.chunks(MIB) {
        lines.extend(s.feed(piece));
        assert!(
            s.buffer_capacity() <= bound,
            "capacity {} after {} bytes",
            s.buffer_capacity(),
            s.consumed()
        );
    }
    assert_eq!(s.committed(), data.len() as u64);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].end, data.len() as u64);
    lines
}

#[test]
fn a_3_mib_human_turn_is_classified_in_bounded_memory() {
    let text = "é\\\"x".repeat(3 * MIB / 5);
    let line =
        format!(r#"{{"type":"user","message":{{"role":"user","content":"{text}"}},"uuid":"u"}}"#);
    assert!(line.len() > 3 * MIB);
    let lines = scan_huge(line.as_bytes());
    let decoded = "é\"x".repeat(HUMAN_TEXT_CAP / 4 + 1);
    let want = Ok(LineClass::HumanTurn {
        text: cap_text_owned(&decoded, HUMAN_TEXT_CAP),
        truncated: true,
    });
    assert_eq!(lines[0].class, want);
    assert_eq!(classify_line(line.as_bytes()), want);
}

#[test]
fn a_3_mib_text_block_turn_is_classified_in_bounded_memory() {
    let big = "word ".repeat(3 * MIB / 5);
    let line = format!(
        r#"{{"type":"user","message":{{"role":"user","content":[{{"type":"image","source":{{"data":"{big}"}}}},{{"type":"text","text":"look at this"}}]}}}}"#
    );
    let lines = scan_huge(line.as_bytes());
    assert_eq!(lines[0].class, human("look at this"));
    assert_eq!(classify_line(line.as_bytes()), human("look at this"));
}

#[test]
fn a_3_mib_assistant_row_is_classified_in_bounded_memory() {
    let block = r#"{"type":"text","text":"a long answer with \"quotes\" and \u00e9 "},{"type":"tool_use","input":{"nested":[1,2,{"deep":true}]}},"#;
    let blocks = block.repeat(3 * MIB / block.len() + 1);
    let line = format!(
        r#"{{"message":{{"role":"assistant","content":[{blocks}{{"type":"text","text":"end"}}]}},"type":"assistant"}}"#
    );
    assert!(line.len() > 3 * MIB);
    let lines = scan_huge(line.as_bytes());
    assert_eq!(lines[0].class, Ok(LineClass::Assistant));
    assert_eq!(classify_line(line.as_bytes()), Ok(LineClass::Assistant));
}

#[test]
fn a_huge_line_between_normal_lines_keeps_offsets_exact() {
    let before = "{\"type\":\"summary\"}\n";
    let huge = format!(
        "{{\"type\":\"assistant\",\"pad\":\"{}\"}}\n",
        "p".repeat(2 * MIB)
    );
    let after = "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"after\"}}\r\n";
    let data = format!("{before}{huge}{after}");
    let mut s = LineScanner::default();
    let lines = scan_in_chunks(&mut s, data.as_bytes(), MIB);
    assert_eq!(
        lines,
        vec![
            ScannedLine {
                start: 0,
                end: before.len() as u64,
                class: Ok(LineClass::Summary),
            },
            ScannedLine {
                start: before.len() as u64,
                end: (before.len() + huge.len()) as u64,
                class: Ok(LineClass::Assistant),
            },
            ScannedLine {
                start: (before.len() + huge.len()) as u64,
                end: data.len() as u64,
                class: human("after"),
            },
        ]
    );
    assert!(s.buffer_capacity() <= DEFAULT_LINE_CAP + HUMAN_TEXT_CAP + 1024);
}

#[test]
fn a_huge_malformed_line_is_an_error() {
    let line = format!("{{\"type\":\"user\",\"pad\":\"{}", "p".repeat(3 * MIB));
    let mut s = LineScanner::default();
    assert!(scan_in_chunks(&mut s, line.as_bytes(), MIB).is_empty());
    assert_eq!(s.pending_bytes(), line.len() as u64);
    let lines = s.feed(b"\n");
    assert_eq!(lines[0].class, Err(MalformedLine::InvalidJson));
}

fn cap_text_owned(s: &str, cap: usize) -> String {
    super::super::classify::cap_text(s, cap).to_owned()
}

/// A small deterministic generator for the randomised comparison.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

fn ws(rng: &mut Rng) -> &'static str {
    ["", "", "", " ", "\t", " \r "][rng.below(6)]
}

fn gen_string(rng: &mut Rng) -> String {
    let mut s = String::from("\"");
    for _ in 0..rng.below(6) {
        s.push_str(rng.pick(&[
            "a",
            "bc",
            " ",
            "\\\"",
            "\\\\",
            "\\n",
            "\\u00e9",
            "\\ud83d\\ude00",
            "é",
            "😀",
            "\\/",
            "user",
            "text",
        ]));
    }
    s.push('"');
    s
}

fn gen_junk(rng: &mut Rng, depth: usize) -> String {
    let simple = [
        "0", "-1", "2.5e3", "1e400", "true", "false", "null", "\"x\"", "01", "1e-5",
    ];
    match rng.below(if depth > 2 { 1 } else { 4 }) {
        0 => rng.pick(&simple).to_owned(),
        1 => gen_string(rng),
        2 => {
            let items: Vec<String> = (0..rng.below(3))
                .map(|_| gen_junk(rng, depth + 1))
                .collect();
            format!("[{}]", items.join(","))
        }
        _ => {
            let items: Vec<String> = (0..rng.below(3))
                .map(|_| {
                    let key = rng.pick(&["\"type\"", "\"text\"", "\"content\"", "\"k\""]);
                    format!("{key}:{}", gen_junk(rng, depth + 1))
                })
                .collect();
            format!("{{{}}}", items.join(","))
        }
    }
}

fn gen_block(rng: &mut Rng) -> String {
    if rng.below(8) == 0 {
        return gen_junk(rng, 2);
    }
    let mut fields = Vec::new();
    for _ in 0..1 + rng.below(3) {
        fields.push(match rng.below(4) {
            0 | 1 => format!(
                "\"type\":{}",
                rng.pick(&[
                    "\"text\"",
                    "\"tool_result\"",
                    "\"image\"",
                    "\"t\\u0065xt\"",
                    "1"
                ])
            ),
            2 => format!(
                "\"text\":{}",
                if rng.below(5) == 0 {
                    gen_junk(rng, 2)
                } else {
                    gen_string(rng)
                }
            ),
            _ => format!("\"content\":{}", gen_junk(rng, 2)),
        });
    }
    format!("{{{}}}", fields.join(","))
}

fn gen_row(rng: &mut Rng) -> String {
    let mut fields = Vec::new();
    if rng.below(2) == 0 {
        // Mostly a human turn, so that the text paths are well exercised.
        fields.push("\"type\":\"user\"".to_owned());
        let content = if rng.below(2) == 0 {
            gen_string(rng)
        } else {
            let blocks: Vec<String> = (0..1 + rng.below(4))
                .map(|_| format!("{{\"type\":\"text\",\"text\":{}}}", gen_string(rng)))
                .collect();
            format!("[{}]", blocks.join(","))
        };
        fields.push(format!(
            "\"message\":{{\"role\":\"user\",\"content\":{content}}}"
        ));
    }
    for _ in 0..rng.below(4) {
        let field = match rng.below(7) {
            0 | 1 => format!(
                "\"type\":{}",
                rng.pick(&[
                    "\"user\"",
                    "\"user\"",
                    "\"assistant\"",
                    "\"summary\"",
                    "\"system\"",
                    "null"
                ])
            ),
            2 => format!(
                "\"{}\":{}",
                rng.pick(&["isMeta", "isSidechain", "is\\u004deta"]),
                rng.pick(&["true", "false", "\"true\"", "null"])
            ),
            3 | 4 => {
                let mut m = Vec::new();
                for _ in 0..rng.below(4) {
                    m.push(match rng.below(4) {
                        0 => format!(
                            "\"role\":{}",
                            rng.pick(&["\"user\"", "\"assistant\"", "\"us\\u0065r\"", "3"])
                        ),
                        1 | 2 => match rng.below(3) {
                            0 => format!("\"content\":{}", gen_string(rng)),
                            1 => {
                                let blocks: Vec<String> =
                                    (0..rng.below(4)).map(|_| gen_block(rng)).collect();
                                format!("\"content\":[{}]", blocks.join(","))
                            }
                            _ => format!("\"content\":{}", gen_junk(rng, 1)),
                        },
                        _ => format!("\"k\":{}", gen_junk(rng, 1)),
                    });
                }
                if rng.below(10) == 0 {
                    format!("\"message\":{}", gen_junk(rng, 1))
                } else {
                    format!("\"message\":{{{}}}", m.join(","))
                }
            }
            _ => format!("\"uuid\":{}", gen_junk(rng, 0)),
        };
        let at = rng.below(fields.len() + 1);
        fields.insert(at, field);
    }
    let sep = format!("{},{}", ws(rng), ws(rng));
    format!("{}{{{}}}{}", ws(rng), fields.join(&sep), ws(rng))
}

/// Random rows, some of them corrupted, scanned as a file with random chunking, line
/// caps (0 streams every line) and text caps, against each line parsed whole.
#[test]
fn randomised_rows_agree_with_whole_line_parsing() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut human_turns, mut errors) = (0, 0);
    for _ in 0..200 {
        let text_cap = [0, 1, 2, 3, 5, 8, HUMAN_TEXT_CAP][rng.below(7)];
        let line_cap = [0, 0, 30, DEFAULT_LINE_CAP][rng.below(4)];
        let mut file = Vec::new();
        let mut want = Vec::new();
        for _ in 0..20 {
            let mut line = gen_row(&mut rng).into_bytes();
            for _ in 0..[0, 0, 0, 1, 2][rng.below(5)] {
                if line.is_empty() {
                    break;
                }
                let at = rng.below(line.len());
                match rng.below(3) {
                    0 => {
                        line.remove(at);
                    }
                    1 => line.insert(at, b"\"\\{}[],:e0\xc3 "[rng.below(12)]),
                    _ => line.truncate(at),
                }
            }
            let start = file.len() as u64;
            file.extend_from_slice(&line);
            file.extend_from_slice(if rng.below(4) == 0 { b"\r\n" } else { b"\n" });
            let class = classify_line_capped(&line, text_cap);
            match class {
                Ok(LineClass::Blank) => continue,
                Ok(LineClass::HumanTurn { .. }) => human_turns += 1,
                Err(_) => errors += 1,
                _ => {}
            }
            want.push(ScannedLine {
                start,
                end: file.len() as u64,
                class,
            });
        }
        let mut scanner = LineScanner::with_text_cap(line_cap, text_cap);
        let mut got = Vec::new();
        let mut rest = file.as_slice();
        while !rest.is_empty() {
            let (piece, tail) = rest.split_at((1 + rng.below(64)).min(rest.len()));
            got.extend(scanner.feed(piece));
            rest = tail;
        }
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(
                g,
                w,
                "line cap {line_cap}, text cap {text_cap}, line {:?}",
                String::from_utf8_lossy(&file[w.start as usize..w.end as usize])
            );
        }
        assert_eq!(got.len(), want.len());
    }
    assert!(human_turns > 400, "{human_turns}");
    assert!(errors > 400, "{errors}");
}
