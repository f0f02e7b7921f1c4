//! The operations of the model-based test, and how one random number encodes one of them.

use crate::spec::{self, Model, DAY, HOUR};
// The kinds, as the model's rules name them.
pub use crate::spec::{LOG_ONLY, NOTIFY};

pub const START: i64 = 1_800_000_000_000;

/// Main-like, main-like of another agent, nested.
pub const WATCHERS: [&str; 3] = ["agent:main:main", "agent:ops:main", "agent:main:subagent:x"];
/// A plain target, one main-like despite its prefix, one nested.
pub const TARGETS: [&str; 3] = [
    "agent:main:t",
    "agent:ops:subagentx",
    "agent:main:subagent:y",
];
pub const BARE: &str = "global";
pub const W0: &str = WATCHERS[0];
pub const T0: &str = TARGETS[0];

/// Every session observed after each step: the qualified keys under their own agent, and the
/// bare key under both agents.
pub fn sessions() -> Vec<(&'static str, Option<&'static str>)> {
    let mut out: Vec<_> = WATCHERS
        .iter()
        .chain(&TARGETS)
        .map(|k| (*k, None))
        .collect();
    out.push((BARE, None));
    out.push((BARE, Some("ops")));
    out
}

#[derive(Debug, Clone)]
pub struct Rec {
    pub key: &'static str,
    pub agent: Option<&'static str>,
    pub kind: &'static str,
    pub actor_type: &'static str,
    pub actor: Option<&'static str>,
    pub watchers: Vec<&'static str>,
    pub dedupe: Option<&'static str>,
    pub occurred: Occurred,
    pub summary: u8,
    pub payload: u8,
    pub only_if_watched: bool,
    pub ids: bool,
}

/// `occurredAt` relative to the clock.
#[derive(Debug, Clone, Copy)]
pub enum Occurred {
    Absent,
    Ago(f64),
    NaN,
}

/// A clock jump; the retention-relative ones depend on the case's options.
#[derive(Debug, Clone, Copy)]
pub enum Jump {
    Ms(i64),
    RetentionPlus(i64),
}

/// `after` of a `changesSince`, relative to the sequences handed out so far.
#[derive(Debug, Clone, Copy)]
pub enum After {
    Zero,
    Half,
    Top,
    Beyond,
    Raw(f64),
}

#[derive(Debug, Clone)]
pub enum Op {
    Record(Box<Rec>),
    Watch(&'static str, &'static str, bool),
    Unwatch(&'static str, &'static str),
    Drain(&'static str),
    Acknowledge(&'static str, Vec<&'static str>),
    Sweep(Option<Vec<&'static str>>),
    Prune,
    Reset(&'static str),
    Delete(&'static str, Option<&'static str>),
    Clock(Jump),
    Changes(&'static str, Option<&'static str>, After, Option<f64>),
    /// Close the store and open it again on the same file (a gateway restart).
    Restart,
    /// Holds the store's writer thread (semantics.md#promise-api) with a job that waits: the
    /// jobs queued until [`Op::Release`] are then taken by it in one batch, after every
    /// synchronous call made meanwhile.
    Hold,
    /// A call queued for the held writer thread: a record (records next to each other in the
    /// queue are written as one group), or a drain, acknowledge or watch (run alone, in turn).
    Queue(Box<Op>),
    /// Lets the held writer thread run its queue and waits for every result.
    Release,
}

/// Reads choices out of one random number. The first entry of every list is the plainest
/// choice, so proptest, shrinking the number toward 0, also simplifies the operation.
pub struct Draw(u64);

impl Draw {
    /// One of `items`, each with its weight.
    fn pick<T: Copy>(&mut self, items: &[(u64, T)]) -> T {
        let total: u64 = items.iter().map(|i| i.0).sum();
        let mut r = self.0 % total;
        self.0 /= total;
        for &(w, item) in items {
            if r < w {
                return item;
            }
            r -= w;
        }
        unreachable!()
    }

    /// One of `items`, equally likely.
    fn any<T: Copy>(&mut self, items: &[T]) -> T {
        let n = items.len() as u64;
        let i = self.0 % n;
        self.0 /= n;
        items[i as usize]
    }
}

pub const ALL_KEYS: [&str; 8] = [
    WATCHERS[0],
    WATCHERS[1],
    WATCHERS[2],
    TARGETS[0],
    TARGETS[1],
    TARGETS[2],
    BARE,
    "",
];

/// The static key equal to `k` (the model hands out `String`s).
pub fn key_of(k: &str) -> &'static str {
    ALL_KEYS.into_iter().find(|s| *s == k).expect("a known key")
}

/// Any key: mostly watchers and targets, sometimes the bare key, rarely the empty one.
pub fn any_key(d: &mut Draw) -> &'static str {
    d.pick(&[
        (6, d_watcher as fn(&mut Draw) -> &'static str),
        (6, d_target),
        (2, |_| BARE),
        (1, |_| ""),
    ])(d)
}

pub fn d_watcher(d: &mut Draw) -> &'static str {
    d.any(&WATCHERS)
}

pub fn d_target(d: &mut Draw) -> &'static str {
    d.any(&TARGETS)
}

/// A target: mostly the targets, sometimes a watcher (watchers watch each other), the bare
/// key, or the empty one.
pub fn target_key(d: &mut Draw) -> &'static str {
    d.pick(&[
        (8, d_target as fn(&mut Draw) -> &'static str),
        (3, d_watcher),
        (1, |_| BARE),
        (1, |_| ""),
    ])(d)
}

/// An agent for `key`: absent, its own (`main` for the bare key), `ops`, or malformed.
pub fn agent_for(d: &mut Draw, key: &'static str) -> Option<&'static str> {
    match d.pick(&[(24, 0), (4, 1), (3, 2), (1, 3)]) {
        0 => None,
        1 => Some(spec::own_agent(key).unwrap_or("main")),
        2 => Some("ops"),
        _ => Some("Bad"),
    }
}

pub fn record(d: &mut Draw, m: &Model) -> Op {
    let watched: Vec<&'static str> = m.cursors.keys().map(|(_, t)| key_of(t)).collect();
    let key = if !watched.is_empty() && d.any(&[false, true]) {
        d.any(&watched)
    } else {
        d.pick(&[
            (16, d_target as fn(&mut Draw) -> &'static str),
            (8, d_watcher),
            (4, |_| BARE),
            (1, |_| ""),
        ])(d)
    };
    let agent = agent_for(d, key);
    let (notify, log_only) = (d.any(&NOTIFY), d.any(&LOG_ONLY));
    let kind = d.pick(&[
        (18, notify),
        (8, "child_spawned"),
        (6, log_only),
        (1, "bogus"),
    ]);
    let actor_type = d.any(&["human", "agent", "system"]);
    let actor_type = d.pick(&[(40, actor_type), (1, "robot")]);
    let watcher = d_watcher(d);
    let actor = d.pick(&[
        (6, None),
        (3, Some(watcher)),
        (1, Some("")),
        (1, Some("user:ada")),
    ]);
    let dedupe = d.any(&["d0", "d1", "d2"]);
    let dedupe = d.pick(&[(12, None), (6, Some(dedupe)), (1, Some(""))]);
    let ago = d.any(&[
        0.5,
        1_000.0,
        10.0 * HOUR as f64,
        30.0 * HOUR as f64,
        -5_000.0,
    ]);
    let occurred = d.pick(&[
        (6, Occurred::Absent),
        (6, Occurred::Ago(ago)),
        (1, Occurred::NaN),
    ]);
    let watchers = (0..d.pick(&[(3, 0), (4, 1), (2, 2)]))
        .map(|_| any_key(d))
        .collect();
    Op::Record(Box::new(Rec {
        key,
        agent,
        kind,
        actor_type,
        actor,
        watchers,
        dedupe,
        occurred,
        summary: d.any(&[0, 1, 2, 3]),
        payload: d.pick(&[(24, 0), (2, 1), (4, 2), (1, 3)]),
        only_if_watched: d.pick(&[(6, false), (1, true)]),
        ids: d.any(&[false, true]),
    }))
}

/// A watcher for `drain`: half the time one with queued notices, if any; rarely the empty
/// key.
pub fn drain_key(d: &mut Draw, m: &Model) -> &'static str {
    let pending: Vec<&'static str> = m.queue.iter().map(|q| key_of(&q.0)).collect();
    if !pending.is_empty() && d.any(&[false, true]) {
        d.any(&pending)
    } else {
        d.pick(&[
            (16, d_watcher as fn(&mut Draw) -> &'static str),
            (4, d_target),
            (2, |_| BARE),
            (1, |_| ""),
        ])(d)
    }
}

/// The operation `n` encodes in the model's current state (keys with pending notices are
/// drained and acknowledged more often than chance would).
pub fn decode(n: u64, m: &Model, restartable: bool) -> Op {
    let mut d = Draw(n);
    let d = &mut d;
    // A restart loses the queue; a sweep (gateway start) brings the notices back, so it is
    // likelier while notices are lost.
    let restart = if restartable { 2 } else { 0 };
    let sweep = if m.lost_notices() { 20 } else { 1 };
    match d.pick(&[
        (10, 0),
        (4, 1),
        (4, 2),
        (3, 3),
        (2, 4),
        (2, 5),
        (1, 6),
        (sweep, 7),
        (1, 8),
        (1, 9),
        (1, 10),
        (restart, 11),
        (2, 12),
    ]) {
        0 => record(d, m),
        1 => watch(d),
        2 => Op::Drain(drain_key(d, m)),
        3 => {
            let small = d.any(&[1_000, 0, 1, 30 * 60 * 1000, -5_000]);
            let large = d.any(&[HOUR, HOUR + 1, 2 * DAY]);
            let beyond = d.any(&[0, 1]);
            Op::Clock(d.pick(&[
                (4, Jump::Ms(small)),
                (2, Jump::Ms(large)),
                (2, Jump::RetentionPlus(beyond)),
            ]))
        }
        4 => acknowledge(d, m),
        5 => {
            let key = any_key(d);
            let agent = agent_for(d, key);
            let valid = d.any(&[After::Zero, After::Half, After::Top, After::Beyond]);
            let invalid = d.any(&[After::Raw(-1.0), After::Raw(0.5), After::Raw(f64::NAN)]);
            let after = d.pick(&[(20, valid), (1, invalid)]);
            let limit = d.any(&[1.0, 2.7, 0.0, -3.0, 1e9]);
            let limit = d.pick(&[(8, None), (8, Some(limit)), (1, Some(f64::INFINITY))]);
            Op::Changes(key, agent, after, limit)
        }
        6 => {
            let w = any_key(d);
            Op::Unwatch(w, target_key(d))
        }
        7 => Op::Sweep(match d.any(&[0, 1, 2, 3]) {
            0 => None,
            n => Some((1..n).map(|_| d_watcher(d)).collect()),
        }),
        8 => Op::Prune,
        9 => Op::Reset(any_key(d)),
        11 => Op::Restart,
        12 => Op::Hold,
        _ => {
            let key = any_key(d);
            Op::Delete(key, agent_for(d, key))
        }
    }
}

pub fn watch(d: &mut Draw) -> Op {
    let (w, t) = (any_key(d), target_key(d));
    Op::Watch(w, t, d.pick(&[(2, false), (1, true)]))
}

pub fn acknowledge(d: &mut Draw, m: &Model) -> Op {
    let w = drain_key(d, m);
    let mut targets: Vec<&'static str> = Vec::new();
    if d.any(&[false, true]) {
        targets.extend(m.peek(w).iter().map(|q| key_of(&q.1)));
    }
    for _ in 0..d.pick(&[(2, 1), (1, 0), (1, 2)]) {
        targets.push(target_key(d));
    }
    Op::Acknowledge(d.pick(&[(20, w), (1, "")]), targets)
}

/// A call that can be queued for the writer thread, or made synchronously while it is held.
fn call(d: &mut Draw, m: &Model, tasks: bool) -> Op {
    match d.pick(&[(6, 0), (1, 1), (1, 2), (1, 3)]) {
        1 if tasks => Op::Drain(drain_key(d, m)),
        2 if tasks => acknowledge(d, m),
        3 if tasks => watch(d),
        _ => record(d, m),
    }
}

/// The operation `n` encodes while the writer thread is held (after [`Op::Hold`]): mostly a
/// call queued behind it, sometimes a synchronous call, which commits before everything
/// queued; the clock stands still until [`Op::Release`]. While the automatic prune is due
/// (`prune_due`), only records are queued: the first group's prune runs in the background, and
/// a drain or acknowledge queued behind it would race with it.
pub fn decode_held(n: u64, m: &Model, prune_due: bool) -> Op {
    let mut d = Draw(n);
    let d = &mut d;
    match d.pick(&[(10, 0), (4, 1), (2, 2), (1, 3)]) {
        0 => Op::Queue(Box::new(call(d, m, !prune_due))),
        1 => Op::Release,
        2 => call(d, m, true),
        _ => {
            let key = any_key(d);
            Op::Changes(key, None, After::Zero, None)
        }
    }
}
