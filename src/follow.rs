//! Followers (semantics.md#follow): the registration of each open follower, and the one
//! signal per store that tells the TypeScript layer's hub, on the JS thread, that followed
//! sessions may have new rows. The hub then reads them itself; nothing is copied here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{
    ThreadsafeFunction, ThreadsafeFunctionCallMode, UnknownReturnValue,
};
use napi::{Result, Status};
use napi_derive::napi;
use session_awareness_core::FollowSignal;

use crate::error::{Code, IntoJs};
use crate::session_state::NativeSessionState;

// Weak: it never keeps Node alive.
type TouchedTsfn = ThreadsafeFunction<(), UnknownReturnValue, (), Status, false, true>;

/// Calls the hub on the JS thread; one call in flight at most.
struct JsTouched {
    tsfn: TouchedTsfn,
    in_flight: Arc<AtomicBool>,
}

impl FollowSignal for JsTouched {
    fn touched(&self) {
        if self.in_flight.swap(true, Ordering::AcqRel) {
            // The call in flight clears the flag before the hub takes the touched sessions:
            // it takes these too.
            return;
        }
        let status = self.tsfn.call_with_return_value(
            (),
            ThreadsafeFunctionCallMode::NonBlocking,
            |_, _| Ok(()),
        );
        if status != Status::Ok {
            self.in_flight.store(false, Ordering::Release);
        }
    }
}

#[napi]
impl NativeSessionState {
    /// Calls `touched` on the JS thread soon after followed sessions were touched (a commit
    /// of this store, the poll, the PostgreSQL catch-up); a burst makes one call. `close`
    /// releases it; it never keeps Node alive.
    #[napi]
    pub fn follow_signal(&self, touched: Function<'_, (), UnknownReturnValue>) -> Result<(), Code> {
        let in_flight = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&in_flight);
        let tsfn: TouchedTsfn = touched
            .build_threadsafe_function::<()>()
            .callee_handled::<false>()
            .weak::<true>()
            .build_callback(move |_| {
                // Before the hub takes the touched sessions: a touch from here on makes a new
                // call.
                flag.store(false, Ordering::Release);
                Ok(())
            })
            .js()?;
        self.store
            .set_follow_signal(Some(Arc::new(JsTouched { tsfn, in_flight })));
        Ok(())
    }

    /// Registers one open follower of the session; returns the agent resolved.
    #[napi]
    pub fn follow(&self, session_key: String, agent_id: Option<String>) -> Result<String, Code> {
        self.store.follow(&session_key, agent_id.as_deref()).js()
    }

    /// One follower of the session less (`agent` as `follow` returned it).
    #[napi]
    pub fn unfollow(&self, session_key: String, agent: String) {
        self.store.unfollow(&session_key, &agent);
    }

    /// The followed sessions touched since the last call, as agent, key, agent, key, ….
    #[napi]
    pub fn take_followed(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (agent, key) in self.store.take_followed() {
            out.push(agent);
            out.push(key);
        }
        out
    }
}
