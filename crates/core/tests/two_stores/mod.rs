//! Fixtures of the tests where two stores on one file stand for two gateway processes: the
//! keys, the stores (their background poll too slow to matter, so tests poll with `sync_now`),
//! a record helper and the readers of what a store queued or woke.
#![allow(dead_code)]

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rusqlite::Connection;
use session_awareness_core::{Hooks, Notice, Options, RecordInput, Store, WakeRequest, WakeSink};

/// The watcher.
pub const W: &str = "agent:main:main";
/// The watched target.
pub const T: &str = "agent:main:subagent:research";
/// The time every record is made at (epoch ms).
pub const NOW: i64 = 1_700_000_000_000;

struct Wakes(Mutex<mpsc::Sender<WakeRequest>>);
impl WakeSink for Wakes {
    fn wake(&self, request: WakeRequest) {
        let _ = self.0.lock().send(request);
    }
}

/// The options with the poll every `sync_interval_ms` and no wake coalescing.
pub fn opts(sync_interval_ms: u32) -> Options {
    Options {
        sync_interval_ms,
        wake_coalesce_ms: 0,
        ..Options::default()
    }
}

/// A store on `path` whose background poll is too slow to matter: tests poll with `sync_now`.
pub fn open(path: &str) -> Store {
    Store::open(path, opts(60_000), Hooks::default()).unwrap()
}

/// [`open`], with the store's wakes.
pub fn open_waking(path: &str) -> (Store, mpsc::Receiver<WakeRequest>) {
    let (tx, rx) = mpsc::channel();
    let hooks = Hooks {
        wake: Some(Arc::new(Wakes(Mutex::new(tx)))),
        ..Hooks::default()
    };
    (Store::open(path, opts(60_000), hooks).unwrap(), rx)
}

/// The database file's path in `dir`.
pub fn db(dir: &tempfile::TempDir) -> String {
    dir.path().join("state.sqlite").to_str().unwrap().to_owned()
}

/// A human's message to `target`.
pub fn human(target: &str) -> RecordInput {
    RecordInput {
        session_key: target.into(),
        kind: "human_direct_message".into(),
        actor_type: "human".into(),
        summary: "human message via telegram".into(),
        ..Default::default()
    }
}

/// Records `input` at [`NOW`] and returns its sequence.
pub fn record(store: &Store, input: RecordInput) -> i64 {
    store.record(input, NOW).unwrap().unwrap().sequence
}

/// Each notice's target and position.
pub fn positions(notices: &[Notice]) -> Vec<(String, i64)> {
    notices
        .iter()
        .map(|n| (n.target_key.clone(), n.changes_since))
        .collect()
}

/// The session the next wake calls, waited for up to ten seconds.
pub fn woken(wakes: &mpsc::Receiver<WakeRequest>) -> String {
    wakes
        .recv_timeout(Duration::from_secs(10))
        .unwrap()
        .session_key
}

/// The cursor's L, N and M, read from the file.
pub fn lnm(conn: &Connection, watcher: &str, target: &str) -> (i64, i64, i64) {
    conn.query_row(
        "SELECT last_seen_sequence, notified_sequence, material_sequence \
         FROM session_watch_cursors WHERE watcher_session_key = ?1 AND target_session_key = ?2",
        [watcher, target],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .unwrap()
}
