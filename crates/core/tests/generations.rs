//! semantics.md#storage: a file written by any OpenClaw generation opens, is upgraded additively, and works:
//! every generation's tables are built from OpenClaw's own statements
//! (`fixtures/openclaw-schema/*.sql`), filled the way that generation's writer fills them,
//! opened, used, and checked against what must not change.

mod common;
mod schema_facts;

use std::path::{Path, PathBuf};

use common::*;
use rusqlite::{params, Connection};
use schema_facts::*;
use session_awareness_core::{inspect, Provenance, VersionRef};

/// One generation of OpenClaw's tables and how its writer fills them.
struct Generation {
    /// The fixture file.
    file: &'static str,
    /// Its writer gives cursors a provenance (an ambient watch is a sentinel row before).
    writes_provenance: bool,
    /// Its writer gives cursors a watcher store path.
    writes_store_path: bool,
    /// The `user_version` OpenClaw gave files of that time.
    user_version: i64,
    /// The columns the store appends to `session_watch_cursors`, in order.
    appended: &'static [&'static str],
}

const GENERATIONS: [Generation; 5] = [
    Generation {
        file: "1-loose.sql",
        writes_provenance: false,
        writes_store_path: false,
        user_version: 2,
        appended: &["watcher_store_path", "provenance"],
    },
    Generation {
        file: "2-strict.sql",
        writes_provenance: false,
        writes_store_path: false,
        user_version: 3,
        appended: &["watcher_store_path", "provenance"],
    },
    Generation {
        file: "3-provenance.sql",
        writes_provenance: true,
        writes_store_path: false,
        user_version: 4,
        appended: &["watcher_store_path"],
    },
    Generation {
        file: "4-store-path-appended.sql",
        writes_provenance: true,
        writes_store_path: true,
        user_version: 17,
        appended: &[],
    },
    Generation {
        file: "5-openclaw-2026.9.6.sql",
        writes_provenance: true,
        writes_store_path: true,
        user_version: 18,
        appended: &[],
    },
];

/// A group session the main session watches ambiently.
const GROUP: &str = "agent:main:telegram:group:ops";
/// A nested session that an older writer adds a cursor for after the upgrade.
const LEGACY: &str = "agent:main:subagent:legacy";
/// The session store path OpenClaw's newer writers record on a cursor.
const STORE: &str = "/state/agents/main/agent/openclaw-agent.sqlite";

/// The sentinel watcher key OpenClaw's first generations wrote for an ambient watch by `w`.
fn sentinel(w: &str) -> String {
    let hex: String = w.bytes().map(|b| format!("{b:02x}")).collect();
    format!("ambient-group-watch:{hex}")
}

/// Builds a file of `g` in `dir`: OpenClaw's statements, a host table, `user_version`, and
/// rows written as that generation's writer writes them.
fn build(dir: &Path, g: &Generation) -> PathBuf {
    let path = dir.join("openclaw.sqlite");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(&fixture_sql(g.file)).unwrap();
    conn.execute_batch(&format!(
        "CREATE TABLE schema_meta (meta_key TEXT NOT NULL PRIMARY KEY, schema_version INTEGER);
         CREATE INDEX idx_schema_meta_version ON schema_meta(schema_version);
         INSERT INTO schema_meta VALUES ('primary', {v});
         PRAGMA user_version = {v};",
        v = g.user_version
    ))
    .unwrap();
    let event = "INSERT INTO session_state_events (dedupe_key, session_key, session_id, \
                 agent_id, kind, actor_type, actor_id, run_id, occurred_at, summary, payload_json) \
                 VALUES (?1, ?2, ?3, 'main', ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
    conn.execute(
        event,
        params![
            DEDUPE,
            CHILD,
            "session-child",
            "child_spawned",
            "agent",
            MAIN,
            "run-1",
            T0,
            "spawned by agent:main:main",
            None::<String>
        ],
    )
    .unwrap();
    conn.execute(
        event,
        params![
            None::<String>,
            CHILD,
            "session-child",
            "goal_changed",
            "human",
            None::<String>,
            None::<String>,
            T0 + MINUTE,
            "goal changed via dashboard",
            "{\"goal\":\"ship\"}"
        ],
    )
    .unwrap();
    conn.execute(
        event,
        params![
            None::<String>,
            GROUP,
            None::<String>,
            "human_direct_message",
            "human",
            "tg:42",
            None::<String>,
            T0 + 2 * MINUTE,
            "human message via telegram",
            None::<String>
        ],
    )
    .unwrap();
    // Every generation's writer leaves pruned_max_sequence to its default.
    let head =
        "INSERT INTO session_state_heads (session_key, agent_id, last_sequence, updated_at) \
                VALUES (?1, 'main', ?2, ?3)";
    conn.execute(head, params![CHILD, 2, T0 + MINUTE]).unwrap();
    conn.execute(head, params![GROUP, 3, T0 + 2 * MINUTE])
        .unwrap();
    let store = g.writes_store_path.then_some(STORE);
    let cursor = |w: &str, t: &str, lnm: (i64, i64, i64), prov: &str, at: i64| {
        let (l, n, m) = lnm;
        if g.writes_store_path {
            conn.execute(
                "INSERT INTO session_watch_cursors (watcher_session_key, watcher_store_path, \
                 target_session_key, last_seen_sequence, notified_sequence, material_sequence, \
                 provenance, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![w, store, t, l, n, m, prov, at],
            )
        } else if g.writes_provenance {
            conn.execute(
                "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, \
                 last_seen_sequence, notified_sequence, material_sequence, provenance, \
                 updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![w, t, l, n, m, prov, at],
            )
        } else {
            conn.execute(
                "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, \
                 last_seen_sequence, notified_sequence, material_sequence, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![w, t, l, n, m, at],
            )
        }
        .unwrap();
    };
    cursor(MAIN, CHILD, (1, 2, 2), "explicit", T0 + MINUTE);
    if g.writes_provenance {
        cursor(MAIN, GROUP, (0, 3, 3), "ambient-group", T0 + 3 * MINUTE);
    } else {
        cursor(MAIN, GROUP, (0, 3, 3), "", T0 + 2 * MINUTE);
        cursor(&sentinel(MAIN), GROUP, (3, 3, 3), "", T0 + 3 * MINUTE);
    }
    path
}

/// The dedupe key of the spawn event.
const DEDUPE: &str = "child-spawned:agent:main:main";

/// What OpenClaw's reads return right after the upgrade, for every generation.
fn expected_reads(g: &Generation) -> Vec<(String, Vec<String>)> {
    let path = if g.writes_store_path {
        format!("'{STORE}'")
    } else {
        "NULL".into()
    };
    let event1 = format!(
        "actor_id='{MAIN}', actor_type='agent', agent_id='main', dedupe_key='{DEDUPE}', \
         kind='child_spawned', occurred_at={T0}, payload_json=NULL, run_id='run-1', sequence=1, \
         session_id='session-child', session_key='{CHILD}', summary='spawned by agent:main:main'"
    );
    let event2 = format!(
        "actor_id=NULL, actor_type='human', agent_id='main', dedupe_key=NULL, \
         kind='goal_changed', occurred_at={}, payload_json='{{\"goal\":\"ship\"}}', run_id=NULL, \
         sequence=2, session_id='session-child', session_key='{CHILD}', \
         summary='goal changed via dashboard'",
        T0 + MINUTE
    );
    let child_cursor = format!(
        "last_seen_sequence=1, material_sequence=2, notified_sequence=2, provenance='explicit', \
         target_session_key='{CHILD}', updated_at={}, watcher_session_key='{MAIN}', \
         watcher_store_path={path}",
        T0 + MINUTE
    );
    let group_cursor = format!(
        "last_seen_sequence=0, material_sequence=3, notified_sequence=3, \
         provenance='ambient-group', target_session_key='{GROUP}', updated_at={}, \
         watcher_session_key='{MAIN}', watcher_store_path={path}",
        T0 + 3 * MINUTE
    );
    let watcher = vec![format!("watcher_session_key='{MAIN}'")];
    vec![
        ("getSessionStateVersion", vec!["last_sequence=2".into()]),
        (
            "getSessionStateVersions",
            vec![format!(
                "agent_id='main', last_sequence=2, session_key='{CHILD}'"
            )],
        ),
        (
            "listSessionStateEventsSince rows",
            vec![event1.clone(), event2],
        ),
        (
            "listSessionStateEventsSince earliest",
            vec!["sequence=1".into()],
        ),
        (
            "listSessionStateEventsSince head",
            vec!["last_sequence=2, pruned_max_sequence=0".into()],
        ),
        ("readCursor", vec![child_cursor.clone()]),
        ("readMaterialCursors", vec![child_cursor.clone()]),
        (
            "recordSessionStateEventInDatabase registered watchers",
            watcher.clone(),
        ),
        ("recordSessionStateEventInDatabase dedupe hit", vec![event1]),
        ("hasSessionStateWatchers", watcher),
        (
            "listAmbientGroupWatchTargets",
            vec![format!("target_session_key='{GROUP}'")],
        ),
        (
            "sweepSessionStateWatchNotices",
            vec![group_cursor, child_cursor],
        ),
        ("pruneSessionStateEvents sequence cutoff", vec![]),
    ]
    .into_iter()
    .map(|(name, rows)| (name.to_owned(), rows))
    .collect()
}

/// The named parameters OpenClaw's reads are run with.
fn read_params() -> Vec<(&'static str, rusqlite::types::Value)> {
    use rusqlite::types::Value::{Integer, Text};
    vec![
        (":session_key", Text(CHILD.into())),
        (":agent_id", Text("main".into())),
        (":after", Integer(0)),
        (":limit", Integer(201)),
        (":watcher", Text(MAIN.into())),
        (":dedupe_key", Text(DEDUPE.into())),
        (":one", Integer(1)),
        (":ambient", Text("ambient-group".into())),
        (":max_rows", Integer(50_000)),
    ]
}

#[test]
fn every_generation_opens_upgraded_and_works() {
    for g in &GENERATIONS {
        let dir = tempfile::tempdir().unwrap();
        let path = build(dir.path(), g);
        let before = Snapshot::take(&Connection::open(&path).unwrap());
        let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
        let conn = fx.conn();

        // OpenClaw's own reads see the upgraded rows, the promoted ambient watch included.
        let got: Vec<_> = openclaw_reads()
            .iter()
            .map(|(name, sql)| (name.clone(), run_read(&conn, sql, &read_params())))
            .collect();
        assert_eq!(got, expected_reads(g), "{}", g.file);

        exercise(&fx, g);
        fx.store.close();

        let after = Snapshot::take(&conn);
        let created: &[&str] = if g.writes_provenance {
            &[]
        } else {
            // These generations predate the upstream-links table; the store creates it in
            // OpenClaw's shape, with OpenClaw's index.
            &[
                "idx_session_upstream_links_catalog_id",
                "session_upstream_links",
                "sqlite_autoindex_session_upstream_links_1",
            ]
        };
        after.assert_additive_over(&before, g.appended, created, g.file);
        assert_eq!(user_version(&conn), g.user_version, "{}", g.file);
        assert_eq!(integrity(&conn), "ok", "{}", g.file);
        assert_eq!(duplicate_indexes(&conn), Vec::<String>::new(), "{}", g.file);
        let meta: i64 = conn
            .query_row("SELECT schema_version FROM schema_meta", [], |r| r.get(0))
            .unwrap();
        assert_eq!(meta, g.user_version, "{}", g.file);
    }
}

/// Record, watch, sweep, drain, acknowledge, prune, changesSince, stateVersions and inspect on
/// an upgraded file, with an older writer's rows added in between.
fn exercise(fx: &Fixture, g: &Generation) {
    let s = &fx.store;
    let name = g.file;
    let refs = |keys: &[&str]| -> Vec<VersionRef> {
        keys.iter()
            .map(|k| VersionRef {
                session_key: (*k).into(),
                agent_id: None,
            })
            .collect()
    };
    let versions = |keys: &[&str]| s.state_versions(&refs(keys)).unwrap();
    let v = |k: &str, a: &str, n: i64| (k.to_owned(), a.to_owned(), n);
    assert_eq!(
        versions(&[CHILD, GROUP, "agent:main:none"]),
        [v(CHILD, "main", 2), v(GROUP, "main", 3)],
        "{name}"
    );
    let c = s.changes_since(CHILD, 0.0, None, None).unwrap();
    assert_eq!(
        (seqs(&c.events), c.history_gap),
        (vec![1, 2], false),
        "{name}"
    );
    assert_eq!(
        c.events[1].summary(),
        "goal changed via dashboard",
        "{name}"
    );

    // The gateway starts: both pending notices come back; only the explicit one wakes.
    let report = s.sweep(None, T0 + 10 * MINUTE).unwrap();
    assert_eq!(report.notices, 2, "{name}");
    let wake = fx.next_wake();
    assert_eq!(wake.reason, format!("session-state:{CHILD}"), "{name}");
    fx.assert_no_wake(100);
    let notices = s.drain(MAIN, T0 + 11 * MINUTE).unwrap();
    assert_eq!(
        pairs(&notices),
        expect_pairs(&[(CHILD, 1), (GROUP, 0)]),
        "{name}"
    );
    assert_eq!(
        notices[0].text,
        "Session \"agent:main:subagent:child\" changed (other actor). Reconcile before acting: \
         session_status sessionKey \"agent:main:subagent:child\" changesSince 1.",
        "{name}"
    );
    assert_eq!(fx.lnm(MAIN, CHILD), (2, 2, 2), "{name}");
    assert_eq!(fx.lnm(MAIN, GROUP), (3, 3, 3), "{name}");
    assert_eq!(
        fx.cursor(MAIN, GROUP).unwrap().provenance,
        Provenance::AmbientGroup
    );

    // Notify and log-only records, then an acknowledge.
    assert_eq!(
        fx.rec(CHILD, "human_direct_message", None, T0 + 12 * MINUTE)
            .sequence,
        4
    );
    assert_eq!(fx.lnm(MAIN, CHILD), (2, 4, 4), "{name}");
    assert_eq!(
        fx.next_wake().reason,
        format!("session-state:{CHILD}"),
        "{name}"
    );
    assert_eq!(
        fx.rec(CHILD, "compacted", None, T0 + 13 * MINUTE).sequence,
        5
    );
    assert_eq!(fx.lnm(MAIN, CHILD), (2, 4, 4), "{name}");
    assert_eq!(
        pairs(&s.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 2)]),
        "{name}"
    );
    let acked = s
        .acknowledge(MAIN, &strings(&[CHILD]), T0 + 14 * MINUTE)
        .unwrap();
    assert_eq!((acked, fx.lnm(MAIN, CHILD)), (1, (4, 4, 4)), "{name}");
    assert!(s
        .watch(OPS, CHILD, Provenance::Explicit, T0 + 14 * MINUTE)
        .unwrap());
    assert_eq!(fx.lnm(OPS, CHILD), (5, 5, 5), "{name}");
    fx.settle();

    // An older writer that omits L/N/M, provenance and the pruned watermark still works.
    let conn = fx.conn();
    conn.execute(
        "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, updated_at) \
         VALUES (?1, ?2, ?3)",
        params![LEGACY, CHILD, T0 + 15 * MINUTE],
    )
    .unwrap();
    let legacy = fx.cursor(LEGACY, CHILD).unwrap();
    assert_eq!(
        (
            legacy.last_seen,
            legacy.notified,
            legacy.material,
            legacy.provenance
        ),
        (0, 0, 0, Provenance::Explicit),
        "{name}"
    );
    conn.execute(
        "INSERT INTO session_state_events (session_key, agent_id, kind, actor_type, occurred_at, \
         summary) VALUES ('global', 'main', 'created', 'system', ?1, 'created')",
        [T0 + 15 * MINUTE],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO session_state_heads (session_key, agent_id, last_sequence, updated_at) \
         VALUES ('global', 'main', 6, ?1)",
        [T0 + 15 * MINUTE],
    )
    .unwrap();
    assert_eq!(s.state_version("global", None).unwrap(), 6, "{name}");

    // Retention: the first three events age out, and (first generations) the sentinel row.
    let pruned = s.prune(T0 + 30 * DAY + 5 * MINUTE).unwrap();
    let sentinels = u64::from(!g.writes_provenance);
    assert_eq!(
        (pruned.events_deleted, pruned.cursors_deleted),
        (3, sentinels),
        "{name}"
    );
    assert_eq!(fx.head_row(CHILD, "main"), Some((5, 2)), "{name}");
    assert_eq!(fx.head_row(GROUP, "main"), Some((3, 3)), "{name}");
    let c = s.changes_since(CHILD, 0.0, None, None).unwrap();
    assert_eq!(
        (
            seqs(&c.events),
            c.history_gap,
            c.earliest_available_sequence
        ),
        (vec![4, 5], true, 4),
        "{name}"
    );
    assert_eq!(
        versions(&[CHILD, GROUP, "global"]),
        [
            v(CHILD, "main", 5),
            v(GROUP, "main", 3),
            v("global", "main", 6)
        ],
        "{name}"
    );

    let report = inspect::inspect(fx.file_path().to_str().unwrap()).unwrap();
    assert_eq!(report.missing_tables, Vec::<String>::new(), "{name}");
    let c = report.counts;
    assert_eq!((c.events, c.heads, c.cursors), (3, 3, 4), "{name}");
    assert_eq!(report.last_sequence, 6, "{name}");
    assert!(report.pending_notices.is_empty(), "{name}");
    let provenances: Vec<_> = report
        .cursors
        .iter()
        .map(|c| {
            (
                c.row.watcher.as_str(),
                c.row.target.as_str(),
                c.row.provenance.as_str(),
            )
        })
        .collect();
    assert_eq!(
        provenances,
        [
            (MAIN, CHILD, "explicit"),
            (MAIN, GROUP, "ambient-group"),
            (LEGACY, CHILD, "explicit"),
            (OPS, CHILD, "explicit"),
        ],
        "{name}"
    );
}

#[test]
fn inspect_reads_a_first_generation_file_without_changing_it() {
    for g in &GENERATIONS[..2] {
        let dir = tempfile::tempdir().unwrap();
        let path = build(dir.path(), g);
        let bytes = std::fs::read(&path).unwrap();
        let report = inspect::inspect(path.to_str().unwrap()).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{}", g.file);
        let rows: Vec<_> = report
            .cursors
            .iter()
            .map(|c| (c.row.watcher.clone(), c.row.provenance.clone(), c.pending))
            .collect();
        assert_eq!(
            rows,
            [
                (MAIN.to_owned(), "explicit".to_owned(), true),
                (MAIN.to_owned(), "ambient-group".to_owned(), true),
                (sentinel(MAIN), "explicit".to_owned(), false),
            ],
            "{}",
            g.file
        );
    }
}
