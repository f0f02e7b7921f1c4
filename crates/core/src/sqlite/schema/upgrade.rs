//! The additive upgrade (semantics.md#storage): a file written by any OpenClaw generation opens, and its tables
//! end up with every column of the newest generation, without a rebuild, a new table or a
//! change to `user_version`.
//!
//! OpenClaw's generations of the three shared tables, oldest first:
//! 1. tables without `STRICT`, and cursors without `provenance` (an ambient group watch was a
//!    second, sentinel row whose watcher is `ambient-group-watch:` + hex of the real watcher);
//! 2. the same tables `STRICT`;
//! 3. cursors with `provenance` (appended by OpenClaw's own migration, or in the table);
//! 4. cursors with `watcher_store_path`, appended by OpenClaw's writer on its first write;
//! 5. 2026.9.6: `watcher_store_path` in the table, second column.
//!
//! For each table the columns present are read (`PRAGMA table_xinfo`) and each missing one
//! is appended (`ALTER TABLE … ADD COLUMN`) with OpenClaw's own definition, whose default lets a writer that omits it go
//! on working: L/N/M `0`, `provenance` `'explicit'`, `pruned_max_sequence` `0`, the others
//! NULL. A missing column that cannot be appended (a key, or `NOT NULL` without a default)
//! means the table is not one of these generations: [`Error::ForeignSchema`], and nothing
//! changes. The indexes OpenClaw creates are reused: one is created only when no index on the
//! same columns exists, under OpenClaw's name.

use rusqlite::Connection;

use crate::error::{Error, Result};

// Every statement is a constant of its own: the SQL the store runs never depends on anything
// read at run time.
const ADD_SESSION_ID: &str = "ALTER TABLE session_state_events ADD COLUMN session_id TEXT";
const ADD_ACTOR_ID: &str = "ALTER TABLE session_state_events ADD COLUMN actor_id TEXT";
const ADD_RUN_ID: &str = "ALTER TABLE session_state_events ADD COLUMN run_id TEXT";
const ADD_PAYLOAD_JSON: &str = "ALTER TABLE session_state_events ADD COLUMN payload_json TEXT";
const ADD_PRUNED_MAX_SEQUENCE: &str = "ALTER TABLE session_state_heads \
     ADD COLUMN pruned_max_sequence INTEGER NOT NULL DEFAULT 0";
const ADD_WATCHER_STORE_PATH: &str =
    "ALTER TABLE session_watch_cursors ADD COLUMN watcher_store_path TEXT";
const ADD_LAST_SEEN_SEQUENCE: &str = "ALTER TABLE session_watch_cursors \
     ADD COLUMN last_seen_sequence INTEGER NOT NULL DEFAULT 0";
const ADD_NOTIFIED_SEQUENCE: &str = "ALTER TABLE session_watch_cursors \
     ADD COLUMN notified_sequence INTEGER NOT NULL DEFAULT 0";
const ADD_MATERIAL_SEQUENCE: &str = "ALTER TABLE session_watch_cursors \
     ADD COLUMN material_sequence INTEGER NOT NULL DEFAULT 0";
/// `provenance` as OpenClaw defines it, so OpenClaw accepts the appended column as its own.
const ADD_PROVENANCE: &str = "ALTER TABLE session_watch_cursors ADD COLUMN \
     provenance TEXT NOT NULL DEFAULT 'explicit' CHECK (provenance IN ('explicit', 'ambient-group'))";

/// A column's name and the statement that appends it (`None`: it cannot be appended, so a
/// table without it is foreign).
type Column = (&'static str, Option<&'static str>);

/// The columns of the newest generation per table, in its order.
const COLUMNS: [(&str, &[Column]); 3] = [
    (
        "session_state_events",
        &[
            ("sequence", None),
            ("dedupe_key", None),
            ("session_key", None),
            ("session_id", Some(ADD_SESSION_ID)),
            ("agent_id", None),
            ("kind", None),
            ("actor_type", None),
            ("actor_id", Some(ADD_ACTOR_ID)),
            ("run_id", Some(ADD_RUN_ID)),
            ("occurred_at", None),
            ("summary", None),
            ("payload_json", Some(ADD_PAYLOAD_JSON)),
        ],
    ),
    (
        "session_state_heads",
        &[
            ("session_key", None),
            ("agent_id", None),
            ("last_sequence", None),
            ("pruned_max_sequence", Some(ADD_PRUNED_MAX_SEQUENCE)),
            ("updated_at", None),
        ],
    ),
    (
        "session_watch_cursors",
        &[
            ("watcher_session_key", None),
            ("watcher_store_path", Some(ADD_WATCHER_STORE_PATH)),
            ("target_session_key", None),
            ("last_seen_sequence", Some(ADD_LAST_SEEN_SEQUENCE)),
            ("notified_sequence", Some(ADD_NOTIFIED_SEQUENCE)),
            ("material_sequence", Some(ADD_MATERIAL_SEQUENCE)),
            ("provenance", Some(ADD_PROVENANCE)),
            ("updated_at", None),
        ],
    ),
];

const CREATE_SESSION_SEQUENCE: &str = "CREATE INDEX idx_session_state_events_session_sequence\n  \
     ON session_state_events(session_key, sequence DESC)";
const CREATE_TIME: &str = "CREATE INDEX idx_session_state_events_time\n  \
     ON session_state_events(occurred_at DESC, sequence DESC)";
const CREATE_TARGET: &str = "CREATE INDEX idx_session_watch_cursors_target\n  \
     ON session_watch_cursors(target_session_key)";
const CREATE_FORMER_SESSION_SEQUENCE: &str = "CREATE INDEX IF NOT EXISTS \
     session_state_events_session_sequence ON session_state_events (session_key, sequence DESC)";
const CREATE_FORMER_TIME: &str = "CREATE INDEX IF NOT EXISTS session_state_events_occurred \
     ON session_state_events (occurred_at DESC, sequence DESC)";
const CREATE_FORMER_TARGET: &str = "CREATE INDEX IF NOT EXISTS session_watch_cursors_target \
     ON session_watch_cursors (target_session_key)";
const DROP_FORMER_SESSION_SEQUENCE: &str = "DROP INDEX session_state_events_session_sequence";
const DROP_FORMER_TIME: &str = "DROP INDEX session_state_events_occurred";
const DROP_FORMER_TARGET: &str = "DROP INDEX session_watch_cursors_target";

/// An index the store's reads need.
struct Wanted {
    /// The table it is on.
    table: &'static str,
    /// OpenClaw's name for it, used when the store creates it.
    name: &'static str,
    /// The name earlier versions of the store gave it.
    former: &'static str,
    /// Its key columns, with `true` for a descending one.
    keys: &'static [(&'static str, bool)],
    /// Creates it under OpenClaw's name, as OpenClaw writes it.
    create: &'static str,
    /// Creates it under the former name.
    create_former: &'static str,
    /// Drops the index of the former name.
    drop_former: &'static str,
}

/// The three indexes, identical to OpenClaw's.
const INDEXES: [Wanted; 3] = [
    Wanted {
        table: "session_state_events",
        name: "idx_session_state_events_session_sequence",
        former: "session_state_events_session_sequence",
        keys: &[("session_key", false), ("sequence", true)],
        create: CREATE_SESSION_SEQUENCE,
        create_former: CREATE_FORMER_SESSION_SEQUENCE,
        drop_former: DROP_FORMER_SESSION_SEQUENCE,
    },
    Wanted {
        table: "session_state_events",
        name: "idx_session_state_events_time",
        former: "session_state_events_occurred",
        keys: &[("occurred_at", true), ("sequence", true)],
        create: CREATE_TIME,
        create_former: CREATE_FORMER_TIME,
        drop_former: DROP_FORMER_TIME,
    },
    Wanted {
        table: "session_watch_cursors",
        name: "idx_session_watch_cursors_target",
        former: "session_watch_cursors_target",
        keys: &[("target_session_key", false)],
        create: CREATE_TARGET,
        create_former: CREATE_FORMER_TARGET,
        drop_former: DROP_FORMER_TARGET,
    },
];

/// Runs one of the constant statements above.
fn run(conn: &Connection, sql: &str) -> Result<()> {
    conn.execute_batch(sql)?;
    Ok(())
}

/// Upgrades the three shared tables (already created when missing) and their indexes. Runs
/// inside the caller's write transaction; on an error the caller rolls everything back.
pub fn upgrade(conn: &Connection) -> Result<()> {
    for (table, columns) in COLUMNS {
        for (name, add) in missing(conn, table, columns)? {
            run(conn, add.expect("missing() refuses the others"))?;
            if *name == "provenance" {
                promote_ambient_sentinels(conn)?;
            }
        }
    }
    for wanted in &INDEXES {
        ensure_index(conn, wanted)?;
    }
    Ok(())
}

/// Refuses a file whose shared tables no generation wrote, before the store changes anything
/// in it (its journal mode included). [`upgrade`] checks again inside its transaction.
pub fn refuse_foreign(conn: &Connection) -> Result<()> {
    for (table, columns) in COLUMNS {
        missing(conn, table, columns)?;
    }
    Ok(())
}

/// The columns of the newest generation that `table` lacks, all of them appendable; an
/// [`Error::ForeignSchema`] when one that cannot be appended is missing. A table that does not
/// exist lacks nothing: it is created whole.
fn missing<'a>(conn: &Connection, table: &str, columns: &'a [Column]) -> Result<Vec<&'a Column>> {
    let present = column_names(conn, table)?;
    if present.is_empty() {
        return Ok(Vec::new());
    }
    let missing: Vec<&Column> = columns
        .iter()
        .filter(|(name, _)| !present.iter().any(|p| p.eq_ignore_ascii_case(name)))
        .collect();
    if let Some((name, _)) = missing.iter().find(|(_, add)| add.is_none()) {
        return Err(Error::ForeignSchema(format!(
            "table {table} has no column {name}: no generation of this schema wrote it"
        )));
    }
    Ok(missing)
}

/// When `provenance` has just been appended to a cursors table of the first two generations,
/// the cursors that had an ambient-group sentinel row get `ambient-group`, and the later
/// `updated_at` of the two rows, as OpenClaw's own migration gives them. The sentinel rows
/// stay: the store never notifies them (their watcher is a bare key), and OpenClaw's migration
/// still finds and removes them when OpenClaw opens the file.
fn promote_ambient_sentinels(conn: &Connection) -> Result<()> {
    conn.execute_batch(
        "UPDATE session_watch_cursors AS c SET provenance = 'ambient-group', \
         updated_at = max(c.updated_at, (SELECT max(s.updated_at) FROM session_watch_cursors s \
           WHERE s.watcher_session_key = 'ambient-group-watch:' || lower(hex(c.watcher_session_key)) \
           AND s.target_session_key = c.target_session_key)) \
         WHERE EXISTS (SELECT 1 FROM session_watch_cursors s \
           WHERE s.watcher_session_key = 'ambient-group-watch:' || lower(hex(c.watcher_session_key)) \
           AND s.target_session_key = c.target_session_key)",
    )?;
    Ok(())
}

/// The names of `table`'s columns, hidden ones included.
fn column_names(conn: &Connection, table: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_xinfo(?1)")?;
    let rows = stmt.query_map([table], |r| r.get::<_, String>(0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// One index of a table: its name, whether it is partial, and its key columns (name in
/// lowercase, descending, collation in uppercase; an expression has no name).
struct Existing {
    name: String,
    partial: bool,
    keys: Vec<(Option<String>, bool, String)>,
}

impl Existing {
    /// Serves the same reads as `wanted`: not partial, the same key columns in the same
    /// order and direction, with the default collation.
    fn matches(&self, wanted: &Wanted) -> bool {
        !self.partial
            && self.keys.len() == wanted.keys.len()
            && self
                .keys
                .iter()
                .zip(wanted.keys)
                .all(|((name, desc, coll), (want, want_desc))| {
                    name.as_deref() == Some(*want) && desc == want_desc && coll == "BINARY"
                })
    }
}

/// Every index of `table`.
fn indexes(conn: &Connection, table: &str) -> Result<Vec<Existing>> {
    let mut list = conn.prepare("SELECT name, partial FROM pragma_index_list(?1)")?;
    let mut keys = conn.prepare(
        "SELECT lower(name), \"desc\", upper(coll) FROM pragma_index_xinfo(?1) \
         WHERE key = 1 ORDER BY seqno",
    )?;
    let named: Vec<(String, bool)> = list
        .query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    named
        .into_iter()
        .map(|(name, partial)| {
            let keys = keys
                .query_map([&name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<rusqlite::Result<_>>()?;
            Ok(Existing {
                name,
                partial,
                keys,
            })
        })
        .collect()
}

/// Makes sure exactly one index serves `wanted`'s reads. An index on the same columns under
/// any name (OpenClaw's, the store's former one, another tool's) is reused; when the store's
/// former index duplicates another one it is dropped, so no write maintains two; when none
/// exists it is created under OpenClaw's name (the former name if another object holds it).
fn ensure_index(conn: &Connection, wanted: &Wanted) -> Result<()> {
    let existing = indexes(conn, wanted.table)?;
    let serving: Vec<&Existing> = existing.iter().filter(|i| i.matches(wanted)).collect();
    if serving.len() > 1 {
        if serving.iter().any(|i| i.name == wanted.former) {
            run(conn, wanted.drop_former)?;
        }
        return Ok(());
    }
    if !serving.is_empty() {
        return Ok(());
    }
    let taken: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = ?1 COLLATE NOCASE)",
        [wanted.name],
        |r| r.get(0),
    )?;
    run(
        conn,
        if taken {
            wanted.create_former
        } else {
            wanted.create
        },
    )
}
