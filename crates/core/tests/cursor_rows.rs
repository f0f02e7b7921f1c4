//! `Store::cursor_rows`: the cursor rows as stored, filtered by watcher and/or target and
//! ordered by watcher, then target (read by hosts that answer questions about watches).

mod common;

use common::*;
use session_awareness_core::{CursorRow, Provenance, WatchOptions};

fn row(
    w: &str,
    t: &str,
    lnm: (i64, i64, i64),
    provenance: &str,
    scope: Option<&str>,
    at: i64,
) -> CursorRow {
    CursorRow {
        watcher: w.into(),
        target: t.into(),
        last_seen: lnm.0,
        notified: lnm.1,
        material: lnm.2,
        provenance: provenance.into(),
        scope: scope.map(str::to_owned),
        updated_at: at,
    }
}

#[test]
fn rows_are_read_as_stored_and_filtered() {
    let fx = Fixture::memory();
    let scoped = WatchOptions {
        provenance: Provenance::Explicit,
        scope: Some("/stores/main.sqlite".into()),
        refresh: true,
    };
    assert!(fx.store.watch_with(MAIN, CHILD2, &scoped, T0).unwrap());
    assert!(fx
        .store
        .watch(MAIN, CHILD, Provenance::Explicit, T0)
        .unwrap());
    assert!(fx
        .store
        .watch(CHILD, CHILD2, Provenance::AmbientGroup, T0 + 5)
        .unwrap());
    fx.store
        .record(input(CHILD2, "human_direct_message"), T0 + 5)
        .unwrap();

    let all = fx.store.cursor_rows(None, None).unwrap();
    assert_eq!(
        all,
        vec![
            row(MAIN, CHILD, (0, 0, 0), "explicit", None, T0),
            row(
                MAIN,
                CHILD2,
                (0, 1, 1),
                "explicit",
                Some("/stores/main.sqlite"),
                T0 + 5
            ),
            row(CHILD, CHILD2, (0, 1, 1), "ambient-group", None, T0 + 5),
        ]
    );
    let of = |w: Option<&str>, t: Option<&str>| {
        fx.store
            .cursor_rows(w, t)
            .unwrap()
            .into_iter()
            .map(|r| (r.watcher, r.target))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        of(Some(MAIN), None),
        vec![(MAIN.into(), CHILD.into()), (MAIN.into(), CHILD2.into())]
    );
    assert_eq!(
        of(None, Some(CHILD2)),
        vec![(MAIN.into(), CHILD2.into()), (CHILD.into(), CHILD2.into())]
    );
    assert_eq!(
        of(Some(CHILD), Some(CHILD2)),
        vec![(CHILD.into(), CHILD2.into())]
    );
    assert_eq!(of(Some(OPS), None), vec![]);
}

#[test]
fn a_closed_store_refuses() {
    let fx = Fixture::memory();
    fx.store.close();
    assert!(fx.store.cursor_rows(None, None).is_err());
}
