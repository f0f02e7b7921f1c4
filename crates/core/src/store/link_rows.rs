//! OpenClaw's link-row API on the façade ([`LinkRow`]): each call checks that the store is
//! open and asks the engine, which answers `ERR_INVALID_ARG` when it does not serve it.

use crate::error::Result;
use crate::upstream::LinkRow;

use super::Store;

impl Store {
    /// The link row of a session and agent, as stored.
    pub fn link_row(&self, session_key: &str, agent_id: &str) -> Result<Option<LinkRow>> {
        self.check_open()?;
        self.engine().link_row(session_key, agent_id)
    }

    /// The link rows of watched sessions (some cursor targets them), by catalog, then key.
    pub fn watched_link_rows(&self) -> Result<Vec<LinkRow>> {
        self.check_open()?;
        self.engine().watched_link_rows()
    }

    /// Writes a link row with OpenClaw's conflict rule (a changed source takes the new marker
    /// and forgets its last scan); with `if_absent`, an existing row is left alone. True when
    /// a row was written.
    pub fn upsert_link_row(&self, row: &LinkRow, if_absent: bool, now: i64) -> Result<bool> {
        self.check_open()?;
        self.engine().upsert_link_row(row, if_absent, now)
    }

    /// Sets a link's marker and last scan to `now`, only while its `updated_at` is
    /// `expected_updated_at` when one is given. True when the row was written.
    pub fn set_link_marker(
        &self,
        session_key: &str,
        agent_id: &str,
        marker_json: &str,
        now: i64,
        expected_updated_at: Option<i64>,
    ) -> Result<bool> {
        self.check_open()?;
        self.engine()
            .set_link_marker(session_key, agent_id, marker_json, now, expected_updated_at)
    }

    /// Deletes the link row of a session and agent. True if there was one.
    pub fn delete_link_row(&self, session_key: &str, agent_id: &str) -> Result<bool> {
        self.check_open()?;
        self.engine().delete_link_row(session_key, agent_id)
    }
}
