//! semantics.md#wake: wakes from records and acknowledges, their coalescing, and a wake
//! handler that drains at once.

mod common;
mod watching;

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, OnceLock};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use common::*;
use parking_lot::Mutex;
use session_awareness_core::{Hooks, Notice, Options, Provenance, Store, WakeRequest, WakeSink};
use watching::*;

#[test]
fn wakes_coalesce_per_watcher_and_name_the_first_target() {
    until_judged(|| {
        let fx = Fixture::file_with(Options {
            wake_coalesce_ms: 400,
            ..opts()
        });
        for t in [CHILD, CHILD2, W3] {
            assert!(explicit(&fx, MAIN, t, T0));
        }
        let start = Instant::now();
        fx.rec(CHILD2, "goal_changed", None, T0);
        fx.rec(CHILD, "goal_changed", None, T0);
        if start.elapsed() >= Duration::from_millis(300) {
            return false;
        }
        let w = fx.next_wake();
        assert!(start.elapsed() >= Duration::from_millis(400));
        assert_eq!(
            (w.session_key.as_str(), w.reason.as_str()),
            (MAIN, "session-state:agent:main:subagent:second")
        );
        fx.assert_no_wake(500);
        // After the call, a new notice schedules a new one.
        fx.rec(W3, "goal_changed", None, T0);
        assert_eq!(fx.next_wake().reason, format!("session-state:{W3}"));
        true
    });
}

#[test]
fn close_cancels_a_scheduled_wake() {
    until_judged(|| {
        let fx = Fixture::file_with(Options {
            wake_coalesce_ms: 500,
            ..opts()
        });
        assert!(explicit(&fx, MAIN, CHILD, T0));
        let start = Instant::now();
        fx.rec(CHILD, "goal_changed", None, T0);
        fx.store.close();
        if start.elapsed() >= Duration::from_millis(400) {
            return false;
        }
        fx.assert_no_wake(800);
        true
    });
}

#[test]
fn a_reopen_on_acknowledge_wakes_the_watcher() {
    let fx = Fixture::file();
    assert!(explicit(&fx, MAIN, CHILD, T0));
    fx.rec(CHILD, "goal_changed", None, T0); // 1
    assert_eq!(fx.next_wake().session_key, MAIN);
    fx.rec(CHILD, "goal_changed", None, T0); // 2: absorbed by the open notice
    fx.assert_no_wake(150);
    assert_eq!(
        fx.store.acknowledge(MAIN, &strings(&[CHILD]), T0).unwrap(),
        1
    );
    assert_eq!(
        pairs(&fx.store.peek(MAIN).unwrap()),
        expect_pairs(&[(CHILD, 1)])
    );
    let w = fx.next_wake();
    assert_eq!(
        (w.session_key.as_str(), w.reason.as_str()),
        (MAIN, "session-state:agent:main:subagent:child")
    );
    assert_eq!(
        fx.store.acknowledge(MAIN, &strings(&[CHILD]), T0).unwrap(),
        1
    );
    fx.assert_no_wake(150);
}

/// A host whose wake handler drains the watcher at once.
struct DrainingHost {
    store: OnceLock<Store>,
    caller: ThreadId,
    tx: Mutex<Sender<(ThreadId, Vec<Notice>)>>,
}

impl WakeSink for DrainingHost {
    fn wake(&self, request: WakeRequest) {
        let here = std::thread::current().id();
        // Called on the recording thread, the drain below could only deadlock.
        let drained = if here == self.caller {
            Vec::new()
        } else {
            let store = self.store.get().expect("store set");
            store.drain(&request.session_key, T0).unwrap()
        };
        let _ = self.tx.lock().send((here, drained));
    }
}

#[test]
fn the_wake_comes_after_the_record_and_may_drain() {
    let (tx, rx) = mpsc::channel();
    let host = Arc::new(DrainingHost {
        store: OnceLock::new(),
        caller: std::thread::current().id(),
        tx: Mutex::new(tx),
    });
    let store = Store::open(
        ":memory:",
        Options {
            wake_coalesce_ms: 0,
            ..opts()
        },
        Hooks {
            wake: Some(host.clone()),
            ..Hooks::default()
        },
    )
    .unwrap();
    assert!(host.store.set(store.clone()).is_ok());
    assert!(store.watch(MAIN, CHILD, Provenance::Explicit, T0).unwrap());
    let e = rec(&store, CHILD, "human_direct_message", None, T0);
    let (thread, drained) = rx.recv_timeout(PATIENCE).unwrap();
    assert_ne!(thread, std::thread::current().id());
    assert_eq!(pairs(&drained), expect_pairs(&[(CHILD, 0)]));
    assert_eq!(store.state_version(CHILD, None).unwrap(), e.sequence);
    assert!(store.peek(MAIN).unwrap().is_empty());
    store.close();
}
