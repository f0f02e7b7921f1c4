//! What the upstream tests share, on either store: the transcript lines a human turn is
//! written as, appending them as Claude Code does, and an error sink that keeps the codes.
#![allow(dead_code)]

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use serde_json::json;
use session_awareness_core::{Error, ErrorSink};

/// The reports a store made, by code.
#[derive(Default)]
pub struct Errors(pub Mutex<Vec<String>>);
impl ErrorSink for Errors {
    fn report(&self, error: Error) {
        self.0.lock().unwrap().push(error.code().to_owned());
    }
}

/// One transcript line: a turn a human typed.
pub fn human(text: &str) -> String {
    json!({"type": "user", "message": {"role": "user", "content": text}}).to_string() + "\n"
}

/// Appends `s` to the transcript at `path`, creating it.
pub fn append(path: &Path, s: &str) {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(s.as_bytes()).unwrap();
}
