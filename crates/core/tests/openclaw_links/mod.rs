//! What the tests of upstream links in OpenClaw's table share: the file OpenClaw 2026.9.6
//! wrote (tests/fixtures/openclaw-2026.9.6.sqlite) and its JSON report, a temp dir holding a
//! copy of it or a fresh file, transcripts, and the link table's columns and rows.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use serde_json::{json, Value};
use session_awareness_core::{Error, ErrorSink, Hooks, Options, Store};

#[path = "../transcripts/mod.rs"]
mod transcripts;
pub use transcripts::{append, human};

pub const MAIN: &str = "agent:main:main";
/// The links OpenClaw wrote into the fixture.
pub const OC_LOCAL: &str = "agent:main:claude:fixture-local";
pub const OC_REMOTE: &str = "agent:main:claude:fixture-remote";
pub const OC_REMOTE_MARKER: &str = "c0ffee00-0000-4000-8000-000000000003";
/// The highest sequence in the fixture.
pub const OC_HEAD: i64 = 13;
pub const THREAD: &str = "0d9e8f7a-6b5c-4d3e-8f21-a0b1c2d3e4f5";

/// An hour after OpenClaw's last write to the fixture: the store's retention (30 days) keeps
/// OpenClaw's rows, as it would in a gateway that moved to the store that day.
pub fn now() -> i64 {
    let report = fixture_json();
    let rows = report["rows"].as_object().unwrap();
    let last = rows
        .values()
        .flat_map(|t| t.as_array().unwrap())
        .filter_map(|r| r.get("updated_at").or_else(|| r.get("occurred_at")))
        .filter_map(Value::as_i64)
        .max()
        .unwrap();
    last + 3_600_000
}

pub fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openclaw-2026.9.6.sqlite")
}

pub fn fixture_json() -> Value {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openclaw-2026.9.6.json"),
    )
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

#[derive(Default)]
pub struct Errors(pub Mutex<Vec<String>>);
impl ErrorSink for Errors {
    fn report(&self, error: Error) {
        self.0.lock().unwrap().push(error.code().to_owned());
    }
}

pub struct Dir {
    dir: tempfile::TempDir,
    db: PathBuf,
    pub errors: Arc<Errors>,
}

impl Dir {
    /// A temp dir with a database: a copy of OpenClaw's file, or none yet (a fresh one).
    pub fn new(openclaw: bool) -> Dir {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.sqlite");
        if openclaw {
            std::fs::copy(fixture(), &db).unwrap();
        }
        Dir {
            dir,
            db,
            errors: Arc::default(),
        }
    }

    pub fn open(&self) -> Store {
        let hooks = Hooks {
            errors: Some(self.errors.clone() as Arc<dyn ErrorSink>),
            ..Default::default()
        };
        Store::open(self.db.to_str().unwrap(), Options::default(), hooks).unwrap()
    }

    /// A raw connection; only while no store has the file open.
    pub fn conn(&self) -> Connection {
        Connection::open(&self.db).unwrap()
    }

    pub fn transcript(&self) -> PathBuf {
        self.dir.path().join(format!("{THREAD}.jsonl"))
    }
}

pub fn human_item(uuid: &str, text: &str) -> Value {
    json!({"uuid": uuid, "type": "user", "message": {"role": "user", "content": text}})
}

/// (name, type, notnull, default, pk) of every column of the link table.
pub fn table_info(conn: &Connection) -> Vec<(String, String, i64, Option<String>, i64)> {
    let mut stmt = conn
        .prepare("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info('session_upstream_links')")
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

/// Every link row as (session_key, agent_id, catalog_id, host_id, thread_id, upstream_kind,
/// upstream_ref_json, last_marker_json, last_scanned_at, failure_count, own_messages_json).
pub type Row = (
    String,
    String,
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<String>,
);

pub fn rows(conn: &Connection) -> Vec<Row> {
    let mut stmt = conn
        .prepare(
            "SELECT session_key, agent_id, catalog_id, host_id, thread_id, upstream_kind, \
             upstream_ref_json, last_marker_json, last_scanned_at, failure_count, own_messages_json \
             FROM session_upstream_links ORDER BY session_key, agent_id",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
                r.get(9)?,
                r.get(10)?,
            ))
        })
        .unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}
