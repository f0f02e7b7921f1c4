//! Fixtures shared by the integration tests: stores in memory or in a temporary file, a
//! record helper, and channel sinks for wakes and background errors.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rusqlite::{Connection, OptionalExtension};
use session_awareness_core::{
    ChangeEvent, Cursor, Error, ErrorSink, Hooks, Notice, Options, Provenance, RecordInput,
    StateEvent, Store, WakeRequest, WakeSink,
};
use tempfile::TempDir;

/// A fixed point in time (epoch ms) the tests start from.
pub const T0: i64 = 1_700_000_000_000;
/// One minute in ms.
pub const MINUTE: i64 = 60 * 1000;
/// One hour in ms.
pub const HOUR: i64 = 60 * MINUTE;
/// One day in ms.
pub const DAY: i64 = 24 * HOUR;

/// A main-like watcher.
pub const MAIN: &str = "agent:main:main";
/// A second main-like watcher, of another agent.
pub const OPS: &str = "agent:ops:main";
/// A nested child session.
pub const CHILD: &str = "agent:main:subagent:child";
/// Another nested child session.
pub const CHILD2: &str = "agent:main:subagent:second";

/// How long a test waits for something that must happen.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// A [`WakeSink`] that forwards every wake into a channel.
pub struct ChannelWake(Mutex<Sender<WakeRequest>>);

impl WakeSink for ChannelWake {
    fn wake(&self, request: WakeRequest) {
        let _ = self.0.lock().send(request);
    }
}

/// An [`ErrorSink`] that forwards every reported failure into a channel.
pub struct ChannelErrors(Mutex<Sender<Error>>);

impl ErrorSink for ChannelErrors {
    fn report(&self, error: Error) {
        let _ = self.0.lock().send(error);
    }
}

/// The options the tests use unless they say otherwise: the defaults, with a short wake
/// coalescing window so wake tests stay fast.
pub fn opts() -> Options {
    Options {
        wake_coalesce_ms: 20,
        ..Options::default()
    }
}

/// A store with its wake and error channels, and (for file stores) the directory that holds
/// the database.
pub struct Fixture {
    pub store: Store,
    pub wakes: Receiver<WakeRequest>,
    pub errors: Receiver<Error>,
    pub path: Option<PathBuf>,
    pub opts: Options,
    dir: Option<TempDir>,
}

impl Fixture {
    /// A private in-memory store with [`opts`].
    pub fn memory() -> Self {
        Self::memory_with(opts())
    }

    /// A private in-memory store.
    pub fn memory_with(opts: Options) -> Self {
        Self::open(":memory:", None, opts)
    }

    /// A store in a new temporary file with [`opts`].
    pub fn file() -> Self {
        Self::file_with(opts())
    }

    /// A store in a new temporary file.
    pub fn file_with(opts: Options) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("state.sqlite");
        let mut fx = Self::open(path.to_str().expect("utf-8 path"), Some(path.clone()), opts);
        fx.dir = Some(dir);
        fx
    }

    /// Opens a store at `path` with fresh channels.
    pub fn open(path: &str, file: Option<PathBuf>, opts: Options) -> Self {
        let (wake_tx, wakes) = mpsc::channel();
        let (error_tx, errors) = mpsc::channel();
        let hooks = Hooks {
            wake: Some(Arc::new(ChannelWake(Mutex::new(wake_tx)))),
            errors: Some(Arc::new(ChannelErrors(Mutex::new(error_tx)))),
            clock: None,
        };
        let store = Store::open(path, opts, hooks).expect("store opens");
        Fixture {
            store,
            wakes,
            errors,
            path: file,
            opts,
            dir: None,
        }
    }

    /// The database file.
    pub fn file_path(&self) -> &Path {
        self.path.as_deref().expect("a file store")
    }

    /// A second, independent store on the same file (as another gateway process would open).
    pub fn attach(&self) -> Fixture {
        self.attach_with(self.opts)
    }

    /// A second, independent store on the same file, with other options.
    pub fn attach_with(&self, opts: Options) -> Fixture {
        let path = self.file_path().to_path_buf();
        Fixture::open(path.to_str().expect("utf-8 path"), Some(path.clone()), opts)
    }

    /// Closes the store and opens the file again (a gateway restart): the queue starts empty.
    pub fn reopen(&mut self) {
        self.reopen_with(self.opts);
    }

    /// Closes the store and opens the file again with other options.
    pub fn reopen_with(&mut self, opts: Options) {
        self.settle();
        self.store.close();
        let next = self.attach_with(opts);
        self.store = next.store;
        self.wakes = next.wakes;
        self.errors = next.errors;
        self.opts = opts;
    }

    /// A plain SQLite connection to the file, for reading what the store wrote.
    pub fn conn(&self) -> Connection {
        let conn = Connection::open(self.file_path()).expect("second connection");
        conn.busy_timeout(Duration::from_secs(30))
            .expect("busy timeout");
        conn
    }

    /// The cursor row of (watcher, target) as stored (live or inert), read through a second
    /// connection.
    pub fn cursor(&self, watcher: &str, target: &str) -> Option<Cursor> {
        self.conn()
            .query_row(
                "SELECT last_seen_sequence, notified_sequence, material_sequence, provenance, \
                 updated_at, watcher_store_path FROM session_watch_cursors \
                 WHERE watcher_session_key = ?1 AND target_session_key = ?2",
                [watcher, target],
                |r| {
                    Ok(Cursor {
                        watcher: watcher.to_owned(),
                        target: target.to_owned(),
                        last_seen: r.get(0)?,
                        notified: r.get(1)?,
                        material: r.get(2)?,
                        provenance: Provenance::parse(&r.get::<_, String>(3)?).expect("provenance"),
                        updated_at: r.get(4)?,
                        scope: r.get(5)?,
                    })
                },
            )
            .optional()
            .expect("cursor read")
    }

    /// (L, N, M) of an existing cursor.
    pub fn lnm(&self, watcher: &str, target: &str) -> (i64, i64, i64) {
        let c = self
            .cursor(watcher, target)
            .unwrap_or_else(|| panic!("no cursor {watcher} -> {target}"));
        (c.last_seen, c.notified, c.material)
    }

    /// The number of cursor rows.
    pub fn cursor_count(&self) -> i64 {
        self.conn()
            .query_row("SELECT count(*) FROM session_watch_cursors", [], |r| {
                r.get(0)
            })
            .expect("count cursors")
    }

    /// Every retained event sequence, ascending.
    pub fn sequences(&self) -> Vec<i64> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare("SELECT sequence FROM session_state_events ORDER BY sequence")
            .expect("prepare");
        let rows = stmt.query_map([], |r| r.get(0)).expect("query");
        rows.collect::<rusqlite::Result<_>>().expect("rows")
    }

    /// (last_sequence, pruned_max_sequence) of a head row, if there is one.
    pub fn head_row(&self, key: &str, agent: &str) -> Option<(i64, i64)> {
        use rusqlite::OptionalExtension;
        self.conn()
            .query_row(
                "SELECT last_sequence, pruned_max_sequence FROM session_state_heads \
                 WHERE session_key = ?1 AND agent_id = ?2",
                [key, agent],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .expect("head read")
    }

    /// Waits (bounded) until no automatic prune runs in the background.
    pub fn settle(&self) {
        let start = Instant::now();
        while self.store.is_pruning() {
            assert!(
                start.elapsed() < PATIENCE,
                "the automatic prune did not finish"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The next wake; fails the test if none comes.
    pub fn next_wake(&self) -> WakeRequest {
        self.wakes.recv_timeout(PATIENCE).expect("a wake")
    }

    /// Fails the test if a wake arrives within `ms`.
    pub fn assert_no_wake(&self, ms: u64) {
        match self.wakes.recv_timeout(Duration::from_millis(ms)) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(w) => panic!("unexpected wake {w:?}"),
            Err(RecvTimeoutError::Disconnected) => {}
        }
    }

    /// Fails the test if a background failure was reported.
    pub fn assert_no_error(&self) {
        if let Ok(e) = self.errors.try_recv() {
            panic!("unexpected background error {} {e}", e.code());
        }
    }

    /// Records through the fixture's store.
    pub fn rec(&self, key: &str, kind: &str, actor: Option<&str>, now: i64) -> StateEvent {
        rec(&self.store, key, kind, actor, now)
    }

    /// Records an input that must be stored.
    pub fn record(&self, input: RecordInput, now: i64) -> StateEvent {
        record(&self.store, input, now)
    }
}

/// A record input: `kind` on `key` by a human, summary "s".
pub fn input(key: &str, kind: &str) -> RecordInput {
    RecordInput {
        session_key: key.into(),
        kind: kind.into(),
        actor_type: "human".into(),
        summary: "s".into(),
        ..Default::default()
    }
}

/// Records `kind` on `key` at `now`. `actor` is the causing session (actor type `agent`);
/// `None` is a human with no id. Panics unless the event is stored.
pub fn rec(store: &Store, key: &str, kind: &str, actor: Option<&str>, now: i64) -> StateEvent {
    let mut i = input(key, kind);
    if let Some(a) = actor {
        i.actor_type = "agent".into();
        i.actor_id = Some(a.into());
    }
    record(store, i, now)
}

/// Records an input that must be stored.
pub fn record(store: &Store, input: RecordInput, now: i64) -> StateEvent {
    store
        .record(input, now)
        .expect("record succeeds")
        .expect("record stores an event")
}

/// The sequences of some events of a read.
pub fn seqs(events: &[ChangeEvent]) -> Vec<i64> {
    events.iter().map(ChangeEvent::sequence).collect()
}

/// The events of a read, each one the store wrote (a foreign row fails the test).
pub fn stored(events: &[ChangeEvent]) -> Vec<StateEvent> {
    events
        .iter()
        .map(|e| e.stored().cloned().expect("a row the store wrote"))
        .collect()
}

/// (target, changesSince) of some notices, in order.
pub fn pairs(notices: &[Notice]) -> Vec<(String, i64)> {
    notices
        .iter()
        .map(|n| (n.target_key.clone(), n.changes_since))
        .collect()
}

/// `(target, changes_since)` pairs from literals.
pub fn expect_pairs(list: &[(&str, i64)]) -> Vec<(String, i64)> {
    list.iter().map(|(t, l)| ((*t).to_owned(), *l)).collect()
}

/// Targets as owned strings, for `acknowledge`.
pub fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// Runs a timing-sensitive check until one attempt is judged. Each attempt returns `false`
/// when its setup took too long to prove anything (a loaded machine can stall a thread for
/// longer than a wake's coalescing window); it then runs again on a fresh fixture.
pub fn until_judged(mut attempt: impl FnMut() -> bool) {
    for _ in 0..10 {
        if attempt() {
            return;
        }
    }
    panic!("the machine was too busy for ten attempts in a row");
}
