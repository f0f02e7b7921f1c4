//! The link table's rows in OpenClaw's own terms, for a host that keeps OpenClaw's upstream
//! link API (its catalog writes and reads them): read, list the watched ones, upsert with
//! OpenClaw's conflict rule, move the marker, delete. The monitor's own view is `links`.
//! SQLite's statements are in `sqlite/link_rows.rs`.

use crate::error::Result;
use crate::shapes::row_shape;
use crate::sqlite::link_rows;
use crate::store::Store;
use crate::upstream::links::LinkRows;

row_shape! {
    /// One row of `session_upstream_links`, OpenClaw's columns as stored.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct LinkRow {
        /// The linked session.
        pub session_key: String = "sessionKey",
        /// Its agent.
        pub agent_id: String = "agentId",
        /// The catalog (`claude`).
        pub catalog_id: String = "catalogId",
        /// Where the upstream session lives (`gateway:local`, `node:<id>`).
        pub host_id: String = "hostId",
        /// The upstream session id.
        pub thread_id: String = "threadId",
        /// The upstream's kind (`claude-cli`).
        pub upstream_kind: String = "upstreamKind",
        /// The upstream reference, JSON text as stored.
        pub upstream_ref_json: Option<String> = "upstreamRefJson",
        /// The scan marker, JSON text as stored.
        pub last_marker_json: Option<String> = "lastMarkerJson",
        /// The last scan (epoch ms).
        pub last_scanned_at: Option<i64> = "lastScannedAt",
        /// When the row was first written (epoch ms).
        pub created_at: i64 = "createdAt",
        /// When it was last written (epoch ms).
        pub updated_at: i64 = "updatedAt",
    }
}

impl Store {
    /// The link row of a session and agent, as stored.
    pub fn link_row(&self, session_key: &str, agent_id: &str) -> Result<Option<LinkRow>> {
        self.check_open()?;
        self.with_conn(|conn| link_rows::get(conn, session_key, agent_id))
    }

    /// The link rows of watched sessions (some cursor targets them), by catalog, then key.
    pub fn watched_link_rows(&self) -> Result<Vec<LinkRow>> {
        self.check_open()?;
        self.with_conn(|conn| link_rows::watched(conn))
    }

    /// Writes a link row with OpenClaw's conflict rule (a changed source takes the new marker
    /// and forgets its last scan); with `if_absent`, an existing row is left alone. True when
    /// a row was written.
    pub fn upsert_link_row(&self, row: &LinkRow, if_absent: bool, now: i64) -> Result<bool> {
        self.check_open()?;
        self.with_conn(|conn| link_rows::upsert(conn, row, if_absent, now))
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
        self.with_conn(|conn| {
            link_rows::set_marker(
                conn,
                session_key,
                agent_id,
                marker_json,
                now,
                expected_updated_at,
            )
        })
    }

    /// Deletes the link row of a session and agent. True if there was one.
    pub fn delete_link_row(&self, session_key: &str, agent_id: &str) -> Result<bool> {
        self.check_open()?;
        self.with_conn(|conn| conn.delete_link(session_key, agent_id))
    }
}
