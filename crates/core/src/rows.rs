//! The storage seam (docs/architecture.md, "The storage seam"): the row operations of one
//! write transaction, as a trait a store implements. The rules that decide what to write
//! (which cursors move and to which L/N/M, a seed's and a refresh's provenance, scope binding,
//! self-suppression, the dedupe outcome, expiry) are decided in storage-free Rust
//! (`rules.rs`, `cursors.rs`, `record.rs`); a [`Rows`] implementation only reads and writes
//! the rows it is told to. The SQLite store's implementation is `sqlite/rows.rs`.
//!
//! Every method runs inside the caller's open write transaction and is one or a few
//! statements on any SQL store (on PostgreSQL: `INSERT … ON CONFLICT`, `UPDATE … RETURNING`,
//! `SELECT … FOR UPDATE`, savepoints). A method's contract names no feature of one store.
//!
//! A row the store would never write itself (semantics.md#storage, "inert rows": a position
//! that is not an integer in range, an unknown provenance, a key that is not agent-qualified
//! text) is no cursor: the read methods never return it and the update methods leave it as
//! it is. A store whose schema cannot hold such rows has nothing to filter.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::event::{StateEvent, ValidEvent};
use crate::log::Head;
use crate::rules::Positions;

/// Where a cursor came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provenance {
    /// A spawn edge or a deliberate `watch`: main-like watchers are woken.
    Explicit,
    /// Registered for a group; notices wait for the watcher's next turn, no wake.
    AmbientGroup,
}

impl Provenance {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Provenance::Explicit => "explicit",
            Provenance::AmbientGroup => "ambient-group",
        }
    }

    /// Parses a stored or given name.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "explicit" => Ok(Provenance::Explicit),
            "ambient-group" => Ok(Provenance::AmbientGroup),
            _ => Err(Error::invalid(
                "provenance must be 'explicit' or 'ambient-group'",
            )),
        }
    }
}

/// One cursor row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The watching session.
    pub watcher: String,
    /// The watched session.
    pub target: String,
    /// L.
    pub last_seen: i64,
    /// N.
    pub notified: i64,
    /// M.
    pub material: i64,
    /// Where it came from.
    pub provenance: Provenance,
    /// Last seed, material update, acknowledge or re-watch (clock ms).
    pub updated_at: i64,
    /// The watcher scope it is bound to (`watcher_store_path`), if any (semantics.md#cursors-scope).
    pub scope: Option<String>,
}

impl Cursor {
    /// The cursor a stored row of `(watcher, target)` is, at `at`, or `None` for an inert
    /// row (semantics.md#storage): a position below 0 or above `head`, the target's version.
    pub(crate) fn checked(
        (watcher, target): (&str, &str),
        at: Positions,
        provenance: Provenance,
        updated_at: i64,
        scope: Option<String>,
        head: i64,
    ) -> Option<Self> {
        let (l, n, m) = (at.last_seen, at.notified, at.material);
        if l.min(n).min(m) < 0 || l.max(n).max(m) > head {
            return None;
        }
        Some(Cursor {
            watcher: watcher.to_owned(),
            target: target.to_owned(),
            last_seen: l,
            notified: n,
            material: m,
            provenance,
            updated_at,
            scope,
        })
    }
}

/// A cursor whose notice is pending (N != L) after a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The watcher.
    pub watcher: String,
    /// The target, shared by the cursors of one change (the notice queue keeps it as is).
    pub target: Arc<str>,
    /// L, the position the notice names.
    pub last_seen: i64,
    /// N.
    pub notified: i64,
    /// Whether a main-like watcher is woken for it.
    pub provenance: Provenance,
    /// The cursor's watcher scope, if any; non-text reads as none.
    pub scope: Option<Arc<str>>,
}

/// The outcome of inserting an event (semantics.md#recording-dedupe).
#[derive(Debug)]
pub enum Inserted {
    /// A new row with this sequence.
    New(i64),
    /// The dedupe key was taken: the first row with it.
    Duplicate(StateEvent),
}

/// A (watcher, target) pair.
pub type Pair = (String, String);

/// What one call of [`Rows::expire_cursors`] deleted.
#[derive(Debug, Default)]
pub struct Expired {
    /// The pairs deleted whose keys are text (only those can have a queued notice).
    pub pairs: Vec<Pair>,
    /// How many rows it deleted in all.
    pub deleted: u64,
    /// Where the next call resumes, while rows remain past this one; `None` when done.
    pub next: Option<i64>,
}

/// The row operations of one write transaction. The caller opens and commits the transaction;
/// each method runs inside it, and a failure of any leaves the transaction to be rolled back
/// (or rolled back to the last [`Rows::savepoint`]).
pub trait Rows {
    /// Inserts the event with the next sequence of the store, unless its dedupe key (when it
    /// has one) is already taken: then nothing is written and the first row with that key is
    /// returned. Sequences only grow and are never reused, even after a delete or a prune.
    fn insert_event(&mut self, v: &ValidEvent) -> Result<Inserted>;

    /// Moves the head of `(session_key, agent_id)` to `sequence` and its `updated_at` to `now`,
    /// creating it (with a pruned watermark of 0) when there is none. Never lowers
    /// `last_sequence`.
    fn bump_head(
        &mut self,
        session_key: &str,
        agent_id: &str,
        sequence: i64,
        now: i64,
    ) -> Result<()>;

    /// Reads the live cursor of `(watcher, target)`, if there is one (the keys are checked by
    /// the caller: distinct, both watchable).
    fn cursor(&mut self, watcher: &str, target: &str) -> Result<Option<Cursor>>;

    /// Whether a row of `(watcher, target)` exists, live or not, and its provenance when it is
    /// one the store knows: `None` for no row, `Some(None)` for a row with an unknown
    /// provenance.
    fn stored_provenance(
        &mut self,
        watcher: &str,
        target: &str,
    ) -> Result<Option<Option<Provenance>>>;

    /// Writes the cursor of `(watcher, target)` whole, inserting it or replacing the row there
    /// is (live or not): the positions `at`, `provenance`, `updated_at = now`, and the scope
    /// when `scope` is given (a row that exists keeps its own scope otherwise).
    fn put_cursor(
        &mut self,
        watcher: &str,
        target: &str,
        at: Positions,
        provenance: Provenance,
        scope: Option<&str>,
        now: i64,
    ) -> Result<()>;

    /// Inserts the cursor of `(watcher, target)` at `at` with `provenance`, bound to `scope`
    /// when given, unless a row of the pair exists (live or not): then nothing is written.
    /// Returns true when it inserted.
    fn insert_cursor(
        &mut self,
        watcher: &str,
        target: &str,
        at: Positions,
        provenance: Provenance,
        scope: Option<&str>,
        now: i64,
    ) -> Result<bool>;

    /// A material event at `sequence` on `target`: every live cursor on `target` but the one
    /// of `except` (when given) and those of the watchers in `skip` gets
    /// [`Positions::after_material`] (N through [`crate::rules::notified_after_material`], M =
    /// `sequence`) and `updated_at = now`. `sequence` is the target's new head. Returns every
    /// cursor it moved, as it is after the update, pending or not, in no particular order.
    fn material_update(
        &mut self,
        target: &Arc<str>,
        sequence: i64,
        except: Option<&str>,
        skip: &[&str],
        now: i64,
    ) -> Result<Vec<Pending>>;

    /// True when a live cursor targets `target` (the caller checks that `target` is
    /// watchable).
    fn is_watched(&mut self, target: &str) -> Result<bool>;

    /// The head of `(session_key, agent_id)`; zeroes when there is none.
    fn head(&mut self, session_key: &str, agent_id: &str) -> Result<Head>;

    /// Sets L and N of the cursor of `(watcher, target)` and its `updated_at` to `now`; M is
    /// left as it is.
    fn set_positions(
        &mut self,
        watcher: &str,
        target: &str,
        last_seen: i64,
        notified: i64,
        now: i64,
    ) -> Result<()>;

    /// Sets the provenance and `updated_at` of the cursor of `(watcher, target)`; its
    /// positions and scope are left as they are.
    fn touch_cursor(
        &mut self,
        watcher: &str,
        target: &str,
        provenance: Provenance,
        updated_at: i64,
    ) -> Result<()>;

    /// Deletes the live cursor of `(watcher, target)`; a row that is not live is left. Returns
    /// true when it deleted one.
    fn delete_cursor(&mut self, watcher: &str, target: &str) -> Result<bool>;

    /// Deletes every row (live or not) whose watcher is `key`. Returns how many.
    fn delete_cursors_of(&mut self, key: &str) -> Result<usize>;

    /// Deletes every row (live or not) whose target is `key`. Returns how many.
    fn delete_cursors_on(&mut self, key: &str) -> Result<usize>;

    /// Deletes the events and the head of `(session_key, agent_id)`.
    fn delete_events(&mut self, session_key: &str, agent_id: &str) -> Result<()>;

    /// The watchers with a live cursor whose M is past its L, distinct, in ascending order.
    fn watchers_behind(&mut self) -> Result<Vec<String>>;

    /// The watcher's live cursors with a pending notice (N ≠ L), in ascending order of N, then
    /// target.
    fn pending_of(&mut self, watcher: &str) -> Result<Vec<Pending>>;

    /// Every live cursor on `target`, pending or not, in ascending order of watcher.
    fn on_target(&mut self, target: &str) -> Result<Vec<Pending>>;

    /// The sweep's re-freeze: every live cursor whose M is past its L (of the watchers in
    /// `only` when given) gets [`Positions::refrozen`], written only where it moves N. Returns
    /// each such cursor as it is after it (pending, naming L), in no particular order.
    fn refreeze(&mut self, only: Option<&[String]>) -> Result<Vec<Pending>>;

    /// Deletes cursors not updated since `cutoff` (a row without a numeric `updated_at`
    /// counts as never updated), in chunks: a call deletes those among about `span` rows
    /// from resume point `after` (0 for the first call) and says where the next call resumes.
    /// A store may delete every such row in one call and answer `next: None`.
    fn expire_cursors(&mut self, cutoff: i64, after: i64, span: i64) -> Result<Expired>;

    /// Opens a savepoint inside the transaction (one per event of a group commit; never
    /// nested).
    fn savepoint(&mut self) -> Result<()>;

    /// Releases the savepoint: its writes stay in the transaction.
    fn release_savepoint(&mut self) -> Result<()>;

    /// Rolls the transaction back to the savepoint and releases it: the writes since it are
    /// gone and the transaction goes on.
    fn rollback_to_savepoint(&mut self) -> Result<()>;
}
