//! The state versions of many sessions (`stateVersions`, semantics.md#reading), read through a
//! cache of the versions already read.
//!
//! A `sessions_list` page asks for the same sessions again and again, and a version only
//! changes when someone commits. The cache is part of the store's read cache
//! (`read_cache.rs`), which proves it current before every read and empties it otherwise; a
//! record puts the versions it wrote, so a read right after a write reads nothing again.

use std::collections::HashMap;

use foldhash::fast::RandomState;
use rusqlite::Connection;

use crate::error::Result;
use crate::sqlite::inert;

/// Versions read while the read cache was current: agent, then session key, to its version (0
/// for no head). Past its byte budget it starts again empty.
pub struct HeadCache {
    by_agent: HashMap<String, HashMap<String, i64, RandomState>, RandomState>,
    len: usize,
    bytes: usize,
    budget: usize,
}

/// What one cached version costs besides its key: its slot in the map and the value.
const VERSION_BYTES: usize = 48;

impl HeadCache {
    /// An empty cache of at most `budget` bytes.
    pub(crate) fn new(budget: usize) -> Self {
        HeadCache {
            by_agent: HashMap::default(),
            len: 0,
            bytes: 0,
            budget,
        }
    }

    /// Drops every version.
    pub(crate) fn clear(&mut self) {
        self.by_agent.clear();
        self.len = 0;
        self.bytes = 0;
    }

    /// True when no version is kept.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes the versions are counted for.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    fn get(&self, key: &str, agent: &str) -> Option<i64> {
        self.by_agent.get(agent)?.get(key).copied()
    }

    /// Keeps `version` as the version of `(key, agent)`.
    pub(crate) fn put(&mut self, key: &str, agent: &str, version: i64) {
        if self.bytes + key.len() + VERSION_BYTES > self.budget {
            self.clear();
            if key.len() + VERSION_BYTES > self.budget {
                return;
            }
        }
        let keys = match self.by_agent.get_mut(agent) {
            Some(keys) => keys,
            None => self.by_agent.entry(agent.to_owned()).or_default(),
        };
        if keys.insert(key.to_owned(), version).is_none() {
            self.len += 1;
            self.bytes += key.len() + VERSION_BYTES;
        }
    }
}

/// The state versions of `refs` (`(session_key, agent_id)` pairs) in the read transaction open
/// on `conn`: for each one whose head is above 0, its index in `refs` and its version, in the
/// order of `refs` (a session named twice appears twice). A head whose `last_sequence` is not
/// an integer (a head the store never wrote, semantics.md#storage) reads as 0. `cache`, when
/// given, was proven current for this transaction: versions found there are not read again,
/// and the ones read are put there.
pub fn versions(
    conn: &Connection,
    mut cache: Option<&mut HeadCache>,
    refs: &[(&str, &str)],
) -> Result<Vec<(usize, i64)>> {
    let mut out = Vec::with_capacity(refs.len());
    if refs.is_empty() {
        return Ok(out);
    }
    let mut stmt = None;
    for (at, &(key, agent)) in refs.iter().enumerate() {
        let v = match cache.as_ref().and_then(|c| c.get(key, agent)) {
            Some(v) => v,
            None => {
                let stmt = match &mut stmt {
                    Some(s) => s,
                    None => stmt.insert(conn.prepare_cached(
                        "SELECT last_sequence FROM session_state_heads \
                         WHERE session_key = ?1 AND agent_id = ?2",
                    )?),
                };
                stmt.raw_bind_parameter(1, key)?;
                stmt.raw_bind_parameter(2, agent)?;
                let mut rows = stmt.raw_query();
                let v = match rows.next()? {
                    Some(r) => inert::integer(r.get_ref(0)?).unwrap_or(0),
                    None => 0,
                };
                drop(rows);
                if let Some(c) = cache.as_mut() {
                    c.put(key, agent, v);
                }
                v
            }
        };
        if v > 0 {
            out.push((at, v));
        }
    }
    Ok(out)
}
