//! Group commit (semantics.md#promise-api): records queued together are written in one
//! transaction, each event inside its own savepoint, so every event is processed exactly as
//! it would be alone (dedupe, cursors, notices, wakes) and a failing one leaves the others in.
//! An engine may first try the group without savepoints ([`write_all`]) and fall back to
//! [`write_each`] in a fresh transaction only when a record of it fails.
//! Notices are queued and wakes scheduled only once the whole group has committed. The flow
//! over [`Rows`] is shared by both engines; each runs it in its own transaction
//! (`sqlite/recorder.rs`, `postgres/record.rs`).

use crate::cursors;
use crate::error::{Error, Result};
use crate::event::{RecordInput, ValidEvent};
use crate::record::{self, WriteRules, Written};
use crate::rows::Rows;

/// One record of a group: the input and the caller's clock at the call.
pub type GroupItem = (RecordInput, i64);

/// One event of a group, written or not: its slot in the group, its clock, the outcome.
pub(crate) type WrittenItem = (usize, i64, Result<Option<Written>>);

/// The writes of a group's valid events (slot, event, clock) in order inside the caller's open
/// transaction on `rows`, each in its own savepoint: a failing one leaves the others in.
pub(crate) fn write_each<R: Rows + ?Sized>(
    rows: &mut R,
    rules: WriteRules,
    valid: Vec<(usize, ValidEvent, i64)>,
) -> Vec<WrittenItem> {
    let mut written = Vec::with_capacity(valid.len());
    for (i, v, now) in valid {
        written.push((
            i,
            now,
            savepoint(rows, |r| write_if_watched(r, rules, v, now)),
        ));
    }
    written
}

/// The writes of a group's valid events (slot, event, clock) in order inside the caller's open
/// transaction on `rows`, with no savepoint: every result when none of them failed, else the
/// first error, the transaction then holding part of a record's writes (the caller rolls it
/// back). `valid` is left whole for a [`write_each`] of the same group after that rollback.
pub(crate) fn write_all<R: Rows + ?Sized>(
    rows: &mut R,
    rules: WriteRules,
    valid: &[(usize, ValidEvent, i64)],
) -> Result<Vec<WrittenItem>> {
    let mut written = Vec::with_capacity(valid.len());
    for (i, v, now) in valid {
        let w = write_if_watched(rows, rules, v.clone(), *now)?;
        written.push((*i, *now, Ok(w)));
    }
    Ok(written)
}

/// [`record::write`], or `None` when `onlyIfWatched` finds nobody watching (read inside
/// the group's transaction: it sees the cursors of the group's earlier records).
fn write_if_watched<R: Rows + ?Sized>(
    rows: &mut R,
    rules: WriteRules,
    v: ValidEvent,
    now: i64,
) -> Result<Option<Written>> {
    if v.only_if_watched
        && v.watchers.is_empty()
        && !cursors::is_watched(rows, &v.event.session_key)?
    {
        return Ok(None);
    }
    record::write(rows, rules, v, now).map(Some)
}

/// Runs `f` inside a savepoint of the open transaction: on failure its writes are rolled back
/// and the transaction goes on without them.
fn savepoint<R: Rows + ?Sized, T>(rows: &mut R, f: impl FnOnce(&mut R) -> Result<T>) -> Result<T> {
    rows.savepoint()?;
    match f(rows) {
        Ok(v) => {
            rows.release_savepoint()?;
            Ok(v)
        }
        Err(e) => {
            rows.rollback_to_savepoint()?;
            Err(e)
        }
    }
}

/// An error equal to `e` in code and message, for each record of a group that failed as one.
pub(crate) fn copy(e: &Error) -> Error {
    match e {
        Error::InvalidArg(m) => Error::InvalidArg(m.clone()),
        Error::Closed => Error::Closed,
        Error::Db { kind, message } => Error::db(*kind, message.clone()),
        Error::Io(io) => Error::Io(std::io::Error::new(io.kind(), io.to_string())),
        Error::UpstreamParse(m) => Error::UpstreamParse(m.clone()),
        Error::NotSqlite(m) => Error::NotSqlite(m.clone()),
        Error::FileShared(m) => Error::FileShared(m.clone()),
        Error::ForeignSchema(m) => Error::ForeignSchema(m.clone()),
        Error::ImportDiverged(m) => Error::ImportDiverged(m.clone()),
        Error::SourceChanged(m) => Error::SourceChanged(m.clone()),
        Error::AsyncOnly(m) => Error::AsyncOnly(m.clone()),
        Error::OutcomeUnknown(m) => Error::OutcomeUnknown(m.clone()),
        Error::PoolerMode(m) => Error::PoolerMode(m.clone()),
    }
}
