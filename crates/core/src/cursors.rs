//! Watch cursors (semantics.md#recording-fan-out, semantics.md#cursors): L (acknowledged), N (frozen notified position),
//! M (latest material event) per (watcher, target). The rows are the truth; the queue is a
//! cache of the ones with N != L.

use std::sync::Arc;

use crate::error::Result;
use crate::keys;
pub use crate::rows::{Cursor, Pending, Provenance};
use crate::rows::{Expired, Rows};
use crate::rules::Positions;

mod write;
pub use write::WatchOptions;
pub(crate) use write::{material_insert, material_update, seed, watch};

/// Reads one cursor, if it is live: an inert row (semantics.md#storage) reads as none, and so
/// does a pair that cannot hold a cursor (the same key twice, a key that is not watchable).
pub(crate) fn live<R: Rows + ?Sized>(
    rows: &mut R,
    watcher: &str,
    target: &str,
) -> Result<Option<Cursor>> {
    if watcher == target || !keys::is_watchable(watcher) || !keys::is_watchable(target) {
        return Ok(None);
    }
    rows.cursor(watcher, target)
}

/// True when a live cursor (semantics.md#storage) targets `target` (`onlyIfWatched`,
/// semantics.md#api); never for a target that is not watchable.
pub(crate) fn is_watched<R: Rows + ?Sized>(rows: &mut R, target: &str) -> Result<bool> {
    Ok(keys::is_watchable(target) && rows.is_watched(target)?)
}

/// The outcome of acknowledging one pending notice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acked {
    /// L before: the position the consumed notice named.
    pub old_last_seen: i64,
    /// The cursor after: a fresh notice is pending when `notified != last_seen`.
    pub after: Pending,
}

/// Acknowledge (semantics.md#cursors-acknowledge): L = old N; N = max(M, old N). A cursor with nothing pending (or none at
/// all, or an inert row, semantics.md#storage) is left alone and gives `None`. With `scope`, a cursor
/// bound to another scope (or to none) is left alone too (semantics.md#cursors-scope).
///
/// With `through` (the watcher has read the target up to that sequence), a pending cursor
/// whose material events are all read (max(M, N) <= through) becomes L = N = max(M, N):
/// nothing is pending. A partial read (L < through < max(M, N)) sets L = through and
/// N = max(M, N): one notice stays pending, naming `through`. A `through` at or below L has
/// read nothing new and leaves the cursor alone (`None`).
pub(crate) fn acknowledge<R: Rows + ?Sized>(
    rows: &mut R,
    watcher: &str,
    target: &str,
    scope: Option<&str>,
    through: Option<i64>,
    now: i64,
) -> Result<Option<Acked>> {
    let Some(c) = live(rows, watcher, target)? else {
        return Ok(None);
    };
    if scope.is_some_and(|s| c.scope.as_deref() != Some(s)) {
        return Ok(None);
    }
    let at = Positions {
        last_seen: c.last_seen,
        notified: c.notified,
        material: c.material,
    };
    let Some(after) = at.after_acknowledge(through) else {
        return Ok(None);
    };
    let (new_l, new_n) = (after.last_seen, after.notified);
    rows.set_positions(watcher, target, new_l, new_n, now)?;
    Ok(Some(Acked {
        old_last_seen: c.last_seen,
        after: Pending {
            watcher: watcher.to_owned(),
            target: Arc::from(target),
            last_seen: new_l,
            notified: new_n,
            provenance: c.provenance,
            scope: c.scope.map(Arc::from),
        },
    }))
}

/// Watchers with material history past their acknowledged position (sweep candidates),
/// sorted.
pub(crate) fn watchers_behind<R: Rows + ?Sized>(rows: &mut R) -> Result<Vec<String>> {
    rows.watchers_behind()
}

/// Sweep (semantics.md#cursors-sweep): re-freezes N = M ([`Positions::refrozen`]) on every
/// live cursor with M > L, for all watchers or for `only`. Returns the pending cursors in
/// ascending order of N, then watcher, then target. Inert rows (semantics.md#storage) are
/// neither written nor returned.
pub(crate) fn refreeze<R: Rows + ?Sized>(
    rows: &mut R,
    only: Option<&[String]>,
) -> Result<Vec<Pending>> {
    let mut out = rows.refreeze(only)?;
    // No two cursors share a watcher and a target: an unstable sort gives the same order,
    // without the stable sort's scratch copy of every row.
    out.sort_unstable_by(|a, b| {
        a.notified
            .cmp(&b.notified)
            .then_with(|| a.watcher.cmp(&b.watcher))
            .then_with(|| a.target.cmp(&b.target))
    });
    Ok(out)
}

/// The watcher's live pending cursors (N != L), in ascending order of N.
pub(crate) fn pending_of<R: Rows + ?Sized>(rows: &mut R, watcher: &str) -> Result<Vec<Pending>> {
    rows.pending_of(watcher)
}

/// Every live cursor on `target`, pending or not (`notified != last_seen` tells), by watcher.
pub(crate) fn on_target<R: Rows + ?Sized>(rows: &mut R, target: &str) -> Result<Vec<Pending>> {
    rows.on_target(target)
}

/// Deletes one cursor (`unwatch`). Returns true if it existed. An inert row of the pair
/// (semantics.md#storage) is no cursor: it is left for retention, and gives false.
pub(crate) fn delete<R: Rows + ?Sized>(rows: &mut R, watcher: &str, target: &str) -> Result<bool> {
    rows.delete_cursor(watcher, target)
}

/// Deletes the cursors where `key` is the watcher (a reset, semantics.md#retention).
pub(crate) fn delete_watcher<R: Rows + ?Sized>(rows: &mut R, key: &str) -> Result<usize> {
    rows.delete_cursors_of(key)
}

/// Deletes the cursors where `key` is the target.
pub(crate) fn delete_target<R: Rows + ?Sized>(rows: &mut R, key: &str) -> Result<usize> {
    rows.delete_cursors_on(key)
}

/// Cursor rows one expiry transaction looks at: a few milliseconds of scanning, so a large
/// table is expired without holding the connection long.
pub const EXPIRE_CHUNK: i64 = 5000;

/// Deletes the cursors not updated since `cutoff` (semantics.md#retention) among one chunk of
/// `span` rows from `after` (0 first); see [`Rows::expire_cursors`].
pub(crate) fn expire_chunk<R: Rows + ?Sized>(
    rows: &mut R,
    cutoff: i64,
    after: i64,
    span: i64,
) -> Result<Expired> {
    rows.expire_cursors(cutoff, after, span)
}
