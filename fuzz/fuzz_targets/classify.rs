#![no_main]
//! The JSONL transcript classifier (semantics.md#upstream).
//!
//! Input: one byte choosing the scanner's line cap (0 streams every line), one byte seeding
//! the chunking, then the file. Checks: `LineScanner` fed the file in pseudo-random chunks
//! (and in one piece) reports exactly the complete non-blank lines, with their offsets and
//! the class `classify_line` gives each line whole, keeps the partial last line pending, and
//! `classify_value` of a line parsed as a JSON object agrees with `classify_line`.

use libfuzzer_sys::fuzz_target;
use session_awareness_core::upstream::{
    classify_line, classify_value, LineClass, LineScanner, ScannedLine, DEFAULT_LINE_CAP,
};

const LINE_CAPS: [usize; 5] = [0, 1, 16, 4096, DEFAULT_LINE_CAP];

fuzz_target!(|data: &[u8]| {
    let [cap, seed, file @ ..] = data else {
        return;
    };
    let cap = LINE_CAPS[usize::from(*cap) % LINE_CAPS.len()];

    let mut want = Vec::new();
    let mut start = 0;
    for (i, _) in file.iter().enumerate().filter(|(_, b)| **b == b'\n') {
        let line = &file[start..i];
        let class = classify_line(line);
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) {
            if v.is_object() {
                assert_eq!(Ok(classify_value(&v)), class);
            }
        }
        if class != Ok(LineClass::Blank) {
            want.push(ScannedLine {
                start: start as u64,
                end: i as u64 + 1,
                class,
            });
        }
        start = i + 1;
    }

    let mut scanner = LineScanner::new(cap);
    let mut got = Vec::new();
    let mut rest = file;
    let mut x = u32::from(*seed);
    while !rest.is_empty() {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let size = match x >> 29 {
            0 => 1,
            1..=4 => 1 + (x >> 8) as usize % 16,
            _ => 1 + (x >> 8) as usize % 512,
        };
        let (chunk, tail) = rest.split_at(size.min(rest.len()));
        got.extend(scanner.feed(chunk));
        rest = tail;
    }
    assert_eq!(got, want);
    assert_eq!(scanner.committed(), start as u64);
    assert_eq!(scanner.pending_bytes(), (file.len() - start) as u64);
    assert_eq!(scanner.consumed(), file.len() as u64);

    assert_eq!(LineScanner::new(cap).feed(file), want);
});
