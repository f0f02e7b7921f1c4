//! What the SQLite store keeps in memory for its reads (semantics.md#reading-memory): the
//! per-session tail that answers `changesSince` ([`crate::tail`]) and the versions behind
//! `stateVersions` ([`HeadCache`]), and the proof that they are current.
//!
//! Two things change the file under the cache. Commits of any other connection, in this
//! process or another: `PRAGMA data_version` on the store's connection moves with each of them
//! (and never with the connection's own). The store's own writes: an update hook on the
//! connection counts every row it changes in the event and head tables
//! ([`crate::sqlite::changes::ChangeCount`]), whichever path writes it (a prune, a reset, a
//! delete, an import). A record, after its
//! commit, brings the cache up to date with what it wrote and accounts for its own rows; any
//! row changed outside a record leaves the count ahead of the cache's, and the next read
//! empties the cache first. So a read answers from memory only what SQLite would answer now.

use rusqlite::Connection;

use crate::error::Result;
use crate::event::StateEvent;
use crate::sqlite::heads::HeadCache;
use crate::tail::Tail;

/// The tail and the versions, with the stamp they are current for.
pub(crate) struct ReadCache {
    /// `PRAGMA data_version` when the cache was last proven current.
    data_version: Option<i64>,
    /// The [`crate::sqlite::changes::ChangeCount`] the cache's contents account for.
    accounted: u64,
    /// The per-session tails.
    pub(crate) tail: Tail,
    /// The versions read.
    pub(crate) heads: HeadCache,
    budget: usize,
}

impl ReadCache {
    /// An empty cache holding at most `budget` bytes (three quarters for the tail, a quarter
    /// for the versions: about 13,000 of them at the default); 0 keeps nothing.
    pub(crate) fn new(budget: usize) -> Self {
        ReadCache {
            data_version: None,
            accounted: 0,
            tail: Tail::new(budget / 4 * 3),
            heads: HeadCache::new(budget / 4),
            budget,
        }
    }

    /// False when the cache keeps nothing (a budget of 0).
    pub(crate) fn enabled(&self) -> bool {
        self.budget > 0
    }

    /// The bytes held now.
    pub(crate) fn bytes(&self) -> usize {
        self.tail.bytes() + self.heads.bytes()
    }

    /// Proves the cache current for a read on `conn` whose own change count is `changes`, or
    /// empties it. `conn` must be the store's connection, its lock held until the read is
    /// done; the `data_version` read here is the read's first statement, so what the read
    /// then finds is at least as new as the stamp.
    pub(crate) fn refresh(&mut self, conn: &Connection, changes: u64) -> Result<()> {
        let data_version: i64 = conn
            .prepare_cached("PRAGMA data_version")?
            .query_row([], |r| r.get(0))?;
        if self.data_version != Some(data_version) || self.accounted != changes {
            self.clear();
            self.data_version = Some(data_version);
            self.accounted = changes;
        }
        Ok(())
    }

    /// The store's connection committed `events` (the new heads of their sessions), the change
    /// count going from `before` (read before the transaction began) to `after`: the cache
    /// follows when it accounted for everything before, and is emptied otherwise.
    pub(crate) fn written<'a>(
        &mut self,
        before: u64,
        after: u64,
        events: impl Iterator<Item = &'a StateEvent>,
    ) {
        if self.accounted != before {
            self.clear();
        } else if !self.tail.is_empty() || !self.heads.is_empty() {
            for e in events {
                self.tail.append(e);
                if !self.heads.is_empty() {
                    self.heads.put(&e.session_key, &e.agent_id, e.sequence);
                }
            }
        }
        self.accounted = after;
    }

    fn clear(&mut self) {
        self.tail.clear();
        self.heads.clear();
    }

    /// The store's connection was opened anew: its `PRAGMA data_version` starts over, so no
    /// stamp taken before proves anything; the cache starts empty and unstamped.
    pub(crate) fn reset(&mut self) {
        self.clear();
        self.data_version = None;
    }
}
