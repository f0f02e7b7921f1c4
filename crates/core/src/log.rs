//! The durable signal log (semantics.md#storage, semantics.md#recording-dedupe, semantics.md#reading): a session's head, a read's
//! answer and the checks of its arguments. The SQLite store reads and deletes them in
//! `sqlite/log.rs`; a record writes them through [`crate::rows::Rows`].

use std::collections::vec_deque;

use crate::error::{Error, Result};
use crate::event::StateEvent;
use crate::read_event::{ChangeEvent, ForeignEvent};

/// The largest `limit` of `changesSince`, and its default.
pub const MAX_CHANGES: u32 = 200;
/// The largest integer a JS number holds exactly.
pub const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// A session's head: its state version and pruned watermark.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Head {
    /// The state version (largest sequence ever recorded), 0 when none.
    pub last_sequence: i64,
    /// The largest sequence lost to pruning, 0 when none.
    pub pruned_max_sequence: i64,
}

/// The result of `changesSince` (semantics.md#reading).
#[derive(Debug, Clone, PartialEq)]
pub struct Changes {
    /// The session's state version.
    pub state_version: i64,
    /// Every stored event row with `sequence > after`, ascending (semantics.md#reading-foreign-events).
    pub events: Vec<ChangeEvent>,
    /// More events exist past `limit`.
    pub truncated: bool,
    /// The smallest retained sequence, else head + 1 when head > 0, else 0.
    pub earliest_available_sequence: i64,
    /// `after` predates retained history, or a row of the range could not be answered.
    pub history_gap: bool,
}

/// One event of a lent answer ([`ChangesRef`]).
#[derive(Debug, Clone, Copy)]
pub enum EventRef<'a> {
    /// A row the store could have written.
    Stored(&'a StateEvent),
    /// A row the store would not write itself, in its safe form.
    Foreign(&'a ForeignEvent),
}

/// A `changesSince` answer lent for the length of a call
/// ([`crate::Store::changes_since_with`]): the events the store holds in memory are borrowed
/// where they are, not copied (a copy of 200 events is about 1,400 allocations).
#[derive(Debug, Clone)]
pub struct ChangesRef<'a> {
    /// The session's state version.
    pub state_version: i64,
    events: Lent<'a>,
    /// More events exist past `limit`.
    pub truncated: bool,
    /// As [`Changes::earliest_available_sequence`].
    pub earliest_available_sequence: i64,
    /// As [`Changes::history_gap`].
    pub history_gap: bool,
}

#[derive(Debug, Clone)]
enum Lent<'a> {
    /// From the read cache's tail of the session.
    Held(vec_deque::Iter<'a, StateEvent>),
    /// From a read of the store.
    Read(&'a [ChangeEvent]),
}

impl<'a> ChangesRef<'a> {
    /// An answer the caller owns, lent.
    pub fn of(c: &'a Changes) -> Self {
        ChangesRef {
            state_version: c.state_version,
            events: Lent::Read(&c.events),
            truncated: c.truncated,
            earliest_available_sequence: c.earliest_available_sequence,
            history_gap: c.history_gap,
        }
    }

    /// Events the store holds, with the rest of the answer.
    pub(crate) fn held(
        state_version: i64,
        events: vec_deque::Iter<'a, StateEvent>,
        truncated: bool,
        earliest_available_sequence: i64,
        history_gap: bool,
    ) -> Self {
        ChangesRef {
            state_version,
            events: Lent::Held(events),
            truncated,
            earliest_available_sequence,
            history_gap,
        }
    }

    /// How many events.
    pub fn len(&self) -> usize {
        match &self.events {
            Lent::Held(i) => i.len(),
            Lent::Read(e) => e.len(),
        }
    }

    /// True without events.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The events, ascending.
    pub fn events(&self) -> EventRefs<'a> {
        EventRefs(self.events.clone())
    }

    /// The answer, owned (the events copied).
    pub fn to_owned(&self) -> Changes {
        Changes {
            state_version: self.state_version,
            events: self
                .events()
                .map(|e| match e {
                    EventRef::Stored(e) => ChangeEvent::Stored(e.clone()),
                    EventRef::Foreign(f) => ChangeEvent::Foreign(f.clone()),
                })
                .collect(),
            truncated: self.truncated,
            earliest_available_sequence: self.earliest_available_sequence,
            history_gap: self.history_gap,
        }
    }
}

/// The events of a [`ChangesRef`], ascending.
#[derive(Debug, Clone)]
pub struct EventRefs<'a>(Lent<'a>);

impl<'a> Iterator for EventRefs<'a> {
    type Item = EventRef<'a>;

    fn next(&mut self) -> Option<EventRef<'a>> {
        match &mut self.0 {
            Lent::Held(i) => i.next().map(EventRef::Stored),
            Lent::Read(rest) => {
                let (first, after) = rest.split_first()?;
                *rest = after;
                Some(match first {
                    ChangeEvent::Stored(e) => EventRef::Stored(e),
                    ChangeEvent::Foreign(f) => EventRef::Foreign(f),
                })
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match &self.0 {
            Lent::Held(i) => i.len(),
            Lent::Read(rest) => rest.len(),
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for EventRefs<'_> {}

/// Validates `after` (a non-negative safe integer).
pub fn check_after(after: f64) -> Result<i64> {
    if after.is_finite() && after >= 0.0 && after.fract() == 0.0 && after <= MAX_SAFE_INTEGER {
        Ok(after as i64)
    } else {
        Err(Error::invalid("after must be a non-negative safe integer"))
    }
}

/// Floors and clamps a `limit` to `[1, 200]`; `None` is 200; non-finite is refused.
pub fn clamp_limit(limit: Option<f64>) -> Result<u32> {
    match limit {
        None => Ok(MAX_CHANGES),
        Some(l) if !l.is_finite() => Err(Error::invalid("limit must be a finite number")),
        Some(l) => Ok(l.floor().clamp(1.0, f64::from(MAX_CHANGES)) as u32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_and_limit_rules() {
        assert_eq!(check_after(0.0).unwrap(), 0);
        assert_eq!(
            check_after(MAX_SAFE_INTEGER).unwrap(),
            9_007_199_254_740_991
        );
        for bad in [-1.0, 0.5, f64::NAN, f64::INFINITY, MAX_SAFE_INTEGER + 2.0] {
            assert_eq!(
                check_after(bad).unwrap_err().code(),
                "ERR_INVALID_ARG",
                "{bad}"
            );
        }
        assert_eq!(clamp_limit(None).unwrap(), 200);
        assert_eq!(clamp_limit(Some(0.0)).unwrap(), 1);
        assert_eq!(clamp_limit(Some(-5.0)).unwrap(), 1);
        assert_eq!(clamp_limit(Some(2.9)).unwrap(), 2);
        assert_eq!(clamp_limit(Some(1e9)).unwrap(), 200);
        assert_eq!(
            clamp_limit(Some(f64::NAN)).unwrap_err().code(),
            "ERR_INVALID_ARG"
        );
        assert_eq!(
            clamp_limit(Some(f64::NEG_INFINITY)).unwrap_err().code(),
            "ERR_INVALID_ARG"
        );
    }
}
