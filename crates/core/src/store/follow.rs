//! The followers' part of the façade (semantics.md#follow): the host registers each open
//! follower here, and the store tells it when followed sessions may have new rows.

use std::sync::Arc;

use crate::error::Result;
use crate::follow::FollowSignal;
use crate::keys;

use super::Store;

impl Store {
    /// Registers one open follower of the session (`agent_id` resolved as `changesSince`
    /// does) and returns the agent. Its commits here, another process's on the file (seen by
    /// the poll) and another host's on PostgreSQL (seen by the catch-up) touch the session.
    pub fn follow(&self, session_key: &str, agent_id: Option<&str>) -> Result<String> {
        self.check_open()?;
        let agent = keys::resolve_agent(session_key, agent_id)?;
        self.delivery().follows.follow(&agent, session_key);
        if let Some(pg) = self.remote() {
            pg.notices().kick();
        }
        Ok(agent)
    }

    /// One follower of the session less (`agent` as [`Store::follow`] returned it).
    pub fn unfollow(&self, session_key: &str, agent: &str) {
        self.delivery().follows.unfollow(agent, session_key);
    }

    /// Sets (or, with `None`, removes) the signal told when followed sessions were touched.
    /// Ignored once the store is closed; `close` removes it.
    pub fn set_follow_signal(&self, signal: Option<Arc<dyn FollowSignal>>) {
        if signal.is_some() && self.is_closed() {
            return;
        }
        self.delivery().follows.set_signal(signal);
    }

    /// The followed sessions touched since the last call, (agent, key).
    pub fn take_followed(&self) -> Vec<(String, String)> {
        self.delivery().follows.take()
    }
}
