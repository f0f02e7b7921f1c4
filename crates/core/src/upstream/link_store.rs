//! What the upstream monitor ([`super::monitor::Monitor`]) needs of a store: the link rows and
//! a record whose transaction also writes a link. Every engine serves it
//! (`sqlite/engine/links.rs`, `postgres/links.rs`): it is the supertrait of
//! [`crate::engine::Engine`]. Nothing here names a database.

use crate::error::Result;
use crate::event::{RecordInput, StateEvent};
use crate::upstream::links::Link;

/// The link write that commits with a monitor's event.
#[derive(Debug, Clone)]
pub(crate) enum LinkWrite {
    /// A new link from `adopt`, replacing the row of the same session and agent (on
    /// PostgreSQL it also names this host as the one that scans it).
    Adopt(Link),
    /// The link's state written back after a scan or a check.
    Save(Link),
    /// The link of the session and agent dropped.
    Delete {
        /// The session.
        session_key: String,
        /// Its agent.
        agent_id: String,
    },
}

/// The store behind an upstream monitor.
pub(crate) trait LinkStore: Send + Sync {
    /// `ERR_CLOSED` once the store is closed.
    fn check_open(&self) -> Result<()>;
    /// The link of `session_key` (see [`LinkRows::link`]).
    fn link(&self, session_key: &str) -> Result<Option<Link>>;
    /// The watched links with a local transcript this host scans (see
    /// [`LinkRows::watched_local_links`]).
    fn watched_local_links(&self) -> Result<Vec<Link>>;
    /// Writes the link's state back, inserting it again if it was dropped meanwhile.
    fn save_link(&self, link: &Link, now: i64) -> Result<()>;
    /// Reads the link of `session_key`, applies `change` and writes it back, in one
    /// transaction. Nothing for a session without a link.
    fn update_link(
        &self,
        session_key: &str,
        now: i64,
        change: &mut (dyn FnMut(&mut Link) + Send),
    ) -> Result<()>;
    /// Records one event with `also` written in the same transaction once the event is in (or
    /// found by its dedupe key): a failure of either leaves neither. `also` is not written when
    /// `onlyIfWatched` finds nobody watching.
    fn record_with(
        &self,
        input: RecordInput,
        now: i64,
        also: LinkWrite,
    ) -> Result<Option<StateEvent>>;
}
