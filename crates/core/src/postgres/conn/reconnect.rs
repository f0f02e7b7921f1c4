//! The store's connection made anew: at once, or through the outage's window after a loss
//! (`outage.rs` holds the window's rules).

use crate::error::Result;
use crate::postgres::outage::{waits_for, Step};

use super::{Pg, Session};

impl Pg {
    /// A new session: connected at once, or, once the store has lost its connection, through
    /// the outage's window (`outage.rs`): attempts with backoff until the server answers or
    /// the window has passed.
    pub(crate) async fn reconnect(&self) -> Result<Session> {
        let pg = self;
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
}
