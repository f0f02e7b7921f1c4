//! semantics.md#storage: rows the store would never write itself are inert. Each hostile row is written into a
//! file (STRICT tables as the store creates them, and the non-STRICT tables of OpenClaw's
//! older generations) before the store opens; then every path runs over it: no notice, no
//! wake, no error, the row unchanged byte for byte, until retention deletes it by the
//! ordinary rules, and no prune creates a head.
//!
//! The rows and the files they are written into: `hostile/mod.rs`; the row cap, the upstream
//! scan and the calls that replace an inert row: `foreign_edges.rs`.

mod common;
mod hostile;

use common::*;
use hostile::*;
use rusqlite::Connection;
use session_awareness_core::{inspect, ChangeEvent, ForeignPayload, VersionRef};

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
