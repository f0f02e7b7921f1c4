//! The reads of the façade: state versions and the typed delta (semantics.md#reading). They
//! move no cursor.

use crate::error::Result;
use crate::keys;
use crate::log::{self, Changes};
use crate::metrics::{Count, Hist};
use crate::sqlite;
use crate::sqlite::heads;
use crate::sqlite::tx::Tx;

use super::{Store, VersionRef};

impl Store {
    /// The state version of a session (0 when none).
    pub fn state_version(&self, session_key: &str, agent_id: Option<&str>) -> Result<i64> {
        if let Some(pg) = self.remote() {
            return pg.state_version(session_key, agent_id);
        }
        self.check_open()?;
        let agent = keys::resolve_agent(session_key, agent_id)?;
        self.read_conn(|conn| Ok(sqlite::log::head(conn, session_key, &agent)?.last_sequence))
    }

    /// The state versions of many sessions, in the order given, leaving out those at 0.
    pub fn state_versions(&self, refs: &[VersionRef]) -> Result<Vec<(String, String, i64)>> {
        let refs: Vec<(&str, Option<&str>)> = refs
            .iter()
            .map(|r| (r.session_key.as_str(), r.agent_id.as_deref()))
            .collect();
        Ok(self
            .state_versions_of(&refs)?
            .into_iter()
            .map(|(at, agent, v)| (refs[at].0.to_owned(), agent.to_owned(), v))
            .collect())
    }

    /// [`Store::state_versions`] of `(session_key, agent_id)` pairs, without copies: for each
    /// session above 0, its index in `refs`, its resolved agent and its version, in the order
    /// given. Every ref is checked before anything is read; the first bad one is the error.
    pub fn state_versions_of<'a>(
        &self,
        refs: &[(&'a str, Option<&'a str>)],
    ) -> Result<Vec<(usize, &'a str, i64)>> {
        if let Some(pg) = self.remote() {
            return pg.state_versions_of(refs);
        }
        self.check_open()?;
        let resolved = keys::resolve_refs(refs)?;
        let db = self.db();
        let found = self.read_conn(|conn| {
            let tx = Tx::read(conn)?;
            let mut cache = db.read_cache();
            let found = if cache.enabled() {
                // The transaction's first read: the snapshot starts with the stamp.
                cache.refresh(&tx, db.changes())?;
                heads::versions(&tx, Some(&mut cache.heads), &resolved)?
            } else {
                heads::versions(&tx, None, &resolved)?
            };
            drop(cache);
            tx.commit()?;
            Ok(found)
        })?;
        Ok(found
            .into_iter()
            .map(|(at, v)| (at, resolved[at].1, v))
            .collect())
    }

    /// The typed delta after `after` (semantics.md#reading). Moves no cursor.
    pub fn changes_since(
        &self,
        session_key: &str,
        after: f64,
        agent_id: Option<&str>,
        limit: Option<f64>,
    ) -> Result<Changes> {
        if let Some(pg) = self.remote() {
            return pg.changes_since(session_key, after, agent_id, limit);
        }
        self.check_open()?;
        let agent = keys::resolve_agent(session_key, agent_id)?;
        let after = log::check_after(after)?;
        let limit = log::clamp_limit(limit)?;
        let start = std::time::Instant::now();
        let db = self.db();
        let r = self.read_conn(|conn| {
            let mut cache = db.read_cache();
            if !cache.enabled() {
                return sqlite::log::changes_since(conn, session_key, &agent, after, limit);
            }
            cache.refresh(conn, db.changes())?;
            let metrics = &self.delivery().metrics;
            if let Some(c) = cache.tail.answer(session_key, &agent, after, limit) {
                metrics.add(Count::ReadCacheHits, 1);
                return Ok(c);
            }
            metrics.add(Count::ReadCacheMisses, 1);
            let (c, bounds) = sqlite::log::read_changes(conn, session_key, &agent, after, limit)?;
            if let Some(bounds) = bounds {
                cache.tail.fill(session_key, &agent, after, &c, bounds);
            }
            Ok(c)
        });
        self.delivery().metrics.since(Hist::ChangesSince, start);
        r
    }
}
