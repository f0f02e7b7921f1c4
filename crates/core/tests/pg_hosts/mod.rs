//! Gateway hosts for the PostgreSQL notice tests: a store on a schema of the shared cluster
//! with its wakes recorded, two of them on one schema, and waiting for a lease.
#![allow(dead_code)]

use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use session_awareness_core::{Hooks, Options, Provenance, Store, WakeRequest, WakeSink};

use crate::pg_harness::{schema, shared, until};
use crate::two_stores::{NOW, W};

/// A wake sink that sends each request, with when, to a channel.
pub struct Wakes(pub Mutex<mpsc::Sender<(WakeRequest, Instant)>>);
impl WakeSink for Wakes {
    fn wake(&self, request: WakeRequest) {
        let _ = self.0.lock().unwrap().send((request, Instant::now()));
    }
}

/// A host: a store on `schema` named `app` (its connections' application_name), with its
/// wakes.
pub fn host(schema: &str, app: &str, sync_ms: u32) -> (Store, WakeLog) {
    let (tx, rx) = mpsc::channel();
    let hooks = Hooks {
        wake: Some(Arc::new(Wakes(Mutex::new(tx)))),
        ..Hooks::default()
    };
    let mut opts = Options {
        sync_interval_ms: sync_ms,
        wake_coalesce_ms: 0,
        ..Options::default()
    };
    opts.pg_schema = session_awareness_core::SchemaName::parse(schema).unwrap();
    let url = format!("{}?application_name={app}", shared().url());
    (Store::open(&url, opts, hooks).unwrap(), rx)
}

/// The wakes a host was asked for, each with when.
pub type WakeLog = mpsc::Receiver<(WakeRequest, Instant)>;

/// A fresh schema and two hosts on it, `<name>-a` and `<name>-b`, each polling every 100 ms.
pub fn two_hosts(name: &str) -> (String, (Store, WakeLog), (Store, WakeLog)) {
    let s = schema("notices");
    let a = host(&s, &format!("{name}-a"), 100);
    let b = host(&s, &format!("{name}-b"), 100);
    (s, a, b)
}

/// [`two_hosts`], B watching `t` as [`W`] and serving W (its lease written).
pub fn served_on_b(name: &str, t: &str) -> ((Store, WakeLog), (Store, WakeLog)) {
    let (s, a, b) = two_hosts(name);
    assert!(b.0.watch(W, t, Provenance::Explicit, NOW).unwrap());
    leased(&s, W, 1);
    (a, b)
}

/// Waits until `store`'s leases are in the table (its task wrote them).
pub fn leased(schema: &str, watcher: &str, hosts: usize) {
    until("the lease", || {
        let n = shared()
            .sql(&format!(
                "SELECT count(*) FROM {schema}.session_awareness_served WHERE watcher_key = '{watcher}'"
            ))
            .unwrap();
        n == hosts.to_string()
    });
}
