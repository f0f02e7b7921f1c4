//! A server process behind one of the store's connections, named by its pid and start time so
//! that a transaction a lost connection left open can be ended later
//! (docs/postgres.md#exactly-once) without ending another process that reused the pid.

use tokio_postgres::Client;

/// A server process of the store, named so that it can be ended later without ending another
/// one that reused its pid.
#[derive(Clone, Debug)]
pub(crate) struct Backend {
    pid: i32,
    start: String,
}

impl Backend {
    /// The backend that answered the connection's settings
    /// ([`crate::postgres::settings::SESSION`]): its pid and start time, the row's last two
    /// columns.
    pub(crate) fn of(row: &tokio_postgres::Row) -> Option<Backend> {
        let n = row.len();
        Some(Backend {
            pid: row.try_get(n.checked_sub(2)?).ok()?,
            start: row.try_get::<_, Option<String>>(n - 1).ok()??,
        })
    }

    /// Ends this backend if it still runs (its open transaction rolls back, its locks go), on
    /// `client`'s connection. Nothing when another process has its pid now.
    pub(crate) async fn terminate(
        &self,
        client: &Client,
    ) -> std::result::Result<(), tokio_postgres::Error> {
        client
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE pid = $1 AND backend_start::text = $2",
                &[&self.pid, &self.start],
            )
            .await
            .map(|_| ())
    }
}
