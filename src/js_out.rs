//! Results that cross the boundary many at a time (`changesSince`'s events, `stateVersions`,
//! `drain`/`peek`'s notices) or on every turn (`record`), built fast.
//!
//! What such a call costs is mostly the JS objects it creates. Made through Node-API, every
//! object starts empty and grows one property at a time (a hidden-class transition, and past
//! four properties a new backing store, each time), and every property name is interned again:
//! about 2 µs per event on the bench machine, as much as reading it from SQLite. JavaScript
//! object literals, compiled by V8, cost a fraction of that. So Rust packs the values into
//! one string and one `Float64Array` (lengths in UTF-16 units, numbers, flags), and a few small
//! functions, compiled once per `SessionState` from [`BUILDERS_JS`], cut the string and build
//! the objects with literals. The objects are the same plain objects with the same keys in the
//! same order (absent optional fields left out); payloads are parsed by one `JSON.parse`.
#![allow(unsafe_code)]
// SAFETY (for the whole module): every function takes the `napi_env` of the native call in
// progress, and every `napi_value` made or taken here lives in that call's handle scope and is
// never kept past it (`Js` is only returned to napi-rs, which hands it to JS at once).

use std::ffi::c_void;
use std::ptr;

use napi::bindgen_prelude::{
    Env, FromNapiValue, Function, FunctionRef, JsObjectValue, Object, ToNapiValue,
};
use napi::{check_status, sys, JsValue, Result};
use session_awareness_core::{Changes, Notice, StateEvent};

/// A JS value made during the current native call, returned as it is.
#[derive(Clone, Copy)]
pub struct Js(sys::napi_value);

impl ToNapiValue for Js {
    unsafe fn to_napi_value(_env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
        Ok(val.0)
    }
}

impl Js {
    /// The raw value.
    pub fn raw(self) -> sys::napi_value {
        self.0
    }
}

impl FromNapiValue for Js {
    unsafe fn from_napi_value(_env: sys::napi_env, val: sys::napi_value) -> Result<Self> {
        Ok(Js(val))
    }
}

/// The JS half. Field lengths of -1 mean absent, -2 the same value as the row before.
const BUILDERS_JS: &str = r#"(() => {
  'use strict';
  function events(text, m, payloadText) {
    const payloads = payloadText === null ? null : JSON.parse(payloadText);
    const out = [];
    let at = 0, p = 0, len = 0, sessionKey = '', agentId = '', kind = '', actorType = '';
    for (let j = 0; j < m.length; j += 11) {
      len = m[j + 2]; if (len !== -2) { sessionKey = text.slice(at, at + len); at += len; }
      len = m[j + 3]; if (len !== -2) { agentId = text.slice(at, at + len); at += len; }
      len = m[j + 4]; if (len !== -2) { kind = text.slice(at, at + len); at += len; }
      len = m[j + 5]; if (len !== -2) { actorType = text.slice(at, at + len); at += len; }
      const e = { sequence: m[j], sessionKey, agentId, kind, actorType };
      len = m[j + 6]; if (len >= 0) { e.actorId = text.slice(at, at + len); at += len; }
      len = m[j + 7]; if (len >= 0) { e.runId = text.slice(at, at + len); at += len; }
      len = m[j + 8]; if (len >= 0) { e.sessionId = text.slice(at, at + len); at += len; }
      e.occurredAt = m[j + 1];
      len = m[j + 9]; e.summary = text.slice(at, at + len); at += len;
      if (m[j + 10] === 1) e.payload = payloads[p++];
      out.push(e);
    }
    return out;
  }
  function changes(text, m, payloadText, stateVersion, truncated, earliest, historyGap) {
    return {
      stateVersion,
      stateChanges: {
        events: events(text, m, payloadText),
        truncated,
        earliestAvailableSequence: earliest,
        historyGap,
      },
    };
  }
  function versions(text, m) {
    const out = [];
    let at = 0, len = 0, sessionKey = '', agentId = '';
    for (let j = 0; j < m.length; j += 3) {
      len = m[j]; sessionKey = text.slice(at, at + len); at += len;
      len = m[j + 1]; if (len !== -2) { agentId = text.slice(at, at + len); at += len; }
      out.push({ sessionKey, agentId, stateVersion: m[j + 2] });
    }
    return out;
  }
  function notices(watcherKey, text, m) {
    const out = [];
    let at = 0, len = 0;
    for (let j = 0; j < m.length; j += 4) {
      len = m[j]; const targetKey = text.slice(at, at + len); at += len;
      len = m[j + 2]; const noticeText = text.slice(at, at + len); at += len;
      len = m[j + 3]; const contextKey = text.slice(at, at + len); at += len;
      out.push({ watcherKey, targetKey, changesSince: m[j + 1], text: noticeText, contextKey });
    }
    return out;
  }
  return { events, changes, versions, notices };
})()"#;

/// The words of `signal` as an `Int32Array` over their own memory, which the array keeps
/// alive (it holds one reference to `signal` until it is collected). `None` when the
/// runtime refuses external buffers.
pub fn signal_words(
    env: &Env,
    signal: std::sync::Arc<session_awareness_core::queue::QueueSignal>,
) -> Result<Option<Js>> {
    unsafe extern "C" fn release(_env: sys::napi_env, _data: *mut c_void, hint: *mut c_void) {
        // SAFETY: `hint` is the box made below, released once, by this finalizer.
        drop(unsafe {
            Box::from_raw(hint.cast::<std::sync::Arc<session_awareness_core::queue::QueueSignal>>())
        });
    }
    let data = signal.words.as_ptr().cast_mut().cast::<c_void>();
    let hint = Box::into_raw(Box::new(signal)).cast::<c_void>();
    let mut buffer = ptr::null_mut();
    // SAFETY: `data` points to two `AtomicI32` (8 bytes, i32-aligned) that live as long as the
    // `Arc` in `hint`, which the finalizer releases when the buffer is collected.
    let status = unsafe {
        sys::napi_create_external_arraybuffer(env.raw(), data, 8, Some(release), hint, &mut buffer)
    };
    if status != sys::Status::napi_ok {
        // SAFETY: the buffer was not made, so the finalizer will never run.
        drop(unsafe {
            Box::from_raw(hint.cast::<std::sync::Arc<session_awareness_core::queue::QueueSignal>>())
        });
        return Ok(None);
    }
    let mut words = ptr::null_mut();
    check_status!(unsafe {
        sys::napi_create_typedarray(
            env.raw(),
            sys::TypedarrayType::int32_array,
            2,
            buffer,
            0,
            &mut words,
        )
    })?;
    Ok(Some(Js(words)))
}

/// The JS side of `record` and `drain`, installed over the addon's methods when the module
/// loads (`install_js`).
///
/// `record`: reading thirteen fields through Node-API costs two calls each, a
/// property-name string and a slow-path lookup; read here they cost nothing, and the values
/// go to the addon as arguments of one call (`recordFields`). Anything unusual (not an
/// object, a getter or proxy trap that throws) takes the addon's own `record`, which reads
/// and reports exactly as before. The event comes back as one string ([`Builders::event_packed`]).
///
/// `drain`: a store's first drain for a watcher goes to the addon, which checks the key and
/// starts serving the watcher (§12). After that, while nothing at all is queued in the store
/// (the signal words, [`signal_words`]), a drain for that watcher answers `[]` itself: the
/// addon would have run no SQL and returned the same. A watcher that stops being served, a
/// closed store, or any queued notice sends the call to the addon again.
pub const INSTALL_JS: &str = r#"((SessionState) => {
  'use strict';
  const proto = SessionState.prototype;
  const slow = proto.record;
  const fields = proto.recordFields;
  const drainAddon = proto.drain;
  const drainSignal = proto.drainSignal;
  if (typeof fields !== 'function' || typeof drainSignal !== 'function') return;
  delete proto.recordFields;
  delete proto.drainSignal;
  const drains = new WeakMap();
  const drain = {
    drain(watcherKey) {
      let d = drains.get(this);
      if (d !== undefined && d.words[0] === 0 && d.words[1] === d.unserved && d.served.has(watcherKey)) {
        return [];
      }
      const out = drainAddon.call(this, watcherKey);
      if (d === undefined) {
        const words = drainSignal.call(this);
        if (words === null) return out;
        d = { words, unserved: words[1], served: new Set() };
        drains.set(this, d);
      }
      if (d.words[1] !== d.unserved) {
        d.served.clear();
        d.unserved = d.words[1];
      }
      d.served.add(watcherKey);
      return out;
    },
  }.drain;
  Object.defineProperty(proto, 'drain', {
    value: drain, writable: true, enumerable: true, configurable: true,
  });
  function build(t) {
    let at = 11, len = 0;
    len = t.charCodeAt(8); const sequence = +t.slice(at, at + len); at += len;
    len = t.charCodeAt(9); const occurredAt = +t.slice(at, at + len); at += len;
    len = t.charCodeAt(0); const sessionKey = t.slice(at, at + len); at += len;
    len = t.charCodeAt(1); const agentId = t.slice(at, at + len); at += len;
    len = t.charCodeAt(2); const kind = t.slice(at, at + len); at += len;
    len = t.charCodeAt(3); const actorType = t.slice(at, at + len); at += len;
    const e = { sequence, sessionKey, agentId, kind, actorType };
    len = t.charCodeAt(4); if (len !== 0xffff) { e.actorId = t.slice(at, at + len); at += len; }
    len = t.charCodeAt(5); if (len !== 0xffff) { e.runId = t.slice(at, at + len); at += len; }
    len = t.charCodeAt(6); if (len !== 0xffff) { e.sessionId = t.slice(at, at + len); at += len; }
    e.occurredAt = occurredAt;
    len = t.charCodeAt(7); e.summary = t.slice(at, at + len); at += len;
    len = t.charCodeAt(10); if (len !== 0xffff) e.payload = JSON.parse(t.slice(at, at + len));
    return e;
  }
  const built = (r) => (typeof r === 'string' ? build(r) : r);
  const record = {
    record(input) {
      if (typeof input !== 'object' || input === null) return built(slow.call(this, input));
      let a, b, c, d, e, f, g, h, i, j, k, l, m;
      try {
        a = input.sessionKey; b = input.agentId; c = input.sessionId; d = input.kind;
        e = input.actorType; f = input.actorId; g = input.runId; h = input.summary;
        i = input.payload; j = input.occurredAt; k = input.dedupeKey; l = input.watchers;
        m = input.onlyIfWatched;
      } catch {
        return built(slow.call(this, input));
      }
      return built(fields.call(this, a, b, c, d, e, f, g, h, i, j, k, l, m));
    },
  }.record;
  Object.defineProperty(proto, 'record', {
    value: record, writable: true, enumerable: true, configurable: true,
  });
})"#;

type Builder = FunctionRef<(), Js>;

/// The compiled JS half, kept by each `SessionState`.
pub struct Builders {
    events: Builder,
    changes: Builder,
    versions: Builder,
    notices: Builder,
}

impl Builders {
    /// Compiles [`BUILDERS_JS`] in this environment.
    pub fn new(env: &Env) -> Result<Self> {
        let all: Object<'_> = env.run_script(BUILDERS_JS)?;
        let get = |name: &str| -> Result<Builder> {
            let f: Function<'_, (), Js> = all.get_named_property(name)?;
            f.create_ref()
        };
        Ok(Builders {
            events: get("events")?,
            changes: get("changes")?,
            versions: get("versions")?,
            notices: get("notices")?,
        })
    }

    fn call(&self, env: &Env, f: &Builder, args: &[Js]) -> Result<Js> {
        let f = f.borrow_back(env)?;
        let raw_env = env.raw();
        let mut undefined = ptr::null_mut();
        check_status!(unsafe { sys::napi_get_undefined(raw_env, &mut undefined) })?;
        let raw: Vec<sys::napi_value> = args.iter().map(|a| a.0).collect();
        let mut result = ptr::null_mut();
        check_status!(unsafe {
            sys::napi_call_function(
                raw_env,
                undefined,
                f.value().value,
                raw.len(),
                raw.as_ptr(),
                &mut result,
            )
        })?;
        Ok(Js(result))
    }

    /// `StateEvent` objects.
    pub fn events(&self, env: &Env, events: &[StateEvent]) -> Result<Js> {
        let (text, m, payloads) = pack_events(env, events)?;
        self.call(env, &self.events, &[text, m, payloads])
    }

    /// One `StateEvent` for the JS side of `record` ([`INSTALL_JS`]): a string it turns into
    /// the object without another call into the addon. Eleven UTF-16 length slots (the
    /// session key, agent, kind, actor type, actor id, run id, session id and summary, 0xffff
    /// for an absent one; then the decimal digits of `sequence` and of `occurredAt`, then the
    /// payload JSON or 0xffff), the digits, the strings, the payload. An event with a string
    /// too long for a slot is built as an object here instead.
    pub fn event_packed(&self, env: &Env, e: &StateEvent) -> Result<Js> {
        let sequence = e.sequence.to_string();
        let occurred_at = e.occurred_at.to_string();
        let payload = payload_json(e);
        let fields = [
            Some(e.session_key.as_str()),
            Some(e.agent_id.as_str()),
            Some(e.kind.as_str()),
            Some(e.actor_type.as_str()),
            e.actor_id.as_deref(),
            e.run_id.as_deref(),
            e.session_id.as_deref(),
            Some(e.summary.as_str()),
            Some(sequence.as_str()),
            Some(occurred_at.as_str()),
            payload,
        ];
        let mut text: Vec<u16> = Vec::with_capacity(11 + 160);
        text.resize(11, 0xffff);
        // The numbers first, so the object's keys keep their documented order.
        for i in [8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 10] {
            if let Some(f) = fields[i] {
                let start = text.len();
                text.extend(f.encode_utf16());
                match u16::try_from(text.len() - start) {
                    Ok(len) if len < 0xffff => text[i] = len,
                    // A string too long for one code unit: the general path.
                    _ => {
                        let array = self.events(env, std::slice::from_ref(e))?;
                        let mut first = ptr::null_mut();
                        check_status!(unsafe {
                            sys::napi_get_element(env.raw(), array.0, 0, &mut first)
                        })?;
                        return Ok(Js(first));
                    }
                }
            }
        }
        let mut t = ptr::null_mut();
        check_status!(unsafe {
            sys::napi_create_string_utf16(env.raw(), text.as_ptr(), text.len() as isize, &mut t)
        })?;
        Ok(Js(t))
    }

    /// The `changesSince` result.
    pub fn changes(&self, env: &Env, c: &Changes) -> Result<Js> {
        let (text, m, payloads) = pack_events(env, &c.events)?;
        let args = [
            text,
            m,
            payloads,
            int(env, c.state_version)?,
            boolean(env, c.truncated)?,
            int(env, c.earliest_available_sequence)?,
            boolean(env, c.history_gap)?,
        ];
        self.call(env, &self.changes, &args)
    }

    /// The `stateVersions` result: (session key, agent, version) rows.
    pub fn versions(&self, env: &Env, rows: &[(String, String, i64)]) -> Result<Js> {
        let mut p = Packer::with_capacity(rows.len() * 3);
        let mut last_agent: Option<&str> = None;
        for (key, agent, version) in rows {
            p.text(key);
            if last_agent == Some(agent.as_str()) {
                p.num(-2.0);
            } else {
                p.text(agent);
                last_agent = Some(agent);
            }
            p.num(*version as f64);
        }
        let (text, m) = p.finish(env)?;
        self.call(env, &self.versions, &[text, m])
    }

    /// `Notice` objects of one watcher.
    pub fn notices(&self, env: &Env, watcher: &str, notices: &[Notice]) -> Result<Js> {
        let mut p = Packer::with_capacity(notices.len() * 4);
        for n in notices {
            p.text(&n.target_key);
            p.num(n.changes_since as f64);
            p.text(&n.text);
            p.text(&n.context_key);
        }
        let (text, m) = p.finish(env)?;
        self.call(env, &self.notices, &[str(env, watcher)?, text, m])
    }
}

/// Collects the text and numbers of rows.
struct Packer {
    text: String,
    m: Vec<f64>,
}

impl Packer {
    fn with_capacity(numbers: usize) -> Self {
        Packer {
            text: String::with_capacity(numbers * 16),
            m: Vec::with_capacity(numbers),
        }
    }

    fn num(&mut self, v: f64) {
        self.m.push(v);
    }

    /// Appends `s` and records its length in UTF-16 units (what `String.prototype.slice`
    /// counts).
    fn text(&mut self, s: &str) {
        self.text.push_str(s);
        let units = if s.is_ascii() {
            s.len()
        } else {
            s.encode_utf16().count()
        };
        self.m.push(units as f64);
    }

    /// The text as a JS string and the numbers as a `Float64Array`.
    fn finish(self, env: &Env) -> Result<(Js, Js)> {
        let raw = env.raw();
        let text = if self.text.is_ascii() {
            // ASCII is Latin-1 too, and V8 copies Latin-1 without decoding it.
            let mut v = ptr::null_mut();
            check_status!(unsafe {
                sys::napi_create_string_latin1(
                    raw,
                    self.text.as_ptr().cast(),
                    self.text.len() as isize,
                    &mut v,
                )
            })?;
            Js(v)
        } else {
            str(env, &self.text)?
        };
        let bytes = self.m.len() * std::mem::size_of::<f64>();
        let mut data = ptr::null_mut();
        let mut buffer = ptr::null_mut();
        check_status!(unsafe { sys::napi_create_arraybuffer(raw, bytes, &mut data, &mut buffer) })?;
        if bytes > 0 {
            // The buffer was just allocated with exactly `bytes` bytes.
            unsafe {
                ptr::copy_nonoverlapping(self.m.as_ptr().cast::<u8>(), data.cast::<u8>(), bytes)
            };
        }
        let mut array = ptr::null_mut();
        check_status!(unsafe {
            sys::napi_create_typedarray(
                raw,
                sys::TypedarrayType::float64_array,
                self.m.len(),
                buffer,
                0,
                &mut array,
            )
        })?;
        Ok((text, Js(array)))
    }
}

/// Packs events for the `events` builder: 11 numbers per event, and all payloads as one JSON
/// array text (or null when there are none).
fn pack_events(env: &Env, events: &[StateEvent]) -> Result<(Js, Js, Js)> {
    let mut p = Packer::with_capacity(events.len() * 11);
    let mut payloads = String::from("[");
    let mut prev: Option<&StateEvent> = None;
    for e in events {
        p.num(e.sequence as f64);
        p.num(e.occurred_at as f64);
        let same = |f: fn(&StateEvent) -> &str| prev.is_some_and(|x| f(x) == f(e));
        for f in [
            (|x: &StateEvent| x.session_key.as_str()) as fn(&StateEvent) -> &str,
            |x| x.agent_id.as_str(),
            |x| x.kind.as_str(),
            |x| x.actor_type.as_str(),
        ] {
            if same(f) {
                p.num(-2.0);
            } else {
                p.text(f(e));
            }
        }
        for v in [&e.actor_id, &e.run_id, &e.session_id] {
            match v {
                Some(v) => p.text(v),
                None => p.num(-1.0),
            }
        }
        p.text(&e.summary);
        match payload_json(e) {
            Some(json) => {
                if payloads.len() > 1 {
                    payloads.push(',');
                }
                payloads.push_str(json);
                p.num(1.0);
            }
            None => p.num(0.0),
        }
        prev = Some(e);
    }
    payloads.push(']');
    let payloads = if payloads.len() > 2 {
        str(env, &payloads)?
    } else {
        null(env)?
    };
    let (text, m) = p.finish(env)?;
    Ok((text, m, payloads))
}

/// The stored payload if it is JSON, else `None` (only another writer could store such a row;
/// it was always left out). Checked without building it: what this store writes is compact
/// JSON from serde_json and passes as it is.
fn payload_json(e: &StateEvent) -> Option<&str> {
    let json = e.payload_json.as_deref()?;
    serde_json::from_str::<&serde_json::value::RawValue>(json)
        .ok()
        .map(|_| json)
}

/// A new empty array.
pub fn empty_array(env: &Env) -> Result<Js> {
    let mut v = ptr::null_mut();
    check_status!(unsafe { sys::napi_create_array_with_length(env.raw(), 0, &mut v) })?;
    Ok(Js(v))
}

fn str(env: &Env, s: &str) -> Result<Js> {
    let mut v = ptr::null_mut();
    check_status!(unsafe {
        sys::napi_create_string_utf8(env.raw(), s.as_ptr().cast(), s.len() as isize, &mut v)
    })?;
    Ok(Js(v))
}

fn null(env: &Env) -> Result<Js> {
    let mut v = ptr::null_mut();
    check_status!(unsafe { sys::napi_get_null(env.raw(), &mut v) })?;
    Ok(Js(v))
}

fn int(env: &Env, n: i64) -> Result<Js> {
    let mut v = ptr::null_mut();
    check_status!(unsafe { sys::napi_create_int64(env.raw(), n, &mut v) })?;
    Ok(Js(v))
}

fn boolean(env: &Env, b: bool) -> Result<Js> {
    let mut v = ptr::null_mut();
    check_status!(unsafe { sys::napi_get_boolean(env.raw(), b, &mut v) })?;
    Ok(Js(v))
}
