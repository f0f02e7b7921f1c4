//! What a commit that opened notices sends right after its `COMMIT` (postgres/catchup.rs,
//! docs/postgres.md): the hint naming their watchers, and the lease read of the watchers
//! neither served nor held here. The record path polls them right after the `COMMIT`, in
//! the commit's pipeline; the other calls in a round trip of their own after it.
//!
//! The hint goes out only where a host may act on it (docs/postgres.md#hint-rule): a host
//! acts on a hint only for the watchers it serves, and every host that serves a watcher
//! holds a lease row on it, so the statement notifies only when another instance has a row,
//! live or lapsed, on a watcher it names, or when it names a session another host follows.

use tokio_postgres::{Client, Statement};

use crate::error::{Error, Result};
use crate::postgres::cursors::{self, Cached};
use crate::postgres::rows::PgRows;

/// A hint that always goes out: `$1` the channel (the schema's name), `$2` the payload.
pub(crate) const NOTIFY: &str = "SELECT pg_notify($1, $2)";
/// The hint after a commit or a consuming call: `$1` the channel, `$2` the payload, sent
/// only when `$5` (it names a session another host follows) or when an instance other than
/// `$4` holds a lease row, live or lapsed, on one of the watchers `$3`.
pub(crate) const NOTIFY_IF_SERVED: &str = "SELECT pg_notify($1, $2) WHERE $5::bool \
     OR EXISTS (SELECT 1 FROM __SCHEMA__.session_awareness_served \
     WHERE watcher_key = ANY($3) AND instance_id <> $4)";
/// The watchers among `$1` that an instance other than `$2` holds a live lease on at `$3`,
/// asked after every commit that opens a notice for a watcher not served here (prepared once
/// per connection).
pub(crate) const SERVED_ELSEWHERE: &str = "SELECT DISTINCT watcher_key \
     FROM __SCHEMA__.session_awareness_served \
     WHERE watcher_key = ANY($1) AND instance_id <> $2 AND expires_at > $3";

/// The hint and the lease read of one commit, ready to send. Never inside the data
/// transaction: a NOTIFY there serializes every commit in the cluster.
pub(crate) struct Tail {
    channel: String,
    payload: String,
    instance: String,
    // The watchers the hint names, and whether it names a followed session too.
    watchers: Vec<String>,
    followed: bool,
    ask: Vec<String>,
    now: i64,
}

/// The two statements of a [`Tail`], prepared once per connection (or why not).
pub(crate) struct Prepared {
    notify: Result<Statement>,
    elsewhere: Result<Statement>,
}

impl Prepared {
    /// Both statements, prepared through the record path's `rows` before its transaction
    /// begins, so no prepare runs inside it.
    pub(crate) fn on_rows(rows: &mut PgRows<'_>) -> Self {
        let notify = rows.prepared(NOTIFY_IF_SERVED);
        let elsewhere = rows.prepared(SERVED_ELSEWHERE);
        Prepared { notify, elsewhere }
    }

    /// The statements on `c`: the lease read's only when the tail `asks`.
    pub(crate) async fn on(c: &mut Cached<'_>, asks: bool) -> Self {
        let notify = c.prepare(NOTIFY_IF_SERVED).await;
        let elsewhere = match asks {
            true => c.prepare(SERVED_ELSEWHERE).await,
            false => Err(Error::invalid("the lease read is not asked")),
        };
        Prepared { notify, elsewhere }
    }
}

/// Sends the hint `payload` on `channel` on `c`, with the cached [`NOTIFY`].
pub(crate) async fn notify(c: &mut Cached<'_>, channel: &str, payload: &str) -> Result<()> {
    let st = c.prepare(NOTIFY).await?;
    c.client
        .execute(&st, &[&channel, &payload])
        .await
        .map_err(cursors::db)?;
    Ok(())
}

/// Sends the hint `payload` naming `watchers` on `channel` on `c` ([`NOTIFY_IF_SERVED`]):
/// only when an instance other than `instance` holds a lease row on one of them.
pub(crate) async fn notify_if_served(
    c: &mut Cached<'_>,
    channel: &str,
    payload: &str,
    watchers: &[&str],
    instance: &str,
) -> Result<()> {
    let st = c.prepare(NOTIFY_IF_SERVED).await?;
    c.client
        .execute(&st, &[&channel, &payload, &watchers, &instance, &false])
        .await
        .map_err(cursors::db)?;
    Ok(())
}

/// What a [`Tail`] was told: the hint's outcome, and the watchers served elsewhere.
pub(crate) struct Told {
    hinted: Result<()>,
    elsewhere: Result<Vec<String>>,
}

impl Told {
    /// The hint's failure, once: a later call answers `None`.
    pub(crate) fn take_failure(&mut self) -> Option<Error> {
        std::mem::replace(&mut self.hinted, Ok(())).err()
    }

    /// The watchers served elsewhere: none when the lease read failed.
    pub(crate) fn elsewhere(&self) -> &[String] {
        self.elsewhere.as_deref().unwrap_or(&[])
    }
}

impl Tail {
    /// The hint `payload` on `channel` naming `watchers` (and sessions another host follows
    /// when `followed`), and the lease read of `ask` for an instance other than `instance`
    /// at `now`.
    pub(crate) fn new(
        channel: &str,
        payload: String,
        instance: &str,
        (watchers, followed): (Vec<String>, bool),
        ask: Vec<String>,
        now: i64,
    ) -> Self {
        Tail {
            channel: channel.to_owned(),
            payload,
            instance: instance.to_owned(),
            watchers,
            followed,
            ask,
            now,
        }
    }

    /// True when the lease read is part of it.
    pub(crate) fn asks(&self) -> bool {
        !self.ask.is_empty()
    }

    /// Sends the hint ([`NOTIFY_IF_SERVED`]), then the lease read ([`SERVED_ELSEWHERE`]) when it asks,
    /// with the statements `p`. Each request goes out when first polled: polled right after a
    /// `COMMIT`, both run after it, in the same pipeline.
    pub(crate) async fn send(self, client: &Client, p: Prepared) -> Told {
        let hint = async {
            let notify = p.notify?;
            let (who, followed) = (&self.watchers, &self.followed);
            client
                .execute(
                    &notify,
                    &[&self.channel, &self.payload, who, &self.instance, followed],
                )
                .await
                .map_err(cursors::db)?;
            Ok::<(), Error>(())
        };
        let lease = async {
            if self.ask.is_empty() {
                return Ok(Vec::new());
            }
            let elsewhere = p.elsewhere?;
            let rows = client
                .query(&elsewhere, &[&self.ask, &self.instance, &self.now])
                .await
                .map_err(cursors::db)?;
            Ok::<Vec<String>, Error>(rows.iter().map(|r| r.get(0)).collect())
        };
        let (hinted, elsewhere) = tokio::join!(hint, lease);
        Told { hinted, elsewhere }
    }
}
