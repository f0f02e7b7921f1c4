//! The durable signal log (semantics.md#storage, semantics.md#recording-dedupe, semantics.md#reading): a session's head, a read's
//! answer and the checks of its arguments. The SQLite store reads and deletes them in
//! `sqlite/log.rs`; a record writes them through [`crate::rows::Rows`].

use crate::error::{Error, Result};
use crate::read_event::ChangeEvent;

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
