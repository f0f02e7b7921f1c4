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
    /// Asks the server for the identity of the backend that answers.
    pub(crate) const QUERY: &'static str =
        "SELECT pg_backend_pid()::text, (SELECT backend_start::text \
         FROM pg_stat_activity WHERE pid = pg_backend_pid())";

    pub(crate) fn of(answer: &[tokio_postgres::SimpleQueryMessage]) -> Option<Backend> {
        // The last row of the answer: the settings before it answer rows of their own.
        answer.iter().rev().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) if r.len() == 2 => Some(Backend {
                pid: r.get(0)?.parse().ok()?,
                start: r.get(1)?.to_owned(),
            }),
            _ => None,
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
