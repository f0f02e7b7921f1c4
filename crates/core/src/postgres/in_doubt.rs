//! Exactly once across a lost `COMMIT` (docs/postgres.md#faults). A group's `COMMIT` went out
//! and the connection was lost before its answer: the server may have committed or not. The
//! group's own rows settle it. Its fresh events were given their sequences before `COMMIT`
//! (drawn in its first round trip, or returned by their inserts), and a sequence is drawn once:
//! so, once connected again, the group is committed exactly when the rows with those sequences
//! are there with the group's session keys, summaries and payloads (compared too, so that a
//! sequence another transaction was given after an asynchronous failover cannot pass for the
//! group's). The look-up first locks the group's heads, as the group did before it drew its
//! sequences: the lock is granted only once the group's transaction has ended on the server,
//! either way, so the answer cannot change afterwards. A group that inserted no event (every
//! record found by its dedupe key, or skipped by `onlyIfWatched`) changed nothing that writing
//! it again would change otherwise, and is written again.

use futures_util::future::{join, join4};
use tokio_postgres::Client;

use crate::group::WrittenItem;
use crate::options::SchemaName;
use crate::postgres::batch::LOCK_HEADS;

/// Counts the group's fresh events found as the group wrote them.
const FOUND: &str = "SELECT count(*) FROM __SCHEMA__.session_state_events e \
     JOIN unnest($1::bigint[], $2::text[], $3::text[], $4::text[]) AS t(s, k, m, p) \
     ON e.sequence = t.s AND e.session_key = t.k AND e.summary = t.m \
     AND e.payload_json IS NOT DISTINCT FROM t.p";

/// A group whose `COMMIT` was sent and not answered: what it wrote, as its answer if it
/// committed, and how to tell.
pub(crate) struct InDoubt {
    /// The group's results as the commit would have made them.
    pub(crate) written: Vec<WrittenItem>,
    keys: Vec<String>,
    agents: Vec<String>,
    sequences: Vec<i64>,
    sessions: Vec<String>,
    summaries: Vec<String>,
    payloads: Vec<Option<String>>,
}

impl InDoubt {
    /// The group that wrote `written` (its heads as it locked them).
    pub(crate) fn new(written: Vec<WrittenItem>) -> Self {
        let fresh: Vec<&crate::event::StateEvent> = written
            .iter()
            .filter_map(|(_, _, r)| r.as_ref().ok()?.as_ref())
            .filter(|w| w.fresh)
            .map(|w| &w.event)
            .collect();
        let heads = heads_of_events(&fresh);
        let (keys, agents) = heads.into_iter().unzip();
        InDoubt {
            keys,
            agents,
            sequences: fresh.iter().map(|e| e.sequence).collect(),
            sessions: fresh.iter().map(|e| e.session_key.clone()).collect(),
            summaries: fresh.iter().map(|e| e.summary.clone()).collect(),
            payloads: fresh.iter().map(|e| e.payload_json.clone()).collect(),
            written,
        }
    }

    /// True when the group committed, false when it did not (or inserted nothing), on a
    /// connection made after the loss. Waits for the group's transaction to end on the
    /// server (bounded by the statement timeout).
    pub(crate) async fn committed(
        &self,
        client: &Client,
        schema: SchemaName,
    ) -> std::result::Result<bool, tokio_postgres::Error> {
        if self.sequences.is_empty() {
            return Ok(false);
        }
        let now = 0_i64;
        // Prepared first, so that the look-up is one pipeline the server runs in order (an
        // unprepared query would send its execution after the ROLLBACK); nothing of it stays
        // (a head the lock created goes with the rollback).
        let sql = LOCK_HEADS.replace("__SCHEMA__", schema.as_str());
        let lock = client.prepare(&sql);
        let sql = FOUND.replace("__SCHEMA__", schema.as_str());
        let found = client.prepare(&sql);
        let (lock, found) = join(lock, found).await;
        let (lock, found) = (lock?, found?);
        let (begun, locked, answer, rolled_back) = join4(
            client.batch_execute("BEGIN"),
            client.query(&lock, &[&self.keys, &self.agents, &now]),
            client.query_one(
                &found,
                &[
                    &self.sequences,
                    &self.sessions,
                    &self.summaries,
                    &self.payloads,
                ],
            ),
            client.batch_execute("ROLLBACK"),
        )
        .await;
        begun?;
        locked?;
        let n: i64 = answer?.try_get(0)?;
        rolled_back?;
        Ok(n > 0)
    }
}

/// The heads of `events`, sorted as a group locks them (by session key, then agent id,
/// bytewise: `overlay::heads_of`).
fn heads_of_events(events: &[&crate::event::StateEvent]) -> Vec<(String, String)> {
    let mut heads: Vec<(String, String)> = events
        .iter()
        .map(|e| (e.session_key.clone(), e.agent_id.clone()))
        .collect();
    heads.sort_unstable();
    heads.dedup();
    heads
}
