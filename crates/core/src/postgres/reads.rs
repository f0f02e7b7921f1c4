//! The PostgreSQL store's reads: `changesSince` (one snapshot: the head, the events after
//! `after` up to the limit, the earliest retained sequence, pipelined in one round trip),
//! `stateVersion`, `stateVersions` (one statement for any number of sessions) and the cursor
//! rows as stored.

use futures_util::future::{join3, join4};

use crate::error::Result;
use crate::log::Changes;
use crate::postgres::rows::{block, event_of};
use crate::postgres::PgStore;
use crate::read_event::ChangeEvent;
use crate::shapes::CursorRow;

const HEAD: &str = "SELECT last_sequence, pruned_max_sequence FROM __SCHEMA__.session_state_heads \
     WHERE session_key = $1 AND agent_id = $2";
const EARLIEST: &str = "SELECT min(sequence) FROM __SCHEMA__.session_state_events \
     WHERE session_key = $1 AND agent_id = $2";
const VERSIONS: &str = "SELECT t.i, h.last_sequence FROM unnest($1::text[], $2::text[]) \
     WITH ORDINALITY AS t(k, a, i) JOIN __SCHEMA__.session_state_heads h \
     ON h.session_key = t.k AND h.agent_id = t.a WHERE h.last_sequence > 0 ORDER BY t.i";
const CURSOR_ROWS: &str = "SELECT watcher_session_key, target_session_key, last_seen_sequence, \
     notified_sequence, material_sequence, provenance, watcher_store_path, updated_at \
     FROM __SCHEMA__.session_watch_cursors \
     WHERE ($1::text IS NULL OR watcher_session_key = $1) AND ($2::text IS NULL OR target_session_key = $2) \
     ORDER BY watcher_session_key COLLATE \"C\", target_session_key COLLATE \"C\"";

const EVENTS_AFTER: &str = "SELECT sequence, session_key, agent_id, kind, actor_type, actor_id, \
     run_id, session_id, occurred_at, summary, payload_json FROM __SCHEMA__.session_state_events \
     WHERE session_key = $1 AND agent_id = $2 AND sequence > $3 ORDER BY sequence LIMIT $4";

impl PgStore {
    /// [`crate::Store::changes_since`].
    pub(crate) fn changes_since(
        &self,
        session_key: &str,
        agent: &str,
        after: i64,
        limit: u32,
    ) -> Result<Changes> {
        self.check_open()?;
        let start = std::time::Instant::now();
        let target = self.pg.target();
        let r = self.with_session(|s| {
            let head = block(s.prepare(HEAD))?;
            let events = block(s.prepare(EVENTS_AFTER))?;
            let earliest = block(s.prepare(EARLIEST))?;
            let client = s.client()?;
            let fetch = i64::from(limit) + 1;
            // One snapshot for the three reads, sent in one round trip.
            let (begin, (h, ev, min), end, ()) = block(join4(
                client.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
                join3(
                    client.query_opt(&head, &[&session_key, &agent]),
                    client.query(&events, &[&session_key, &agent, &after, &fetch]),
                    client.query_one(&earliest, &[&session_key, &agent]),
                ),
                client.batch_execute("COMMIT"),
                async {},
            ));
            let err = |e: tokio_postgres::Error| target.error(&e);
            begin.map_err(err)?;
            let h = h.map_err(err)?;
            let rows = ev.map_err(err)?;
            let min: Option<i64> = min.map_err(err)?.try_get(0).map_err(err)?;
            end.map_err(err)?;
            let (last, pruned) = match h {
                Some(r) => (
                    r.try_get::<_, i64>(0).map_err(err)?,
                    r.try_get::<_, i64>(1).map_err(err)?,
                ),
                None => (0, 0),
            };
            let mut events = Vec::with_capacity(rows.len());
            let mut unanswerable = false;
            for r in &rows {
                match event_of(r).map_err(err)? {
                    Some(e) if e.sequence <= last => events.push(ChangeEvent::Stored(e)),
                    _ => unanswerable = true,
                }
            }
            let truncated = rows.len() > limit as usize;
            events.truncate(limit as usize);
            Ok(Changes {
                state_version: last,
                events,
                truncated,
                earliest_available_sequence: min.unwrap_or(if last > 0 { last + 1 } else { 0 }),
                history_gap: after < pruned || unanswerable,
            })
        });
        self.delivery
            .metrics
            .since(crate::metrics::Hist::ChangesSince, start);
        r
    }

    /// [`crate::Store::state_version`].
    pub(crate) fn state_version(&self, session_key: &str, agent: &str) -> Result<i64> {
        self.check_open()?;
        let target = self.pg.target();
        self.with_session(|s| {
            let st = block(s.prepare(HEAD))?;
            let row = block(s.client()?.query_opt(&st, &[&session_key, &agent]))
                .map_err(|e| target.error(&e))?;
            match row {
                Some(r) => r.try_get::<_, i64>(0).map_err(|e| target.error(&e)),
                None => Ok(0),
            }
        })
    }

    /// [`crate::Store::state_versions_of`] of the resolved sessions: index and version.
    pub(crate) fn state_versions(&self, resolved: &[(&str, &str)]) -> Result<Vec<(usize, i64)>> {
        self.check_open()?;
        if resolved.is_empty() {
            return Ok(Vec::new());
        }
        let keys_: Vec<&str> = resolved.iter().map(|(k, _)| *k).collect();
        let agents: Vec<&str> = resolved.iter().map(|(_, a)| *a).collect();
        let target = self.pg.target();
        self.with_session(|s| {
            let st = block(s.prepare(VERSIONS))?;
            let rows =
                block(s.client()?.query(&st, &[&keys_, &agents])).map_err(|e| target.error(&e))?;
            rows.iter()
                .map(|r| {
                    let i: i64 = r.try_get(0).map_err(|e| target.error(&e))?;
                    let v: i64 = r.try_get(1).map_err(|e| target.error(&e))?;
                    Ok(((i - 1) as usize, v))
                })
                .collect::<Result<Vec<_>>>()
        })
    }

    /// [`crate::Store::cursor_rows`].
    pub(crate) fn cursor_rows(
        &self,
        watcher: Option<&str>,
        target_key: Option<&str>,
    ) -> Result<Vec<CursorRow>> {
        self.check_open()?;
        let target = self.pg.target();
        self.with_session(|s| {
            let st = block(s.prepare(CURSOR_ROWS))?;
            let rows = block(s.client()?.query(&st, &[&watcher, &target_key]))
                .map_err(|e| target.error(&e))?;
            rows.iter()
                .map(|r| {
                    let row = || -> std::result::Result<CursorRow, tokio_postgres::Error> {
                        Ok(CursorRow {
                            watcher: r.try_get(0)?,
                            target: r.try_get(1)?,
                            last_seen: r.try_get(2)?,
                            notified: r.try_get(3)?,
                            material: r.try_get(4)?,
                            provenance: r.try_get(5)?,
                            scope: r.try_get(6)?,
                            updated_at: r.try_get(7)?,
                        })
                    };
                    row().map_err(|e| target.error(&e))
                })
                .collect()
        })
    }
}
