//! Riding through an outage of the PostgreSQL server (docs/postgres.md#faults): once the
//! store has lost its connection (a restart, a failover, a cut link past the call deadline),
//! the calls that need the database wait for it, in call order (the writer thread runs them
//! one after another), reconnecting with backoff (50 ms doubling to 5 s, as the listener), until
//! `reconnectWindowMs` after the loss was first seen. Past the window a call settles at once,
//! unless a reconnection attempt is due, which it makes first (bounded by the connect
//! timeout): so the store finds the server again by itself. While the connection is down at
//! most `maxWaitingCalls` calls wait in the Promise API's queue; a new call past it settles
//! at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::{DbFailure, Error, Result};
use crate::postgres::backend::Backend;
use crate::postgres::conn::{Pg, Session};
use crate::postgres::floor::Floor;

/// The first wait between two reconnection attempts; it doubles up to [`BACKOFF_MAX`].
pub(crate) const BACKOFF_MIN: Duration = Duration::from_millis(50);
/// The longest wait between two reconnection attempts.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// What a store keeps across a lost connection: the outage, the sequence floor (`floor.rs`),
/// and the backend a connection lost mid-transaction left (its transaction holds the heads'
/// locks until the server notices the loss: ended once connected again).
pub(crate) struct Faults {
    /// The outage, if any, and the window calls wait in.
    pub(crate) outage: Outage,
    /// The highest sequence handed out, raised on the server after a lost connection.
    pub(crate) floor: Floor,
    orphan: Mutex<Option<Backend>>,
}

impl Faults {
    /// Nothing lost yet.
    pub(crate) fn new(outage: Outage) -> Self {
        Faults {
            outage,
            floor: Floor::default(),
            orphan: Mutex::new(None),
        }
    }

    /// A connection was lost mid-transaction on `backend`.
    pub(crate) fn orphaned(&self, backend: Option<Backend>) {
        *self.orphan.lock() = backend;
    }

    /// The backend of a connection lost mid-transaction, taken (see [`Backend::terminate`]).
    pub(crate) fn take_orphan(&self) -> Option<Backend> {
        self.orphan.lock().take()
    }
}

/// The outage state of one store's connection.
pub(crate) struct Outage {
    window: Duration,
    cap: usize,
    state: Mutex<State>,
    /// True from the first loss seen until a connection is made again.
    down: AtomicBool,
}

struct State {
    /// When the loss was first seen.
    since: Option<Instant>,
    /// The next reconnection attempt is not made before this.
    next_try: Option<Instant>,
    backoff: Duration,
    /// A connection was made once: before that (at open) nothing waits.
    ever_up: bool,
}

/// What a call that needs a connection does next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Attempt to connect, within this long (the rest of the window) when given.
    Try(Option<Duration>),
    /// Sleep until then, and ask again.
    Wait(Instant),
    /// The window has passed: settle now.
    GiveUp,
}

impl Outage {
    /// The state of a store whose calls wait up to `window_ms` and whose queue holds at most
    /// `cap` waiting calls.
    pub(crate) fn new(window_ms: u32, cap: u32) -> Self {
        Outage {
            window: Duration::from_millis(window_ms.into()),
            cap: cap as usize,
            state: Mutex::new(State {
                since: None,
                next_try: None,
                backoff: BACKOFF_MIN,
                ever_up: false,
            }),
            down: AtomicBool::new(false),
        }
    }

    /// True while the connection is known to be down.
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    /// How many calls may wait in the queue while the connection is down.
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// The window (`reconnectWindowMs`).
    pub(crate) fn window(&self) -> Duration {
        self.window
    }

    /// A connection was made: the outage, if any, is over.
    pub(crate) fn up(&self) {
        let mut s = self.state.lock();
        s.since = None;
        s.next_try = None;
        s.backoff = BACKOFF_MIN;
        s.ever_up = true;
        self.down.store(false, Ordering::Release);
    }

    /// A call lost its connection (or found it gone): the window starts, unless it runs.
    pub(crate) fn lost(&self) {
        let mut s = self.state.lock();
        if s.ever_up && s.since.is_none() {
            s.since = Some(Instant::now());
            self.down.store(true, Ordering::Release);
        }
    }

    /// A reconnection attempt failed: the next one waits for the backoff, which doubles.
    pub(crate) fn failed(&self) {
        self.lost();
        let mut s = self.state.lock();
        s.next_try = Some(Instant::now() + s.backoff);
        s.backoff = (s.backoff * 2).min(BACKOFF_MAX);
    }

    /// What a call that needs a connection does now; `tried` says whether this call has made
    /// an attempt already (past the window, a call makes at most one, and only when due).
    pub(crate) fn step(&self, tried: bool) -> Step {
        let s = self.state.lock();
        let now = Instant::now();
        let Some(since) = s.since.filter(|_| s.ever_up) else {
            return Step::Try(None);
        };
        let end = since + self.window;
        let due = s.next_try.unwrap_or(now);
        if now >= end {
            return match due <= now && !tried {
                true => Step::Try(None),
                false => Step::GiveUp,
            };
        }
        if due <= now {
            Step::Try(Some(end - now))
        } else {
            Step::Wait(due.min(end))
        }
    }

    /// True when the store has connected once, so a lost connection is waited for.
    pub(crate) fn rides(&self) -> bool {
        self.state.lock().ever_up
    }

    /// The failure a call settles with when the window passed without the server: the last
    /// failure seen, or, when none, one saying so.
    pub(crate) fn gave_up(&self, last: Option<Error>) -> Error {
        last.unwrap_or_else(|| {
            Error::db(
                DbFailure::Connection,
                format!(
                    "the PostgreSQL server was not back within reconnectWindowMs ({} ms)",
                    self.window.as_millis()
                ),
            )
        })
    }
}

/// The kind of a client's error: SQLSTATE classes of a server error, a lost or refused
/// connection otherwise.
pub(crate) fn failure_of(e: &tokio_postgres::Error) -> DbFailure {
    let Some(db) = e.as_db_error() else {
        return DbFailure::Connection;
    };
    let code = db.code().code();
    match code {
        "40001" | "40P01" | "55P03" | "57014" => DbFailure::Busy,
        "53100" => DbFailure::Full,
        "25006" => DbFailure::ReadOnly,
        "XX001" | "XX002" => DbFailure::Corrupt,
        "57P01" | "57P02" | "57P03" => DbFailure::Connection,
        // The server refused this login: waiting for it does not help.
        "3D000" => DbFailure::Login,
        _ if code.starts_with("28") => DbFailure::Login,
        _ if code.starts_with("08") => DbFailure::Connection,
        _ => DbFailure::Other,
    }
}

/// True when `e` is a lost or refused connection that waiting may cure (the server
/// restarting, failing over or out of reach), not a login the server refused.
pub(crate) fn waits_for(e: &Error) -> bool {
    matches!(
        e,
        Error::Db {
            kind: DbFailure::Connection,
            ..
        }
    )
}

/// A new session: connected at once, or, once the store has lost its connection, through
/// the outage's window (`outage.rs`): attempts with backoff until the server answers or
/// the window has passed.
pub(crate) async fn reconnect(pg: &Pg) -> Result<Session> {
    let mut last = None;
    let mut tried = false;
    loop {
        let within = match pg.faults().outage.step(tried) {
            Step::GiveUp => return Err(pg.faults().outage.gave_up(last)),
            Step::Wait(until) => {
                tokio::time::sleep_until(until.into()).await;
                continue;
            }
            Step::Try(within) => within,
        };
        tried = true;
        let attempt = pg.target().connect();
        let r = match within {
            Some(t) => tokio::time::timeout(t, attempt)
                .await
                .unwrap_or_else(|_| Err(pg.faults().outage.gave_up(last.take()))),
            None => attempt.await,
        };
        let r = match r {
            // After a loss the server may be a promoted standby behind what was handed out.
            Ok((client, conn, backend)) if pg.faults().outage.is_down() => {
                // Best effort past a lost connection: a refusal (no right to the sequence)
                // leaves the identity as it is, and the primary key still refuses a row.
                match pg.faults().floor.raise(&client, pg.schema()).await {
                    Err(e) if e.is_closed() => Err(pg.target().error(&e)),
                    _ => Ok((client, conn, backend)),
                }
            }
            other => other,
        };
        match r {
            Ok((client, conn, backend)) => {
                pg.faults().outage.up();
                return Ok(Session::new(client, conn, backend));
            }
            Err(e) if waits_for(&e) && pg.faults().outage.rides() => {
                pg.faults().outage.failed();
                last = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_waits_before_the_first_connection_and_the_window_runs_from_the_loss() {
        let o = Outage::new(60_000, 5);
        o.failed();
        assert!(!o.is_down());
        assert_eq!(o.step(false), Step::Try(None));
        o.up();
        assert_eq!(o.step(false), Step::Try(None));
        o.lost();
        assert!(o.is_down());
        assert!(matches!(o.step(false), Step::Try(Some(d)) if d > Duration::from_secs(59)));
        o.failed();
        assert!(matches!(o.step(true), Step::Wait(_)));
        o.up();
        assert!(!o.is_down());
    }

    #[test]
    fn past_the_window_a_call_gives_up_unless_an_attempt_is_due() {
        let o = Outage::new(0, 5);
        o.up();
        o.lost();
        assert_eq!(o.step(false), Step::Try(None));
        assert_eq!(o.step(true), Step::GiveUp);
        o.failed();
        assert_eq!(o.step(false), Step::GiveUp);
        std::thread::sleep(BACKOFF_MIN * 2);
        assert_eq!(o.step(false), Step::Try(None));
    }

    #[test]
    fn only_a_lost_connection_is_waited_for() {
        assert!(waits_for(&Error::db(DbFailure::Connection, "x")));
        assert!(!waits_for(&Error::db(DbFailure::Login, "x")));
        assert!(!waits_for(&Error::db(DbFailure::Busy, "x")));
    }
}
