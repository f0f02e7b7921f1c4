//! The writes that seed or move cursors: a spawn's seed, a material event's update, a
//! producer-named watcher's first cursor, and `watch` (semantics.md#recording-fan-out,
//! semantics.md#cursors-seed, semantics.md#cursors-material, semantics.md#cursors-scope).

use std::sync::Arc;

use super::{Pending, Provenance};
use crate::error::Result;
use crate::rows::Rows;
use crate::rules::Positions;

/// How `watch` registers a cursor (semantics.md#cursors-seed, semantics.md#cursors-scope).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchOptions {
    /// The provenance of a new or re-seeded cursor; `explicit` also promotes an existing one.
    pub provenance: Provenance,
    /// The watcher scope to bind the cursor to. `None` leaves an existing cursor's scope alone.
    pub scope: Option<String>,
    /// Whether a re-register of an existing cursor (same scope) refreshes its `updated_at`.
    pub refresh: bool,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            provenance: Provenance::Explicit,
            scope: None,
            refresh: true,
        }
    }
}

/// Spawn edge (semantics.md#recording-fan-out): L = N = M = `sequence`. The provenance is
/// kept, or set to `explicit` when `reset_provenance` (a new cursor is `explicit`); `scope`,
/// when given, binds the cursor, otherwise an existing cursor keeps its own. Returns true when a
/// cursor existed (its pending notice, if any, must be dropped).
///
/// The spawn names the pair explicitly, so an inert row of the pair (semantics.md#storage) is
/// replaced by the seeded cursor: every column is written, an unknown provenance becomes
/// `explicit`.
pub(crate) fn seed<R: Rows + ?Sized>(
    rows: &mut R,
    watcher: &str,
    target: &str,
    sequence: i64,
    scope: Option<&str>,
    reset_provenance: bool,
    now: i64,
) -> Result<bool> {
    let stored = rows.stored_provenance(watcher, target)?;
    let provenance = seeded_provenance(stored.flatten(), reset_provenance);
    let at = Positions::seeded(sequence);
    rows.put_cursor(watcher, target, at, provenance, scope, now)?;
    Ok(stored.is_some())
}

/// The provenance a spawn's seed writes (semantics.md#recording-fan-out): the cursor's own
/// (`stored`, when it has one the store knows), unless `reset` (see
/// [`crate::Options::seed_resets_provenance`]) or there is none: then `explicit`.
fn seeded_provenance(stored: Option<Provenance>, reset: bool) -> Provenance {
    match stored {
        Some(p) if !reset => p,
        _ => Provenance::Explicit,
    }
}

/// Material event `sequence` on `target` (semantics.md#cursors-material) for every cursor on it,
/// except the one whose watcher caused it (self-suppression) and those of the watchers in
/// `skip` (bound to another scope than the record gave them). Returns the cursors whose notice
/// is pending after it. Inert rows (semantics.md#storage) are left as they are.
pub(crate) fn material_update<R: Rows + ?Sized>(
    rows: &mut R,
    target: &Arc<str>,
    sequence: i64,
    actor_id: Option<&str>,
    skip: &[&str],
    now: i64,
) -> Result<Vec<Pending>> {
    let mut moved = rows.material_update(target, sequence, actor_id, skip, now)?;
    moved.retain(|p| p.notified != p.last_seen);
    Ok(moved)
}

/// A material event for a producer-named watcher that has no cursor yet: L = 0, N = M = S,
/// `explicit`, bound to `scope` when given. Returns the pending cursor when one was inserted.
pub(crate) fn material_insert<R: Rows + ?Sized>(
    rows: &mut R,
    watcher: &str,
    target: &Arc<str>,
    sequence: i64,
    scope: Option<&str>,
    now: i64,
) -> Result<Option<Pending>> {
    let at = Positions::named_at(sequence);
    let provenance = Provenance::Explicit;
    let inserted = rows.insert_cursor(watcher, target, at, provenance, scope, now)?;
    Ok((inserted && at.is_pending()).then(|| Pending {
        watcher: watcher.to_owned(),
        target: Arc::clone(target),
        last_seen: at.last_seen,
        notified: at.notified,
        provenance,
        scope: scope.map(Arc::from),
    }))
}

/// `watch` (semantics.md#cursors-seed, semantics.md#cursors-scope) of `target`, whose own
/// agent is `agent`: seeds at the target's head when there is no cursor, or when `o.scope` is
/// given and the cursor is bound to another scope (or none); otherwise refreshes `updated_at` (unless `o.refresh` is false) and promotes `ambient-group`
/// to `explicit` (never the reverse). Returns true when it seeded: a notice the pair had
/// pending must then be dropped. The call names the pair explicitly, so an inert row of the
/// pair (semantics.md#storage) is replaced by a seeded cursor, as if there were none.
pub(crate) fn watch<R: Rows + ?Sized>(
    rows: &mut R,
    watcher: &str,
    target: &str,
    agent: &str,
    o: &WatchOptions,
    now: i64,
) -> Result<bool> {
    if let Some(c) = super::live(rows, watcher, target)? {
        if o.scope.is_none() || c.scope == o.scope {
            let provenance = match o.provenance {
                Provenance::Explicit => Provenance::Explicit,
                Provenance::AmbientGroup => c.provenance,
            };
            let updated_at = if o.refresh { now } else { c.updated_at };
            if (provenance, updated_at) != (c.provenance, c.updated_at) {
                rows.touch_cursor(watcher, target, provenance, updated_at)?;
            }
            return Ok(false);
        }
    }
    let head = rows.head(target, agent)?.last_sequence;
    let at = Positions::seeded(head);
    rows.put_cursor(watcher, target, at, o.provenance, o.scope.as_deref(), now)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_keeps_a_known_provenance_unless_reset() {
        let ambient = Some(Provenance::AmbientGroup);
        assert_eq!(seeded_provenance(ambient, false), Provenance::AmbientGroup);
        assert_eq!(seeded_provenance(ambient, true), Provenance::Explicit);
        assert_eq!(seeded_provenance(None, false), Provenance::Explicit);
        assert_eq!(seeded_provenance(None, true), Provenance::Explicit);
    }
}
