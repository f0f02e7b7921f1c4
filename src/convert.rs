//! Reading loosely-typed JS input. Every argument of every method comes through here, so a
//! value of the wrong type is always an `ERR_INVALID_ARG` core error (never one of napi's own
//! statuses, never a bare `TypeError`), and `null` for an optional value or member means absent
//! (§5). `record` reports these errors through `onError`; the other methods throw them.

use std::ffi::CStr;

use napi::bindgen_prelude::{
    FromNapiValue, Function, FunctionRef, JsObjectValue, JsValue, JsValuesTupleIntoVec, Object,
    Unknown,
};
use napi::{sys, ValueType};
use serde_json::{Map, Number, Value};
use session_awareness_core::{Error, RecordInput, Result};

/// Nesting deeper than this is refused; it also stops a cyclic payload.
const MAX_PAYLOAD_DEPTH: usize = 32;
/// A payload with more entries than this cannot fit in 4096 bytes anyway.
const MAX_PAYLOAD_ENTRIES: usize = 4096;

fn napi_err(e: napi::Error) -> Error {
    Error::invalid(e.reason.clone())
}

fn field<'a>(obj: &Object<'a>, name: &str) -> Result<Option<Unknown<'a>>> {
    let v: Option<Unknown<'a>> = obj.get(name).map_err(napi_err)?;
    match v {
        Some(u) if u.get_type().map_err(napi_err)? == ValueType::Null => Ok(None),
        other => Ok(other),
    }
}

fn as_string(v: Unknown<'_>, name: &str) -> Result<String> {
    if v.get_type().map_err(napi_err)? != ValueType::String {
        return Err(Error::invalid(format!("{name} must be a string")));
    }
    // SAFETY: the type was checked just above.
    #[allow(unsafe_code)]
    unsafe { v.cast::<String>() }.map_err(napi_err)
}

/// An optional string field: undefined and null are absent; other types are refused.
pub fn opt_string(obj: &Object<'_>, name: &str) -> Result<Option<String>> {
    field(obj, name)?.map(|v| as_string(v, name)).transpose()
}

/// A required string field.
pub fn req_string(obj: &Object<'_>, name: &str) -> Result<String> {
    opt_string(obj, name)?.ok_or_else(|| Error::invalid(format!("{name} is required")))
}

/// An optional number field.
pub fn opt_number(obj: &Object<'_>, name: &str) -> Result<Option<f64>> {
    let Some(v) = field(obj, name)? else {
        return Ok(None);
    };
    if v.get_type().map_err(napi_err)? != ValueType::Number {
        return Err(Error::invalid(format!("{name} must be a number")));
    }
    #[allow(unsafe_code)]
    // SAFETY: the type was checked just above.
    unsafe { v.cast::<f64>() }.map(Some).map_err(napi_err)
}

/// An optional boolean field.
pub fn opt_bool(obj: &Object<'_>, name: &str) -> Result<Option<bool>> {
    let Some(v) = field(obj, name)? else {
        return Ok(None);
    };
    if v.get_type().map_err(napi_err)? != ValueType::Boolean {
        return Err(Error::invalid(format!("{name} must be a boolean")));
    }
    #[allow(unsafe_code)]
    // SAFETY: the type was checked just above.
    unsafe { v.cast::<bool>() }.map(Some).map_err(napi_err)
}

fn as_object<'a>(v: Unknown<'a>, name: &str) -> Result<Object<'a>> {
    if v.get_type().map_err(napi_err)? != ValueType::Object {
        return Err(Error::invalid(format!("{name} must be an object")));
    }
    #[allow(unsafe_code)]
    // SAFETY: the type was checked just above.
    unsafe { v.cast::<Object<'a>>() }.map_err(napi_err)
}

/// An optional array of strings.
pub fn opt_string_array(obj: &Object<'_>, name: &str) -> Result<Vec<String>> {
    field(obj, name)?.map_or(Ok(Vec::new()), |v| string_array(v, name))
}

/// A required string argument.
pub fn string(v: Unknown<'_>, name: &str) -> Result<String> {
    as_string(v, name)
}

/// An optional string argument: undefined and null are absent.
pub fn opt_string_arg(v: Option<Unknown<'_>>, name: &str) -> Result<Option<String>> {
    v.map(|v| as_string(v, name)).transpose()
}

/// A required number argument (any number: range rules belong to the core).
pub fn number(v: Unknown<'_>, name: &str) -> Result<f64> {
    if v.get_type().map_err(napi_err)? != ValueType::Number {
        return Err(Error::invalid(format!("{name} must be a number")));
    }
    #[allow(unsafe_code)]
    // SAFETY: the type was checked just above.
    unsafe { v.cast::<f64>() }.map_err(napi_err)
}

/// An optional options-object argument: undefined and null are absent; anything but a plain
/// object (an array, a string, a function, …) is refused.
pub fn options<'a>(v: Option<Unknown<'a>>, name: &str) -> Result<Option<Object<'a>>> {
    let Some(v) = v else {
        return Ok(None);
    };
    let obj = as_object(v, name)?;
    if obj.is_array().map_err(napi_err)? {
        return Err(Error::invalid(format!("{name} must be an object")));
    }
    Ok(Some(obj))
}

/// An optional function member, borrowed for the current call.
pub fn opt_function<'a, Args: JsValuesTupleIntoVec, Ret>(
    obj: &Object<'a>,
    name: &str,
) -> Result<Option<Function<'a, Args, Ret>>> {
    let Some(v) = field(obj, name)? else {
        return Ok(None);
    };
    if v.get_type().map_err(napi_err)? != ValueType::Function {
        return Err(Error::invalid(format!("{name} must be a function")));
    }
    #[allow(unsafe_code)]
    // SAFETY: the type was checked just above.
    unsafe { v.cast::<Function<'a, Args, Ret>>() }
        .map(Some)
        .map_err(napi_err)
}

/// An optional function member, kept beyond the current call.
pub fn opt_function_ref<Args: JsValuesTupleIntoVec, Ret>(
    obj: &Object<'_>,
    name: &str,
) -> Result<Option<FunctionRef<Args, Ret>>> {
    opt_function::<Args, Ret>(obj, name)?
        .map(|f| f.create_ref().map_err(napi_err))
        .transpose()
}

/// An array of strings.
pub fn string_array(v: Unknown<'_>, name: &str) -> Result<Vec<String>> {
    let arr = as_object(v, name)?;
    if !arr.is_array().map_err(napi_err)? {
        return Err(Error::invalid(format!(
            "{name} must be an array of strings"
        )));
    }
    let len = arr.get_array_length().map_err(napi_err)?;
    (0..len)
        .map(|i| {
            let item: Unknown<'_> = arr.get_element(i).map_err(napi_err)?;
            as_string(item, name)
        })
        .collect()
}

/// A `{ sessionKey, agentId? }` reference, as `stateVersions` takes them.
pub fn session_refs(v: Unknown<'_>, name: &str) -> Result<Vec<(String, Option<String>)>> {
    let arr = as_object(v, name)?;
    if !arr.is_array().map_err(napi_err)? {
        return Err(Error::invalid(format!("{name} must be an array")));
    }
    let len = arr.get_array_length().map_err(napi_err)?;
    (0..len)
        .map(|i| {
            let item: Unknown<'_> = arr.get_element(i).map_err(napi_err)?;
            let obj = options(Some(item), name)?
                .ok_or_else(|| Error::invalid(format!("{name} must hold objects")))?;
            Ok((
                req_string(&obj, "sessionKey")?,
                opt_string(&obj, "agentId")?,
            ))
        })
        .collect()
}

/// A string argument read into a buffer on the stack when it is short (session keys are), so
/// the calls every turn makes (the empty `drain`) allocate nothing for it.
pub struct Key {
    buf: [u8; 256],
    len: usize,
    long: Option<String>,
}

impl Key {
    /// Reads a string argument; another type is `ERR_INVALID_ARG`, as for [`string`].
    pub fn read(v: Unknown<'_>, name: &str) -> Result<Key> {
        if v.get_type().map_err(napi_err)? != ValueType::String {
            return Err(Error::invalid(format!("{name} must be a string")));
        }
        let mut key = Key {
            buf: [0; 256],
            len: 0,
            long: None,
        };
        #[allow(unsafe_code)]
        // SAFETY: `v` is a string of the call in progress; napi writes at most 255 bytes and
        // a NUL into the 256-byte buffer.
        let status = unsafe {
            napi::sys::napi_get_value_string_utf8(
                v.value().env,
                v.value().value,
                key.buf.as_mut_ptr().cast(),
                key.buf.len(),
                &mut key.len,
            )
        };
        // napi writes whole characters only: a longer string fills at least 252 bytes, and
        // up to 251 the string is surely whole (and valid UTF-8, which napi transcoded).
        if status != napi::sys::Status::napi_ok
            || key.len >= key.buf.len() - 4
            || std::str::from_utf8(&key.buf[..key.len]).is_err()
        {
            key.long = Some(as_string(v, name)?);
        }
        Ok(key)
    }

    /// The string.
    pub fn as_str(&self) -> &str {
        match &self.long {
            Some(s) => s,
            #[allow(unsafe_code)]
            // SAFETY: `read` keeps the buffer only after `from_utf8` accepted these bytes, and
            // nothing writes to it afterwards. The empty drain reads its key here on every
            // turn, so the check is not repeated.
            None => unsafe { std::str::from_utf8_unchecked(&self.buf[..self.len]) },
        }
    }
}

/// Reads the fields of one JS object with as few Node-API calls as it can: one lookup and one
/// type check per field, and one read for a string of up to 251 bytes (napi-rs's accessors
/// make the key, look it up, check the type three times and read a string twice). `record`
/// reads thirteen fields on every call.
struct Fields<'a> {
    env: sys::napi_env,
    src: Source<'a>,
}

/// Where the fields come from: the input object, or the values the JS side of `record` read
/// from it (in [`RECORD_FIELDS`] order).
enum Source<'a> {
    Object(Object<'a>),
    Values(&'a [sys::napi_value; 13]),
}

/// `record`'s input fields, in the order they are read.
pub const RECORD_FIELDS: [&CStr; 13] = [
    c"sessionKey",
    c"agentId",
    c"sessionId",
    c"kind",
    c"actorType",
    c"actorId",
    c"runId",
    c"summary",
    c"payload",
    c"occurredAt",
    c"dedupeKey",
    c"watchers",
    c"onlyIfWatched",
];

/// A looked-up field: absent (undefined or null) or a value of a known type.
enum Field {
    Absent,
    Present(sys::napi_value, sys::napi_valuetype),
}

impl<'a> Fields<'a> {
    fn get(&self, i: usize) -> Result<Field> {
        let name = RECORD_FIELDS[i];
        let mut v = std::ptr::null_mut();
        let mut t = 0;
        #[allow(unsafe_code)]
        // SAFETY: `obj` and the values are live values of the call in progress on `env`;
        // `name` is a C string.
        let ok = unsafe {
            let found = match &self.src {
                Source::Object(obj) => {
                    sys::napi_get_named_property(self.env, obj.value().value, name.as_ptr(), &mut v)
                        == sys::Status::napi_ok
                }
                Source::Values(values) => {
                    v = values[i];
                    true
                }
            };
            found && sys::napi_typeof(self.env, v, &mut t) == sys::Status::napi_ok
        };
        if !ok {
            // A throwing getter: record reports it instead of throwing it.
            let mut exception = std::ptr::null_mut();
            #[allow(unsafe_code)]
            // SAFETY: as above.
            unsafe {
                sys::napi_get_and_clear_last_exception(self.env, &mut exception)
            };
            return Err(Error::invalid(format!(
                "{} could not be read",
                name.to_string_lossy()
            )));
        }
        Ok(match t {
            sys::ValueType::napi_undefined | sys::ValueType::napi_null => Field::Absent,
            _ => Field::Present(v, t),
        })
    }

    fn string_value(&self, v: sys::napi_value) -> Result<String> {
        read_string(self.env, v)
    }

    fn opt_string(&self, i: usize) -> Result<Option<String>> {
        let name = RECORD_FIELDS[i];
        match self.get(i)? {
            Field::Absent => Ok(None),
            Field::Present(v, sys::ValueType::napi_string) => self.string_value(v).map(Some),
            Field::Present(..) => Err(Error::invalid(format!(
                "{} must be a string",
                name.to_string_lossy()
            ))),
        }
    }

    fn req_string(&self, i: usize) -> Result<String> {
        let name = RECORD_FIELDS[i];
        self.opt_string(i)?
            .ok_or_else(|| Error::invalid(format!("{} is required", name.to_string_lossy())))
    }

    fn opt_number(&self, i: usize) -> Result<Option<f64>> {
        let name = RECORD_FIELDS[i];
        match self.get(i)? {
            Field::Absent => Ok(None),
            Field::Present(v, sys::ValueType::napi_number) => {
                let mut n = 0.0;
                #[allow(unsafe_code)]
                // SAFETY: `v` is a number of the call in progress.
                let status = unsafe { sys::napi_get_value_double(self.env, v, &mut n) };
                if status == sys::Status::napi_ok {
                    Ok(Some(n))
                } else {
                    Err(Error::invalid(format!(
                        "{} could not be read",
                        name.to_string_lossy()
                    )))
                }
            }
            Field::Present(..) => Err(Error::invalid(format!(
                "{} must be a number",
                name.to_string_lossy()
            ))),
        }
    }

    fn opt_bool(&self, i: usize) -> Result<Option<bool>> {
        let name = RECORD_FIELDS[i];
        match self.get(i)? {
            Field::Absent => Ok(None),
            Field::Present(v, sys::ValueType::napi_boolean) => {
                let mut b = false;
                #[allow(unsafe_code)]
                // SAFETY: `v` is a boolean of the call in progress.
                let status = unsafe { sys::napi_get_value_bool(self.env, v, &mut b) };
                if status == sys::Status::napi_ok {
                    Ok(Some(b))
                } else {
                    Err(Error::invalid(format!(
                        "{} could not be read",
                        name.to_string_lossy()
                    )))
                }
            }
            Field::Present(..) => Err(Error::invalid(format!(
                "{} must be a boolean",
                name.to_string_lossy()
            ))),
        }
    }

    fn unknown(&self, i: usize) -> Result<Option<Unknown<'a>>> {
        match self.get(i)? {
            Field::Absent => Ok(None),
            #[allow(unsafe_code)]
            // SAFETY: `v` is a value of the call in progress on `env`.
            Field::Present(v, _) => Ok(Some(unsafe { Unknown::from_raw_unchecked(self.env, v) })),
        }
    }

    fn opt_string_array(&self, i: usize) -> Result<Vec<String>> {
        let name = RECORD_FIELDS[i];
        let label = name.to_string_lossy();
        let arr = match self.get(i)? {
            Field::Absent => return Ok(Vec::new()),
            Field::Present(v, sys::ValueType::napi_object) => v,
            Field::Present(..) => return Err(Error::invalid(format!("{label} must be an object"))),
        };
        let mut is_array = false;
        let mut len = 0u32;
        #[allow(unsafe_code)]
        // SAFETY: `arr` is an object of the call in progress.
        let ok = unsafe {
            sys::napi_is_array(self.env, arr, &mut is_array) == sys::Status::napi_ok
                && (!is_array
                    || sys::napi_get_array_length(self.env, arr, &mut len) == sys::Status::napi_ok)
        };
        if !ok || !is_array {
            return Err(Error::invalid(format!(
                "{label} must be an array of strings"
            )));
        }
        (0..len)
            .map(|i| {
                let mut item = std::ptr::null_mut();
                let mut t = 0;
                #[allow(unsafe_code)]
                // SAFETY: `arr` is an array of the call in progress.
                let ok = unsafe {
                    sys::napi_get_element(self.env, arr, i, &mut item) == sys::Status::napi_ok
                        && sys::napi_typeof(self.env, item, &mut t) == sys::Status::napi_ok
                };
                if !ok || t != sys::ValueType::napi_string {
                    return Err(Error::invalid(format!("{label} must be a string")));
                }
                self.string_value(item)
            })
            .collect()
    }
}

/// Reads the `record` input object (§5).
pub fn record_input(input: Unknown<'_>) -> Result<RecordInput> {
    if matches!(
        input.get_type().map_err(napi_err)?,
        ValueType::Null | ValueType::Undefined
    ) {
        return Err(Error::invalid("record needs an input object"));
    }
    let obj = as_object(input, "input")?;
    record_fields(Fields {
        env: obj.value().env,
        src: Source::Object(obj),
    })
}

/// Reads `record`'s input from the values of its fields, already read from the object by
/// the JS side of `record`, in [`RECORD_FIELDS`] order.
pub fn record_input_values(
    env: sys::napi_env,
    values: &[sys::napi_value; 13],
) -> Result<RecordInput> {
    record_fields(Fields {
        env,
        src: Source::Values(values),
    })
}

fn record_fields(f: Fields<'_>) -> Result<RecordInput> {
    Ok(RecordInput {
        session_key: f.req_string(0)?,
        agent_id: f.opt_string(1)?,
        session_id: f.opt_string(2)?,
        kind: f.req_string(3)?,
        actor_type: f.req_string(4)?,
        actor_id: f.opt_string(5)?,
        run_id: f.opt_string(6)?,
        summary: f.req_string(7)?,
        payload: f.unknown(8)?.map(|v| payload(v, 0)).transpose()?,
        occurred_at: f.opt_number(9)?,
        dedupe_key: f.opt_string(10)?,
        watchers: f.opt_string_array(11)?,
        only_if_watched: f.opt_bool(12)?.unwrap_or(false),
    })
}

/// Converts a JS value to JSON for a payload: plain data only (objects, arrays, strings,
/// finite numbers, booleans, null). `undefined` members are left out, as `JSON.stringify`
/// does; functions, symbols, BigInts and non-finite numbers are refused, and so is nesting
/// deeper than 32 levels (which also stops a cyclic value).
pub fn payload(v: Unknown<'_>, depth: usize) -> Result<Value> {
    let env = v.value().env;
    let mut t = 0;
    #[allow(unsafe_code)]
    // SAFETY: `v` is a value of the call in progress on `env`.
    let status = unsafe { sys::napi_typeof(env, v.value().value, &mut t) };
    if status != sys::Status::napi_ok {
        return Err(read_failed(env, "payload"));
    }
    payload_value(env, v.value().value, t, depth)
}

/// A failed read (a throwing getter or proxy trap): the pending exception is cleared, so that
/// `record` reports it instead of throwing it.
fn read_failed(env: sys::napi_env, what: &str) -> Error {
    let mut exception = std::ptr::null_mut();
    #[allow(unsafe_code)]
    // SAFETY: `env` is the env of the call in progress.
    unsafe {
        sys::napi_get_and_clear_last_exception(env, &mut exception)
    };
    Error::invalid(format!("{what} could not be read"))
}

// The payload walk, on raw Node-API calls: one lookup per member with the key value the
// property-name list already holds, one type check, one read (napi-rs's accessors make each
// key again and check each type twice).
#[allow(unsafe_code)]
fn payload_value(
    env: sys::napi_env,
    v: sys::napi_value,
    t: sys::napi_valuetype,
    depth: usize,
) -> Result<Value> {
    if depth > MAX_PAYLOAD_DEPTH {
        return Err(Error::invalid(
            "payload is nested too deeply (or is cyclic)",
        ));
    }
    let ok = |status: sys::napi_status| -> Result<()> {
        if status == sys::Status::napi_ok {
            Ok(())
        } else {
            Err(read_failed(env, "payload"))
        }
    };
    // SAFETY (every block below): `v` and the values read from it belong to the call in
    // progress on `env`, and each read matches the type checked before it.
    match t {
        sys::ValueType::napi_null | sys::ValueType::napi_undefined => Ok(Value::Null),
        sys::ValueType::napi_boolean => {
            let mut b = false;
            ok(unsafe { sys::napi_get_value_bool(env, v, &mut b) })?;
            Ok(Value::Bool(b))
        }
        sys::ValueType::napi_string => Ok(Value::String(read_string(env, v)?)),
        sys::ValueType::napi_number => {
            let mut n = 0.0;
            ok(unsafe { sys::napi_get_value_double(env, v, &mut n) })?;
            let num = if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 {
                Some(Number::from(n as i64))
            } else {
                Number::from_f64(n)
            };
            num.map(Value::Number)
                .ok_or_else(|| Error::invalid("payload numbers must be finite"))
        }
        sys::ValueType::napi_object => {
            let mut is_array = false;
            ok(unsafe { sys::napi_is_array(env, v, &mut is_array) })?;
            let (list, len) = if is_array {
                (v, array_len(env, v)?)
            } else {
                let mut names = std::ptr::null_mut();
                ok(unsafe { sys::napi_get_property_names(env, v, &mut names) })?;
                (names, array_len(env, names)?)
            };
            if len as usize > MAX_PAYLOAD_ENTRIES {
                return Err(Error::invalid("payload is too large"));
            }
            let element = |i: u32| -> Result<sys::napi_value> {
                let mut e = std::ptr::null_mut();
                ok(unsafe { sys::napi_get_element(env, list, i, &mut e) })?;
                Ok(e)
            };
            let type_of = |x: sys::napi_value| -> Result<sys::napi_valuetype> {
                let mut t = 0;
                ok(unsafe { sys::napi_typeof(env, x, &mut t) })?;
                Ok(t)
            };
            if is_array {
                let mut out = Vec::with_capacity(len as usize);
                for i in 0..len {
                    let item = element(i)?;
                    out.push(payload_value(env, item, type_of(item)?, depth + 1)?);
                }
                return Ok(Value::Array(out));
            }
            let mut map = Map::new();
            for i in 0..len {
                let key = element(i)?;
                let mut item = std::ptr::null_mut();
                ok(unsafe { sys::napi_get_property(env, v, key, &mut item) })?;
                // Undefined members are left out, as JSON.stringify does.
                let t = type_of(item)?;
                if t != sys::ValueType::napi_undefined {
                    map.insert(
                        read_string(env, key)?,
                        payload_value(env, item, t, depth + 1)?,
                    );
                }
            }
            Ok(Value::Object(map))
        }
        sys::ValueType::napi_symbol => Err(Error::invalid("payload cannot hold a Symbol value")),
        sys::ValueType::napi_function => {
            Err(Error::invalid("payload cannot hold a Function value"))
        }
        sys::ValueType::napi_bigint => Err(Error::invalid("payload cannot hold a BigInt value")),
        _ => Err(Error::invalid("payload cannot hold this value")),
    }
}

#[allow(unsafe_code)]
fn array_len(env: sys::napi_env, v: sys::napi_value) -> Result<u32> {
    let mut len = 0;
    // SAFETY: `v` is an array of the call in progress on `env`.
    if unsafe { sys::napi_get_array_length(env, v, &mut len) } == sys::Status::napi_ok {
        Ok(len)
    } else {
        Err(read_failed(env, "payload"))
    }
}

/// Reads a JS string: one call for up to 251 bytes of UTF-8, two beyond.
#[allow(unsafe_code)]
fn read_string(env: sys::napi_env, v: sys::napi_value) -> Result<String> {
    let mut buf = [0u8; 256];
    let mut len = 0usize;
    // SAFETY: `v` is a string of the call in progress; napi writes at most 255 bytes and a NUL.
    let status = unsafe {
        sys::napi_get_value_string_utf8(env, v, buf.as_mut_ptr().cast(), buf.len(), &mut len)
    };
    if status != sys::Status::napi_ok {
        return Err(read_failed(env, "a string"));
    }
    // napi writes whole characters only: a longer string fills at least 252 bytes.
    if len < buf.len() - 4 {
        return String::from_utf8(buf[..len].to_vec()).map_err(|e| Error::invalid(e.to_string()));
    }
    // SAFETY: as above.
    unsafe { <String as FromNapiValue>::from_napi_value(env, v) }.map_err(napi_err)
}
