//! Served-watcher leases on PostgreSQL (semantics.md#processes): the table
//! `session_awareness_served` of the store's schema, one row per (watcher, store instance)
//! that serves it, renewed by the instance's background task, deleted at close, and no longer
//! counted once its `expires_at` (the system clock, epoch ms) has passed, so a crashed host
//! stops holding its watchers within one lease length. The length and the clock are those of
//! the SQLite store's leases ([`crate::lease::length_ms`], [`crate::lease::now`]).

use tokio_postgres::GenericClient;

use super::cursors::{db, Cached};
use crate::error::Result;
use crate::options::SchemaName;

// Answers the watchers whose row it inserted: a row an upsert updated has the writing
// transaction as its `xmax`, an inserted one 0.
const RENEW: &str = "WITH w AS (INSERT INTO __SCHEMA__.session_awareness_served \
     (watcher_key, instance_id, expires_at) SELECT w, $2, $3 FROM unnest($1::text[]) AS w \
     ON CONFLICT (watcher_key, instance_id) DO UPDATE SET expires_at = excluded.expires_at \
     RETURNING watcher_key, xmax = 0 AS inserted) \
     SELECT watcher_key FROM w WHERE inserted";
const RELEASE: &str = "DELETE FROM __SCHEMA__.session_awareness_served \
     WHERE instance_id = $2 AND watcher_key = ANY($1)";
const EXPIRE: &str = "DELETE FROM __SCHEMA__.session_awareness_served WHERE expires_at < $1";

/// Writes this instance's leases: `serving` until `expires_at`, `released` dropped, and every
/// row that expired before `stale_before` deleted (a crashed host's). One statement each,
/// autocommitted: a lease is a hint of its own, never part of a data transaction. The
/// statements are prepared once per connection. Returns the watchers of `serving` whose row
/// was inserted (none was there: first served, or deleted as stale by another host).
pub(crate) async fn renew(
    c: &mut Cached<'_>,
    instance: &str,
    serving: &[String],
    released: &[String],
    expires_at: i64,
    stale_before: i64,
) -> Result<Vec<String>> {
    let mut anew = Vec::new();
    if !serving.is_empty() {
        let st = c.prepare(RENEW).await?;
        let rows = c
            .client
            .query(&st, &[&serving, &instance, &expires_at])
            .await
            .map_err(db)?;
        anew = rows.iter().map(|r| r.get(0)).collect();
    }
    if !released.is_empty() {
        let st = c.prepare(RELEASE).await?;
        c.client
            .execute(&st, &[&released, &instance])
            .await
            .map_err(db)?;
    }
    let st = c.prepare(EXPIRE).await?;
    c.client.execute(&st, &[&stale_before]).await.map_err(db)?;
    Ok(anew)
}

/// Drops every lease of this instance (the store closes).
pub(crate) async fn release_all<C: GenericClient + Sync>(
    c: &C,
    s: SchemaName,
    instance: &str,
) -> Result<()> {
    let sql = format!("DELETE FROM {s}.session_awareness_served WHERE instance_id = $1");
    c.execute(&sql, &[&instance]).await.map_err(db)?;
    Ok(())
}
