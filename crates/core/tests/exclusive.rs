//! One SQLite per file per process (semantics.md#storage): a handle on the store's file that the store's own
//! SQLite did not open refuses the constructor, and while it is open every later write,
//! without changing anything; reads are answered. Once it is closed, the store reopens its
//! connections (its locks taken anew), says so once, and goes on with nothing lost.

mod common;

use std::fs::File;

use common::*;
use session_awareness_core::upstream::{AdoptInput, RemoteCheck};
use session_awareness_core::{inspect, Error, Provenance, Store};

fn code<T>(r: Result<T, Error>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) => e.code(),
    }
}

#[test]
fn a_foreign_handle_first_refuses_the_store_and_leaves_the_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.sqlite");
    let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
    fx.rec(CHILD, "run_completed", None, T0);
    fx.store.close();
    let before = std::fs::read(&path).unwrap();
    let foreign = File::open(&path).unwrap();
    let err = Store::open(path.to_str().unwrap(), opts(), Default::default())
        .err()
        .expect("refused");
    assert_eq!(err.code(), "ERR_FILE_SHARED");
    // Nothing was opened: no -wal or -shm, the file as it was.
    assert!(!dir.path().join("state.sqlite-wal").exists());
    assert!(!dir.path().join("state.sqlite-shm").exists());
    assert_eq!(std::fs::read(&path).unwrap(), before);
    drop(foreign);
    let fx = Fixture::open(path.to_str().unwrap(), Some(path.clone()), opts());
    assert_eq!(fx.sequences(), [1]);
}

#[test]
fn a_handle_that_appears_later_refuses_every_write_answers_reads_and_clears_once_closed() {
    let mut fx = Fixture::file();
    fx.store
        .watch(MAIN, CHILD, Provenance::Explicit, T0)
        .unwrap();
    fx.rec(CHILD, "human_direct_message", Some("human"), T0 + 1);
    fx.rec(CHILD2, "run_completed", None, T0 + 2);
    assert_eq!(fx.sequences(), [1, 2]);
    let lnm = fx.lnm(MAIN, CHILD);
    let foreign = File::open(fx.file_path()).unwrap();
    let s = &fx.store;
    let now = T0 + 10;
    assert_eq!(
        code(s.record(input(CHILD, "run_completed"), now)),
        "ERR_FILE_SHARED"
    );
    assert_eq!(
        code(s.watch(OPS, CHILD, Provenance::Explicit, now)),
        "ERR_FILE_SHARED"
    );
    assert_eq!(code(s.unwatch(MAIN, CHILD)), "ERR_FILE_SHARED");
    assert_eq!(code(s.drain(MAIN, now)), "ERR_FILE_SHARED");
    assert_eq!(
        code(s.acknowledge(MAIN, &[CHILD.to_owned()], now)),
        "ERR_FILE_SHARED"
    );
    assert_eq!(code(s.sweep(None, now)), "ERR_FILE_SHARED");
    assert_eq!(code(s.prune(now + 100 * DAY)), "ERR_FILE_SHARED");
    assert_eq!(code(s.reset_session(MAIN)), "ERR_FILE_SHARED");
    assert_eq!(code(s.delete_session(CHILD2, None)), "ERR_FILE_SHARED");
    assert_eq!(code(s.sync_now()), "ERR_FILE_SHARED");
    // Reads are answered while the handle is open.
    assert_eq!(s.state_version(CHILD, None).unwrap(), 1);
    assert_eq!(s.state_version(CHILD2, None).unwrap(), 2);
    assert_eq!(
        s.changes_since(CHILD2, 0.0, None, None)
            .unwrap()
            .events
            .iter()
            .map(|e| e.sequence())
            .collect::<Vec<_>>(),
        [2]
    );
    let link = AdoptInput {
        source: "claude".into(),
        remote_id: Some("remote-1".into()),
        ..Default::default()
    };
    assert_eq!(code(s.adopt(CHILD2, link, now)), "ERR_FILE_SHARED");
    assert_eq!(
        code(s.check_upstream(CHILD, RemoteCheck::Found(Vec::new()), now)),
        "ERR_FILE_SHARED"
    );
    assert_eq!(code(s.scan_upstream(now)), "ERR_FILE_SHARED");
    // Answered from memory: the notice is still queued, and nothing was acknowledged.
    assert_eq!(pairs(&s.peek(MAIN).unwrap()), expect_pairs(&[(CHILD, 0)]));
    assert!(s.has_pending(MAIN).unwrap());
    // The background work reported nothing; the refused calls said it.
    fx.assert_no_error();
    drop(foreign);
    // The foreign close dropped this process's locks on the file: the next call reopens the
    // store's connections, which takes them anew, and says so once.
    assert_eq!(fx.rec(CHILD, "run_completed", None, now).sequence, 3);
    let told = fx.errors.recv_timeout(PATIENCE).expect("one report");
    assert_eq!(told.code(), "ERR_FILE_SHARED");
    assert_eq!(fx.rec(CHILD2, "run_completed", None, now).sequence, 4);
    fx.settle();
    fx.assert_no_error();
    assert_eq!(fx.lnm(MAIN, CHILD), lnm);
    assert_eq!(
        pairs(&fx.store.drain(MAIN, now).unwrap()),
        expect_pairs(&[(CHILD, 0)])
    );
    // Nothing recorded was lost: every event is in the file for a store opened after.
    fx.reopen();
    assert_eq!(fx.sequences(), [1, 2, 3, 4]);
    fx.assert_no_error();
}

#[test]
fn a_handle_on_the_wal_or_shm_refuses_the_next_write_until_it_is_closed() {
    for suffix in ["", "-wal", "-shm"] {
        let fx = Fixture::file();
        fx.rec(CHILD, "run_completed", None, T0);
        let mut name = fx.file_path().to_path_buf().into_os_string();
        name.push(suffix);
        let foreign = File::open(&name).unwrap();
        assert_eq!(
            code(fx.store.record(input(CHILD, "run_completed"), T0)),
            "ERR_FILE_SHARED",
            "{suffix}"
        );
        assert_eq!(fx.sequences(), [1], "{suffix}");
        drop(foreign);
        assert_eq!(
            fx.rec(CHILD, "run_completed", None, T0).sequence,
            2,
            "{suffix}"
        );
        let told = fx.errors.recv_timeout(PATIENCE).expect("one report");
        assert_eq!(told.code(), "ERR_FILE_SHARED", "{suffix}");
        assert_eq!(fx.sequences(), [1, 2], "{suffix}");
        fx.assert_no_error();
    }
}

#[test]
fn with_another_store_of_the_process_on_the_file_the_locks_cannot_come_back() {
    let fx = Fixture::file();
    let other = fx.attach();
    fx.rec(CHILD, "run_completed", None, T0);
    let foreign = File::open(fx.file_path()).unwrap();
    assert_eq!(
        code(fx.store.record(input(CHILD, "run_completed"), T0)),
        "ERR_FILE_SHARED"
    );
    drop(foreign);
    // The other store still holds the file: this one stays refused, reads answered.
    assert_eq!(
        code(fx.store.record(input(CHILD, "run_completed"), T0)),
        "ERR_FILE_SHARED"
    );
    assert_eq!(fx.store.state_version(CHILD, None).unwrap(), 1);
    // Once the other store is closed, the locks come back.
    other.store.close();
    assert_eq!(fx.rec(CHILD, "run_completed", None, T0).sequence, 2);
    assert_eq!(fx.sequences(), [1, 2]);
}

#[test]
fn many_writes_without_a_foreign_handle_go_through() {
    let fx = Fixture::file();
    let other = fx.attach();
    for i in 0..50 {
        let store = if i % 2 == 0 { &fx.store } else { &other.store };
        store.record(input(CHILD, "run_completed"), T0 + i).unwrap();
    }
    assert_eq!(fx.sequences(), (1..=50).collect::<Vec<_>>());
    fx.assert_no_error();
    other.assert_no_error();
}

#[test]
fn inspect_and_read_events_refuse_a_file_another_library_holds() {
    let fx = Fixture::file();
    fx.rec(CHILD, "run_completed", None, T0);
    let path = fx.file_path().to_str().unwrap().to_owned();
    // A store of this process on the file is not foreign.
    assert_eq!(inspect::inspect(&path).unwrap().counts.events, 1);
    fx.store.close();
    let foreign = File::open(&path).unwrap();
    assert_eq!(code(inspect::inspect(&path)), "ERR_FILE_SHARED");
    assert_eq!(
        code(inspect::read_events(&path, CHILD, None, 0.0)),
        "ERR_FILE_SHARED"
    );
    drop(foreign);
    assert_eq!(
        inspect::read_events(&path, CHILD, None, 0.0)
            .unwrap()
            .events
            .len(),
        1
    );
}
