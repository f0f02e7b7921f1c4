//! The monitor's [`LinkStore`] over the SQLite engine: the link statements of
//! `sqlite/links.rs` on the store's connection, and a record whose transaction also writes
//! the link.

use crate::error::Result;
use crate::event::{RecordInput, StateEvent};
use crate::upstream::link_store::{LinkStore, LinkWrite};
use crate::upstream::links::{Link, LinkRows};

use super::SqliteEngine;

impl LinkStore for SqliteEngine {
    fn check_open(&self) -> Result<()> {
        self.recorder.db.check_open()
    }

    fn link(&self, session_key: &str) -> Result<Option<Link>> {
        self.recorder.db.with(|conn| conn.link(session_key))
    }

    fn watched_local_links(&self) -> Result<Vec<Link>> {
        self.recorder.db.with(|conn| conn.watched_local_links())
    }

    fn save_link(&self, link: &Link, now: i64) -> Result<()> {
        self.recorder.db.with(|conn| conn.put_link(link, now))
    }

    fn update_link(
        &self,
        session_key: &str,
        now: i64,
        change: &mut (dyn FnMut(&mut Link) + Send),
    ) -> Result<()> {
        self.recorder
            .db
            .with(|conn| conn.update_link(session_key, now, change))
    }

    fn record_with(
        &self,
        input: RecordInput,
        now: i64,
        also: LinkWrite,
    ) -> Result<Option<StateEvent>> {
        self.recorder.record_with(input, now, |tx| match &also {
            LinkWrite::Adopt(link) | LinkWrite::Save(link) => tx.put_link(link, now),
            LinkWrite::Delete {
                session_key,
                agent_id,
            } => tx.delete_link(session_key, agent_id).map(drop),
        })
    }
}
