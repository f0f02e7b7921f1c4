//! The SQLite store's [`Rows`]: the row operations of one write transaction as cached
//! statements on the caller's connection, inside the transaction it opened
//! ([`crate::sqlite::tx::Tx`]). Inert rows (semantics.md#storage) are filtered here: by the
//! registered SQL function `session_state_live` in a statement's `WHERE`, or by the checks of
//! [`inert`] on the raw values read.

use std::ops::Deref;
use std::sync::Arc;

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Error, Result};
use crate::event::ValidEvent;
use crate::keys::SessionKey;
use crate::log::Head;
use crate::rows::{Cursor, Pending, Provenance};
use crate::rows::{Expired, Inserted, Rows};
use crate::rules::Positions;
use crate::sqlite::inert::{self, live_cursor, within_head};
use crate::sqlite::log::{self, EVENT_COLUMNS};
use crate::sqlite::rows_cursors::{self, provenance_col, scope_col};

/// [`Rows`] over a connection inside the caller's open transaction. It derefs to the
/// connection, so a write of SQLite's own parts (an adopted session's link) joins the same
/// transaction.
pub(crate) struct SqliteRows<'c> {
    conn: &'c Connection,
}

/// The cursor row's insert up to its conflict action (`DO ...`), with the parameters of
/// [`SqliteRows::write_cursor`].
macro_rules! insert_cursor {
    () => {
        "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, \
         last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at, \
         watcher_store_path) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
         ON CONFLICT (watcher_session_key, target_session_key) "
    };
}

impl<'c> SqliteRows<'c> {
    /// The row operations on `conn`, inside the transaction the caller opened on it.
    pub(crate) fn new(conn: &'c Connection) -> Self {
        SqliteRows { conn }
    }

    /// Runs `sql`, an [`insert_cursor`] statement, for the cursor `(watcher, target)`;
    /// returns the rows it wrote.
    fn write_cursor(
        &self,
        sql: &str,
        (watcher, target): (&str, &str),
        at: Positions,
        provenance: Provenance,
        scope: Option<&str>,
        now: i64,
    ) -> Result<usize> {
        Ok(self.conn.prepare_cached(sql)?.execute(params![
            watcher,
            target,
            at.last_seen,
            at.notified,
            at.material,
            provenance.as_str(),
            now,
            scope
        ])?)
    }
}

impl Deref for SqliteRows<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Rows for SqliteRows<'_> {
    fn insert_event(&mut self, v: &ValidEvent) -> Result<Inserted> {
        let e = &v.event;
        let seq: Option<i64> = self
            .conn
            .prepare_cached(
                "INSERT INTO session_state_events (dedupe_key, session_key, session_id, agent_id, kind, \
                 actor_type, actor_id, run_id, occurred_at, summary, payload_json) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
                 ON CONFLICT (dedupe_key) DO NOTHING RETURNING sequence",
            )?
            .query_row(
                params![
                    v.dedupe_key,
                    e.session_key,
                    e.session_id,
                    e.agent_id,
                    e.kind.as_str(),
                    e.actor_type.as_str(),
                    e.actor_id,
                    e.run_id,
                    e.occurred_at,
                    e.summary,
                    e.payload_json,
                ],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(seq) = seq {
            return Ok(Inserted::New(seq));
        }
        let sql = format!("SELECT {EVENT_COLUMNS} FROM session_state_events WHERE dedupe_key = ?1");
        let first = self
            .conn
            .prepare_cached(&sql)?
            .query_row([&v.dedupe_key], inert::event_of)?;
        // A row the store would never write (semantics.md#storage) holds the key: it cannot be
        // returned.
        first.map(Inserted::Duplicate).ok_or_else(|| {
            Error::from(rusqlite::Error::InvalidColumnType(
                0,
                "dedupe_key is held by a row this store did not write".into(),
                rusqlite::types::Type::Text,
            ))
        })
    }

    fn bump_head(
        &mut self,
        session_key: &str,
        agent_id: &str,
        sequence: i64,
        now: i64,
    ) -> Result<()> {
        // A head the store never wrote (no integer `last_sequence`, semantics.md#storage) is
        // replaced.
        self.conn
            .prepare_cached(
                "INSERT INTO session_state_heads (session_key, agent_id, last_sequence, pruned_max_sequence, updated_at) \
                 VALUES (?1, ?2, ?3, 0, ?4) \
                 ON CONFLICT (session_key, agent_id) DO UPDATE SET \
                 last_sequence = CASE WHEN typeof(last_sequence) = 'integer' \
                 AND last_sequence > excluded.last_sequence THEN last_sequence ELSE excluded.last_sequence END, \
                 pruned_max_sequence = CASE WHEN typeof(pruned_max_sequence) = 'integer' \
                 THEN pruned_max_sequence ELSE 0 END, updated_at = excluded.updated_at",
            )?
            .execute(params![session_key, agent_id, sequence, now])?;
        Ok(())
    }

    fn cursor(&mut self, watcher: &str, target: &str) -> Result<Option<Cursor>> {
        let row = self
            .conn
            .prepare_cached(
                "SELECT last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at, \
                 coalesce((SELECT h.last_sequence FROM session_state_heads h \
                 WHERE h.session_key = ?2 AND h.agent_id = ?3 AND typeof(h.last_sequence) = 'integer'), 0), \
                 watcher_store_path FROM session_watch_cursors WHERE watcher_session_key = ?1 AND target_session_key = ?2",
            )?
            .query_row(
                params![watcher, target, SessionKey::classify(target).agent()],
                |r| {
                    let int = |i: usize| -> rusqlite::Result<Option<i64>> {
                        Ok(inert::integer(r.get_ref(i)?))
                    };
                    let provenance =
                        inert::text(r.get_ref(3)?).and_then(|p| Provenance::parse(p).ok());
                    let scope = inert::text(r.get_ref(6)?).map(str::to_owned);
                    Ok((
                        int(0)?,
                        int(1)?,
                        int(2)?,
                        provenance,
                        int(4)?,
                        r.get::<_, i64>(5)?,
                        scope,
                    ))
                },
            )
            .optional()?;
        let Some((Some(l), Some(n), Some(m), Some(provenance), Some(updated_at), head, scope)) =
            row
        else {
            return Ok(None);
        };
        let at = Positions {
            last_seen: l,
            notified: n,
            material: m,
        };
        let key = (watcher, target);
        Ok(Cursor::checked(
            key, at, provenance, updated_at, scope, head,
        ))
    }

    fn stored_provenance(
        &mut self,
        watcher: &str,
        target: &str,
    ) -> Result<Option<Option<Provenance>>> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT provenance FROM session_watch_cursors \
                 WHERE watcher_session_key = ?1 AND target_session_key = ?2",
            )?
            .query_row([watcher, target], |r| {
                Ok(inert::text(r.get_ref(0)?).and_then(|p| Provenance::parse(p).ok()))
            })
            .optional()?)
    }

    fn put_cursor(
        &mut self,
        watcher: &str,
        target: &str,
        at: Positions,
        provenance: Provenance,
        scope: Option<&str>,
        now: i64,
    ) -> Result<()> {
        const PUT: &str = concat!(
            insert_cursor!(),
            "DO UPDATE SET last_seen_sequence = excluded.last_seen_sequence, \
             notified_sequence = excluded.notified_sequence, \
             material_sequence = excluded.material_sequence, provenance = excluded.provenance, \
             updated_at = excluded.updated_at, watcher_store_path = coalesce(?8, watcher_store_path)"
        );
        self.write_cursor(PUT, (watcher, target), at, provenance, scope, now)?;
        Ok(())
    }

    fn insert_cursor(
        &mut self,
        watcher: &str,
        target: &str,
        at: Positions,
        provenance: Provenance,
        scope: Option<&str>,
        now: i64,
    ) -> Result<bool> {
        const INSERT: &str = concat!(insert_cursor!(), "DO NOTHING");
        let n = self.write_cursor(INSERT, (watcher, target), at, provenance, scope, now)?;
        Ok(n == 1)
    }

    fn material_update(
        &mut self,
        target: &Arc<str>,
        sequence: i64,
        except: Option<&str>,
        skip: &[&str],
        now: i64,
    ) -> Result<Vec<Pending>> {
        // N is decided by `rules::notified_after_material`, registered as a SQL function. Inert
        // rows are left as they are: `sequence` is the target's new head, so a live cursor's
        // positions all lie below it.
        const UPDATE: &str = concat!(
            "UPDATE session_watch_cursors SET \
             notified_sequence = session_state_notified_after(last_seen_sequence, notified_sequence, ?2), \
             material_sequence = ?2, updated_at = ?4 \
             WHERE target_session_key = ?1 AND watcher_session_key IS NOT ?3 AND ",
            live_cursor!(),
            "?2 - 1)"
        );
        const RETURNING: &str = " RETURNING watcher_session_key, last_seen_sequence, \
             notified_sequence, provenance, watcher_store_path";
        let skipped;
        let mut stmt = if skip.is_empty() {
            skipped = None;
            self.conn.prepare_cached(&[UPDATE, RETURNING].concat())?
        } else {
            skipped = Some(serde_json::to_string(skip).map_err(|e| Error::invalid(e.to_string()))?);
            self.conn.prepare_cached(
                &[
                    UPDATE,
                    " AND watcher_session_key NOT IN (SELECT value FROM json_each(?5))",
                    RETURNING,
                ]
                .concat(),
            )?
        };
        let map = |r: &rusqlite::Row<'_>| {
            Ok(Pending {
                watcher: r.get(0)?,
                target: Arc::clone(target),
                last_seen: r.get(1)?,
                notified: r.get(2)?,
                provenance: provenance_col(r.get(3)?)?,
                scope: scope_col(r.get_ref(4)?),
            })
        };
        let rows: Vec<Pending> = match &skipped {
            None => stmt
                .query_map(params![&**target, sequence, except, now], map)?
                .collect::<rusqlite::Result<_>>()?,
            Some(json) => stmt
                .query_map(params![&**target, sequence, except, now, json], map)?
                .collect::<rusqlite::Result<_>>()?,
        };
        Ok(rows)
    }

    fn is_watched(&mut self, target: &str) -> Result<bool> {
        Ok(self
            .conn
            .prepare_cached(concat!(
                "SELECT 1 FROM session_watch_cursors WHERE target_session_key = ?1 AND ",
                live_cursor!(),
                within_head!(),
                " LIMIT 1"
            ))?
            .exists([target])?)
    }

    fn head(&mut self, session_key: &str, agent_id: &str) -> Result<Head> {
        log::head(self.conn, session_key, agent_id)
    }

    fn set_positions(
        &mut self,
        watcher: &str,
        target: &str,
        last_seen: i64,
        notified: i64,
        now: i64,
    ) -> Result<()> {
        self.conn
            .prepare_cached(
                "UPDATE session_watch_cursors SET last_seen_sequence = ?3, notified_sequence = ?4, updated_at = ?5 \
                 WHERE watcher_session_key = ?1 AND target_session_key = ?2",
            )?
            .execute(params![watcher, target, last_seen, notified, now])?;
        Ok(())
    }

    fn touch_cursor(
        &mut self,
        watcher: &str,
        target: &str,
        provenance: Provenance,
        updated_at: i64,
    ) -> Result<()> {
        rows_cursors::touch(self.conn, watcher, target, provenance, updated_at)
    }

    fn delete_cursor(&mut self, watcher: &str, target: &str) -> Result<bool> {
        rows_cursors::delete(self.conn, watcher, target)
    }

    fn delete_cursors_of(&mut self, key: &str) -> Result<usize> {
        rows_cursors::delete_watcher(self.conn, key)
    }

    fn delete_cursors_on(&mut self, key: &str) -> Result<usize> {
        rows_cursors::delete_target(self.conn, key)
    }

    fn delete_events(&mut self, session_key: &str, agent_id: &str) -> Result<()> {
        log::delete_session(self.conn, session_key, agent_id)
    }

    fn watchers_behind(&mut self) -> Result<Vec<String>> {
        rows_cursors::watchers_behind(self.conn)
    }

    fn pending_of(&mut self, watcher: &str) -> Result<Vec<Pending>> {
        rows_cursors::pending_of(self.conn, watcher)
    }

    fn on_target(&mut self, target: &str) -> Result<Vec<Pending>> {
        rows_cursors::on_target(self.conn, target)
    }

    fn refreeze(&mut self, only: Option<&[String]>) -> Result<Vec<Pending>> {
        rows_cursors::refreeze(self.conn, only)
    }

    fn expire_cursors(&mut self, cutoff: i64, after: i64, span: i64) -> Result<Expired> {
        rows_cursors::expire_chunk(self.conn, cutoff, after, span)
    }

    fn savepoint(&mut self) -> Result<()> {
        self.conn.prepare_cached("SAVEPOINT event")?.execute([])?;
        Ok(())
    }

    fn release_savepoint(&mut self) -> Result<()> {
        self.conn.prepare_cached("RELEASE event")?.execute([])?;
        Ok(())
    }

    fn rollback_to_savepoint(&mut self) -> Result<()> {
        self.conn.prepare_cached("ROLLBACK TO event")?.execute([])?;
        self.conn.prepare_cached("RELEASE event")?.execute([])?;
        Ok(())
    }
}
