//! A background step held at a chosen point until a test lets it go (compiled for the
//! crate's own tests and with the `test-hooks` feature, never into the addon): the race of a
//! call landing in the middle of that step, made certain instead of hoped for.

use std::sync::mpsc::{self, TryRecvError};
use std::time::Duration;

/// The test's end of a pause: learns that the step reached its point, lets it go, and learns
/// that it ended. Dropping it lets the step go too.
pub struct Pause {
    reached: mpsc::Receiver<()>,
    go: mpsc::Sender<()>,
    done: mpsc::Receiver<()>,
}

impl Pause {
    /// Waits up to `timeout` for the step to reach its point; true once it has.
    pub fn wait_reached(&self, timeout: Duration) -> bool {
        self.reached.recv_timeout(timeout).is_ok()
    }

    /// Lets the step go on.
    pub fn resume(&self) {
        let _ = self.go.send(());
    }

    /// Waits up to `timeout` for the step to end; true once it has.
    pub fn wait_done(&self, timeout: Duration) -> bool {
        self.done.recv_timeout(timeout).is_ok()
    }
}

/// The step's end of a [`Pause`].
pub(crate) struct Hold {
    reached: mpsc::Sender<()>,
    go: mpsc::Receiver<()>,
    done: mpsc::Sender<()>,
}

/// Held by the step until it ends: dropping it tells the test.
pub(crate) struct Done(mpsc::Sender<()>);

impl Drop for Done {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

impl Hold {
    /// Says the point is reached, then waits (without blocking the runtime's thread) until
    /// the test lets go or drops its end.
    pub(crate) async fn hold(self) -> Done {
        let _ = self.reached.send(());
        while let Err(TryRecvError::Empty) = self.go.try_recv() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Done(self.done)
    }
}

/// A pause and its hold, linked.
pub(crate) fn pair() -> (Pause, Hold) {
    let (reached_tx, reached_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    (
        Pause {
            reached: reached_rx,
            go: go_tx,
            done: done_rx,
        },
        Hold {
            reached: reached_tx,
            go: go_rx,
            done: done_tx,
        },
    )
}
