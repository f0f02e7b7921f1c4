//! semantics.md#reading-memory: a `changesSince` answer lent by the store
//! (`Store::changes_since_with`) equals the owned one, and one the read cache holds is lent
//! where it is, not copied.

mod common;

use common::*;
use session_awareness_core::{Changes, ChangesRef, EventRef, Options, StateEvent};

/// The answer `changes_since_with` lends, owned, with where each stored event lives.
fn lent(fx: &Fixture, after: f64, limit: Option<f64>) -> (Changes, Vec<*const StateEvent>) {
    fx.store
        .changes_since_with(CHILD, after, None, limit, |c: ChangesRef<'_>| {
            let at = c
                .events()
                .map(|e| match e {
                    EventRef::Stored(e) => e as *const StateEvent,
                    EventRef::Foreign(_) => std::ptr::null(),
                })
                .collect();
            assert_eq!(c.len(), c.events().len());
            (c.to_owned(), at)
        })
        .unwrap()
}

#[test]
fn a_lent_answer_equals_the_owned_one_and_a_cached_one_is_not_copied() {
    for cache in [true, false] {
        let fx = Fixture::file_with(Options {
            read_cache_bytes: if cache { 1 << 20 } else { 0 },
            ..opts()
        });
        for _ in 0..5 {
            fx.rec(CHILD, "goal_changed", None, T0);
            fx.rec(CHILD2, "created", None, T0);
        }
        for (after, limit) in [(0.0, None), (3.0, Some(2.0)), (9.0, None), (100.0, None)] {
            let owned = fx.store.changes_since(CHILD, after, None, limit).unwrap();
            let (first, at) = lent(&fx, after, limit);
            assert_eq!(first, owned, "after {after}, cache {cache}");
            // A second read: the cache lends the very events it holds. (The block held here
            // keeps a copy made for the second call from landing where the first one's was.)
            let hold: Vec<session_awareness_core::ChangeEvent> = Vec::with_capacity(at.len());
            let (second, again) = lent(&fx, after, limit);
            drop(hold);
            assert_eq!(second, owned);
            assert_eq!(at.len(), again.len());
            if cache && !at.is_empty() {
                assert_eq!(at, again, "after {after}");
            }
        }
        assert_eq!(
            seqs(&lent(&fx, 3.0, Some(2.0)).0.events),
            [5, 7],
            "cache {cache}"
        );
        // A refused argument reaches no callback.
        let e = fx
            .store
            .changes_since_with(CHILD, -1.0, None, None, |_| panic!("called"))
            .unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_ARG");
    }
}
