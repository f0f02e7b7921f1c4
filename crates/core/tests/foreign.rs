//! semantics.md#storage: rows the store would never write itself are inert. Each hostile row is written into a
//! file (STRICT tables as the store creates them, and the non-STRICT tables of OpenClaw's
//! older generations) before the store opens; then every path runs over it: no notice, no
//! wake, no error, the row unchanged byte for byte, until retention deletes it by the
//! ordinary rules, and no prune creates a head.

mod common;

use std::path::Path;

use common::*;
use rusqlite::Connection;
use session_awareness_core::{
    inspect, ChangeEvent, ForeignPayload, Options, Provenance, VersionRef,
};

const W: &str = "agent:main:main";
const T: &str = "agent:main:t";
const RETENTION: i64 = 30 * 24 * 60 * 60 * 1000;

/// OpenClaw's older generations: the same tables, not STRICT, without NOT NULL.
const LOOSE_SCHEMA: &str = include_str!("fixtures/loose-schema.sql");

/// One hostile row: the SQL that writes it (`?1` is T0), the table, and whether it needs the
/// non-STRICT tables.
struct Hostile {
    name: &'static str,
    table: &'static str,
    sql: &'static str,
    loose_only: bool,
    /// For an event row: it ages out on `occurred_at` (an integer there).
    ages: bool,
}

const fn cursor(name: &'static str, sql: &'static str, loose_only: bool) -> Hostile {
    Hostile {
        name,
        table: "session_watch_cursors",
        sql,
        loose_only,
        ages: false,
    }
}

const fn event(name: &'static str, sql: &'static str, loose_only: bool, ages: bool) -> Hostile {
    Hostile {
        name,
        table: "session_state_events",
        sql,
        loose_only,
        ages,
    }
}

/// Cursor rows on T (head 1) with a pending notice (L 0, N 1, M 1) and one defect each.
const CURSORS: &[Hostile] = &[
    cursor("bare watcher", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('global', 'agent:main:t', 0, 1, 1, 'explicit', ?1)", false),
    cursor("empty watcher", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('', 'agent:main:t', 0, 1, 1, 'explicit', ?1)", false),
    cursor("uppercase agent watcher", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:MAIN:x', 'agent:main:t', 0, 1, 1, 'explicit', ?1)", false),
    cursor("bare target", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:main', 'global', 0, 1, 1, 'explicit', ?1)", false),
    cursor("empty target", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:main', '', 0, 1, 1, 'explicit', ?1)", false),
    cursor("self cursor", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:t', 'agent:main:t', 0, 1, 1, 'explicit', ?1)", false),
    cursor("unknown provenance", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:w2', 'agent:main:t', 0, 1, 1, 'bogus', ?1)", true),
    cursor("invalid utf-8 watcher", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES (CAST(x'6167656e743a6d61696e3a77ff' AS TEXT), 'agent:main:t', 0, 1, 1, 'explicit', ?1)", false),
    cursor("invalid utf-8 target", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:main', CAST(x'6167656e743a6d61696e3a74ff' AS TEXT), 0, 1, 1, 'explicit', ?1)", false),
    cursor("lone surrogate watcher", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES (CAST(x'6167656e743a6d61696e3aeda080' AS TEXT), 'agent:main:t', 0, 1, 1, 'explicit', ?1)", false),
    cursor("invalid utf-8 provenance", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:w3', 'agent:main:t', 0, 1, 1, CAST(x'6578706c69636974ff' AS TEXT), ?1)", true),
    cursor("above the head", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:w4', 'agent:main:t', 0, 5, 5, 'explicit', ?1)", false),
    cursor("negative position", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:w5', 'agent:main:t', -1, 1, 1, 'explicit', ?1)", false),
    cursor("blob watcher", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES (x'6167656e743a6d61696e3a7736', 'agent:main:t', 0, 1, 1, 'explicit', ?1)", true),
    cursor("null watcher", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES (NULL, 'agent:main:t', 0, 1, 1, 'explicit', ?1)", true),
    cursor("null L", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:w7', 'agent:main:t', NULL, 1, 1, 'explicit', ?1)", true),
    cursor("text M", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:w8', 'agent:main:t', 0, 1, 'many', 'explicit', ?1)", true),
    cursor("null provenance", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:w9', 'agent:main:t', 0, 1, 1, NULL, ?1)", true),
    cursor("null updated_at", "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:wa', 'agent:main:t', 0, 1, 1, 'explicit', NULL)", true),
];

/// Event rows at sequence 2 with one defect each; the head of their session is moved to 2
/// (as a writer that keeps heads would), except for the row above its session's head.
const EVENTS: &[Hostile] = &[
    event("unknown kind", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'bogus', 'human', NULL, NULL, ?1, 's', NULL)", false, true),
    event("unknown actor type", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'robot', NULL, NULL, ?1, 's', NULL)", false, true),
    event("invalid utf-8 summary", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, CAST(x'61ff62' AS TEXT), NULL)", false, true),
    event("invalid utf-8 kind", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', CAST(x'676f616cff' AS TEXT), 'human', NULL, NULL, ?1, 's', NULL)", false, true),
    event("invalid utf-8 actor id", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', CAST(x'ff' AS TEXT), NULL, ?1, 's', NULL)", false, true),
    event("invalid utf-8 run id", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, CAST(x'ff' AS TEXT), ?1, 's', NULL)", false, true),
    event("invalid utf-8 session id", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', CAST(x'ff' AS TEXT), 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', NULL)", false, true),
    event("invalid utf-8 payload", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', CAST(x'7b7dff' AS TEXT))", false, true),
    event("invalid utf-8 dedupe key", "INSERT INTO session_state_events VALUES (2, CAST(x'ff' AS TEXT), 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', NULL)", false, true),
    event("invalid utf-8 session key", "INSERT INTO session_state_events VALUES (2, NULL, CAST(x'6167656e743a6d61696e3a74ff' AS TEXT), NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', NULL)", false, true),
    event("lone surrogate session key", "INSERT INTO session_state_events VALUES (2, NULL, CAST(x'6167656e743a6d61696e3aeda080' AS TEXT), NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', NULL)", false, true),
    event("invalid utf-8 agent", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, CAST(x'6d61696eff' AS TEXT), 'goal_changed', 'human', NULL, NULL, ?1, 's', NULL)", false, true),
    event("huge summary", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, printf('%.*c', 100000, 'x'), NULL)", false, true),
    event("multi-line summary", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 'a' || char(10) || 'b', NULL)", false, true),
    event("huge payload", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', '{\"a\":\"' || printf('%.*c', 100000, 'x') || '\"}')", false, true),
    event("payload not json", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', '{not json')", false, true),
    event("payload not an object", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', '[1]')", false, true),
    event("above the head", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:ghost', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', NULL)", false, true),
    event("null kind", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', NULL, 'human', NULL, NULL, ?1, 's', NULL)", true, true),
    event("null summary", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, NULL, NULL)", true, true),
    event("null session key", "INSERT INTO session_state_events VALUES (2, NULL, NULL, NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, 's', NULL)", true, true),
    event("null occurred_at", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, NULL, 's', NULL)", true, false),
    event("text occurred_at", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, 'yesterday', 's', NULL)", true, false),
    event("blob summary", "INSERT INTO session_state_events VALUES (2, NULL, 'agent:main:t', NULL, 'main', 'goal_changed', 'human', NULL, NULL, ?1, x'ff00', NULL)", true, true),
];

/// How a read answers an event row with one defect (semantics.md#reading-foreign-events).
#[derive(Clone)]
struct Read {
    /// The row is one of T's (main agent): T's reads answer it.
    in_t: bool,
    /// The fields named foreign; empty for a row the store could have written.
    foreign: &'static [&'static str],
    kind: &'static str,
    actor_type: &'static str,
    summary: &'static str,
    occurred_at: Option<i64>,
    ids: [Option<&'static str>; 3],
    payload: Option<ForeignPayload>,
}

fn t_row(foreign: &'static [&'static str]) -> Read {
    Read {
        in_t: true,
        foreign,
        kind: "goal_changed",
        actor_type: "human",
        summary: "s",
        occurred_at: None,
        ids: [None, None, None],
        payload: None,
    }
}

fn read_as(name: &str) -> Option<Read> {
    let text = |s: &str| Some(ForeignPayload::Text(s.into()));
    let other = Read {
        in_t: false,
        ..t_row(&[])
    };
    Some(match name {
        "unknown kind" => Read {
            kind: "bogus",
            ..t_row(&["kind"])
        },
        "unknown actor type" => Read {
            actor_type: "robot",
            ..t_row(&["actorType"])
        },
        "invalid utf-8 summary" => Read {
            summary: "a\u{fffd}b",
            ..t_row(&["summary"])
        },
        "invalid utf-8 kind" => Read {
            kind: "goal\u{fffd}",
            ..t_row(&["kind"])
        },
        "invalid utf-8 actor id" => Read {
            ids: [Some("\u{fffd}"), None, None],
            ..t_row(&["actorId"])
        },
        "invalid utf-8 run id" => Read {
            ids: [None, Some("\u{fffd}"), None],
            ..t_row(&["runId"])
        },
        "invalid utf-8 session id" => Read {
            ids: [None, None, Some("\u{fffd}")],
            ..t_row(&["sessionId"])
        },
        "invalid utf-8 payload" => Read {
            payload: text("{}\u{fffd}"),
            ..t_row(&["payload"])
        },
        "invalid utf-8 dedupe key" => t_row(&[]),
        "huge summary" => Read {
            summary: Box::leak("x".repeat(240).into_boxed_str()),
            ..t_row(&["summary"])
        },
        "multi-line summary" => Read {
            summary: "a b",
            ..t_row(&["summary"])
        },
        "huge payload" => Read {
            payload: Some(ForeignPayload::Object(format!(
                "{{\"a\":\"{}\"}}",
                "x".repeat(100_000)
            ))),
            ..t_row(&["payload"])
        },
        "payload not json" => Read {
            payload: text("{not json"),
            ..t_row(&["payload"])
        },
        "payload not an object" => Read {
            payload: text("[1]"),
            ..t_row(&["payload"])
        },
        "above the head" => Read {
            in_t: false,
            ..t_row(&["sequence"])
        },
        "null kind" => Read {
            kind: "",
            ..t_row(&["kind"])
        },
        "null summary" => Read {
            summary: "",
            ..t_row(&["summary"])
        },
        "null occurred_at" | "text occurred_at" => Read {
            occurred_at: Some(0),
            ..t_row(&["occurredAt"])
        },
        "blob summary" => Read {
            summary: "x'ff00'",
            ..t_row(&["summary"])
        },
        "invalid utf-8 session key"
        | "lone surrogate session key"
        | "invalid utf-8 agent"
        | "null session key" => other,
        _ => return None,
    })
}

/// Asserts how a read answered a row with one defect.
fn assert_read(got: &ChangeEvent, want: &Read, ctx: &str) {
    if want.foreign.is_empty() {
        assert!(got.stored().is_some(), "{ctx}: {got:?}");
        return;
    }
    let f = got.foreign().unwrap_or_else(|| panic!("{ctx}: {got:?}"));
    assert_eq!(f.sequence, 2, "{ctx}");
    assert_eq!(f.foreign.names(), want.foreign, "{ctx}");
    assert_eq!(
        (f.kind.as_str(), f.actor_type.as_str(), f.summary.as_str()),
        (want.kind, want.actor_type, want.summary),
        "{ctx}"
    );
    assert_eq!(
        [
            f.actor_id.as_deref(),
            f.run_id.as_deref(),
            f.session_id.as_deref()
        ],
        want.ids,
        "{ctx}"
    );
    assert_eq!(f.occurred_at, want.occurred_at.unwrap_or(T0), "{ctx}");
    assert_eq!(
        f.payload,
        want.payload.clone().unwrap_or(ForeignPayload::None),
        "{ctx}"
    );
}

/// Every column of every row of `table`, as (type, hex) pairs: the exact stored bytes.
fn snapshot(conn: &Connection, table: &str) -> Vec<Vec<(String, String)>> {
    let cols: Vec<String> = conn
        .prepare(&format!(
            "SELECT name FROM pragma_table_info('{table}') ORDER BY cid"
        ))
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let select: Vec<String> = cols
        .iter()
        .map(|c| format!("typeof({c}), hex({c})"))
        .collect();
    let sql = format!("SELECT {} FROM {table} ORDER BY rowid", select.join(", "));
    let mut stmt = conn.prepare(&sql).unwrap();
    let rows = stmt
        .query_map([], |r| {
            (0..cols.len())
                .map(|i| Ok((r.get(2 * i)?, r.get(2 * i + 1)?)))
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Builds the file: the tables (STRICT by the store, or loose), a live cursor W -> T and
/// T's first event (sequence 1), then the hostile row, written with no store open.
fn build(path: &Path, loose: bool, h: &Hostile) {
    if loose {
        Connection::open(path)
            .unwrap()
            .execute_batch(LOOSE_SCHEMA)
            .unwrap();
    }
    {
        let fx = Fixture::open(path.to_str().unwrap(), Some(path.into()), opts());
        assert!(fx.store.watch(W, T, Provenance::Explicit, T0).unwrap());
        assert_eq!(fx.rec(T, "created", None, T0).sequence, 1);
        fx.settle();
        fx.store.close();
    }
    let conn = Connection::open(path).unwrap();
    if h.sql.contains("?1") {
        conn.execute(h.sql, [T0]).unwrap();
    } else {
        conn.execute(h.sql, []).unwrap();
    }
    if h.table == "session_state_events" && h.name != "above the head" {
        conn.execute(
            "INSERT INTO session_state_heads (session_key, agent_id, last_sequence, \
             pruned_max_sequence, updated_at) \
             SELECT session_key, agent_id, 2, 0, ?1 FROM session_state_events WHERE sequence = 2 \
             ON CONFLICT DO UPDATE SET last_sequence = 2",
            [T0],
        )
        .unwrap();
    }
}

/// Runs every path over a file holding `h`. Returns the number of paths run.
fn run(loose: bool, h: &Hostile) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sqlite");
    build(&path, loose, h);
    let raw = Connection::open(&path).unwrap();
    let hostile_before = snapshot(&raw, h.table);
    let heads_before = count(&raw, "SELECT count(*) FROM session_state_heads");
    let is_event = h.table == "session_state_events";
    // The live record comes after every stored sequence.
    let live = 1 + count(&raw, "SELECT max(sequence) FROM session_state_events");
    let ctx = format!("{} ({})", h.name, if loose { "loose" } else { "strict" });
    let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
    let mut paths = 0;
    let mut step = |what: &str| {
        paths += 1;
        let _ = what;
    };

    // record fan-out (and the background prune the first record starts)
    assert_eq!(fx.rec(T, "goal_changed", None, T0).sequence, live, "{ctx}");
    fx.settle();
    step("record");
    step("background prune");
    // The wake first: a drain that empties the watcher withdraws one not yet delivered.
    assert_eq!(fx.next_wake().session_key, W, "{ctx}");
    let notices = fx.store.drain(W, T0).unwrap();
    assert_eq!(pairs(&notices), expect_pairs(&[(T, 0)]), "{ctx}");
    assert_eq!(
        notices[0].text,
        "Session \"agent:main:t\" changed (other actor). Reconcile before acting: \
         session_status sessionKey \"agent:main:t\" changesSince 0.",
        "{ctx}"
    );
    step("drain");
    for watcher in [
        "global",
        "agent:MAIN:x",
        T,
        "agent:main:w2",
        "agent:main:w4",
        "agent:main:w9",
    ] {
        assert!(
            fx.store.peek(watcher).unwrap().is_empty(),
            "{ctx} {watcher}"
        );
        assert!(
            fx.store.drain(watcher, T0).unwrap().is_empty(),
            "{ctx} {watcher}"
        );
        let targets = strings(&[T, "global", W]);
        assert_eq!(
            fx.store.acknowledge(watcher, &targets, T0).unwrap(),
            0,
            "{ctx} {watcher}"
        );
    }
    assert_eq!(
        fx.store
            .acknowledge(W, &strings(&["global", T]), T0)
            .unwrap(),
        0,
        "{ctx}"
    );
    for (watcher, target) in [
        ("global", T),
        (T, T),
        ("agent:main:w2", T),
        ("agent:main:w4", T),
        (W, "global"),
    ] {
        assert!(
            !fx.store.unwatch(watcher, target).unwrap(),
            "{ctx} {watcher} -> {target}"
        );
    }
    step("peek");
    step("acknowledge");
    step("unwatch");
    // A cursor without a usable updated_at counts as never updated: the automatic prune of
    // the first record expired it.
    let expires_now = h.name == "null updated_at";
    let report = fx.store.sweep(None, T0).unwrap();
    assert_eq!(
        (
            report.notices,
            report.prune.events_deleted,
            report.prune.cursors_deleted
        ),
        (0, 0, 0),
        "{ctx}"
    );
    let mut asked = Vec::new();
    let mut exists = |w: &str| {
        asked.push(w.to_owned());
        true
    };
    let report = fx.store.sweep(Some(&mut exists), T0).unwrap();
    assert_eq!(report.notices, 0, "{ctx}");
    assert!(asked.is_empty(), "{ctx}: asked {asked:?}");
    assert!(fx.store.peek(W).unwrap().is_empty(), "{ctx}");
    step("sweep");
    step("sweep with watcherExists");

    let changes = fx.store.changes_since(T, 0.0, None, None).unwrap();
    // Every stored row of T is answered (semantics.md#reading-foreign-events): a foreign one in
    // its safe form, at its place in the order. Rows of another session are not T's.
    let read = read_as(h.name);
    let expected: Vec<i64> = if is_event && read.as_ref().is_some_and(|r| r.in_t) {
        vec![1, 2, live]
    } else {
        vec![1, live]
    };
    assert_eq!(seqs(&changes.events), expected, "{ctx}");
    if let Some(r) = read.as_ref().filter(|r| is_event && r.in_t) {
        let r = r.clone();
        assert_read(&changes.events[1], &r, &ctx);
    }
    assert_eq!(changes.state_version, live, "{ctx}");
    assert!(!changes.truncated && !changes.history_gap, "{ctx}");
    assert_eq!(changes.earliest_available_sequence, 1, "{ctx}");
    let limited = fx.store.changes_since(T, 0.0, None, Some(1.0)).unwrap();
    assert_eq!(
        (seqs(&limited.events), limited.truncated),
        (vec![1], true),
        "{ctx}"
    );
    let two = fx.store.changes_since(T, 1.0, None, Some(1.0)).unwrap();
    assert_eq!(
        (seqs(&two.events), two.truncated),
        (vec![expected[1]], expected.len() == 3),
        "{ctx}: a foreign row counts toward limit"
    );
    let ghost = fx
        .store
        .changes_since("agent:main:ghost", 0.0, None, None)
        .unwrap();
    if is_event && h.name == "above the head" {
        // A row above its session's head (here: no head at all) is stored: it is answered.
        assert_eq!(
            (ghost.state_version, seqs(&ghost.events)),
            (0, vec![2]),
            "{ctx}"
        );
        assert_read(&ghost.events[0], read.as_ref().unwrap(), &ctx);
        assert_eq!(ghost.earliest_available_sequence, 2, "{ctx}");
    } else {
        assert_eq!((ghost.state_version, ghost.events.len()), (0, 0), "{ctx}");
    }
    step("changesSince");
    let refs: Vec<VersionRef> = [T, "global", "agent:main:ghost", "agent:main:w2"]
        .iter()
        .map(|k| VersionRef {
            session_key: (*k).into(),
            agent_id: None,
        })
        .collect();
    let versions = fx.store.state_versions(&refs).unwrap();
    assert_eq!(versions, [(T.to_owned(), "main".to_owned(), live)], "{ctx}");
    step("stateVersions");
    fx.store.sync_now().unwrap();
    step("sync");
    let report = inspect::inspect(path.to_str().unwrap()).unwrap();
    assert!(report.pending_notices.is_empty(), "{ctx}");
    assert_eq!(
        report.counts.cursors,
        if is_event || expires_now { 1 } else { 2 },
        "{ctx}"
    );
    let events = inspect::read_events(path.to_str().unwrap(), T, None, 0.0).unwrap();
    assert_eq!(events.state_version, live, "{ctx}");
    step("inspect");
    step("events");
    fx.store.reset_session("agent:main:other").unwrap();
    fx.store.delete_session("agent:main:other", None).unwrap();
    step("resetSession");
    step("deleteSession");
    let report = fx.store.prune(T0).unwrap();
    assert_eq!(
        (report.events_deleted, report.cursors_deleted),
        (0, 0),
        "{ctx}"
    );
    step("prune");
    if !expires_now {
        hostile_unchanged(&hostile_before, &raw, h);
    }
    fx.assert_no_error();
    fx.assert_no_wake(50);

    // Retention: age on occurred_at, cursor expiry on updated_at; no head is created.
    let later = T0 + RETENTION + 1;
    let report = fx.store.prune(later).unwrap();
    let events_aged = 2 + i64::from(is_event && h.ages);
    assert_eq!(report.events_deleted as i64, events_aged, "{ctx}");
    assert_eq!(
        report.cursors_deleted,
        if is_event || expires_now { 1 } else { 2 },
        "{ctx}"
    );
    assert_eq!(
        count(&raw, "SELECT count(*) FROM session_state_heads"),
        heads_before,
        "{ctx}"
    );
    assert_eq!(
        fx.head_row(T, "main").map(|h| h.1),
        Some(live),
        "{ctx}: T's watermark"
    );
    let left = count(&raw, "SELECT count(*) FROM session_state_events");
    assert_eq!(left, i64::from(is_event && !h.ages), "{ctx}");
    fx.assert_no_error();
    step("retention");
    fx.store.close();
    paths
}

/// Asserts that the hostile row of `before` (W -> T in the cursor table and every event but
/// sequence 2 are the store's own rows, which change) is still there, byte for byte.
fn hostile_unchanged(before: &[Vec<(String, String)>], raw: &Connection, h: &Hostile) {
    let now = snapshot(raw, h.table);
    // Column positions by name: OpenClaw's newest table has `watcher_store_path` second.
    let position = |name: &str| -> usize {
        let cid: i64 = raw
            .query_row(
                "SELECT cid FROM pragma_table_info(?1) WHERE name = ?2",
                [h.table, name],
                |r| r.get(0),
            )
            .unwrap();
        usize::try_from(cid).unwrap()
    };
    let (watcher, target) = if h.table == "session_watch_cursors" {
        (
            position("watcher_session_key"),
            position("target_session_key"),
        )
    } else {
        (0, 0)
    };
    let live = |row: &Vec<(String, String)>| {
        if h.table == "session_watch_cursors" {
            // W -> T, written by the store.
            row[watcher].1 == hex(W) && row[target].1 == hex(T)
        } else {
            row[0].1 != hex_int(2)
        }
    };
    let hostile: Vec<_> = before.iter().filter(|r| !live(r)).cloned().collect();
    assert_eq!(hostile.len(), 1, "{}: one hostile row", h.name);
    assert_eq!(
        now.iter().filter(|r| !live(r)).count(),
        1,
        "{}: the hostile row is still there",
        h.name
    );
    // Compare against what is there now, hostile row first.
    let current: Vec<_> = now.into_iter().filter(|r| !live(r)).collect();
    assert_eq!(current, hostile, "{}: the hostile row is unchanged", h.name);
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02X}")).collect()
}

fn hex_int(i: i64) -> String {
    hex(&i.to_string())
}

#[test]
fn every_path_leaves_hostile_rows_inert() {
    let mut cells = 0;
    let mut rows = 0;
    for loose in [false, true] {
        for h in CURSORS.iter().chain(EVENTS) {
            if h.loose_only && !loose {
                continue;
            }
            rows += 1;
            cells += run(loose, h);
        }
    }
    // The matrix: hostile rows (both table variants) × paths.
    // Two cursor rows exist only in loose tables: OpenClaw's STRICT table checks provenance.
    assert_eq!(rows, 2 * 11 + 2 * 18 + 8 + 6);
    assert_eq!(cells, rows * 17);
    println!("foreign-row matrix: {rows} rows x 17 paths = {cells} cells");
}

#[test]
fn the_row_cap_deletes_rows_that_never_age_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sqlite");
    let h = EVENTS
        .iter()
        .find(|h| h.name == "text occurred_at")
        .unwrap();
    build(&path, true, h);
    let fx = Fixture::open(
        path.to_str().unwrap(),
        Some(path.clone()),
        Options {
            max_events: 1,
            ..opts()
        },
    );
    // Sequences 1 (T, created) and 2 (hostile) go by the cap; the watermark of T rises to
    // 2, the largest sequence within its head that it lost; no head is created.
    let report = fx.store.prune(T0).unwrap();
    assert_eq!(report.events_deleted, 1);
    assert_eq!(fx.sequences(), [2]);
    assert_eq!(fx.head_row(T, "main"), Some((2, 1)));
    assert_eq!(fx.rec(T, "goal_changed", None, T0).sequence, 3);
    let report = fx.store.prune(T0).unwrap();
    assert_eq!(report.events_deleted, 1);
    assert_eq!(fx.sequences(), [3]);
    assert_eq!(fx.head_row(T, "main"), Some((3, 2)));
    fx.assert_no_error();
}

#[test]
fn the_upstream_scan_skips_link_rows_it_cannot_read() {
    use session_awareness_core::upstream::AdoptInput;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sqlite");
    let transcript = dir.path().join("session.jsonl");
    std::fs::write(&transcript, "").unwrap();
    let human = "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n";
    {
        let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
        let link = AdoptInput {
            source: "claude".into(),
            transcript_path: Some(transcript.to_str().unwrap().into()),
            ..Default::default()
        };
        assert_eq!(fx.store.adopt(T, link, T0).unwrap().unwrap().sequence, 1);
        assert!(fx.store.watch(W, T, Provenance::Explicit, T0).unwrap());
        fx.store.close();
    }
    let raw = Connection::open(&path).unwrap();
    // Two watched sessions whose links hold text that is not valid UTF-8.
    for (key, source, transcript_ref) in [
        (
            "agent:main:u",
            "'claude'",
            // {"filePath":"/tmp/x<0xff>"}
            "CAST(x'7b2266696c6550617468223a222f746d702f78ff227d' AS TEXT)",
        ),
        (
            "agent:main:v",
            "CAST(x'636cff' AS TEXT)",
            "'{\"filePath\":\"/tmp/none.jsonl\"}'",
        ),
    ] {
        raw.execute(
            &format!(
                "INSERT INTO session_upstream_links (session_key, agent_id, catalog_id, \
                 host_id, thread_id, upstream_kind, upstream_ref_json, created_at, updated_at) \
                 VALUES ('{key}', 'main', {source}, 'gateway:local', 'x', 'claude-cli', \
                 {transcript_ref}, ?1, ?1)"
            ),
            [T0],
        )
        .unwrap();
        raw.execute(
            "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES (?1, ?2, 0, 0, 0, 'explicit', ?3)",
            rusqlite::params![W, key, T0],
        )
        .unwrap();
    }
    let links_before = snapshot(&raw, "session_upstream_links");
    drop(raw);
    let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
    std::fs::write(&transcript, human).unwrap();
    let events = fx.store.scan_upstream(T0).unwrap();
    assert_eq!(
        events.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        [2],
        "the readable link is still scanned"
    );
    assert_eq!(events[0].session_key, T);
    fx.assert_no_error();
    fx.store.close();
    let raw = Connection::open(&path).unwrap();
    let links_after = snapshot(&raw, "session_upstream_links");
    // The readable link moved its offset; the two unreadable ones are as written.
    assert_eq!(links_after[1..], links_before[1..]);
}

#[test]
fn watch_and_a_spawn_edge_replace_an_inert_row_of_their_pair() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sqlite");
    let h = CURSORS
        .iter()
        .find(|h| h.name == "unknown provenance")
        .unwrap();
    build(&path, true, h);
    let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
    // The pair is named explicitly: the row becomes a cursor seeded at T's head (1).
    assert!(fx
        .store
        .watch("agent:main:w2", T, Provenance::AmbientGroup, T0 + 5)
        .unwrap());
    let c = fx.cursor("agent:main:w2", T).unwrap();
    assert_eq!(
        (
            c.last_seen,
            c.notified,
            c.material,
            c.provenance,
            c.updated_at
        ),
        (1, 1, 1, Provenance::AmbientGroup, T0 + 5)
    );
    // An unknown provenance under a spawn edge becomes explicit.
    fx.conn()
        .execute(
            "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at) VALUES ('agent:main:w3', ?1, 0, 0, 0, 'bogus', ?2)",
            rusqlite::params![T, T0],
        )
        .unwrap();
    let mut spawn = input(T, "child_spawned");
    spawn.watchers = vec!["agent:main:w3".into()];
    let seq = fx.record(spawn, T0).sequence;
    let c = fx.cursor("agent:main:w3", T).unwrap();
    assert_eq!(
        (c.last_seen, c.notified, c.material, c.provenance),
        (seq, seq, seq, Provenance::Explicit)
    );
    fx.assert_no_error();
}
