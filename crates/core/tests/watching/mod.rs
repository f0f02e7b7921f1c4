//! The watch calls the cursor, notice and wake tests share: an explicit `watch`, a spawn
//! edge as a gateway records it, and a third main-like watcher.
#![allow(dead_code)]

use session_awareness_core::Provenance;

use crate::common::*;

pub const W3: &str = "agent:main:coordinator";

pub fn explicit(fx: &Fixture, watcher: &str, target: &str, now: i64) -> bool {
    fx.store
        .watch(watcher, target, Provenance::Explicit, now)
        .unwrap()
}

/// A spawn edge as a gateway records it: the spawning parent is both actor and watcher.
pub fn spawn(fx: &Fixture, child: &str, watchers: &[&str], now: i64) -> i64 {
    let mut i = input(child, "child_spawned");
    i.actor_type = "agent".into();
    i.actor_id = watchers.first().map(|w| (*w).to_owned());
    i.watchers = strings(watchers);
    fx.record(i, now).sequence
}
