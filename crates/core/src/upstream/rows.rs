//! The link table's rows in OpenClaw's own terms, for a host that keeps OpenClaw's upstream
//! link API (its catalog writes and reads them): read, list the watched ones, upsert with
//! OpenClaw's conflict rule, move the marker, delete. The monitor's own view is `links`.
//! The `Store` methods over them are in `store/link_rows.rs`, SQLite's statements in
//! `sqlite/link_rows.rs`.

use crate::shapes::row_shape;

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
