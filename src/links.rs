//! The link table's rows in OpenClaw's terms (`session-awareness/openclaw`'s upstream-link
//! functions): read, list the watched ones, upsert, move the marker, delete.

use napi::bindgen_prelude::Env;
use napi::Result;
use napi_derive::napi;
use session_awareness_core::upstream::LinkRow;

use crate::error::{Code, IntoJs};
use crate::session_state::NativeSessionState;

/// One row of the link table, OpenClaw's columns as stored.
#[napi(object)]
pub struct NativeLinkRow {
    /// The linked session.
    pub session_key: String,
    /// Its agent.
    pub agent_id: String,
    /// The catalog.
    pub catalog_id: String,
    /// Where the upstream session lives.
    pub host_id: String,
    /// The upstream session id.
    pub thread_id: String,
    /// The upstream's kind.
    pub upstream_kind: String,
    /// The upstream reference, JSON text.
    pub upstream_ref_json: Option<String>,
    /// The scan marker, JSON text.
    pub last_marker_json: Option<String>,
    /// The last scan (epoch ms).
    pub last_scanned_at: Option<i64>,
    /// First written (epoch ms); ignored by `upsertLinkRow`.
    pub created_at: i64,
    /// Last written (epoch ms); ignored by `upsertLinkRow`.
    pub updated_at: i64,
}

impl From<LinkRow> for NativeLinkRow {
    fn from(r: LinkRow) -> Self {
        NativeLinkRow {
            session_key: r.session_key,
            agent_id: r.agent_id,
            catalog_id: r.catalog_id,
            host_id: r.host_id,
            thread_id: r.thread_id,
            upstream_kind: r.upstream_kind,
            upstream_ref_json: r.upstream_ref_json,
            last_marker_json: r.last_marker_json,
            last_scanned_at: r.last_scanned_at,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

impl From<NativeLinkRow> for LinkRow {
    fn from(r: NativeLinkRow) -> Self {
        LinkRow {
            session_key: r.session_key,
            agent_id: r.agent_id,
            catalog_id: r.catalog_id,
            host_id: r.host_id,
            thread_id: r.thread_id,
            upstream_kind: r.upstream_kind,
            upstream_ref_json: r.upstream_ref_json,
            last_marker_json: r.last_marker_json,
            last_scanned_at: r.last_scanned_at,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

#[napi]
impl NativeSessionState {
    /// The link row of a session and agent, or null.
    #[napi]
    pub fn link_row(
        &self,
        session_key: String,
        agent_id: String,
    ) -> Result<Option<NativeLinkRow>, Code> {
        Ok(self
            .store
            .link_row(&session_key, &agent_id)
            .js()?
            .map(Into::into))
    }

    /// The link rows of watched sessions, by catalog, then session key.
    #[napi]
    pub fn watched_link_rows(&self) -> Result<Vec<NativeLinkRow>, Code> {
        Ok(self
            .store
            .watched_link_rows()
            .js()?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    /// Writes a link row with OpenClaw's conflict rule; true when a row was written.
    #[napi]
    pub fn upsert_link_row(
        &self,
        env: Env,
        row: NativeLinkRow,
        if_absent: bool,
    ) -> Result<bool, Code> {
        let now = self.now(&env).js()?;
        self.store.upsert_link_row(&row.into(), if_absent, now).js()
    }

    /// Sets a link's marker and last scan; true when the row was written.
    #[napi]
    pub fn set_link_marker(
        &self,
        env: Env,
        session_key: String,
        agent_id: String,
        marker_json: String,
        expected_updated_at: Option<i64>,
    ) -> Result<bool, Code> {
        let now = self.now(&env).js()?;
        self.store
            .set_link_marker(
                &session_key,
                &agent_id,
                &marker_json,
                now,
                expected_updated_at,
            )
            .js()
    }

    /// Deletes a link row; true if there was one.
    #[napi]
    pub fn delete_link_row(&self, session_key: String, agent_id: String) -> Result<bool, Code> {
        self.store.delete_link_row(&session_key, &agent_id).js()
    }
}
