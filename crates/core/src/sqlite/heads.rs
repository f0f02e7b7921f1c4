//! The state versions of many sessions (`stateVersions`, semantics.md#reading), read through a
//! cache of the versions already read.
//!
//! A `sessions_list` page asks for the same sessions again and again, and a version only
//! changes when someone commits. The cache is stamped with what tells this connection that
//! the file changed since: `PRAGMA data_version` (which moves when any other connection, in
//! this process or another, commits) and the connection's own count of changed rows
//! (`sqlite3_total_changes`, which moves with every row this connection writes, whichever
//! path writes it). Both are read inside the read transaction, so every cached value is the
//! value of the snapshot being read; any other stamp empties the cache first.

use std::collections::HashMap;

use foldhash::fast::RandomState;
use rusqlite::Connection;

use crate::error::Result;
use crate::sqlite::inert;

/// The most versions the cache holds; past it, it starts again empty.
pub const MAX_CACHED: usize = 20_000;

/// Versions read under one stamp: agent, then session key, to its version (0 for no head).
#[derive(Default)]
pub struct HeadCache {
    stamp: Option<(i64, u64)>,
    by_agent: HashMap<String, HashMap<String, i64, RandomState>, RandomState>,
    len: usize,
}

impl HeadCache {
    fn clear(&mut self) {
        self.by_agent.clear();
        self.len = 0;
    }

    fn get(&self, key: &str, agent: &str) -> Option<i64> {
        self.by_agent.get(agent)?.get(key).copied()
    }

    fn put(&mut self, key: &str, agent: &str, version: i64) {
        if self.len >= MAX_CACHED {
            self.clear();
        }
        let keys = match self.by_agent.get_mut(agent) {
            Some(keys) => keys,
            None => self.by_agent.entry(agent.to_owned()).or_default(),
        };
        if keys.insert(key.to_owned(), version).is_none() {
            self.len += 1;
        }
    }
}

/// The state versions of `refs` (`(session_key, agent_id)` pairs) in the read transaction open
/// on `conn`: for each one whose head is above 0, its index in `refs` and its version, in the
/// order of `refs` (a session named twice appears twice). A head whose `last_sequence` is not
/// an integer (a head the store never wrote, semantics.md#storage) reads as 0.
pub fn versions(
    conn: &Connection,
    cache: &mut HeadCache,
    refs: &[(&str, &str)],
) -> Result<Vec<(usize, i64)>> {
    let mut out = Vec::with_capacity(refs.len());
    if refs.is_empty() {
        return Ok(out);
    }
    // The first read of the transaction: it starts the snapshot the stamp describes.
    let data_version: i64 = conn
        .prepare_cached("PRAGMA data_version")?
        .query_row([], |r| r.get(0))?;
    let stamp = (data_version, conn.total_changes());
    if cache.stamp != Some(stamp) {
        cache.clear();
        cache.stamp = Some(stamp);
    }
    let mut stmt = None;
    for (at, &(key, agent)) in refs.iter().enumerate() {
        let v = match cache.get(key, agent) {
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
                cache.put(key, agent, v);
                v
            }
        };
        if v > 0 {
            out.push((at, v));
        }
    }
    Ok(out)
}
