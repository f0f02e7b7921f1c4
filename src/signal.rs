//! The notice queue's signal words, shared with JavaScript without a copy: the one place of
//! the binding that hands addon memory to the engine.
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::ptr;
use std::sync::Arc;

use napi::bindgen_prelude::{Env, FromNapiValue, Int32Array};
use napi::{check_status, sys, Result};
use session_awareness_core::QueueSignal;

extern "C" fn release(_env: sys::napi_env, _data: *mut c_void, hint: *mut c_void) {
    // SAFETY: `hint` is the box made in `signal_words`; the engine runs this finalizer once,
    // when the buffer is collected, and nothing else frees the box once the buffer exists.
    drop(unsafe { Box::from_raw(hint.cast::<Arc<QueueSignal>>()) });
}

/// The words of `signal` as an `Int32Array` over their own memory, which the array keeps
/// alive (it holds one reference to `signal` until it is collected). `None` when the runtime
/// refuses external buffers: a copy would go stale, so the caller must then not use one.
pub fn signal_words(env: &Env, signal: Arc<QueueSignal>) -> Result<Option<Int32Array>> {
    let data = signal.words.as_ptr().cast_mut().cast::<c_void>();
    let hint = Box::into_raw(Box::new(signal)).cast::<c_void>();
    let raw = env.raw();
    // SAFETY: `data` points to three `AtomicI32` (12 bytes, i32-aligned) that live as long as the
    // `Arc` in `hint`, which `release` drops when the buffer is collected; if the buffer is not
    // made, `release` never runs and the box is dropped here instead. Every value made here
    // belongs to the native call in progress on `env`.
    let words = unsafe {
        let mut buffer = ptr::null_mut();
        let status =
            sys::napi_create_external_arraybuffer(raw, data, 12, Some(release), hint, &mut buffer);
        if status != sys::Status::napi_ok {
            drop(Box::from_raw(hint.cast::<Arc<QueueSignal>>()));
            return Ok(None);
        }
        let mut words = ptr::null_mut();
        check_status!(sys::napi_create_typedarray(
            raw,
            sys::TypedarrayType::int32_array,
            3,
            buffer,
            0,
            &mut words,
        ))?;
        Int32Array::from_napi_value(raw, words)?
    };
    Ok(Some(words))
}
