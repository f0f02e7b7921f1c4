//! The cursor rules (semantics.md#cursors), decided once, in storage-free Rust: what a seed, a
//! material event, an acknowledge and a sweep's re-freeze make of a cursor's three positions.
//! A store only executes the outcome (docs/architecture.md, "The storage seam"): the SQLite
//! store writes the positions these functions return, and calls [`notified_after_material`]
//! from its one `UPDATE` of a material event through a registered SQL function, so the rule
//! is not spelled again in SQL.

/// A cursor's positions in its target's history: L, N, M (semantics.md#cursors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Positions {
    /// L: what the watcher has acknowledged.
    pub last_seen: i64,
    /// N: frozen when a notice opens; N ≠ L means a notice is pending.
    pub notified: i64,
    /// M: the target's latest material event for this watcher.
    pub material: i64,
}

impl Positions {
    /// A cursor seeded at `at` (a spawn edge, semantics.md#recording-fan-out; a `watch` at the
    /// target's head, semantics.md#cursors-seed): L = N = M = `at`, nothing pending.
    pub fn seeded(at: i64) -> Self {
        Positions {
            last_seen: at,
            notified: at,
            material: at,
        }
    }

    /// A notice is pending exactly when N ≠ L.
    pub fn is_pending(self) -> bool {
        self.notified != self.last_seen
    }

    /// After a material event at `sequence` (semantics.md#cursors-material): N = `sequence` when
    /// nothing was pending (the notice opens), else N unchanged; M = `sequence`.
    pub fn after_material(self, sequence: i64) -> Self {
        Positions {
            notified: notified_after_material(self.last_seen, self.notified, sequence),
            material: sequence,
            ..self
        }
    }

    /// The first cursor of a producer-named watcher at a material event `sequence`
    /// (semantics.md#recording-fan-out): L = 0, N = M = `sequence`.
    pub fn named_at(sequence: i64) -> Self {
        Positions::seeded(0).after_material(sequence)
    }

    /// After an acknowledge (semantics.md#cursors-acknowledge), or `None` when it changes
    /// nothing. Without `through`: L = old N, N = max(M, old N), and a notice stays pending (it
    /// reopened) exactly when M was past the old N. With `through` (the watcher has read up to
    /// it): all read (max(M, N) ≤ `through`) gives L = N = max(M, N); a partial read
    /// (L < `through` < max(M, N)) gives L = `through`, N = max(M, N); `through` ≤ L reads
    /// nothing new. A cursor with nothing pending is never changed.
    pub fn after_acknowledge(self, through: Option<i64>) -> Option<Self> {
        if !self.is_pending() {
            return None;
        }
        let top = self.material.max(self.notified);
        let (last_seen, notified) = match through {
            None => (self.notified, top),
            Some(t) if t >= top => (top, top),
            Some(t) if t > self.last_seen => (t, top),
            Some(_) => return None,
        };
        Some(Positions {
            last_seen,
            notified,
            ..self
        })
    }

    /// The sweep's re-freeze of a cursor behind its material history (semantics.md#cursors-sweep):
    /// N = M, so the re-queued notice covers every material event, naming L.
    pub fn refrozen(self) -> Self {
        Positions {
            notified: self.material,
            ..self
        }
    }
}

/// N after a material event at `sequence` on a cursor at (L, N): the notice opens at `sequence`
/// when nothing was pending, else N stays frozen (semantics.md#cursors-material).
pub fn notified_after_material(last_seen: i64, notified: i64, sequence: i64) -> i64 {
    if notified == last_seen {
        sequence
    } else {
        notified
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn p(last_seen: i64, notified: i64, material: i64) -> Positions {
        Positions {
            last_seen,
            notified,
            material,
        }
    }

    #[test]
    fn a_burst_before_the_turn_is_one_notice() {
        let c = Positions::seeded(1).after_material(2);
        assert_eq!(c, p(1, 2, 2));
        assert_eq!(c.after_material(3).after_material(4), p(1, 2, 4));
        assert_eq!(Positions::named_at(5), p(0, 5, 5));
    }

    #[test]
    fn acknowledge_reopens_once_and_through_withdraws() {
        let burst = p(1, 2, 4);
        assert_eq!(burst.after_acknowledge(None), Some(p(2, 4, 4)));
        assert_eq!(p(2, 4, 4).after_acknowledge(None), Some(p(4, 4, 4)));
        assert_eq!(p(1, 2, 2).after_acknowledge(None), Some(p(2, 2, 2)));
        assert_eq!(burst.after_acknowledge(Some(4)), Some(p(4, 4, 4)));
        assert_eq!(burst.after_acknowledge(Some(9)), Some(p(4, 4, 4)));
        assert_eq!(burst.after_acknowledge(Some(3)), Some(p(3, 4, 4)));
        assert_eq!(burst.after_acknowledge(Some(1)), None);
        assert_eq!(p(4, 4, 4).after_acknowledge(None), None);
        assert_eq!(p(4, 4, 4).after_acknowledge(Some(9)), None);
    }

    #[test]
    fn the_sweep_refreezes_at_m() {
        assert_eq!(p(1, 2, 4).refrozen(), p(1, 4, 4));
        assert!(p(1, 4, 4).refrozen().is_pending());
        assert!(!Positions::seeded(7).is_pending());
    }
}
