//! The `session_upstream_links` rows (semantics.md#upstream): one per adopted session, in OpenClaw's table.
//!
//! The table has OpenClaw's shape, on a fresh file and on one OpenClaw wrote, so a row moves
//! between the two exactly and OpenClaw keeps reading every row, including the store's:
//! primary key `(session_key, agent_id)`, `catalog_id`, `host_id`, `thread_id`,
//! `upstream_kind`, `upstream_ref_json`, `last_marker_json`, `last_scanned_at`, `created_at`,
//! `updated_at`. The store's own state goes where it means the same thing:
//!
//! | [`Link`] field    | column                                                            |
//! |-------------------|-------------------------------------------------------------------|
//! | `source`          | `catalog_id` (`claude`: the catalog the session came from)         |
//! | `host_id`         | `host_id` (`gateway:local` for a local transcript, `node:<id>`)     |
//! | `thread_id`       | `thread_id` (the upstream session id)                              |
//! | `transcript_path` | `upstream_ref_json` `{"filePath": …}`                             |
//! | `remote_id`       | `thread_id` of a link without a `filePath`                         |
//! | `scan_offset`     | `last_marker_json` `{"offset": n}`                                |
//! | `remote_cursor`   | `last_marker_json` `{"uuid": …}` (or `{"identity": …}`, below)    |
//!
//! Two columns OpenClaw does not have are added with `ALTER TABLE … ADD COLUMN` as a bare
//! type, the one form of extra column OpenClaw's schema check accepts (no `NOT NULL`, no
//! `DEFAULT`); NULL reads as the default: `failure_count INTEGER` (consecutive failed checks;
//! OpenClaw counts them in memory) and `own_messages_json TEXT` (the gateway's last user
//! messages, for self-echo checks). The ref is written back as it was read (the store never
//! edits one), and members of the marker the store does not use are kept.
//!
//! What a link's columns mean and how its state changes are here; a store keeps the rows
//! ([`LinkRows`]; SQLite's table, its generations and statements are in `sqlite/links.rs`).

use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::upstream::LinkRow;

/// How many of the gateway's own user messages are kept per session for self-echo checks.
pub const OWN_MESSAGES_KEPT: usize = 10;

/// `host_id` of a link to a transcript on this machine (OpenClaw's value).
pub const LOCAL_HOST: &str = "gateway:local";
/// `host_id` of a remote link whose host did not name its node.
pub const REMOTE_HOST: &str = "remote";
/// `upstream_kind` of the store's links: the transcript rows it classifies are Claude Code's.
pub const UPSTREAM_KIND: &str = "claude-cli";

/// The store's columns beyond OpenClaw's, each a bare type (see the module doc).
pub const EXTRA_COLUMNS: [(&str, &str); 2] =
    [("failure_count", "INTEGER"), ("own_messages_json", "TEXT")];

/// An adopted session's link to its upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    /// The adopted session.
    pub session_key: String,
    /// Its agent.
    pub agent_id: String,
    /// The catalog it came from (`claude`, …): `catalog_id`.
    pub source: String,
    /// Where the upstream session lives: `gateway:local`, `node:<id>`, or `remote`.
    pub host_id: String,
    /// The upstream session id (a Claude Code session id), or empty when unknown.
    pub thread_id: String,
    /// The transcript format: `claude-cli` for the store's links.
    pub upstream_kind: String,
    /// A local JSONL transcript, scanned by the monitor.
    pub transcript_path: Option<String>,
    /// A remote session id, checked by the host through `checkUpstream`.
    pub remote_id: Option<String>,
    /// Bytes of the transcript already classified (through the last complete line).
    pub scan_offset: i64,
    /// Consecutive failed checks.
    pub failure_count: i64,
    /// The last user messages the gateway itself sent, oldest first.
    pub own_messages: Vec<String>,
    /// The identity of the newest remote item seen by the last successful check: `uuid:<id>`,
    /// `fnv:<hash>` for an item without a uuid, empty for a check that saw no items.
    pub remote_cursor: Option<String>,
    /// When the upstream was last scanned or checked successfully (epoch ms).
    pub last_scanned_at: Option<i64>,
    /// `upstream_ref_json` as read (written back unchanged: the store never edits a ref).
    pub upstream_ref_json: Option<String>,
    /// `last_marker_json` as read, likewise.
    pub marker: Option<Value>,
}

impl Link {
    /// A new link as `adopt` makes it: `host_id` defaults to `gateway:local` for a transcript,
    /// `remote` otherwise; `thread_id` is the remote id, else the transcript's file stem (a
    /// Claude Code transcript is named after its session id).
    pub fn new(
        session_key: String,
        agent_id: String,
        source: String,
        host_id: Option<String>,
        transcript_path: Option<String>,
        remote_id: Option<String>,
    ) -> Link {
        let host_id = host_id.unwrap_or_else(|| {
            if transcript_path.is_some() {
                LOCAL_HOST.to_owned()
            } else {
                REMOTE_HOST.to_owned()
            }
        });
        let stem = transcript_path.as_deref().and_then(|p| {
            std::path::Path::new(p)
                .file_stem()
                .and_then(|s| s.to_str())
                .map(str::to_owned)
        });
        let thread_id = remote_id.clone().or(stem).unwrap_or_default();
        let upstream_ref_json = match (&transcript_path, &remote_id) {
            (Some(p), _) => Some(json!({ "filePath": p })),
            (None, Some(r)) => match host_id.strip_prefix("node:") {
                Some(node) => Some(json!({ "nodeId": node, "threadId": r })),
                None => Some(json!({ "threadId": r })),
            },
            (None, None) => None,
        }
        .map(|v| v.to_string());
        Link {
            session_key,
            agent_id,
            source,
            host_id,
            thread_id,
            upstream_kind: UPSTREAM_KIND.to_owned(),
            transcript_path,
            remote_id,
            scan_offset: 0,
            failure_count: 0,
            own_messages: Vec::new(),
            remote_cursor: None,
            last_scanned_at: None,
            upstream_ref_json,
            marker: None,
        }
    }

    /// `last_marker_json` for this link's state: the marker read, with the members the store
    /// owns set from `scan_offset` and `remote_cursor`.
    pub(crate) fn marker_json(&self) -> Option<String> {
        let mut m = match &self.marker {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        };
        if self.transcript_path.is_some() {
            m.remove("size");
            m.insert("offset".into(), json!(self.scan_offset));
        }
        match self.remote_cursor.as_deref() {
            None => {}
            Some("") => {
                m.remove("identity");
                m.insert("uuid".into(), Value::Null);
            }
            Some(c) => match c.strip_prefix("uuid:") {
                Some(uuid) => {
                    m.remove("identity");
                    m.insert("uuid".into(), json!(uuid));
                }
                None => {
                    m.remove("uuid");
                    m.insert("identity".into(), json!(c));
                }
            },
        }
        if m.is_empty() && !matches!(self.marker, Some(Value::Object(_))) {
            return self.marker.as_ref().map(Value::to_string);
        }
        Some(Value::Object(m).to_string())
    }
}

impl Link {
    /// `own_messages_json` for this link's state.
    pub(crate) fn own_messages_json(&self) -> Result<String> {
        serde_json::to_string(&self.own_messages).map_err(|e| Error::invalid(e.to_string()))
    }

    /// Remembers a user message the gateway itself sent (capped as a human turn's text is),
    /// keeping the last [`OWN_MESSAGES_KEPT`].
    pub(crate) fn note_own(&mut self, text: &str) {
        self.own_messages
            .push(crate::upstream::cap_text(text, crate::upstream::HUMAN_TEXT_CAP).to_owned());
        let excess = self.own_messages.len().saturating_sub(OWN_MESSAGES_KEPT);
        self.own_messages.drain(..excess);
    }

    /// The link a stored row reads as: the store's state from OpenClaw's columns, with the
    /// store's own two (`failure_count`, `own_messages_json`; NULL reads as the default).
    pub(crate) fn from_row(
        row: LinkRow,
        failure_count: Option<i64>,
        own_messages_json: Option<String>,
    ) -> Link {
        let upstream_ref = parse(row.upstream_ref_json.clone());
        let marker = parse(row.last_marker_json);
        let thread_id = row.thread_id;
        let transcript_path = upstream_ref
            .as_ref()
            .and_then(|v| v.get("filePath"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let remote_id =
            (transcript_path.is_none() && !thread_id.is_empty()).then(|| thread_id.clone());
        let m = marker.as_ref();
        // As OpenClaw does, `size` stands in for a missing `offset`.
        let scan_offset = m
            .and_then(|m| m.get("offset").or_else(|| m.get("size")))
            .and_then(Value::as_i64)
            .unwrap_or(0)
            .max(0);
        let remote_cursor = match m.and_then(|m| m.get("uuid")) {
            Some(Value::String(u)) => Some(format!("uuid:{u}")),
            Some(Value::Null) => Some(String::new()),
            _ => m
                .and_then(|m| m.get("identity"))
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
        Link {
            session_key: row.session_key,
            agent_id: row.agent_id,
            source: row.catalog_id,
            host_id: row.host_id,
            thread_id,
            upstream_kind: row.upstream_kind,
            transcript_path,
            remote_id,
            scan_offset,
            failure_count: failure_count.unwrap_or(0),
            own_messages: own_messages_json
                .and_then(|o| serde_json::from_str(&o).ok())
                .unwrap_or_default(),
            remote_cursor,
            last_scanned_at: row.last_scanned_at,
            upstream_ref_json: row.upstream_ref_json,
            marker,
        }
    }
}

fn parse(text: Option<String>) -> Option<Value> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

/// The link rows a store keeps (SQLite's are in `sqlite/links.rs`). The monitor's writes run
/// inside the caller's transaction where it has one.
pub(crate) trait LinkRows {
    /// The link of `session_key`. A key that several agents link (OpenClaw's global session
    /// scope shares bare keys) is ambiguous and reads as no link, as OpenClaw's monitor skips it.
    fn link(&self, session_key: &str) -> Result<Option<Link>>;
    /// The links with a local transcript whose session is watched (a live cursor targets it),
    /// by session key, each key linked once. A row the store would never write is left out:
    /// one bad row never stops the scan of the others.
    fn watched_local_links(&self) -> Result<Vec<Link>>;
    /// Inserts the link, replacing the row of the same session and agent.
    fn put_link(&self, link: &Link, now: i64) -> Result<()>;
    /// Deletes the link of the session and agent. True if there was one.
    fn delete_link(&self, session_key: &str, agent_id: &str) -> Result<bool>;
    /// Reads the link of `session_key`, applies `change` and writes it back, in one write
    /// transaction. Nothing for a session without a link.
    fn update_link(
        &self,
        session_key: &str,
        now: i64,
        change: &mut dyn FnMut(&mut Link),
    ) -> Result<()>;
}
