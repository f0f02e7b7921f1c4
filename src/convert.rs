//! Reading loosely-typed JS input. Every argument of every method comes through here, so a
//! value of the wrong type is always an `ERR_INVALID_ARG` core error (never one of napi's own
//! statuses, never a bare `TypeError`), and `null` for an optional value or member means absent
//! (§5). `record` reports these errors through `onError`; the other methods throw them.

use napi::bindgen_prelude::{
    Function, FunctionRef, JsObjectValue, JsValue, JsValuesTupleIntoVec, Object, Unknown,
};
use napi::ValueType;
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
            // Checked valid UTF-8 in `read`.
            None => std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default(),
        }
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
    Ok(RecordInput {
        session_key: req_string(&obj, "sessionKey")?,
        agent_id: opt_string(&obj, "agentId")?,
        session_id: opt_string(&obj, "sessionId")?,
        kind: req_string(&obj, "kind")?,
        actor_type: req_string(&obj, "actorType")?,
        actor_id: opt_string(&obj, "actorId")?,
        run_id: opt_string(&obj, "runId")?,
        summary: req_string(&obj, "summary")?,
        payload: field(&obj, "payload")?.map(|v| payload(v, 0)).transpose()?,
        occurred_at: opt_number(&obj, "occurredAt")?,
        dedupe_key: opt_string(&obj, "dedupeKey")?,
        watchers: opt_string_array(&obj, "watchers")?,
        only_if_watched: opt_bool(&obj, "onlyIfWatched")?.unwrap_or(false),
    })
}

/// Converts a JS value to JSON for a payload: plain data only (objects, arrays, strings,
/// finite numbers, booleans, null). `undefined` members are left out, as `JSON.stringify`
/// does; functions, symbols, BigInts and non-finite numbers are refused, and so is nesting
/// deeper than 32 levels (which also stops a cyclic value).
pub fn payload(v: Unknown<'_>, depth: usize) -> Result<Value> {
    if depth > MAX_PAYLOAD_DEPTH {
        return Err(Error::invalid(
            "payload is nested too deeply (or is cyclic)",
        ));
    }
    #[allow(unsafe_code)]
    // SAFETY: each cast below matches the type checked by its arm.
    unsafe {
        match v.get_type().map_err(napi_err)? {
            ValueType::Null => Ok(Value::Null),
            ValueType::Boolean => Ok(Value::Bool(v.cast::<bool>().map_err(napi_err)?)),
            ValueType::String => Ok(Value::String(v.cast::<String>().map_err(napi_err)?)),
            ValueType::Number => {
                let n = v.cast::<f64>().map_err(napi_err)?;
                let num = if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 {
                    Some(Number::from(n as i64))
                } else {
                    Number::from_f64(n)
                };
                num.map(Value::Number)
                    .ok_or_else(|| Error::invalid("payload numbers must be finite"))
            }
            ValueType::Object => {
                let obj = v.cast::<Object<'_>>().map_err(napi_err)?;
                if obj.is_array().map_err(napi_err)? {
                    let len = obj.get_array_length().map_err(napi_err)? as usize;
                    if len > MAX_PAYLOAD_ENTRIES {
                        return Err(Error::invalid("payload is too large"));
                    }
                    let mut out = Vec::with_capacity(len);
                    for i in 0..len {
                        let item: Unknown<'_> = obj.get_element(i as u32).map_err(napi_err)?;
                        out.push(match item.get_type().map_err(napi_err)? {
                            ValueType::Undefined => Value::Null,
                            _ => payload(item, depth + 1)?,
                        });
                    }
                    Ok(Value::Array(out))
                } else {
                    let keys = Object::keys(&obj).map_err(napi_err)?;
                    if keys.len() > MAX_PAYLOAD_ENTRIES {
                        return Err(Error::invalid("payload is too large"));
                    }
                    let mut map = Map::new();
                    for k in keys {
                        let item: Option<Unknown<'_>> = obj.get(&k).map_err(napi_err)?;
                        if let Some(item) = item {
                            map.insert(k, payload(item, depth + 1)?);
                        }
                    }
                    Ok(Value::Object(map))
                }
            }
            ValueType::Undefined => Ok(Value::Null),
            other => Err(Error::invalid(format!(
                "payload cannot hold a {other:?} value"
            ))),
        }
    }
}
