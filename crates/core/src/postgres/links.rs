//! The PostgreSQL store's link rows (see [`crate::upstream::links`] for what the columns
//! mean): the monitor's [`LinkStore`] over the engine. Several hosts share the table, but a
//! local transcript exists only on the machine that adopted it: `scan_host` names that host
//! (the store's `hostName`), and a host scans only its own local links, so another host never
//! counts a transcript it cannot open as a failure (docs/postgres.md#differences).

use tokio_postgres::types::ToSql;

use crate::error::{DbFailure, Error, Result};
use crate::event::{RecordInput, StateEvent};
use crate::keys;
use crate::postgres::conn::SessionGuard;
use crate::postgres::rows::{block, PgRows, BEGIN};
use crate::postgres::PgStore;
use crate::upstream::link_store::{LinkStore, LinkWrite};
use crate::upstream::links::Link;
use crate::upstream::LinkRow;

/// The columns [`read`] takes, in its order.
macro_rules! columns {
    () => {
        "l.session_key, l.agent_id, l.catalog_id, l.host_id, l.thread_id, l.upstream_kind, \
         l.upstream_ref_json, l.last_marker_json, l.last_scanned_at, l.failure_count, \
         l.own_messages_json"
    };
}

// Two rows at most: a key that several agents link reads as no link, as on SQLite.
const GET: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM __SCHEMA__.session_upstream_links l WHERE l.session_key = $1 \
     ORDER BY l.agent_id COLLATE \"C\" LIMIT 2"
);
const GET_FOR_UPDATE: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM __SCHEMA__.session_upstream_links l WHERE l.session_key = $1 \
     ORDER BY l.agent_id COLLATE \"C\" LIMIT 2 FOR UPDATE"
);

/// This host's links with a local transcript whose session a live cursor targets (positions in
/// `[0, head]`, the head the target's own agent's), no other agent linking the same key; the
/// watchers come along so a key that cannot watch is filtered in Rust, as on SQLite.
const WATCHED_LOCAL: &str = concat!(
    "SELECT ",
    columns!(),
    ", w.watchers FROM __SCHEMA__.session_upstream_links l \
     CROSS JOIN LATERAL (SELECT array_agg(c.watcher_session_key) AS watchers \
     FROM __SCHEMA__.session_watch_cursors c \
     WHERE c.target_session_key = l.session_key AND c.watcher_session_key <> c.target_session_key \
     AND least(c.last_seen_sequence, c.notified_sequence, c.material_sequence) >= 0 \
     AND greatest(c.last_seen_sequence, c.notified_sequence, c.material_sequence) <= \
     coalesce((SELECT h.last_sequence FROM __SCHEMA__.session_state_heads h \
     WHERE h.session_key = c.target_session_key \
     AND h.agent_id = split_part(c.target_session_key, ':', 2)), 0)) w \
     WHERE l.scan_host = $1 AND w.watchers IS NOT NULL \
     AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.session_upstream_links o \
     WHERE o.session_key = l.session_key AND o.agent_id <> l.agent_id) \
     ORDER BY l.session_key COLLATE \"C\""
);

/// Inserts a link, or sets the row of the same session and agent; `created_at` stays.
macro_rules! put {
    ($scan_host:literal) => {
        concat!(
            "INSERT INTO __SCHEMA__.session_upstream_links AS l (session_key, agent_id, \
             catalog_id, host_id, thread_id, upstream_kind, upstream_ref_json, last_marker_json, \
             last_scanned_at, failure_count, own_messages_json, created_at, updated_at, scan_host) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13) \
             ON CONFLICT (session_key, agent_id) DO UPDATE SET catalog_id = excluded.catalog_id, \
             host_id = excluded.host_id, thread_id = excluded.thread_id, \
             upstream_kind = excluded.upstream_kind, upstream_ref_json = excluded.upstream_ref_json, \
             last_marker_json = excluded.last_marker_json, last_scanned_at = excluded.last_scanned_at, \
             failure_count = excluded.failure_count, own_messages_json = excluded.own_messages_json, \
             updated_at = excluded.updated_at, scan_host = ",
            $scan_host
        )
    };
}
/// `adopt`'s link: this host scans it from now on.
const ADOPT: &str = put!("excluded.scan_host");
/// A link's state written back: the host that scans it stays.
const SAVE: &str = put!("coalesce(l.scan_host, excluded.scan_host)");
const DELETE: &str =
    "DELETE FROM __SCHEMA__.session_upstream_links WHERE session_key = $1 AND agent_id = $2";

fn read(r: &tokio_postgres::Row) -> std::result::Result<Link, tokio_postgres::Error> {
    let row = LinkRow {
        session_key: r.try_get(0)?,
        agent_id: r.try_get(1)?,
        catalog_id: r.try_get(2)?,
        host_id: r.try_get(3)?,
        thread_id: r.try_get(4)?,
        upstream_kind: r.try_get(5)?,
        upstream_ref_json: r.try_get(6)?,
        last_marker_json: r.try_get(7)?,
        last_scanned_at: r.try_get(8)?,
        // The monitor does not use them.
        created_at: 0,
        updated_at: 0,
    };
    let failures: Option<i32> = r.try_get(9)?;
    Ok(Link::from_row(row, failures.map(i64::from), r.try_get(10)?))
}

/// The one link of a key (none when several agents link it).
fn one(rows: &[tokio_postgres::Row]) -> std::result::Result<Option<Link>, tokio_postgres::Error> {
    match rows {
        [r] => read(r).map(Some),
        _ => Ok(None),
    }
}

/// A parameter of a held statement.
type Param = Box<dyn ToSql + Sync + Send>;

/// The parameters of [`ADOPT`] and [`SAVE`]: a local link names `host` as its scanner.
fn put_params(link: &Link, now: i64, host: &str) -> Result<Vec<Param>> {
    let own = link.own_messages_json()?;
    // The column is an `integer`; a count past it stays at its ceiling.
    let failures = i32::try_from(link.failure_count).unwrap_or(i32::MAX);
    let scan_host = link.transcript_path.as_ref().map(|_| host.to_owned());
    Ok(vec![
        Box::new(link.session_key.clone()),
        Box::new(link.agent_id.clone()),
        Box::new(link.source.clone()),
        Box::new(link.host_id.clone()),
        Box::new(link.thread_id.clone()),
        Box::new(link.upstream_kind.clone()),
        Box::new(link.upstream_ref_json.clone()),
        Box::new(link.marker_json()),
        Box::new(link.last_scanned_at),
        Box::new(failures),
        Box::new(own),
        Box::new(now),
        Box::new(scan_host),
    ])
}

/// Holds `w` into the transaction open on `rows`.
fn hold(rows: &mut PgRows<'_>, w: &LinkWrite, now: i64, host: &str) -> Result<()> {
    match w {
        LinkWrite::Adopt(link) => rows.hold(ADOPT, put_params(link, now, host)?),
        LinkWrite::Save(link) => rows.hold(SAVE, put_params(link, now, host)?),
        LinkWrite::Delete {
            session_key,
            agent_id,
        } => rows.hold(
            DELETE,
            vec![Box::new(session_key.clone()), Box::new(agent_id.clone())],
        ),
    }
}

impl PgStore {
    /// Runs `f` over [`PgRows`] on the connected session (outside any transaction unless `f`
    /// opens one).
    fn with_rows<T: Send>(&self, f: impl FnOnce(&mut PgRows<'_>) -> Result<T> + Send) -> Result<T> {
        let target = self.pg.target();
        let schema = self.pg.schema();
        self.with_session(|g: &mut SessionGuard<'_>| {
            let (client, statements, _) = g.session()?.parts();
            let client: &tokio_postgres::Client = client;
            f(&mut PgRows::new(client, statements, schema, target, true))
        })
    }

    fn host(&self) -> &str {
        self.opts.host_name.as_str()
    }

    /// [`LinkStore::update_link`] on a thread outside the runtime: the row read `FOR UPDATE`,
    /// changed, and written back in one transaction.
    fn update_link_here(
        &self,
        session_key: &str,
        now: i64,
        change: &mut (dyn FnMut(&mut Link) + Send),
    ) -> Result<()> {
        let target = self.pg.target();
        let schema = self.pg.schema();
        let mut guard = block(self.pg.lock())?;
        let (client, statements, in_tx) = guard.session()?.parts();
        if *in_tx {
            // A call that unwound mid-transaction left it open: end it before anything else.
            block(client.batch_execute("ROLLBACK")).map_err(|e| target.error(&e))?;
            *in_tx = false;
        }
        let client: &tokio_postgres::Client = client;
        *in_tx = true;
        let mut rows = PgRows::new(client, statements, schema, target, true);
        let result = (|| {
            let st = rows.prepared(GET_FOR_UPDATE)?;
            rows.hold_simple(BEGIN);
            let found = rows.send(client.query(&st, &[&session_key]))?;
            if let Some(mut link) = one(&found).map_err(|e| target.error(&e))? {
                change(&mut link);
                hold(&mut rows, &LinkWrite::Save(link), now, self.host())?;
            }
            rows.send(client.batch_execute("COMMIT"))
        })();
        if result.is_err() {
            let _ = block(client.batch_execute("ROLLBACK"));
        }
        *in_tx = false;
        if result.is_err() {
            guard.forget_if_closed();
        }
        result
    }
}

impl LinkStore for PgStore {
    fn check_open(&self) -> Result<()> {
        PgStore::check_open(self)
    }

    fn link(&self, session_key: &str) -> Result<Option<Link>> {
        self.check_open()?;
        self.with_rows(|rows| {
            let st = rows.prepared(GET)?;
            let found = rows.send(rows.tx().query(&st, &[&session_key]))?;
            one(&found).map_err(|e| rows.error(&e))
        })
    }

    fn watched_local_links(&self) -> Result<Vec<Link>> {
        self.check_open()?;
        let host = self.host();
        self.with_rows(|rows| {
            let st = rows.prepared(WATCHED_LOCAL)?;
            let found = rows.send(rows.tx().query(&st, &[&host]))?;
            let mut out = Vec::with_capacity(found.len());
            for r in &found {
                let watchers: Vec<String> = r.try_get(11).map_err(|e| rows.error(&e))?;
                let Ok(link) = read(r) else { continue };
                if link.transcript_path.is_some()
                    && keys::is_watchable(&link.session_key)
                    && watchers.iter().any(|w| keys::is_watchable(w))
                {
                    out.push(link);
                }
            }
            Ok(out)
        })
    }

    fn save_link(&self, link: &Link, now: i64) -> Result<()> {
        self.check_open()?;
        let params = put_params(link, now, self.host())?;
        self.with_rows(|rows| {
            let st = rows.prepared(SAVE)?;
            let refs: Vec<&(dyn ToSql + Sync)> =
                params.iter().map(|p| &**p as &(dyn ToSql + Sync)).collect();
            rows.send(rows.tx().execute(&st, &refs)).map(drop)
        })
    }

    fn update_link(
        &self,
        session_key: &str,
        now: i64,
        change: &mut (dyn FnMut(&mut Link) + Send),
    ) -> Result<()> {
        self.check_open()?;
        if tokio::runtime::Handle::try_current().is_err() {
            return self.update_link_here(session_key, now, change);
        }
        // Blocking a runtime thread on the runtime would stall it: run on a thread of its own.
        std::thread::scope(|s| {
            s.spawn(|| self.update_link_here(session_key, now, change))
                .join()
                .map_err(|_| Error::db(DbFailure::Other, "a PostgreSQL call panicked"))?
        })
    }

    fn record_with(
        &self,
        input: RecordInput,
        now: i64,
        also: LinkWrite,
    ) -> Result<Option<StateEvent>> {
        let host = self.host();
        self.record_also(input, now, &|rows: &mut PgRows<'_>| {
            hold(rows, &also, now, host)
        })
    }
}
