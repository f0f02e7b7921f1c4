//! Followers (semantics.md#follow): the registration of each open follower, and the one
//! signal per store that tells the TypeScript layer's hub, on the JS thread, that followed
//! sessions may have new rows. The hub then reads them itself; nothing is copied here.

use napi::bindgen_prelude::Function;
use napi::threadsafe_function::UnknownReturnValue;
use napi::Result;
use napi_derive::napi;

use crate::error::{Code, IntoJs};
use crate::js_signal::JsSignal;
use crate::session_state::NativeSessionState;

#[napi]
impl NativeSessionState {
    /// Calls `touched` on the JS thread soon after followed sessions were touched (a commit
    /// of this store, the poll, the PostgreSQL catch-up); a burst makes one call. `close`
    /// releases it; it never keeps Node alive.
    #[napi]
    pub fn follow_signal(&self, touched: Function<'_, (), UnknownReturnValue>) -> Result<(), Code> {
        let signal = JsSignal::new(touched).js()?;
        self.store.set_follow_signal(Some(signal));
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
