//! The reads of the façade: state versions and the typed delta (semantics.md#reading). They
//! move no cursor.

use crate::error::{Error, Result};
use crate::keys;
use crate::log::{self, Changes, ChangesRef};

use super::{Store, VersionRef};

impl Store {
    /// The state version of a session (0 when none).
    pub fn state_version(&self, session_key: &str, agent_id: Option<&str>) -> Result<i64> {
        self.check_open()?;
        let agent = keys::resolve_agent(session_key, agent_id)?;
        self.engine().state_version(session_key, &agent)
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
        self.check_open()?;
        let resolved = keys::resolve_refs(refs)?;
        let found = self.engine().state_versions(&resolved)?;
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
        self.check_open()?;
        let agent = keys::resolve_agent(session_key, agent_id)?;
        let after = log::check_after(after)?;
        let limit = log::clamp_limit(limit)?;
        self.engine()
            .changes_since(session_key, &agent, after, limit)
    }

    /// [`Store::changes_since`], lent to `f`, which runs once, on this thread, before this
    /// returns, and returns its value: the events the read cache holds are borrowed, not
    /// copied. `f` runs under the store's read lock and must not call the store.
    pub fn changes_since_with<R>(
        &self,
        session_key: &str,
        after: f64,
        agent_id: Option<&str>,
        limit: Option<f64>,
        f: impl FnOnce(ChangesRef<'_>) -> R,
    ) -> Result<R> {
        self.check_open()?;
        let agent = keys::resolve_agent(session_key, agent_id)?;
        let after = log::check_after(after)?;
        let limit = log::clamp_limit(limit)?;
        let mut f = Some(f);
        let mut out = None;
        self.engine()
            .changes_since_with(session_key, &agent, after, limit, &mut |c| {
                if let Some(f) = f.take() {
                    out = Some(f(c));
                }
            })?;
        out.ok_or_else(|| Error::invalid("changesSince answered nothing"))
    }
}
