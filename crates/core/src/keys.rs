//! Session keys (semantics.md#keys): agent-qualified or bare, nested or main-like, and the notice text and
//! context key derived from a target key (semantics.md#cursors).

use crate::error::{Error, Result};

/// The agent id used for events whose key names no agent.
pub const DEFAULT_AGENT: &str = "main";

/// The longest accepted identifier (session key, watcher key, `actorId`, `runId`,
/// `sessionId`, `dedupeKey`), in UTF-8 bytes. A key is quoted twice in every notice that a
/// watcher's prompt receives, so an unbounded one would be an unbounded prompt.
pub const MAX_KEY_BYTES: usize = 1024;

/// Refuses an identifier longer than [`MAX_KEY_BYTES`].
pub fn check_len(value: &str, name: &str) -> Result<()> {
    if value.len() > MAX_KEY_BYTES {
        return Err(Error::invalid(format!(
            "{name} is {} UTF-8 bytes; the limit is {MAX_KEY_BYTES}",
            value.len()
        )));
    }
    Ok(())
}

/// A session key, classified by semantics.md#keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionKey<'a> {
    /// `agent:<agentId>:<rest>`: may watch and be watched.
    Qualified {
        /// The agent id of the key.
        agent: &'a str,
        /// Everything after the second colon; never empty.
        rest: &'a str,
    },
    /// Any other non-empty key (`global`, legacy `main`, `agent:MAIN:x`, …): log only.
    Bare,
}

impl<'a> SessionKey<'a> {
    /// Classifies `key`, an argument called `sessionKey`. A blank key (empty, or only
    /// whitespace) and one longer than [`MAX_KEY_BYTES`] are refused.
    pub fn parse(key: &'a str) -> Result<Self> {
        Self::parse_named(key, "sessionKey")
    }

    /// [`SessionKey::parse`] of an argument the caller knows as `name` (`watcherKey`,
    /// `targetKeys[2]`, …), which the refusal names.
    pub fn parse_named(key: &'a str, name: &str) -> Result<Self> {
        Self::check_named(key, name)?;
        Ok(Self::classify(key))
    }

    /// The refusals of [`SessionKey::parse`] without the classification: a key is any
    /// string within the identifier limit that holds something besides whitespace.
    pub fn check(key: &str) -> Result<()> {
        Self::check_named(key, "sessionKey")
    }

    /// [`SessionKey::check`] of an argument the caller knows as `name`.
    pub fn check_named(key: &str, name: &str) -> Result<()> {
        if is_blank(key) {
            return Err(Error::invalid(format!(
                "{name} must be a non-empty string that is not only whitespace, got {}",
                json_string(key)
            )));
        }
        check_len(key, name)
    }

    /// Classifies a key without refusing anything (the empty key is bare).
    pub fn classify(key: &'a str) -> Self {
        let Some(tail) = key.strip_prefix("agent:") else {
            return SessionKey::Bare;
        };
        let Some((agent, rest)) = tail.split_once(':') else {
            return SessionKey::Bare;
        };
        if is_agent_id(agent) && !rest.is_empty() {
            SessionKey::Qualified { agent, rest }
        } else {
            SessionKey::Bare
        }
    }

    /// True for agent-qualified keys.
    pub fn is_qualified(&self) -> bool {
        matches!(self, SessionKey::Qualified { .. })
    }

    /// True for a qualified key whose rest starts with `subagent:` in any ASCII case, as
    /// OpenClaw's `isSubagentSessionKey` reads it.
    pub fn is_nested(&self) -> bool {
        matches!(self, SessionKey::Qualified { rest, .. }
            if rest.len() >= NESTED.len() && rest.as_bytes()[..NESTED.len()].eq_ignore_ascii_case(NESTED.as_bytes()))
    }

    /// True for qualified keys that are not nested: these may be woken (semantics.md#wake).
    pub fn is_main_like(&self) -> bool {
        self.is_qualified() && !self.is_nested()
    }

    /// The key's own agent, if it is qualified.
    pub fn agent(&self) -> Option<&'a str> {
        match self {
            SessionKey::Qualified { agent, .. } => Some(agent),
            SessionKey::Bare => None,
        }
    }
}

/// The prefix of a nested key's rest, compared without ASCII case.
const NESTED: &str = "subagent:";

/// True for a string that is no key: empty, or made only of whitespace (Unicode
/// `White_Space`), which no gateway means as a session.
pub fn is_blank(key: &str) -> bool {
    key.trim().is_empty()
}

/// [`SessionKey::check`] of entry `index` of the key list the caller knows as `list`
/// (`watchers`, `targetKeys`, …): the refusal names it as `list[index]`. The name is built
/// only for a refusal.
pub fn check_entry(key: &str, list: &str, index: usize) -> Result<()> {
    if is_blank(key) || key.len() > MAX_KEY_BYTES {
        return SessionKey::check_named(key, &format!("{list}[{index}]"));
    }
    Ok(())
}

/// True when `s` matches `[a-z0-9][a-z0-9_-]{0,63}`.
pub fn is_agent_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

/// True when `key` may hold a cursor, as watcher or as target.
pub fn is_watchable(key: &str) -> bool {
    SessionKey::classify(key).is_qualified()
}

/// Resolves the agent of an event or a read: the explicit one (validated and, for a qualified
/// key, equal to the key's own), else the key's, else `main`.
pub fn resolve_agent(key: &str, explicit: Option<&str>) -> Result<String> {
    resolve_agent_ref(key, explicit).map(str::to_owned)
}

/// [`resolve_agent`] without a copy: the agent borrowed from `key`, from `explicit`, or
/// [`DEFAULT_AGENT`].
pub fn resolve_agent_ref<'a>(key: &'a str, explicit: Option<&'a str>) -> Result<&'a str> {
    let own = SessionKey::parse(key)?.agent();
    match explicit {
        None => Ok(own.unwrap_or(DEFAULT_AGENT)),
        Some(a) if !is_agent_id(a) => Err(Error::invalid(format!(
            "agentId must match [a-z0-9][a-z0-9_-]{{0,63}}, got {}",
            json_string(a)
        ))),
        Some(a) => match own {
            Some(own) if own != a => Err(Error::invalid(format!(
                "agentId {} differs from the agent of key {}",
                json_string(a),
                json_string(key)
            ))),
            _ => Ok(a),
        },
    }
}

/// The `(session_key, agent_id)` refs of a `stateVersions` call, each checked and its agent
/// resolved ([`resolve_agent_ref`]), in order; the first bad ref is the error (a blank or
/// overlong key named `refs[i].sessionKey`).
pub(crate) fn resolve_refs<'a>(
    refs: &[(&'a str, Option<&'a str>)],
) -> Result<Vec<(&'a str, &'a str)>> {
    refs.iter()
        .enumerate()
        .map(|(i, &(key, agent))| {
            if is_blank(key) || key.len() > MAX_KEY_BYTES {
                SessionKey::check_named(key, &format!("refs[{i}].sessionKey"))?;
            }
            Ok((key, resolve_agent_ref(key, agent)?))
        })
        .collect()
}

/// `key` as a JSON string literal, so that no quote or line break in it can escape its place.
/// Besides the control characters JSON escapes, U+0085, U+2028 and U+2029 are escaped too:
/// JSON allows them raw, but they end a line for many readers (and for `summary`).
pub fn json_string(key: &str) -> String {
    let json = serde_json::Value::from(key).to_string();
    if !json.contains(['\u{85}', '\u{2028}', '\u{2029}']) {
        return json;
    }
    json.replace('\u{85}', "\\u0085")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// The pinned, byte-stable notice text of semantics.md#cursors.
pub fn notice_text(target: &str, last_seen: i64) -> String {
    let t = json_string(target);
    format!(
        "Session {t} changed (other actor). Reconcile before acting: session_status sessionKey {t} changesSince {last_seen}."
    )
}

const CONTEXT_PREFIX: &str = "session-state:";

/// `session-state:` followed by the lowercase hex of the target key's UTF-8 bytes.
pub fn encode_notice_context_key(target: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(CONTEXT_PREFIX.len() + target.len() * 2);
    out.push_str(CONTEXT_PREFIX);
    for b in target.bytes() {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

/// The inverse of [`encode_notice_context_key`], strict: the prefix, then non-empty,
/// even-length, lowercase hex that decodes to valid UTF-8 (a leading U+FEFF is kept).
/// Anything else is `None`.
pub fn decode_notice_context_key(context_key: &str) -> Option<String> {
    let hex = context_key.strip_prefix(CONTEXT_PREFIX)?.as_bytes();
    if hex.is_empty() || hex.len() % 2 != 0 {
        return None;
    }
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    let bytes = hex
        .chunks_exact(2)
        .map(|p| Some(nibble(p[0])? << 4 | nibble(p[1])?))
        .collect::<Option<Vec<u8>>>()?;
    // from_utf8 keeps a leading BOM as a character; it never strips it.
    String::from_utf8(bytes).ok()
}

/// The longest accepted watcher scope (semantics.md#cursors-scope), in UTF-8 bytes.
pub const MAX_SCOPE_BYTES: usize = 4096;

/// Checks a watcher scope (semantics.md#cursors-scope): non-empty, at most
/// [`MAX_SCOPE_BYTES`] UTF-8 bytes; anything else is `ERR_INVALID_ARG`.
pub fn check_scope(scope: &str) -> Result<()> {
    if scope.is_empty() || scope.len() > MAX_SCOPE_BYTES {
        return Err(Error::invalid(format!(
            "a scope must be a non-empty string of at most {MAX_SCOPE_BYTES} UTF-8 bytes"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_and_bare() {
        assert_eq!(
            SessionKey::classify("agent:main:subagent:child"),
            SessionKey::Qualified {
                agent: "main",
                rest: "subagent:child"
            }
        );
        for bare in [
            "global",
            "main",
            "agent:MAIN:x",
            "agent:main:",
            "agent:main",
            "agent::x",
            "Agent:main:x",
            "",
            "agent:-a:x",
        ] {
            assert_eq!(SessionKey::classify(bare), SessionKey::Bare, "{bare:?}");
        }
        let long = format!("agent:{}:x", "a".repeat(64));
        assert!(SessionKey::classify(&long).is_qualified());
        let too_long = format!("agent:{}:x", "a".repeat(65));
        assert!(!SessionKey::classify(&too_long).is_qualified());
        assert!(SessionKey::classify("agent:0a_b-c:x").is_qualified());
    }

    #[test]
    fn keys_are_bounded() {
        let at_limit = format!("agent:main:{}", "x".repeat(MAX_KEY_BYTES - 11));
        assert!(SessionKey::parse(&at_limit).unwrap().is_qualified());
        let over = format!("{at_limit}x");
        assert_eq!(
            SessionKey::parse(&over).unwrap_err().code(),
            "ERR_INVALID_ARG"
        );
        // Bytes, not characters: 342 three-byte characters are 1026 bytes.
        assert!(check_len(&"€".repeat(341), "k").is_ok());
        assert!(check_len(&"€".repeat(342), "k").is_err());
    }

    #[test]
    fn nested_and_main_like() {
        assert!(SessionKey::classify("agent:main:subagent:x").is_nested());
        // OpenClaw's isSubagentSessionKey lowercases the rest before it compares.
        assert!(SessionKey::classify("agent:main:SubAgent:x").is_nested());
        assert!(SessionKey::classify("agent:main:SUBAGENT:x").is_nested());
        assert!(SessionKey::classify("agent:main:subagent").is_main_like());
        assert!(SessionKey::classify("agent:main:subagentx").is_main_like());
        assert!(SessionKey::classify("agent:main:main").is_main_like());
        assert!(!SessionKey::classify("global").is_main_like());
        assert!(!SessionKey::classify("global").is_nested());
    }

    #[test]
    fn agent_resolution() {
        assert_eq!(resolve_agent("agent:ops:x", None).unwrap(), "ops");
        assert_eq!(resolve_agent("global", None).unwrap(), "main");
        assert_eq!(resolve_agent("global", Some("ops")).unwrap(), "ops");
        assert_eq!(resolve_agent("agent:ops:x", Some("ops")).unwrap(), "ops");
        assert_eq!(
            resolve_agent("agent:ops:x", Some("main"))
                .unwrap_err()
                .code(),
            "ERR_INVALID_ARG"
        );
        assert_eq!(
            resolve_agent("global", Some("OPS")).unwrap_err().code(),
            "ERR_INVALID_ARG"
        );
        assert_eq!(
            resolve_agent("", None).unwrap_err().code(),
            "ERR_INVALID_ARG"
        );
    }

    #[test]
    fn blank_keys_are_refused_by_name() {
        for blank in ["", "   ", "\t\n", "\u{3000}", "\u{85}"] {
            let e = SessionKey::parse_named(blank, "watcherKey").unwrap_err();
            assert_eq!(e.code(), "ERR_INVALID_ARG", "{blank:?}");
            assert!(e.to_string().contains("watcherKey"), "{e}");
        }
        assert!(SessionKey::parse(" x ").is_ok());
        assert!(SessionKey::parse("   ")
            .unwrap_err()
            .to_string()
            .contains("sessionKey"));
    }

    #[test]
    fn notice_text_is_pinned() {
        assert_eq!(
            notice_text("agent:main:subagent:child", 12),
            "Session \"agent:main:subagent:child\" changed (other actor). Reconcile before acting: session_status sessionKey \"agent:main:subagent:child\" changesSince 12."
        );
        let key = "agent:main:a\"b\nc\rd\u{2028}e\u{2029}f\u{85}g\u{b}h\u{c}i";
        let t = notice_text(key, 0);
        assert!(!t.contains(['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}', '\u{b}', '\u{c}']));
        let quoted = r#""agent:main:a\"b\nc\rd\u2028e\u2029f\u0085g\u000bh\fi""#;
        assert!(t.contains(quoted), "{t}");
        // Still the key as a JSON string literal: it parses back to the key.
        let back: String = serde_json::from_str(quoted).unwrap();
        assert_eq!(back, key);
    }

    #[test]
    fn context_keys_round_trip_strictly() {
        assert_eq!(encode_notice_context_key("ab"), "session-state:6162");
        for k in ["agent:main:x", "é😀", "\u{feff}x", "a\"\n"] {
            assert_eq!(
                decode_notice_context_key(&encode_notice_context_key(k)).as_deref(),
                Some(k)
            );
        }
        for bad in [
            "session-state:",
            "session-state:616",
            "session-state:6A",
            "session-state:zz",
            "session-state:ff",
            "state:6162",
            "Session-state:6162",
            "session-state:6162 ",
        ] {
            assert_eq!(decode_notice_context_key(bad), None, "{bad:?}");
        }
        assert_eq!(
            decode_notice_context_key("session-state:efbbbf78").as_deref(),
            Some("\u{feff}x")
        );
    }
}
