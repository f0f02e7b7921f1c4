//! The signal that hands notices queued by background work to the `onNotice` listener at once
//! (semantics.md#notices-listener): the core tells it, on a background thread, that the outbox
//! holds notices, and the TypeScript layer's delivery runs on the JS thread ([`JsSignal`]).

use napi::bindgen_prelude::Function;
use napi::threadsafe_function::UnknownReturnValue;
use napi::Result;
use napi_derive::napi;
use session_awareness_core::mark_caller_thread;

use crate::error::{Code, IntoJs};
use crate::js_signal::JsSignal;
use crate::session_state::NativeSessionState;

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
        let signal = JsSignal::new(deliver).js()?;
        self.store.set_notice_signal(Some(signal));
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
