//! The PostgreSQL store's write path: a record is a group of one, and a group is one
//! transaction (semantics.md#promise-api). Before any event draws its sequence, the group locks
//! the heads of every session it writes, in one statement and one fixed order (sorted by
//! session key, then agent id, bytewise), so one session's sequences commit in sequence order
//! and two hosts writing the same sessions in opposite orders never deadlock
//! (docs/postgres.md#order). Each event is then written exactly as alone through the shared
//! write flow ([`crate::group::write_each`] over [`PgRows`]); notices are queued and wakes
//! scheduled once the group has committed.

use std::sync::Arc;

use crate::cursors::Pending;
use crate::delivery::Wake;
use crate::error::{DbFailure, Error, Result};
use crate::event::{self, RecordInput, StateEvent, ValidEvent};
use crate::group::{self, copy};
use crate::metrics::Hist;
use crate::postgres::batch::{self, Extra, Fallback, TailOf, DROP_EMPTY_HEADS, LOCK_HEADS};
use crate::postgres::in_doubt::InDoubt;
use crate::postgres::outage::waits_for;
use crate::postgres::overlay::heads_of;
use crate::postgres::rows::{block, Also, PgRows, BEGIN};
use crate::postgres::tail::{Prepared, Told};
use crate::postgres::PgStore;
use crate::record::{WriteRules, Written};

/// True when the group of one wrote (or found) its event, so its [`Also`] is written too.
fn wrote_one(written: &[group::WrittenItem]) -> bool {
    matches!(written, [(_, _, Ok(Some(_)))])
}

const COMMIT: &str = "COMMIT";
const ROLLBACK: &str = "ROLLBACK";

/// How one attempt at a group's transaction ended.
enum Attempt {
    /// Committed (or found committed), with what it wrote and what the tail was told.
    Done(Vec<group::WrittenItem>, Option<Told>),
    /// Failed for good: the group settles with this.
    Failed(Error),
    /// The connection was lost: the group is written again once connected (or looked up
    /// first, when it is in doubt).
    Lost(Error, Option<InDoubt>),
}

/// The failure a group settles with: a group in doubt says that the outcome is unknown.
fn settle(e: Error, doubt: Option<&InDoubt>) -> Error {
    match doubt {
        None => e,
        Some(_) => Error::OutcomeUnknown(format!(
            "the commit was sent and the connection lost before its answer; the server was not \
             back within reconnectWindowMs to say whether it committed ({e})"
        )),
    }
}

impl PgStore {
    /// [`crate::Store::record`]: a group of one.
    pub(crate) fn record(&self, input: RecordInput, now: i64) -> Result<Option<StateEvent>> {
        let mut out = self.record_group(vec![(input, now)]);
        out.pop()
            .unwrap_or_else(|| Err(Error::invalid("record returned nothing")))
    }

    /// [`crate::Store::record_group`].
    pub(crate) fn record_group(
        &self,
        items: Vec<(RecordInput, i64)>,
    ) -> Vec<Result<Option<StateEvent>>> {
        self.record_group_with(items, None)
    }

    /// [`PgStore::record`] with `also` in the event's transaction (see [`Also`]).
    pub(crate) fn record_also(
        &self,
        input: RecordInput,
        now: i64,
        also: &(dyn Fn(&mut PgRows<'_>) -> Result<()> + Sync),
    ) -> Result<Option<StateEvent>> {
        let mut out = self.record_group_with(vec![(input, now)], Some(also));
        out.pop()
            .unwrap_or_else(|| Err(Error::invalid("record returned nothing")))
    }

    fn record_group_with(
        &self,
        items: Vec<(RecordInput, i64)>,
        also: Also<'_>,
    ) -> Vec<Result<Option<StateEvent>>> {
        if tokio::runtime::Handle::try_current().is_ok() {
            // Blocking a runtime thread on the runtime would stall it: run on a thread of its own.
            let n = items.len();
            return std::thread::scope(|s| {
                s.spawn(|| self.record_group_here(items, also))
                    .join()
                    .unwrap_or_else(|_| {
                        (0..n)
                            .map(|_| Err(Error::invalid("the record panicked")))
                            .collect()
                    })
            });
        }
        self.record_group_here(items, also)
    }

    fn record_group_here(
        &self,
        items: Vec<(RecordInput, i64)>,
        also: Also<'_>,
    ) -> Vec<Result<Option<StateEvent>>> {
        let mut out: Vec<Result<Option<StateEvent>>> = Vec::with_capacity(items.len());
        let mut valid: Vec<(usize, ValidEvent, i64)> = Vec::with_capacity(items.len());
        for (i, (input, now)) in items.into_iter().enumerate() {
            match self
                .check_open()
                .and_then(|()| event::validate(input, now))
                .and_then(no_nul)
            {
                Ok(v) => {
                    valid.push((i, v, now));
                    out.push(Ok(None));
                }
                Err(e) => out.push(Err(e)),
            }
        }
        if valid.is_empty() {
            return out;
        }
        // Producer-named watchers are served here from now on (semantics.md#processes).
        for (_, v, _) in &valid {
            for w in &v.watchers {
                self.notices().serve(w);
            }
        }
        let slots: Vec<usize> = valid.iter().map(|(i, _, _)| *i).collect();
        let begun = std::time::Instant::now();
        let size = valid.len() as u64;
        let (written, told) = match self.write_group(valid, also) {
            Ok(w) => w,
            Err(e) => {
                // BEGIN, the head locks or COMMIT failed: nothing of the group is in, and each
                // record fails as it would have alone.
                for i in slots {
                    out[i] = Err(copy(&e));
                }
                return out;
            }
        };
        let m = &self.delivery.metrics;
        m.since(Hist::Commit, begun);
        m.value(Hist::GroupSize, size);
        let mut told = told;
        let mut opened = Vec::new();
        let mut wakes = Vec::new();
        let mut prune_at = None;
        for (i, now, r) in written {
            out[i] = match r {
                Ok(Some(w)) => {
                    self.pg.faults().floor.saw(w.event.sequence);
                    // The notices opened so far are queued before a child_spawned's reseed
                    // drops theirs (`enqueue`): the queue, the wakes and the listener's
                    // notices are those of the group's events recorded one by one.
                    if !w.reseeded.is_empty() && !opened.is_empty() {
                        wakes
                            .extend(self.queue_opened(&std::mem::take(&mut opened), told.as_mut()));
                    }
                    self.enqueue(&w);
                    if w.fresh {
                        prune_at = Some(now);
                    }
                    opened.extend(w.pending);
                    Ok(Some(w.event))
                }
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            };
        }
        wakes.extend(self.queue_opened(&opened, told.as_mut()));
        self.delivery.wake_all(wakes);
        if let Some(now) = prune_at {
            self.maybe_prune_in_background(now);
        }
        out
    }

    /// The group's transaction, again after a lost connection once connected (the writer
    /// thread waits for the server, `outage.rs`), found out rather than redone when its
    /// `COMMIT` was in doubt (`in_doubt.rs`); with the commit, the hint and the lease read of
    /// the notices it opened, and what they were told.
    fn write_group(
        &self,
        valid: Vec<(usize, ValidEvent, i64)>,
        also: Also<'_>,
    ) -> Result<(Vec<group::WrittenItem>, Option<Told>)> {
        let mut doubt = None;
        let mut first_loss: Option<std::time::Instant> = None;
        loop {
            match self.write_group_once(valid.clone(), also, doubt.take()) {
                Attempt::Done(written, told) => return Ok((written, told)),
                Attempt::Failed(e) => return Err(e),
                Attempt::Lost(e, d) => {
                    // A server that takes connections and keeps losing them: the window bounds
                    // this call's attempts too.
                    let outage = &self.pg.faults().outage;
                    let since = *first_loss.get_or_insert_with(std::time::Instant::now);
                    if !outage.rides() || since.elapsed() >= outage.window() {
                        return Err(settle(e, d.as_ref()));
                    }
                    doubt = d;
                }
            }
        }
    }

    /// One attempt at the group's transaction: the fast path ([`batch::write`]), or, when the
    /// server refused a row or a host raced it, the group again event by event
    /// ([`write_each_alone`]). A group in `doubt` is looked up first.
    fn write_group_once(
        &self,
        valid: Vec<(usize, ValidEvent, i64)>,
        also: Also<'_>,
        doubt: Option<InDoubt>,
    ) -> Attempt {
        let rules = self.rules;
        let tail = |written: &[group::WrittenItem]| {
            let mut pending = Vec::new();
            let mut reseeded = Vec::new();
            let mut sessions = Vec::new();
            for w in written
                .iter()
                .filter_map(|(_, _, r)| r.as_ref().ok()?.as_ref())
            {
                pending.extend(w.pending.iter().cloned());
                let target = w.event.session_key.as_str();
                reseeded.extend(w.reseeded.iter().map(|r| (r.as_str(), target)));
                if w.fresh {
                    sessions.push(target);
                }
            }
            self.notices().tail(&pending, &reseeded, &sessions)
        };
        let tail_of: Option<TailOf<'_>> = match self.notices().is_on() {
            true => Some(&tail),
            false => None,
        };
        let pg = Arc::clone(&self.pg);
        let target = pg.target();
        let schema = pg.schema();
        // Waits through an outage, up to the window.
        let mut guard = match block(pg.lock()) {
            Ok(g) => g,
            Err(e) => return Attempt::Failed(settle(e, doubt.as_ref())),
        };
        let session = match guard.session() {
            Ok(s) => s,
            Err(e) => return Attempt::Failed(e),
        };
        let (client, _, in_tx) = session.parts();
        if let Some(orphan) = pg.faults().take_orphan() {
            // A transaction a lost connection left open holds the heads' locks until the
            // server notices the loss (hours, on a cut link): end it. Best effort: the look-up
            // and the write wait for those locks in any case.
            let _ = block(orphan.terminate(client));
        }
        if *in_tx {
            // A call that unwound mid-transaction left it open: end it before anything else.
            if let Err(e) = block(client.batch_execute("ROLLBACK")) {
                return Attempt::Failed(target.error(&e));
            }
            *in_tx = false;
        }
        if let Some(d) = doubt {
            match block(d.committed(client, schema)) {
                Ok(true) => return Attempt::Done(d.written, None),
                Ok(false) => {}
                Err(e) => {
                    let e = target.error(&e);
                    if waits_for(&e) {
                        guard.drop_lost(false);
                        return Attempt::Lost(e, Some(d));
                    }
                    return Attempt::Failed(settle(e, Some(&d)));
                }
            }
        }
        let Ok(session) = guard.session() else {
            return Attempt::Failed(Error::db(DbFailure::Connection, "not connected"));
        };
        let (client, statements, in_tx) = session.parts();
        let client: &tokio_postgres::Client = client;
        *in_tx = true;
        let fast = batch::write(
            client,
            statements,
            schema,
            target,
            rules,
            valid.clone(),
            Extra { also, tail_of },
        );
        let result = match fast {
            Ok(w) => Ok(w),
            Err(Fallback::Again(e)) => {
                let _ = block(client.batch_execute("ROLLBACK"));
                // Waiting longer (a lock, the statement timeout) or a lost connection would
                // fail again: only a refused row or a race is written again event by event.
                let retry = !matches!(
                    e,
                    Error::Db {
                        kind: DbFailure::Busy | DbFailure::Connection,
                        ..
                    }
                );
                if client.is_closed() || !retry {
                    Err(Fallback::Fail(e))
                } else {
                    write_each_alone(
                        client,
                        statements,
                        schema,
                        target,
                        rules,
                        valid,
                        Extra { also, tail_of },
                    )
                }
            }
            Err(other) => Err(other),
        };
        if result.is_err() {
            // Whatever was sent, nothing of the group stays (unless its COMMIT went through).
            let _ = block(client.batch_execute("ROLLBACK"));
        }
        *in_tx = false;
        match result {
            Ok((written, told)) => Attempt::Done(written, told),
            Err(Fallback::Doubt(written, e)) => {
                guard.drop_lost(true);
                Attempt::Lost(e, Some(InDoubt::new(written)))
            }
            Err(Fallback::Fail(e) | Fallback::Again(e)) => {
                // The connection may be gone: the next attempt (or call) starts afresh.
                if waits_for(&e) {
                    guard.drop_lost(true);
                    Attempt::Lost(e, None)
                } else {
                    guard.forget_if_closed();
                    Attempt::Failed(e)
                }
            }
        }
    }

    /// Brings the queue in line with a committed event: a reseeded cursor loses its notice
    /// (the opened ones are queued by [`PgStore::after_commit`]).
    /// Queues committed notices where their watchers are served: by what the hint and the
    /// lease read sent in the commit's pipeline were `told` (postgres/catchup.rs), else in a
    /// round trip of their own after it.
    fn queue_opened(&self, opened: &[Pending], told: Option<&mut Told>) -> Vec<Wake> {
        match told {
            Some(told) => self.notices().settle(opened, told),
            None => self.after_commit(opened),
        }
    }

    fn enqueue(&self, w: &Written) {
        crate::record::count_written(&self.delivery, w);
    }
}

/// The write rules of a store's options.
pub(crate) fn rules_of(opts: &crate::options::Options) -> WriteRules {
    WriteRules {
        notify_kinds: opts.notify_kinds,
        seed_resets_provenance: opts.seed_resets_provenance,
    }
}

/// The group event by event over [`PgRows`], each in its own savepoint (none for a group of
/// one), so each event gets its own answer; the heads locked first as on the fast path; what
/// `tail_of` asks sent right after the commit, as on the fast path.
fn write_each_alone(
    client: &tokio_postgres::Client,
    statements: &mut std::collections::HashMap<&'static str, tokio_postgres::Statement>,
    schema: crate::options::SchemaName,
    target: &crate::postgres::conn::Target,
    rules: WriteRules,
    valid: Vec<(usize, ValidEvent, i64)>,
    Extra { also, tail_of }: Extra<'_>,
) -> std::result::Result<(Vec<group::WrittenItem>, Option<Told>), Fallback> {
    let single = valid.len() == 1;
    let (keys, agents): (Vec<String>, Vec<String>) = heads_of(valid.iter().map(|(_, v, _)| v))
        .into_iter()
        .unzip();
    let now = valid.iter().map(|(_, _, now)| *now).max().unwrap_or(0);
    let mut rows = PgRows::new(client, statements, schema, target, single);
    let lock = rows.prepared(LOCK_HEADS).map_err(Fallback::Fail)?;
    let prepared = tail_of.map(|_| Prepared::on_rows(&mut rows));
    // BEGIN and the head locks in one round trip.
    rows.hold_simple(BEGIN);
    let locked = rows
        .send(client.query(&lock, &[&keys, &agents, &now]))
        .map_err(Fallback::Fail)?;
    let created = locked
        .iter()
        .any(|r| r.try_get::<_, bool>(2).unwrap_or(false));
    let written = group::write_each(&mut rows, rules, valid);
    if created {
        rows.hold(
            DROP_EMPTY_HEADS,
            vec![Box::new(keys.clone()), Box::new(agents.clone())],
        )
        .map_err(Fallback::Fail)?;
    }
    // A group of one has no savepoint: its failure rolls the transaction back.
    let (sql, tail) = if single && written.iter().any(|(_, _, r)| r.is_err()) {
        (ROLLBACK, None)
    } else {
        (COMMIT, tail_of.and_then(|f| f(&written)).zip(prepared))
    };
    if let Some(also) = also.filter(|_| wrote_one(&written)) {
        also(&mut rows).map_err(Fallback::Fail)?;
    }
    if sql == ROLLBACK {
        let told = batch::commit_with(&mut rows, client, sql, tail).map_err(Fallback::Fail)?;
        return Ok((written, told));
    }
    match batch::commit_or_doubt(&mut rows, client, tail, written) {
        Err(Fallback::Again(e)) => Err(Fallback::Fail(e)),
        other => other,
    }
}

/// PostgreSQL's `text` cannot hold U+0000 (docs/postgres.md#differences): a record with one in
/// any text it stores is refused before it is sent, `ERR_INVALID_ARG` naming the field, so it
/// fails as any invalid record does (best-effort: `null` and one `onError`). A payload's
/// U+0000 is stored escaped in its JSON and is fine.
fn no_nul(v: ValidEvent) -> Result<ValidEvent> {
    let e = &v.event;
    let fields = [
        ("sessionKey", Some(e.session_key.as_str())),
        ("agentId", Some(e.agent_id.as_str())),
        ("actorId", e.actor_id.as_deref()),
        ("runId", e.run_id.as_deref()),
        ("sessionId", e.session_id.as_deref()),
        ("summary", Some(e.summary.as_str())),
        ("dedupeKey", v.dedupe_key.as_deref()),
    ];
    let nul = |t: &str| t.contains('\0');
    if let Some((name, _)) = fields.iter().find(|(_, t)| t.is_some_and(nul)) {
        return Err(Error::invalid(format!(
            "{name} holds U+0000, which a PostgreSQL store cannot keep"
        )));
    }
    if v.watchers.iter().any(|w| nul(w)) {
        return Err(Error::invalid(
            "watchers holds U+0000, which a PostgreSQL store cannot keep",
        ));
    }
    if v.watcher_scopes.iter().any(|(k, s)| nul(k) || nul(s)) {
        return Err(Error::invalid(
            "watcherScopes holds U+0000, which a PostgreSQL store cannot keep",
        ));
    }
    Ok(v)
}
