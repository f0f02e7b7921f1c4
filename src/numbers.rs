//! Numbers handed to JavaScript as a `Float64Array` whose memory V8 owns.
//!
//! napi-rs hands a `Float64Array` made from a `Vec` to V8 as an external buffer: the `Vec`
//! stays allocated until the buffer's finalizer runs, and Node runs such finalizers from the
//! event loop, not from the garbage collector. A synchronous loop of reads (a migration, a batch
//! reconcile) therefore held every result's numbers until it yielded: 200,000
//! `changesSince` of 100 events grew the RSS to 1.9 GB. [`Numbers`] copies them into an
//! `ArrayBuffer` V8 allocates, which the collector frees with the array, with no finalizer.

use std::ptr;

use napi::bindgen_prelude::{sys, Result, ToNapiValue, TypeName, ValueType};
use napi::{check_status, Error, Status};

/// Numbers for JavaScript, copied into a V8-owned `Float64Array` when they cross.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Numbers(pub Vec<f64>);

impl TypeName for Numbers {
    fn type_name() -> &'static str {
        "Float64Array"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ToNapiValue for Numbers {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        let len = val.0.len();
        let bytes = std::mem::size_of_val(val.0.as_slice());
        let mut buffer = ptr::null_mut();
        let mut data = ptr::null_mut();
        // SAFETY: `env` is the live environment of this call; V8 allocates `bytes` bytes
        // (zeroed), and `data` points to them.
        check_status!(
            unsafe { sys::napi_create_arraybuffer(env, bytes, &mut data, &mut buffer) },
            "creating the ArrayBuffer of a Float64Array"
        )?;
        if bytes > 0 {
            if data.is_null() {
                return Err(Error::new(
                    Status::GenericFailure,
                    "ArrayBuffer without memory",
                ));
            }
            // SAFETY: `data` holds `bytes` writable bytes, not overlapping the Vec.
            unsafe { ptr::copy_nonoverlapping(val.0.as_ptr().cast::<u8>(), data.cast(), bytes) };
        }
        let mut array = ptr::null_mut();
        // SAFETY: `buffer` is the ArrayBuffer just made, `len` f64s long.
        check_status!(
            unsafe {
                sys::napi_create_typedarray(
                    env,
                    sys::TypedarrayType::float64_array,
                    len,
                    buffer,
                    0,
                    &mut array,
                )
            },
            "creating a Float64Array"
        )?;
        Ok(array)
    }
}
