//! `stateVersions` across the boundary: the refs come in as one string and the versions go
//! out as rows that name a ref by its index.
//!
//! Reading 500 `{ sessionKey, agentId }` objects through Node-API (two property reads and a
//! string conversion each) costs more than reading their 500 heads from SQLite, and so does
//! sending the 500 keys back. So `lib/versions.ts` writes the refs into one string, and the
//! rows it gets back hold no key that the caller already has.
//!
//! The refs string, in UTF-16 units: per ref, [`REF_SLOTS`] units (the key's length, high 16
//! bits then low; 0 for no agent, else the agent's length + 1, high then low), then the key,
//! then the agent if present.
//!
//! The rows: [`VERSION_STRIDE`] numbers each (the ref's index; [`ABSENT`] when the key is the
//! one given, else the length of the key as read, which differs only for a key that was not
//! well-formed UTF-16 (each lone surrogate reads as U+FFFD, as in every other call); the
//! agent's length, [`SAME`] when equal to the row before; the version). The text holds the key
//! (when sent) and then the agent (when sent) of each row in turn.

use napi::bindgen_prelude::Utf16String;
use session_awareness_core::Error as CoreError;

use crate::packed::{PackedRows, Packer, ABSENT, SAME, VERSION_STRIDE};

/// UTF-16 units before each ref's strings in the refs string.
pub const REF_SLOTS: u32 = 4;

/// One ref read from the refs string.
pub struct Ref {
    /// The session key.
    pub key: String,
    /// The agent, when one was given.
    pub agent: Option<String>,
    /// The key was not well-formed UTF-16 and was read with replacements.
    pub replaced: bool,
}

/// Reads the refs string. A string `lib/versions.ts` did not write is `ERR_INVALID_ARG`.
pub fn refs(packed: &Utf16String) -> Result<Vec<Ref>, CoreError> {
    let units: &[u16] = packed;
    let bad = || CoreError::invalid("refs: not a packed refs string");
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < units.len() {
        let head = units.get(at..at + REF_SLOTS as usize).ok_or_else(bad)?;
        let key_len = (usize::from(head[0]) << 16) | usize::from(head[1]);
        let agent_tag = (usize::from(head[2]) << 16) | usize::from(head[3]);
        at += REF_SLOTS as usize;
        let key_units = units.get(at..at + key_len).ok_or_else(bad)?;
        at += key_len;
        let (key, replaced) = match String::from_utf16(key_units) {
            Ok(k) => (k, false),
            Err(_) => (String::from_utf16_lossy(key_units), true),
        };
        let agent = match agent_tag {
            0 => None,
            tag => {
                let agent_units = units.get(at..at + tag - 1).ok_or_else(bad)?;
                at += tag - 1;
                Some(String::from_utf16_lossy(agent_units))
            }
        };
        out.push(Ref {
            key,
            agent,
            replaced,
        });
    }
    Ok(out)
}

/// The rows of the sessions found: `(index in refs, resolved agent, version)`.
pub fn rows(refs: &[Ref], found: &[(usize, &str, i64)]) -> PackedRows {
    let mut p = Packer::with_capacity(found.len() * VERSION_STRIDE as usize);
    let mut last_agent: Option<&str> = None;
    for &(at, agent, version) in found {
        p.num(at as f64);
        match refs.get(at) {
            Some(r) if r.replaced => p.text(&r.key),
            _ => p.num(f64::from(ABSENT)),
        }
        if last_agent == Some(agent) {
            p.num(f64::from(SAME));
        } else {
            p.text(agent);
            last_agent = Some(agent);
        }
        p.num(version as f64);
    }
    p.finish(None)
}
