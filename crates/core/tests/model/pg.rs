//! The model test on a PostgreSQL store: the same operations and assertions as on SQLite
//! ([`super::run_on`]), each case in a schema of its own on one throwaway cluster.

use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::sample::select;

use super::{run_on, HOUR};

/// The throwaway cluster of the PostgreSQL cases, shared by them (each has a schema of its own).
pub(crate) fn cluster() -> &'static session_awareness_pg_test::Cluster {
    static CLUSTER: std::sync::OnceLock<session_awareness_pg_test::Cluster> =
        std::sync::OnceLock::new();
    CLUSTER.get_or_init(|| {
        session_awareness_pg_test::Cluster::start().expect("a throwaway PostgreSQL cluster")
    })
}

/// A fresh schema for one PostgreSQL case.
pub(crate) fn schema() -> session_awareness_core::SchemaName {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    session_awareness_core::SchemaName::parse(&format!("model_{n}")).unwrap()
}

/// Fewer cases on PostgreSQL (each a schema and round trips to a server); `PG_MODEL_CASES`
/// overrides the count.
fn config() -> ProptestConfig {
    let cases = std::env::var("PG_MODEL_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..super::config()
    }
}

proptest! {
    #![proptest_config(config())]

    /// The same model, the same assertions, on a PostgreSQL store (one host: the cross-host
    /// delivery is off, as the SQLite cases run without polling).
    #[test]
    fn the_postgres_store_behaves_like_the_model(
        retention in select(&[10_000, HOUR, 25 * HOUR][..]),
        max_events in select(&[1u64, 2, 4, 1_000][..]),
        restartable in prop::bool::weighted(0.2),
        ops in prop::collection::vec(any::<u64>(), 1..30),
    ) {
        run_on(retention, max_events, restartable, &ops, Some(cluster().url()))?;
    }
}
