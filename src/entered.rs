//! The signal that hands notices queued by background work to the `onNotice` listener at once
//! (semantics.md#notices-listener): the core tells it, on a background thread, that the outbox
//! holds notices; it calls the TypeScript layer's delivery on the JS thread, at most one call
//! in flight, so a burst of notices makes one call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{
    ThreadsafeFunction, ThreadsafeFunctionCallMode, UnknownReturnValue,
};
use napi::{Result, Status};
use napi_derive::napi;
use session_awareness_core::{mark_caller_thread, NoticeSignal};

use crate::error::{Code, IntoJs};
use crate::session_state::NativeSessionState;

// Weak: it never keeps Node alive.
type EnteredTsfn = ThreadsafeFunction<(), UnknownReturnValue, (), Status, false, true>;

/// Calls the host's delivery on the JS thread; one call in flight at most.
struct JsEntered {
    tsfn: EnteredTsfn,
    in_flight: Arc<AtomicBool>,
}

impl NoticeSignal for JsEntered {
    fn entered(&self) {
        if self.in_flight.swap(true, Ordering::AcqRel) {
            // The call in flight clears the flag before the delivery takes the outbox: it
            // takes these notices too.
            return;
        }
        // NonBlocking: a background thread never waits for the JS thread. The return value's
        // callback takes a throw of the delivery, which would otherwise end the process.
        let status = self.tsfn.call_with_return_value(
            (),
            ThreadsafeFunctionCallMode::NonBlocking,
            |_, _| Ok(()),
        );
        if status != Status::Ok {
            // Not queued (Node is closing): the timer tick, if it still runs, hands them over.
            self.in_flight.store(false, Ordering::Release);
        }
    }
}

#[napi]
impl NativeSessionState {
    /// Calls `deliver` on the JS thread soon after background work (the PostgreSQL catch-up,
    /// the cross-process poll, the upstream monitor) put notices in the listener's outbox; a
    /// burst makes one call. Notices queued by a call of this thread or of the Promise API's
    /// writer are left to the delivery that follows the call. `close` releases it; it never
    /// keeps Node alive. Call it on the thread that makes the store's calls.
    #[napi]
    pub fn signal_notices(
        &self,
        deliver: Function<'_, (), UnknownReturnValue>,
    ) -> Result<(), Code> {
        mark_caller_thread();
        let in_flight = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&in_flight);
        let tsfn: EnteredTsfn = deliver
            .build_threadsafe_function::<()>()
            .callee_handled::<false>()
            .weak::<true>()
            .build_callback(move |_| {
                // Before the delivery takes the outbox: a notice entering from here on makes a
                // new call.
                flag.store(false, Ordering::Release);
                Ok(())
            })
            .js()?;
        self.store
            .set_notice_signal(Some(Arc::new(JsEntered { tsfn, in_flight })));
        Ok(())
    }
}

impl Drop for NativeSessionState {
    fn drop(&mut self) {
        // A store collected without close releases its signal now, whatever background work
        // still holds the queue.
        self.store.set_notice_signal(None);
        self.store.set_follow_signal(None);
    }
}
