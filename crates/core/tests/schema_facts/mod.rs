//! Reading a database's schema for the generation tests: OpenClaw's fixture statements, its
//! read statements, snapshots of `sqlite_master` and of table columns, and index checks.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;

/// The tables the store shares with OpenClaw.
pub const SHARED: [&str; 3] = [
    "session_state_events",
    "session_state_heads",
    "session_watch_cursors",
];

/// The folder of OpenClaw's schema fixtures.
pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openclaw-schema")
}

/// The statements of one fixture file.
pub fn fixture_sql(file: &str) -> String {
    std::fs::read_to_string(fixture_dir().join(file)).expect("fixture file")
}

/// OpenClaw's read statements, each with the name of the OpenClaw function that runs it.
pub fn openclaw_reads() -> Vec<(String, String)> {
    let text = fixture_sql("openclaw-reads.sql");
    text.split("-- read: ")
        .skip(1)
        .map(|part| {
            let (name, sql) = part.split_once('\n').expect("a statement after its name");
            (name.trim().to_owned(), sql.trim().to_owned())
        })
        .collect()
}

fn render(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => "NULL".into(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => f.to_string(),
        ValueRef::Text(t) => format!("'{}'", String::from_utf8_lossy(t)),
        ValueRef::Blob(b) => format!(
            "x'{}'",
            b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        ),
    }
}

/// Runs one read with those of `params` it names; each row is rendered as `column=value`
/// pairs sorted by column name (column order differs between generations), and the rows are
/// sorted too when the statement does not order them itself.
pub fn run_read(conn: &Connection, sql: &str, params: &[(&str, Value)]) -> Vec<String> {
    let mut stmt = conn.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    for (name, value) in params {
        if let Some(i) = stmt.parameter_index(name).unwrap() {
            stmt.raw_bind_parameter(i, value).unwrap();
        }
    }
    let names: Vec<String> = stmt.column_names().map(|s| s.to_owned()).collect();
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        let mut cols: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(i, n)| format!("{n}={}", render(row.get_ref(i).unwrap())))
            .collect();
        cols.sort();
        out.push(cols.join(", "));
    }
    if !sql.contains("order by") {
        out.sort();
    }
    out
}

/// `sqlite_master` (type, name → table, SQL) and the columns of every table.
#[derive(Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub objects: BTreeMap<(String, String), (String, Option<String>)>,
    pub columns: BTreeMap<String, Vec<String>>,
}

impl Snapshot {
    /// Reads the snapshot of `conn`'s main database.
    pub fn take(conn: &Connection) -> Self {
        let mut stmt = conn
            .prepare("SELECT type, name, tbl_name, sql FROM sqlite_master")
            .unwrap();
        let objects: BTreeMap<_, _> = stmt
            .query_map([], |r| Ok(((r.get(0)?, r.get(1)?), (r.get(2)?, r.get(3)?))))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let columns = objects
            .keys()
            .filter(|(ty, _)| ty == "table")
            .map(|(_, name): &(String, String)| (name.clone(), column_names(conn, name)))
            .collect();
        Snapshot { objects, columns }
    }

    /// `self` is `before` plus `appended` columns at the end of `session_watch_cursors` (and the
    /// upstream monitor's two columns at the end of OpenClaw's link table), plus
    /// the `created` objects, and nothing else: every other object keeps its SQL, every other
    /// table its columns.
    pub fn assert_additive_over(
        &self,
        before: &Snapshot,
        appended: &[&str],
        created: &[&str],
        label: &str,
    ) {
        let mut expected_names: Vec<&String> = before.objects.keys().map(|(_, n)| n).collect();
        let created_owned: Vec<String> = created.iter().map(|s| (*s).to_owned()).collect();
        expected_names.extend(created_owned.iter());
        expected_names.sort();
        let mut names: Vec<&String> = self.objects.keys().map(|(_, n)| n).collect();
        names.sort();
        assert_eq!(names, expected_names, "{label}: objects");
        for (key, (table, sql)) in &before.objects {
            let (now_table, now_sql) = &self.objects[key];
            assert_eq!(now_table, table, "{label}: {key:?}");
            let appends = SHARED.contains(&key.1.as_str()) || key.1 == "session_upstream_links";
            if !(key.0 == "table" && appends) {
                assert_eq!(now_sql, sql, "{label}: {key:?} changed");
            }
        }
        for (table, cols) in &before.columns {
            let mut expected = cols.clone();
            if table == "session_watch_cursors" {
                expected.extend(appended.iter().map(|s| (*s).to_owned()));
            }
            // OpenClaw's own link table gains the two columns the upstream monitor keeps
            // (docs/openclaw.md, the link mapping).
            if table == "session_upstream_links" && !cols.iter().any(|c| c == "failure_count") {
                expected.extend(["failure_count", "own_messages_json"].map(str::to_owned));
            }
            assert_eq!(self.columns[table], expected, "{label}: columns of {table}");
        }
    }
}

/// The columns of `table`, in order.
pub fn column_names(conn: &Connection, table: &str) -> Vec<String> {
    let mut stmt = conn
        .prepare("SELECT name FROM pragma_table_xinfo(?1)")
        .unwrap();
    stmt.query_map([table], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// (name, type, not null, default, primary-key position) of every column of `table`, sorted
/// by name.
pub fn column_facts(
    conn: &Connection,
    table: &str,
) -> Vec<(String, String, bool, Option<String>, i64)> {
    let mut stmt = conn
        .prepare("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_xinfo(?1) ORDER BY name")
        .unwrap();
    stmt.query_map([table], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    })
    .unwrap()
    .collect::<rusqlite::Result<_>>()
    .unwrap()
}

/// `PRAGMA user_version`.
pub fn user_version(conn: &Connection) -> i64 {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

/// `PRAGMA integrity_check`, its first row.
pub fn integrity(conn: &Connection) -> String {
    conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap()
}

/// The key columns of every index of every table, as `table(col desc, …)` per index name.
pub fn index_keys(conn: &Connection) -> BTreeMap<String, String> {
    let mut stmt = conn
        .prepare(
            "SELECT i.name, m.name, group_concat(x.name || CASE x.\"desc\" WHEN 1 THEN ' DESC' ELSE '' END, ', ') \
             FROM sqlite_master m, pragma_index_list(m.name) i, pragma_index_xinfo(i.name) x \
             WHERE m.type = 'table' AND x.key = 1 AND i.partial = 0 GROUP BY i.name ORDER BY i.name",
        )
        .unwrap();
    stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            format!("{}({})", r.get::<_, String>(1)?, r.get::<_, String>(2)?),
        ))
    })
    .unwrap()
    .collect::<rusqlite::Result<_>>()
    .unwrap()
}

/// Every `table(columns)` of the shared tables served by more than one index (the host's own
/// tables may have theirs: OpenClaw 2026.9.6 indexes `acp_replay_events` twice).
pub fn duplicate_indexes(conn: &Connection) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let shared = index_keys(conn)
        .into_values()
        .filter(|keys| SHARED.iter().any(|t| keys.starts_with(&format!("{t}("))));
    for keys in shared {
        *seen.entry(keys).or_default() += 1;
    }
    seen.into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(k, _)| k)
        .collect()
}
