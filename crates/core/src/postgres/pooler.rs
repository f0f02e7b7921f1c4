//! The check at open for a pooler in transaction or statement mode (docs/postgres.md#poolers).
//! The store needs a connection that keeps its server session: LISTEN, the prepared statements
//! of the store's connection and its `SET`s live in the session. Behind PgBouncer in
//! transaction mode none of them survives a transaction, and the store would open and then
//! fail at random calls. **Decision:** such a store is refused at open with
//! [`Error::PoolerMode`] (`ERR_POOLER_MODE`), naming the mode and what to configure.
//!
//! The check: the store's own connection asks for its backend's pid; a second connection
//! opens a transaction, asks for its pid and holds the transaction open; the first asks
//! again. Through a direct connection or a session-mode pooler it keeps its backend (the
//! second connection has another one). Through a transaction-mode pooler the first
//! connection's backend went back to the pool after its statement: the second connection is
//! handed it (PgBouncer reuses the backend released last), or the first is handed another
//! one, or it waits for a free one (a full pool: a wait past the bound counts as pooled).
//! Statement mode refuses the transaction block itself. Three rounds, in case another client
//! of the pooler took the released backend in between.

use std::time::Duration;

use tokio_postgres::{Client, SimpleQueryMessage};

use crate::error::{DbFailure, Error, Result};
use crate::postgres::conn::{Pg, Target};

/// Rounds of the check; one suffices without other clients on the pooler.
const ROUNDS: usize = 3;

/// What the check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pooling {
    /// Each connection keeps its server session (a direct connection, or a session pooler).
    Session,
    /// A connection's statements run on backends that change between transactions.
    Transaction,
    /// A transaction block was refused (PgBouncer's statement mode).
    Statement,
}

/// How long the first connection may wait for its backend while the second holds one: the
/// connect timeout, at least 1 s, 5 s without one.
fn bound(target: &Target) -> Duration {
    target
        .connect_timeout()
        .map_or(Duration::from_secs(5), |t| t.max(Duration::from_secs(1)))
}

/// The backend's pid, over the simple query protocol: an extended query's parse and execute
/// may land on two backends behind a transaction pooler.
async fn pid(c: &Client, target: &Target) -> Result<i32> {
    let messages = c
        .simple_query("SELECT pg_catalog.pg_backend_pid()")
        .await
        .map_err(|e| target.error(&e))?;
    messages
        .iter()
        .find_map(|m| match m {
            SimpleQueryMessage::Row(row) => row.get(0).and_then(|p| p.parse().ok()),
            _ => None,
        })
        .ok_or_else(|| Error::db(DbFailure::Other, "pg_backend_pid() gave no pid"))
}

/// Runs the check on `pg`'s connection and a second connection of its own.
pub(crate) async fn detect(pg: &Pg) -> Result<Pooling> {
    let target = pg.target();
    let (second, _, _) = target.connect().await?;
    let mut guard = pg.lock().await?;
    let first = guard.client()?;
    for _ in 0..ROUNDS {
        let before = pid(first, target).await?;
        // A transaction block on the second connection: statement mode refuses it (PgBouncer
        // closes the client with "transaction blocks not allowed in statement pooling mode").
        if second.batch_execute("BEGIN").await.is_err() {
            return Ok(Pooling::Statement);
        }
        let held = match pid(&second, target).await {
            Ok(p) => p,
            Err(_) if second.is_closed() => return Ok(Pooling::Statement),
            Err(e) => return Err(e),
        };
        let after = tokio::time::timeout(bound(target), pid(first, target)).await;
        let _ = second.batch_execute("ROLLBACK").await;
        match after {
            Ok(after) => {
                if held == before || after? != before {
                    return Ok(Pooling::Transaction);
                }
            }
            Err(_) => {
                // The first connection still waits for a backend: it is not usable as it is.
                drop(guard);
                pg.disconnect().await;
                return Ok(Pooling::Transaction);
            }
        }
    }
    Ok(Pooling::Session)
}

/// `Ok` for a connection that keeps its session; [`Error::PoolerMode`] otherwise.
pub(crate) async fn check(pg: &Pg) -> Result<()> {
    let mode = match detect(pg).await? {
        Pooling::Session => return Ok(()),
        Pooling::Transaction => "transaction",
        Pooling::Statement => "statement",
    };
    Err(Error::PoolerMode(format!(
        "{}: the connection goes through a pooler in {mode} mode (its backend changes between \
         transactions), which keeps neither LISTEN nor prepared statements: use session mode \
         (PgBouncer `pool_mode = session` for this database or user) or connect to the server \
         directly (docs/postgres.md#poolers)",
        pg.target().place()
    )))
}
