//! Opening the database (semantics.md#storage): the file and its mode, pragmas, and the additive schema.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, Result};

pub mod upgrade;

/// The tables the store shares with OpenClaw, created as OpenClaw's newest generation
/// (2026.9.6) creates them: same names, same columns, same column definitions (OpenClaw
/// compares each definition's text when it opens a file) and `STRICT`. Created with
/// `IF NOT EXISTS` so they coexist with any other tables in the file; an existing table of an
/// older generation is brought up to date by [`upgrade`]. `user_version` is never read or
/// written: it belongs to the host application.
const SHARED_TABLES: &str = "
CREATE TABLE IF NOT EXISTS session_state_events (
  sequence INTEGER PRIMARY KEY AUTOINCREMENT,
  dedupe_key TEXT UNIQUE,
  session_key TEXT NOT NULL,
  session_id TEXT,
  agent_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  actor_type TEXT NOT NULL,
  actor_id TEXT,
  run_id TEXT,
  occurred_at INTEGER NOT NULL,
  summary TEXT NOT NULL,
  payload_json TEXT
) STRICT;
CREATE TABLE IF NOT EXISTS session_state_heads (
  session_key TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  last_sequence INTEGER NOT NULL,
  pruned_max_sequence INTEGER NOT NULL DEFAULT 0,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (session_key, agent_id)
) STRICT;
CREATE TABLE IF NOT EXISTS session_watch_cursors (
  watcher_session_key TEXT NOT NULL,
  watcher_store_path TEXT,
  target_session_key TEXT NOT NULL,
  last_seen_sequence INTEGER NOT NULL DEFAULT 0,
  notified_sequence INTEGER NOT NULL DEFAULT 0,
  material_sequence INTEGER NOT NULL DEFAULT 0,
  provenance TEXT NOT NULL DEFAULT 'explicit' CHECK (provenance IN ('explicit', 'ambient-group')),
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (watcher_session_key, target_session_key)
) STRICT;
";

/// How many prepared statements each connection keeps (record, drain and reads all hit it).
const STATEMENT_CACHE: usize = 64;

/// Opens (creating if needed) the database at `path` with the pragmas of semantics.md#storage and the schema.
///
/// `:memory:` opens a private in-memory database. A new file is created with mode 0600, and a
/// missing parent directory with mode 0700.
pub fn open(path: &str, busy_timeout_ms: u32) -> Result<Connection> {
    prepare(path)?;
    connect(path, busy_timeout_ms)
}

/// Creates the file of `path` (mode 0600) and its directory (0700) when missing, and checks
/// that an existing file is writable, without opening it. Nothing to do for `:memory:`.
pub fn prepare(path: &str) -> Result<()> {
    if path.is_empty() {
        return Err(Error::invalid("path must be a non-empty string"));
    }
    if path != ":memory:" {
        prepare_file(Path::new(path))?;
    }
    Ok(())
}

/// Opens the connection of [`open`] on a file [`prepare`] made ready.
pub fn connect(path: &str, busy_timeout_ms: u32) -> Result<Connection> {
    crate::sqlite::exclusive::install();
    let conn = Connection::open_with_flags(
        sqlite_name(path).as_ref(),
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    configure(&conn, busy_timeout_ms)?;
    crate::sqlite::inert::register(&conn)?;
    Ok(conn)
}

/// The name to hand SQLite for the file-system path `path`. The bundled SQLite is built to
/// read any name starting with `file:` as a URI, whose parameters could name another file
/// (or open it read-only); `./` in front keeps such a relative path a path, the one
/// `prepare_file` created.
pub fn sqlite_name(path: &str) -> std::borrow::Cow<'_, str> {
    if path.starts_with("file:") {
        format!("./{path}").into()
    } else {
        path.into()
    }
}

/// Applies the pragmas and creates the schema on an open connection.
pub fn configure(conn: &Connection, busy_timeout_ms: u32) -> Result<()> {
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // Without the query planner stability guarantee SQLite marks a statement for re-preparing
    // when a bound value might change its plan (a `LIMIT ?`, an `=` on an unindexed column),
    // and clearing its bindings, as the statement cache does, then expires it: the cached
    // statements of `changesSince` and of the prune would be parsed again on every call.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    conn.busy_timeout(std::time::Duration::from_millis(u64::from(busy_timeout_ms)))?;
    upgrade::refuse_foreign(conn)?;
    // WAL lets readers in other processes run beside a writer; where the file system cannot
    // hold a WAL (or for in-memory databases) SQLite keeps its answer and we accept it.
    let mode = wal_mode(conn, busy_timeout_ms)?;
    if !mode.eq_ignore_ascii_case("wal") && !mode.eq_ignore_ascii_case("memory") {
        conn.query_row("PRAGMA journal_mode=DELETE", [], |r| r.get::<_, String>(0))?;
    }
    // temp_store=MEMORY keeps statement journals (opened by every upsert and multi-row
    // update) in 1 KiB heap chunks; with the default each one allocated and freed a 64 KiB
    // buffer per statement, and glibc grew and trimmed the heap with brk() around it.
    conn.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA temp_store=MEMORY;")?;
    // Creating or upgrading the schema is a write: take the write lock up front so two
    // processes opening a file at once wait for each other instead of failing on a lock
    // upgrade, and the second one sees the first one's finished shape.
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let done = install(conn).and_then(|()| Ok(conn.execute_batch("COMMIT")?));
    if done.is_err() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    done
}

/// Asks for WAL and returns the journal mode SQLite answers with. Switching a file to WAL takes
/// its exclusive lock, and SQLite answers a busy lock there at once, without the busy handler:
/// two connections opening a rollback-journal file together (another process or store
/// upgrading it) would fail with "database is locked". So a busy answer is retried here until
/// the busy timeout is spent.
fn wal_mode(conn: &Connection, busy_timeout_ms: u32) -> Result<String> {
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0)) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && started.elapsed()
                        < std::time::Duration::from_millis(u64::from(busy_timeout_ms)) =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            other => return Ok(other?),
        }
    }
}

/// Creates the missing tables and upgrades the existing ones, inside the caller's transaction.
fn install(conn: &Connection) -> Result<()> {
    let own = crate::sqlite::lease::before_install(conn)?;
    conn.execute_batch(SHARED_TABLES)?;
    crate::sqlite::lease::install(conn, own)?;
    upgrade::upgrade(conn)?;
    // The upstream link table and its generations.
    crate::sqlite::links::ensure_table(conn)
}

#[cfg(unix)]
fn prepare_file(path: &Path) -> Result<()> {
    use std::fs::{DirBuilder, OpenOptions};
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};

    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        }
    }
    // Create the file ourselves so it is born 0600; SQLite gives its -wal and -shm files the
    // mode of the main file.
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        // An existing file must be writable. SQLite would open a read-only one read-only and
        // create its -wal and -shm files with the same read-only mode, which then keep the
        // store failing after the file itself is made writable again. Asked without opening
        // it: closing a handle on the file would drop the locks this process's connections
        // (another store on it) hold there.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            Ok(crate::sqlite::exclusive::check_writable(path)?)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(not(unix))]
fn prepare_file(path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_all_tables_strict() -> Result<()> {
        let conn = open(":memory:", 1000)?;
        for t in [
            "session_state_events",
            "session_state_heads",
            "session_watch_cursors",
            "session_upstream_links",
        ] {
            let sql: String = conn.query_row(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [t],
                |r| r.get(0),
            )?;
            assert!(sql.trim_end().ends_with("STRICT"), "{t}");
        }
        Ok(())
    }

    #[test]
    fn a_file_colon_name_stays_a_path() {
        assert_eq!(
            sqlite_name("file:state.sqlite?mode=ro"),
            "./file:state.sqlite?mode=ro"
        );
        assert_eq!(sqlite_name("/var/lib/file:x"), "/var/lib/file:x");
        assert_eq!(sqlite_name(":memory:"), ":memory:");
    }

    #[test]
    fn cached_statements_are_not_prepared_again() -> Result<()> {
        use rusqlite::{params, StatementStatus};
        // A `LIMIT ?` and an `=` on an unindexed column: either would make SQLite re-prepare
        // the statement on each use once the cache has cleared its bindings.
        let conn = open(":memory:", 1000)?;
        let sql = "SELECT sequence FROM session_state_events \
                   WHERE session_key = ?1 AND agent_id = ?2 ORDER BY sequence LIMIT ?3";
        for limit in [1, 2, 2] {
            let mut stmt = conn.prepare_cached(sql)?;
            let n = stmt
                .query_map(params!["k", "main", limit], |r| r.get::<_, i64>(0))?
                .count();
            assert_eq!(n, 0);
            assert_eq!(stmt.get_status(StatementStatus::RePrepare), 0);
        }
        Ok(())
    }

    #[test]
    fn empty_path_is_refused() {
        assert_eq!(open("", 0).unwrap_err().code(), "ERR_INVALID_ARG");
    }
}
