//! The PostgreSQL engine ([`Engine`]) over [`PgStore`]: each call of the interface is one
//! of the store's own (`calls.rs`, `reads.rs`, `record.rs`); its background work (the
//! listener, the catch-up, the leases: `catchup.rs`; the automatic prune: `prune.rs`) is
//! started by [`PgStore::open`] and stopped by `close`. The link-row API of OpenClaw is not
//! served: the interface's provided methods answer it.

use std::sync::atomic::Ordering;

use super::PgStore;
use crate::cursors::WatchOptions;
use crate::engine::Engine;
use crate::error::Result;
use crate::event::{RecordInput, StateEvent};
use crate::log::Changes;
use crate::prune::{PruneReport, SweepReport};
use crate::queue::Notice;
use crate::shapes::CursorRow;

impl Engine for PgStore {
    fn name(&self) -> &'static str {
        "PostgreSQL"
    }

    fn is_remote(&self) -> bool {
        true
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn mark_closed(&self) -> bool {
        !self.closed.swap(true, Ordering::AcqRel)
    }

    fn close(&self) {
        PgStore::close(self);
    }

    fn serve(&self, watcher: &str) {
        self.notices().serve(watcher);
    }

    fn serve_reading(&self, watcher: &str) {
        // No SQL runs for such a call here: the store's task reads the pending cursors at once.
        self.notices().serve(watcher);
    }

    fn record(&self, input: RecordInput, now: i64) -> Result<Option<StateEvent>> {
        PgStore::record(self, input, now)
    }

    fn record_group(&self, items: Vec<(RecordInput, i64)>) -> Vec<Result<Option<StateEvent>>> {
        PgStore::record_group(self, items)
    }

    fn prune(&self, now: i64) -> Result<PruneReport> {
        PgStore::prune(self, now)
    }

    fn watch(
        &self,
        watcher: &str,
        target: &str,
        agent: &str,
        o: &WatchOptions,
        now: i64,
    ) -> Result<()> {
        PgStore::watch(self, watcher, target, agent, o, now).map(drop)
    }

    fn unwatch(&self, watcher: &str, target: &str) -> Result<bool> {
        PgStore::unwatch(self, watcher, target)
    }

    fn cursor_rows(&self, watcher: Option<&str>, target: Option<&str>) -> Result<Vec<CursorRow>> {
        PgStore::cursor_rows(self, watcher, target)
    }

    fn drain(&self, watcher: &str, now: i64) -> Result<Vec<Notice>> {
        PgStore::drain(self, watcher, now)
    }

    fn acknowledge(
        &self,
        watcher: &str,
        targets: &[&str],
        scope: Option<&str>,
        through: Option<i64>,
        now: i64,
    ) -> Result<u64> {
        PgStore::acknowledge(self, watcher, targets, scope, through, now)
    }

    fn sweep(&self, only: Option<&[String]>, now: i64) -> Result<SweepReport> {
        PgStore::sweep(self, only, now)
    }

    fn sweep_candidates(&self) -> Result<Vec<String>> {
        PgStore::sweep_candidates(self)
    }

    fn reset_session(&self, session_key: &str) -> Result<()> {
        PgStore::reset_session(self, session_key)
    }

    fn delete_session(&self, session_key: &str, agent: &str, own: bool) -> Result<()> {
        PgStore::delete_session(self, session_key, agent, own)
    }

    fn state_version(&self, session_key: &str, agent: &str) -> Result<i64> {
        PgStore::state_version(self, session_key, agent)
    }

    fn state_versions(&self, resolved: &[(&str, &str)]) -> Result<Vec<(usize, i64)>> {
        PgStore::state_versions(self, resolved)
    }

    fn changes_since(
        &self,
        session_key: &str,
        agent: &str,
        after: i64,
        limit: u32,
    ) -> Result<Changes> {
        PgStore::changes_since(self, session_key, agent, after, limit)
    }

    fn followed(&self) {
        self.notices().kick();
    }

    fn waiting_gate(&self) -> Option<crate::engine::Gate> {
        Some(PgStore::waiting_gate(self))
    }

    fn served_count(&self) -> u64 {
        // The gauge counts the watchers of the cross-process poll, which this engine has not.
        0
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn serves(&self, watcher: &str) -> bool {
        self.notices().serves(watcher)
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn sync_now(&self) -> Result<()> {
        super::block_on(self.notices().catch_up_now())?
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn is_syncing(&self) -> bool {
        self.notices().is_listening()
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn listener_connects(&self) -> u64 {
        self.notices().counts().0
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn is_pruning(&self) -> bool {
        PgStore::is_pruning(self)
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn pause_next_catch_up(&self) -> Option<crate::pause::Pause> {
        Some(self.notices().pause_next())
    }
}
