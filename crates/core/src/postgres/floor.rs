//! The sequence floor (docs/postgres.md#async): after a failover to an asynchronous standby
//! the new primary's identity can be behind the numbers the old one handed out, and would hand
//! them out again, which the contract forbids ("a sequence is never handed out twice"). So
//! the store remembers the highest sequence it has answered with, and every connection it makes
//! after a lost one first moves the identity past it (`setval` only ever raises it here). A
//! sequence another host handed out and this one never saw is raised by that host when it
//! reconnects, before it records again.

use std::sync::atomic::{AtomicI64, Ordering};

use tokio_postgres::Client;

use crate::options::SchemaName;

/// Raises the identity sequence of the events table `$2` (`schema.session_state_events`) to
/// `$1` when it is below (the next number drawn is above it); never lowers it, which would
/// hand out again what other hosts drew meanwhile. A sequence that has handed out nothing yet
/// (its last value NULL) counts as 0.
const RAISE: &str = "SELECT pg_catalog.setval(q, $1::bigint) \
     FROM (SELECT pg_catalog.pg_get_serial_sequence($2::text, 'sequence')::regclass AS q) s \
     WHERE COALESCE(pg_catalog.pg_sequence_last_value(q), 0) < $1::bigint";

/// The highest sequence this store has answered with.
#[derive(Default)]
pub(crate) struct Floor(AtomicI64);

impl Floor {
    /// Notes that `sequence` was handed out.
    pub(crate) fn saw(&self, sequence: i64) {
        self.0.fetch_max(sequence, Ordering::AcqRel);
    }

    /// The highest sequence handed out so far (0: none).
    pub(crate) fn get(&self) -> i64 {
        self.0.load(Ordering::Acquire)
    }

    /// Moves the identity of `schema`'s events past [`Floor::get`] on `client`, when any was
    /// handed out.
    pub(crate) async fn raise(
        &self,
        client: &Client,
        schema: SchemaName,
    ) -> std::result::Result<(), tokio_postgres::Error> {
        let floor = self.get();
        if floor == 0 {
            return Ok(());
        }
        let table = format!("{}.session_state_events", schema.as_str());
        client.execute(RAISE, &[&floor, &table]).await.map(|_| ())
    }
}
