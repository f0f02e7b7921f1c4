//! The model's reads (semantics.md#reading, semantics.md#api): `stateVersion` and
//! `changesSince` over its maps.

use super::{resolve_agent, Ev, Head, Model, INVALID};

/// `changesSince` (semantics.md#reading).
#[derive(Debug, Clone, PartialEq)]
pub struct Delta {
    pub state_version: i64,
    pub events: Vec<Ev>,
    pub truncated: bool,
    pub earliest: i64,
    pub gap: bool,
}

impl Model {
    /// semantics.md#api `stateVersion`.
    pub fn state_version(&self, k: &str, agent: Option<&str>) -> Result<i64, &'static str> {
        let agent = resolve_agent(k, agent)?;
        Ok(self.heads.get(&(k.to_owned(), agent)).map_or(0, |h| h.last))
    }

    /// semantics.md#reading `changesSince`.
    pub fn changes_since(
        &self,
        k: &str,
        after: f64,
        agent: Option<&str>,
        limit: Option<f64>,
    ) -> Result<Delta, &'static str> {
        let agent = resolve_agent(k, agent)?;
        if !(after >= 0.0 && after.fract() == 0.0 && after <= 9_007_199_254_740_991.0) {
            return Err(INVALID);
        }
        let limit = match limit {
            None => 200,
            Some(l) if !l.is_finite() => return Err(INVALID),
            Some(l) => l.floor().clamp(1.0, 200.0) as usize,
        };
        let after = after as i64;
        let head = self
            .heads
            .get(&(k.to_owned(), agent.clone()))
            .copied()
            .unwrap_or(Head { last: 0, pruned: 0 });
        let mine: Vec<&Ev> = self
            .events
            .values()
            .filter(|e| e.key == k && e.agent == agent)
            .collect();
        let newer: Vec<Ev> = mine
            .iter()
            .filter(|e| e.seq > after)
            .map(|e| (*e).clone())
            .collect();
        let earliest = match mine.first() {
            Some(e) => e.seq,
            None if head.last > 0 => head.last + 1,
            None => 0,
        };
        Ok(Delta {
            state_version: head.last,
            truncated: newer.len() > limit,
            events: newer.into_iter().take(limit).collect(),
            earliest,
            gap: after < head.pruned,
        })
    }
}
