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

use std::ops::Range;

use napi::bindgen_prelude::Utf16String;
use session_awareness_core::Error as CoreError;

pub use crate::packed::REF_SLOTS;
use crate::packed::{PackedRows, Packer, ABSENT, SAME, VERSION_STRIDE};

/// The refs read from the refs string: their strings back to back in one buffer (one
/// allocation for the batch, not one per key) and where each ref's strings are.
pub struct Refs {
    text: String,
    spans: Vec<Span>,
}

/// Where one ref's strings are in [`Refs::text`].
struct Span {
    key: Range<usize>,
    agent: Option<Range<usize>>,
    /// The key was not well-formed UTF-16 and was read with replacements.
    replaced: bool,
}

impl Refs {
    /// Each ref as `(session key, agent if given)`, in order.
    pub fn pairs(&self) -> Vec<(&str, Option<&str>)> {
        self.spans
            .iter()
            .map(|s| {
                (
                    &self.text[s.key.clone()],
                    s.agent.clone().map(|a| &self.text[a]),
                )
            })
            .collect()
    }
}

/// Appends `units` to `text`, each lone surrogate as U+FFFD; true if there was one.
pub(crate) fn decode_into(text: &mut String, units: &[u16]) -> bool {
    if units.iter().all(|&u| u < 0x80) {
        text.extend(units.iter().map(|&u| char::from(u as u8)));
        return false;
    }
    let mut replaced = false;
    for c in char::decode_utf16(units.iter().copied()) {
        text.push(c.unwrap_or_else(|_| {
            replaced = true;
            char::REPLACEMENT_CHARACTER
        }));
    }
    replaced
}

/// Reads the refs string. A string `lib/versions.ts` did not write is `ERR_INVALID_ARG`.
pub fn refs(packed: &Utf16String) -> Result<Refs, CoreError> {
    let units: &[u16] = packed;
    let bad = || CoreError::invalid("refs: not a packed refs string");
    let mut text = String::with_capacity(units.len());
    let mut spans = Vec::new();
    let mut at = 0usize;
    while at < units.len() {
        let head = units.get(at..at + REF_SLOTS as usize).ok_or_else(bad)?;
        let key_len = (usize::from(head[0]) << 16) | usize::from(head[1]);
        let agent_tag = (usize::from(head[2]) << 16) | usize::from(head[3]);
        at += REF_SLOTS as usize;
        let key_units = units.get(at..at + key_len).ok_or_else(bad)?;
        at += key_len;
        let start = text.len();
        let replaced = decode_into(&mut text, key_units);
        let key = start..text.len();
        let agent = match agent_tag {
            0 => None,
            tag => {
                let agent_units = units.get(at..at + tag - 1).ok_or_else(bad)?;
                at += tag - 1;
                let start = text.len();
                decode_into(&mut text, agent_units);
                Some(start..text.len())
            }
        };
        spans.push(Span {
            key,
            agent,
            replaced,
        });
    }
    Ok(Refs { text, spans })
}

/// The rows of the sessions found: `(index in refs, resolved agent, version)`.
pub fn rows(refs: &Refs, found: &[(usize, &str, i64)]) -> PackedRows {
    let mut p = Packer::with_capacity(found.len() * VERSION_STRIDE as usize);
    let mut last_agent: Option<&str> = None;
    for &(at, agent, version) in found {
        p.num(at as f64);
        match refs.spans.get(at) {
            Some(s) if s.replaced => p.text(&refs.text[s.key.clone()]),
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
