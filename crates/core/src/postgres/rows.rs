//! The PostgreSQL store's [`Rows`]: the row operations of one write transaction as prepared
//! statements inside the transaction the caller opened on the client. The trait is
//! synchronous; each call blocks the calling (writer) thread on the core runtime. To save round
//! trips, the writes whose answer nothing waits for (`BEGIN`, a savepoint and its release, a
//! head's bump, a material event's cursor update) are held back and sent with the next
//! statement in one pipeline. [`Rows::release_savepoint`] sends the event's held writes, so a
//! failure is still the failure of its own event; only a bare `RELEASE` waits for the next
//! statement. A group of one needs no savepoint: its failure is the group's.
//!
//! Inert rows (semantics.md#storage): the schema's types and checks keep most of them out; a
//! cursor position outside `[0, head]` or a key that cannot watch is filtered here as on SQLite.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::future::{join, join_all};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use crate::error::{Error, Result};
use crate::event::{ActorType, EventKind, StateEvent, ValidEvent};
use crate::keys::{self, SessionKey};
use crate::log::Head;
use crate::options::SchemaName;
use crate::postgres::conn::Target;
use crate::rows::{Cursor, Expired, Inserted, Pending, Provenance, Rows};
use crate::rules::{self, Positions};

mod cursor_ops;
use cursor_ops as rc;

const INSERT_EVENT: &str = "INSERT INTO __SCHEMA__.session_state_events (dedupe_key, session_key, \
     session_id, agent_id, kind, actor_type, actor_id, run_id, occurred_at, summary, payload_json) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
     ON CONFLICT (dedupe_key) DO NOTHING RETURNING sequence";
const BY_DEDUPE_KEY: &str = "SELECT sequence, session_key, agent_id, kind, actor_type, actor_id, \
     run_id, session_id, occurred_at, summary, payload_json \
     FROM __SCHEMA__.session_state_events WHERE dedupe_key = $1";
const BUMP_HEAD: &str = "INSERT INTO __SCHEMA__.session_state_heads AS h (session_key, agent_id, \
     last_sequence, pruned_max_sequence, updated_at) VALUES ($1, $2, $3, 0, $4) \
     ON CONFLICT (session_key, agent_id) DO UPDATE SET \
     last_sequence = greatest(h.last_sequence, excluded.last_sequence), updated_at = excluded.updated_at";
const CURSOR: &str = "SELECT c.last_seen_sequence, c.notified_sequence, c.material_sequence, \
     c.provenance, c.updated_at, c.watcher_store_path, \
     coalesce((SELECT h.last_sequence FROM __SCHEMA__.session_state_heads h \
     WHERE h.session_key = $2 AND h.agent_id = $3::text), 0) \
     FROM __SCHEMA__.session_watch_cursors c \
     WHERE c.watcher_session_key = $1 AND c.target_session_key = $2";
const STORED_PROVENANCE: &str = "SELECT provenance FROM __SCHEMA__.session_watch_cursors \
     WHERE watcher_session_key = $1 AND target_session_key = $2";
const PUT_CURSOR: &str = "INSERT INTO __SCHEMA__.session_watch_cursors AS c (watcher_session_key, \
     target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, \
     updated_at, watcher_store_path) VALUES ($1, $2, $3, $4, $5, $6, $7, $8::text) \
     ON CONFLICT (watcher_session_key, target_session_key) DO UPDATE SET \
     last_seen_sequence = excluded.last_seen_sequence, notified_sequence = excluded.notified_sequence, \
     material_sequence = excluded.material_sequence, provenance = excluded.provenance, \
     updated_at = excluded.updated_at, watcher_store_path = coalesce($8::text, c.watcher_store_path)";
const INSERT_CURSOR: &str = "INSERT INTO __SCHEMA__.session_watch_cursors (watcher_session_key, \
     target_session_key, last_seen_sequence, notified_sequence, material_sequence, provenance, \
     updated_at, watcher_store_path) VALUES ($1, $2, $3, $4, $5, $6, $7, $8::text) \
     ON CONFLICT (watcher_session_key, target_session_key) DO NOTHING";
// The cursors a material event moves, locked; N is decided in Rust (rules.rs), then written by
// MATERIAL_WRITE. Live: every position in [0, sequence - 1] (sequence is the new head).
const MATERIAL_READ: &str = "SELECT watcher_session_key, last_seen_sequence, notified_sequence, \
     provenance, watcher_store_path FROM __SCHEMA__.session_watch_cursors \
     WHERE target_session_key = $1 AND watcher_session_key IS DISTINCT FROM $2::text \
     AND NOT (watcher_session_key = ANY($3::text[])) \
     AND least(last_seen_sequence, notified_sequence, material_sequence) >= 0 \
     AND greatest(last_seen_sequence, notified_sequence, material_sequence) <= $4::bigint - 1 \
     ORDER BY watcher_session_key FOR UPDATE";
const MATERIAL_WRITE: &str = "UPDATE __SCHEMA__.session_watch_cursors AS c SET \
     notified_sequence = u.n, material_sequence = $2, updated_at = $3 \
     FROM unnest($4::text[], $5::bigint[]) AS u(w, n) \
     WHERE c.target_session_key = $1 AND c.watcher_session_key = u.w";
const IS_WATCHED: &str = "SELECT EXISTS (SELECT 1 FROM __SCHEMA__.session_watch_cursors c \
     WHERE c.target_session_key = $1 AND c.watcher_session_key <> $1 \
     AND least(c.last_seen_sequence, c.notified_sequence, c.material_sequence) >= 0 \
     AND greatest(c.last_seen_sequence, c.notified_sequence, c.material_sequence) <= \
     coalesce((SELECT h.last_sequence FROM __SCHEMA__.session_state_heads h \
     WHERE h.session_key = $1 AND h.agent_id = $2::text), 0))";

/// The answer of a [`Rows`] method that a group's in-memory rows ([`super::overlay`]) cannot
/// answer: the cursor calls run over [`PgRows`] or statements of their own, never over them.
pub(crate) fn outside_the_write_flow(method: &str) -> Error {
    Error::db(
        crate::error::DbFailure::Other,
        format!("{method} is not an operation of a record's write"),
    )
}

/// The transaction statements the engine sends (held, or with the last writes).
pub(crate) const BEGIN: &str = "BEGIN";
const SAVEPOINT: &str = "SAVEPOINT event";
const RELEASE: &str = "RELEASE event";

/// A write that commits with a group of one once its event is in (or found by its dedupe key):
/// held into the transaction before `COMMIT` (the upstream link, `postgres/links.rs`).
pub(crate) type Also<'a> = Option<&'a (dyn Fn(&mut PgRows<'_>) -> Result<()> + Sync)>;

/// A parameter held until its statement is sent.
type Param = Box<dyn ToSql + Sync + Send>;

/// A write held back until the next round trip.
enum Held {
    /// A statement of the simple protocol (`BEGIN`, `SAVEPOINT`, `RELEASE`).
    Simple(&'static str),
    /// A prepared statement and its parameters.
    Prepared(Statement, Vec<Param>),
}

/// [`Rows`] inside an open transaction of the PostgreSQL store.
pub(crate) struct PgRows<'t> {
    tx: &'t Client,
    statements: &'t mut HashMap<&'static str, Statement>,
    schema: SchemaName,
    target: &'t Target,
    held: Vec<Held>,
    /// The event's savepoint is open on the server (its `SAVEPOINT` was sent).
    savepoint_sent: bool,
    /// One event: no savepoints.
    single: bool,
}

impl<'t> PgRows<'t> {
    /// The row operations on `client`, inside the transaction the caller opens (or holds,
    /// see [`PgRows::hold_simple`]), with the connection's statement cache. `single`: the
    /// group has one event, which needs no savepoint.
    pub(crate) fn new(
        client: &'t Client,
        statements: &'t mut HashMap<&'static str, Statement>,
        schema: SchemaName,
        target: &'t Target,
        single: bool,
    ) -> Self {
        PgRows {
            tx: client,
            statements,
            schema,
            target,
            held: Vec::new(),
            savepoint_sent: false,
            single,
        }
    }

    /// Holds a statement of the simple protocol until the next round trip.
    pub(crate) fn hold_simple(&mut self, sql: &'static str) {
        self.held.push(Held::Simple(sql));
    }

    pub(super) fn error(&self, e: &tokio_postgres::Error) -> Error {
        self.target.error(e)
    }

    /// `template` prepared once per connection.
    pub(crate) fn prepared(&mut self, template: &'static str) -> Result<Statement> {
        if let Some(s) = self.statements.get(template) {
            return Ok(s.clone());
        }
        let sql = template.replace("__SCHEMA__", self.schema.as_str());
        let st = block(self.tx.prepare(&sql)).map_err(|e| self.error(&e))?;
        self.statements.insert(template, st.clone());
        Ok(st)
    }

    /// The open transaction.
    pub(super) fn tx(&self) -> &'t Client {
        self.tx
    }

    /// Runs `main` after the held writes, in one round trip; the first failure is the answer.
    pub(crate) fn send<T>(
        &mut self,
        main: impl std::future::Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    ) -> Result<T> {
        let held = std::mem::take(&mut self.held);
        if held
            .iter()
            .any(|h| matches!(h, Held::Simple(s) if *s == SAVEPOINT))
        {
            self.savepoint_sent = true;
        }
        let tx = self.tx;
        let before = join_all(held.iter().map(|h| async move {
            match h {
                Held::Simple(sql) => tx.batch_execute(sql).await.map(|_| 0),
                Held::Prepared(st, params) => {
                    let refs: Vec<&(dyn ToSql + Sync)> =
                        params.iter().map(|p| &**p as &(dyn ToSql + Sync)).collect();
                    tx.execute(st, &refs).await
                }
            }
        }));
        let (before, main) = block(join(before, main));
        for r in before {
            r.map_err(|e| self.error(&e))?;
        }
        main.map_err(|e| self.error(&e))
    }

    /// Holds a prepared write until the next round trip.
    pub(crate) fn hold(&mut self, template: &'static str, params: Vec<Param>) -> Result<()> {
        let st = self.prepared(template)?;
        self.held.push(Held::Prepared(st, params));
        Ok(())
    }

    /// Runs `template` (a cursor write: `$1` to `$8` are the keys, L, N, M, the provenance,
    /// `updated_at = now` and the scope) for `(watcher, target)`; the rows it wrote.
    fn write_cursor(
        &mut self,
        template: &'static str,
        (watcher, target): (&str, &str),
        at: Positions,
        provenance: Provenance,
        scope: Option<&str>,
        now: i64,
    ) -> Result<u64> {
        let st = self.prepared(template)?;
        let tx = self.tx;
        self.send(tx.execute(
            &st,
            &[
                &watcher,
                &target,
                &at.last_seen,
                &at.notified,
                &at.material,
                &provenance.as_str(),
                &now,
                &scope,
            ],
        ))
    }
}

/// Blocks the calling thread, which is outside the runtime (the engine's entry points see to
/// it), on `fut`.
pub(crate) fn block<F: std::future::Future>(fut: F) -> F::Output {
    crate::runtime::handle().block_on(fut)
}

/// An event row (`sequence, session_key, agent_id, kind, actor_type, actor_id, run_id,
/// session_id, occurred_at, summary, payload_json`) as the event `record` returned, or `None` for
/// a row this store would not write (an unknown kind or actor type).
pub(crate) fn event_of(
    r: &tokio_postgres::Row,
) -> std::result::Result<Option<StateEvent>, tokio_postgres::Error> {
    let kind: String = r.try_get(3)?;
    let actor_type: String = r.try_get(4)?;
    let (Ok(kind), Ok(actor_type)) = (EventKind::parse(&kind), ActorType::parse(&actor_type))
    else {
        return Ok(None);
    };
    Ok(Some(StateEvent {
        sequence: r.try_get(0)?,
        session_key: r.try_get(1)?,
        agent_id: r.try_get(2)?,
        kind,
        actor_type,
        actor_id: r.try_get(5)?,
        run_id: r.try_get(6)?,
        session_id: r.try_get(7)?,
        occurred_at: r.try_get(8)?,
        summary: r.try_get(9)?,
        payload_json: r.try_get(10)?,
    }))
}

impl Rows for PgRows<'_> {
    fn insert_event(&mut self, v: &ValidEvent) -> Result<Inserted> {
        let st = self.prepared(INSERT_EVENT)?;
        let e = &v.event;
        let tx = self.tx;
        let row = self.send(tx.query_opt(
            &st,
            &[
                &v.dedupe_key,
                &e.session_key,
                &e.session_id,
                &e.agent_id,
                &e.kind.as_str(),
                &e.actor_type.as_str(),
                &e.actor_id,
                &e.run_id,
                &e.occurred_at,
                &e.summary,
                &e.payload_json,
            ],
        ))?;
        if let Some(row) = row {
            return row
                .try_get::<_, i64>(0)
                .map(Inserted::New)
                .map_err(|e| self.error(&e));
        }
        // The key is taken: the row that holds it committed (a racing insert waits for the
        // holder's transaction), so this statement sees it.
        let st = self.prepared(BY_DEDUPE_KEY)?;
        let row = block(tx.query_one(&st, &[&v.dedupe_key])).map_err(|e| self.error(&e))?;
        match event_of(&row).map_err(|e| self.error(&e))? {
            Some(first) => Ok(Inserted::Duplicate(first)),
            None => Err(Error::db(
                crate::error::DbFailure::Other,
                "dedupe_key is held by a row this store did not write",
            )),
        }
    }

    fn bump_head(
        &mut self,
        session_key: &str,
        agent_id: &str,
        sequence: i64,
        now: i64,
    ) -> Result<()> {
        // The group locked this head before the event drew its sequence; nothing here waits.
        self.hold(
            BUMP_HEAD,
            vec![
                Box::new(session_key.to_owned()),
                Box::new(agent_id.to_owned()),
                Box::new(sequence),
                Box::new(now),
            ],
        )
    }

    fn cursor(&mut self, watcher: &str, target: &str) -> Result<Option<Cursor>> {
        let st = self.prepared(CURSOR)?;
        let agent = SessionKey::classify(target).agent();
        let tx = self.tx;
        let Some(r) = self.send(tx.query_opt(&st, &[&watcher, &target, &agent]))? else {
            return Ok(None);
        };
        let get = |r: &tokio_postgres::Row| -> std::result::Result<_, tokio_postgres::Error> {
            Ok((
                r.try_get::<_, i64>(0)?,
                r.try_get::<_, i64>(1)?,
                r.try_get::<_, i64>(2)?,
                r.try_get::<_, String>(3)?,
                r.try_get::<_, i64>(4)?,
                r.try_get::<_, Option<String>>(5)?,
                r.try_get::<_, i64>(6)?,
            ))
        };
        let (l, n, m, provenance, updated_at, scope, head) = get(&r).map_err(|e| self.error(&e))?;
        let Ok(provenance) = Provenance::parse(&provenance) else {
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
        let st = self.prepared(STORED_PROVENANCE)?;
        let tx = self.tx;
        let row = self.send(tx.query_opt(&st, &[&watcher, &target]))?;
        match row {
            None => Ok(None),
            Some(r) => {
                let p: String = r.try_get(0).map_err(|e| self.error(&e))?;
                Ok(Some(Provenance::parse(&p).ok()))
            }
        }
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
        self.write_cursor(PUT_CURSOR, (watcher, target), at, provenance, scope, now)?;
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
        let n = self.write_cursor(INSERT_CURSOR, (watcher, target), at, provenance, scope, now)?;
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
        let st = self.prepared(MATERIAL_READ)?;
        let tx = self.tx;
        let t: &str = target;
        let rows = self.send(tx.query(&st, &[&t, &except, &skip, &sequence]))?;
        let mut moved = Vec::with_capacity(rows.len());
        let (mut watchers, mut notified) = (Vec::new(), Vec::new());
        for r in rows {
            let read = |r: &tokio_postgres::Row| -> std::result::Result<_, tokio_postgres::Error> {
                Ok((
                    r.try_get::<_, String>(0)?,
                    r.try_get::<_, i64>(1)?,
                    r.try_get::<_, i64>(2)?,
                    r.try_get::<_, String>(3)?,
                    r.try_get::<_, Option<String>>(4)?,
                ))
            };
            let (watcher, l, n, provenance, scope) = read(&r).map_err(|e| self.error(&e))?;
            let Ok(provenance) = Provenance::parse(&provenance) else {
                continue;
            };
            if watcher == t || !keys::is_watchable(&watcher) {
                continue;
            }
            let n = rules::notified_after_material(l, n, sequence);
            watchers.push(watcher.clone());
            notified.push(n);
            moved.push(Pending {
                watcher,
                target: Arc::clone(target),
                last_seen: l,
                notified: n,
                provenance,
                scope: scope.map(Arc::from),
            });
        }
        if !watchers.is_empty() {
            self.hold(
                MATERIAL_WRITE,
                vec![
                    Box::new(t.to_owned()),
                    Box::new(sequence),
                    Box::new(now),
                    Box::new(watchers),
                    Box::new(notified),
                ],
            )?;
        }
        Ok(moved)
    }

    fn is_watched(&mut self, target: &str) -> Result<bool> {
        let st = self.prepared(IS_WATCHED)?;
        let agent = SessionKey::classify(target).agent();
        let tx = self.tx;
        let row = self.send(tx.query_one(&st, &[&target, &agent]))?;
        row.try_get(0).map_err(|e| self.error(&e))
    }

    fn head(&mut self, session_key: &str, agent_id: &str) -> Result<Head> {
        rc::head(self, session_key, agent_id)
    }

    fn set_positions(
        &mut self,
        watcher: &str,
        target: &str,
        last_seen: i64,
        notified: i64,
        now: i64,
    ) -> Result<()> {
        rc::set_positions(self, watcher, target, last_seen, notified, now)
    }

    fn touch_cursor(
        &mut self,
        watcher: &str,
        target: &str,
        provenance: Provenance,
        updated_at: i64,
    ) -> Result<()> {
        rc::touch(self, watcher, target, provenance, updated_at)
    }

    fn delete_cursor(&mut self, watcher: &str, target: &str) -> Result<bool> {
        rc::delete_one(self, watcher, target)
    }

    fn delete_cursors_of(&mut self, key: &str) -> Result<usize> {
        rc::delete_all(self, key, false)
    }

    fn delete_cursors_on(&mut self, key: &str) -> Result<usize> {
        rc::delete_all(self, key, true)
    }

    fn delete_events(&mut self, session_key: &str, agent_id: &str) -> Result<()> {
        rc::delete_events(self, session_key, agent_id)
    }

    fn watchers_behind(&mut self) -> Result<Vec<String>> {
        rc::watchers_behind(self)
    }

    fn pending_of(&mut self, watcher: &str) -> Result<Vec<Pending>> {
        rc::pending_of(self, watcher)
    }

    fn on_target(&mut self, target: &str) -> Result<Vec<Pending>> {
        rc::on_target(self, target)
    }

    fn refreeze(&mut self, only: Option<&[String]>) -> Result<Vec<Pending>> {
        rc::refreeze(self, only)
    }

    fn expire_cursors(&mut self, cutoff: i64, _after: i64, _span: i64) -> Result<Expired> {
        rc::expire(self, cutoff)
    }

    fn savepoint(&mut self) -> Result<()> {
        if !self.single {
            self.held.push(Held::Simple(SAVEPOINT));
        }
        Ok(())
    }

    fn release_savepoint(&mut self) -> Result<()> {
        if self.single {
            return Ok(());
        }
        if !self.savepoint_sent {
            // Nothing of the event reached the server: its held SAVEPOINT goes.
            self.held
                .retain(|h| !matches!(h, Held::Simple(s) if *s == SAVEPOINT));
            return Ok(());
        }
        if self.held.iter().all(|h| matches!(h, Held::Simple(_))) {
            // Only the release is left to send: it cannot fail on its own, so it waits for
            // the next statement.
            self.held.push(Held::Simple(RELEASE));
            self.savepoint_sent = false;
            return Ok(());
        }
        let tx = self.tx;
        match self.send(tx.batch_execute(RELEASE)) {
            Ok(()) => {
                self.savepoint_sent = false;
                Ok(())
            }
            Err(e) => {
                // A held write failed: the event's writes go, the transaction goes on.
                self.rollback_to_savepoint()?;
                Err(e)
            }
        }
    }

    fn rollback_to_savepoint(&mut self) -> Result<()> {
        if self.single {
            // The caller rolls the whole transaction back.
            self.held.clear();
            return Ok(());
        }
        if !self.savepoint_sent {
            // The SAVEPOINT was still held: nothing of the event reached the server.
            self.held
                .retain(|h| !matches!(h, Held::Simple(s) if *s == SAVEPOINT));
            return Ok(());
        }
        // The event's held writes go unsent; a release held for the event before stays.
        self.held.retain(|h| matches!(h, Held::Simple(_)));
        self.savepoint_sent = false;
        let tx = self.tx;
        self.send(tx.batch_execute("ROLLBACK TO event; RELEASE event"))
    }
}
