//! The writes that seed or move cursors: a spawn's seed, a material event's update, a
//! producer-named watcher's first cursor, and `watch` (semantics.md#recording-fan-out,
//! semantics.md#cursors-seed, semantics.md#cursors-material, semantics.md#cursors-scope).

use std::sync::Arc;

use rusqlite::{params, Connection};

use super::{Pending, Provenance};
use crate::error::Result;
use crate::rows::Rows;
use crate::rules::Positions;
use crate::sqlite::inert::{live_cursor, within_head};

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

/// `watch` (semantics.md#cursors-seed, semantics.md#cursors-scope): seeds at `head` when there
/// is no cursor, or when `o.scope` is given and the cursor is bound to another scope (or none);
/// otherwise refreshes `updated_at` (unless `o.refresh` is false) and promotes `ambient-group`
/// to `explicit` (never the reverse). Returns true when it seeded: a notice the pair had
/// pending must then be dropped. The call names the pair explicitly, so an inert row of the
/// pair (semantics.md#storage) is replaced by a seeded cursor, as if there were none.
pub fn watch(
    conn: &Connection,
    watcher: &str,
    target: &str,
    head: i64,
    o: &WatchOptions,
    now: i64,
) -> Result<bool> {
    let updated = conn
        .prepare_cached(concat!(
            "UPDATE session_watch_cursors SET \
                 updated_at = CASE WHEN ?5 THEN ?3 ELSE updated_at END, \
                 provenance = CASE WHEN ?4 = 'explicit' THEN 'explicit' ELSE provenance END \
                 WHERE watcher_session_key = ?1 AND target_session_key = ?2 \
                 AND (?6 IS NULL OR watcher_store_path IS ?6) AND ",
            live_cursor!(),
            within_head!()
        ))?
        .execute(params![
            watcher,
            target,
            now,
            o.provenance.as_str(),
            o.refresh,
            o.scope
        ])?;
    if updated == 1 {
        return Ok(false);
    }
    let at = Positions::seeded(head);
    conn.prepare_cached(
        "INSERT INTO session_watch_cursors (watcher_session_key, target_session_key, \
         last_seen_sequence, notified_sequence, material_sequence, provenance, updated_at, \
         watcher_store_path) VALUES (?1, ?2, ?3, ?7, ?8, ?4, ?5, ?6) \
         ON CONFLICT (watcher_session_key, target_session_key) DO UPDATE SET \
         last_seen_sequence = excluded.last_seen_sequence, notified_sequence = excluded.notified_sequence, \
         material_sequence = excluded.material_sequence, provenance = excluded.provenance, \
         updated_at = excluded.updated_at, watcher_store_path = coalesce(?6, watcher_store_path)",
    )?
    .execute(params![
        watcher,
        target,
        at.last_seen,
        o.provenance.as_str(),
        now,
        o.scope,
        at.notified,
        at.material
    ])?;
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
