//! Hooks for tests that look inside a store: compiled for the crate's own tests and with the
//! `test-hooks` feature, never into the addon.

use crate::error::Result;

use super::Store;

impl Store {
    /// True when `watcher` is served (see [`Store::serve`]).
    pub fn serves(&self, watcher: &str) -> bool {
        self.engine().serves(watcher)
    }

    /// Looks for changes made by other processes now instead of at the next poll, and
    /// brings the queue in line with the cursor rows. A no-op without cross-process delivery.
    pub fn sync_now(&self) -> Result<()> {
        self.check_open()?;
        self.engine().sync_now()
    }

    /// True while the background poll for other processes' changes runs (until `close`).
    pub fn is_syncing(&self) -> bool {
        self.engine().is_syncing()
    }

    /// How many times a PostgreSQL store's listener connected (0 on SQLite): each
    /// (re)connect LISTENs again and catches up from the cursor rows.
    pub fn listener_connects(&self) -> u64 {
        self.engine().listener_connects()
    }

    /// True while an automatic prune runs in the background.
    pub fn is_pruning(&self) -> bool {
        self.engine().is_pruning()
    }

    /// The watchers with a wake scheduled and not yet delivered, sorted (none without a
    /// wake sink). Lets tests check the wake rule (semantics.md#wake) without waiting for the timer.
    pub fn scheduled_wakes(&self) -> Vec<String> {
        self.delivery().scheduled_wakes()
    }

    /// Holds the next catch-up of other hosts' notices (PostgreSQL) after it read the cursor
    /// rows and before it brings the queue in line with them, until the returned pause lets
    /// it go; `None` on SQLite. Lets tests land a call in that gap for certain.
    pub fn pause_next_catch_up(&self) -> Option<crate::pause::Pause> {
        self.engine().pause_next_catch_up()
    }
}
