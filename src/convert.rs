//! Reading loosely-typed JS input without ever throwing from `record`: every shape error
//! becomes an `ERR_INVALID_ARG` core error that the caller reports through `onError`.

use napi::bindgen_prelude::{FromNapiValue, JsObjectValue, JsValue, Object, Unknown};
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

/// Converts an argument as napi would, except that a value of the wrong type is
/// `ERR_INVALID_ARG` like any other bad input, not an error named after a napi status.
pub fn arg<T: FromNapiValue>(v: Unknown<'_>, name: &str) -> Result<T> {
    let raw = v.value();
    #[allow(unsafe_code)]
    // SAFETY: `raw` is a live value of the env of the call being served.
    unsafe { T::from_napi_value(raw.env, raw.value) }
        .map_err(|e| Error::invalid(format!("{name}: {}", e.reason)))
}

/// An options argument: undefined and null are absent; anything but an object is refused.
pub fn options<T: FromNapiValue>(v: Option<Unknown<'_>>) -> Result<Option<T>> {
    let Some(v) = v else {
        return Ok(None);
    };
    match v.get_type().map_err(napi_err)? {
        ValueType::Undefined | ValueType::Null => Ok(None),
        ValueType::Object => arg(v, "options").map(Some),
        _ => Err(Error::invalid("options must be an object")),
    }
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
    let Some(v) = field(obj, name)? else {
        return Ok(Vec::new());
    };
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
