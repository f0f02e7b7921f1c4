//! The store's adopted sessions (semantics.md#upstream): adopting, the link, self-echo, remote
//! checks and the local transcript scans, all served by the store's upstream monitor.

use crate::error::Result;
use crate::event::StateEvent;
use crate::store::Store;
use crate::upstream::links::Link;
use crate::upstream::monitor::{AdoptInput, RemoteCheck};

impl Store {
    /// Adopts `session_key` (semantics.md#upstream): records `adopted` (log only) and stores a new link,
    /// replacing the earlier one of the same session and agent, in one transaction: a failure
    /// leaves neither. A local transcript is scanned from its current end: what it held before
    /// adoption is history, not a change behind the watcher's back.
    pub fn adopt(
        &self,
        session_key: &str,
        input: AdoptInput,
        now: i64,
    ) -> Result<Option<StateEvent>> {
        self.inner.monitor.adopt(session_key, input, now)
    }

    /// The link of an adopted session, if any.
    pub fn upstream_link(&self, session_key: &str) -> Result<Option<Link>> {
        self.inner.monitor.link(session_key)
    }

    /// Remembers a user message the gateway itself sent into an adopted session, so its echo
    /// in the upstream transcript is not taken for a human (the last 10 are kept). Does
    /// nothing for a session without a link.
    pub fn note_own_user_message(&self, session_key: &str, text: &str, now: i64) -> Result<()> {
        self.inner
            .monitor
            .note_own_user_message(session_key, text, now)
    }

    /// Takes the result of the host's probe of a remote upstream (semantics.md#upstream). Returns the event it
    /// recorded, if any; null for a session without a link. The first successful check sets
    /// the baseline; later ones classify the new items among the last 50, and say
    /// `windowOverflow: true` when more new items arrived than the window holds.
    pub fn check_upstream(
        &self,
        session_key: &str,
        check: RemoteCheck,
        now: i64,
    ) -> Result<Option<StateEvent>> {
        self.inner.monitor.check(session_key, check, now)
    }

    /// One scan of every watched adopted session with a local transcript (semantics.md#upstream): at most
    /// 1 MiB of new bytes each, from the durable offset; complete lines are classified, a
    /// partial last line waits; the non-echo human turns of the interval become one
    /// `human_direct_message`. Returns the events recorded.
    pub fn scan_upstream(&self, now: i64) -> Result<Vec<StateEvent>> {
        self.inner.monitor.scan(now)
    }

    /// Starts the background scan every `interval_ms` (restarting it if it runs). It never
    /// keeps the process alive and stops with [`Store::stop_upstream_monitor`] or `close`.
    pub fn start_upstream_monitor(&self, interval_ms: u32) -> Result<()> {
        self.inner.monitor.start(interval_ms)
    }

    /// Stops the background scan: when it returns, no scan runs or starts. Idempotent.
    pub fn stop_upstream_monitor(&self) {
        self.inner.monitor.stop();
    }
}
