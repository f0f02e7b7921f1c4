//! The harness of the PostgreSQL integration tests (`pg_*.rs`): throwaway clusters (one per
//! test, or one per test file with a fresh schema per test), the URL of a cluster without TLS,
//! and waiting for what another connection or task does. Never skipped: without PostgreSQL's
//! server binaries a cluster does not start and the test fails with the line saying what to
//! install.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use session_awareness_pg_test::Cluster;

/// How long a test waits for what another host, task or connection does.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A cluster of its own for one test, its temp dir labelled `name`.
pub fn cluster(name: &str) -> Cluster {
    Cluster::start_with(session_awareness_pg_test::Options {
        name: name.into(),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The one cluster the tests of this file share, each in a [`schema`] of its own.
pub fn shared() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| Cluster::start().expect("a throwaway PostgreSQL cluster"))
}

/// A fresh schema name for one test: `<prefix>_<n>`, `n` counting up from 0 in this process.
pub fn schema(prefix: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("{prefix}_{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The URL of `c` without TLS.
pub fn url(c: &Cluster) -> String {
    format!("{}?sslmode=disable", c.url())
}

/// Polls `done` every 2 ms until it holds; fails the test after [`PATIENCE`].
pub fn until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}
