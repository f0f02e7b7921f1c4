//! A signal from background threads to one JS function: the core says "something is ready"
//! (notices in the listener's outbox, followed sessions touched) on any thread, and the
//! function is called on the JS thread, at most one call in flight, so a burst makes one call.
//! The function then takes what is ready itself; nothing is copied here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{
    ThreadsafeFunction, ThreadsafeFunctionCallMode, UnknownReturnValue,
};
use napi::{Result, Status};
use session_awareness_core::{FollowSignal, NoticeSignal};

// Weak: it never keeps Node alive.
type SignalTsfn = ThreadsafeFunction<(), UnknownReturnValue, (), Status, false, true>;

/// Calls a JS function on the JS thread when fired; one call in flight at most.
pub(crate) struct JsSignal {
    tsfn: SignalTsfn,
    in_flight: Arc<AtomicBool>,
}

impl JsSignal {
    /// The signal that calls `f`.
    pub(crate) fn new(f: Function<'_, (), UnknownReturnValue>) -> Result<Arc<Self>> {
        let in_flight = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&in_flight);
        let tsfn: SignalTsfn = f
            .build_threadsafe_function::<()>()
            .callee_handled::<false>()
            .weak::<true>()
            .build_callback(move |_| {
                // Before the function takes what is ready: a firing from here on makes a new
                // call.
                flag.store(false, Ordering::Release);
                Ok(())
            })?;
        Ok(Arc::new(JsSignal { tsfn, in_flight }))
    }

    fn fire(&self) {
        if self.in_flight.swap(true, Ordering::AcqRel) {
            // The call in flight clears the flag before the function takes what is ready: it
            // takes this too.
            return;
        }
        // NonBlocking: a background thread never waits for the JS thread. The return value's
        // callback takes a throw of the function, which would otherwise end the process.
        let status = self.tsfn.call_with_return_value(
            (),
            ThreadsafeFunctionCallMode::NonBlocking,
            |_, _| Ok(()),
        );
        if status != Status::Ok {
            // Not queued (Node is closing): whatever still runs (a timer tick) takes it.
            self.in_flight.store(false, Ordering::Release);
        }
    }
}

impl NoticeSignal for JsSignal {
    fn entered(&self) {
        self.fire();
    }
}

impl FollowSignal for JsSignal {
    fn touched(&self) {
        self.fire();
    }
}
