//! The tunables of a store (semantics.md#api) and their accepted ranges.

use crate::error::{Error, Result};
use crate::event::NotifyKinds;
use crate::log;

/// Tunables of a store (semantics.md#api). Ranges are checked by [`Options::validate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Events and cursors older than this are pruned. Default 30 days.
    pub retention_ms: i64,
    /// At most this many events are kept. Default 50,000.
    pub max_events: u64,
    /// How long a write waits for another writer's lock. Default 30 s.
    pub busy_timeout_ms: u32,
    /// How long a due wake waits for more to coalesce. Default 250 ms.
    pub wake_coalesce_ms: u32,
    /// How often the store looks for cursor changes made by other processes (semantics.md#processes). Default
    /// 100 ms; 0 turns the cross-process delivery off.
    pub sync_interval_ms: u32,
    /// The event kinds that notify watchers (semantics.md#api-options). Default the three
    /// notify kinds.
    pub notify_kinds: NotifyKinds,
    /// A spawn's seed makes an existing cursor `explicit` instead of keeping its provenance
    /// (semantics.md#cursors-scope). Default false.
    pub seed_resets_provenance: bool,
    /// Every notice entering the queue is also kept for the host's listener
    /// (semantics.md#notices-listener). Default false.
    pub notice_outbox: bool,
    /// The PostgreSQL schema that holds a PostgreSQL store's tables (TypeScript `schema`).
    /// Default `session_awareness`. Refused on a SQLite store unless it is the default.
    pub pg_schema: SchemaName,
    /// How long a PostgreSQL store waits for a connection, TLS included (TypeScript
    /// `connectTimeoutMs`). Default 10 s; 0 waits as long as the system does.
    pub connect_timeout_ms: u32,
    /// The server-side `statement_timeout` of a PostgreSQL store's connection (TypeScript
    /// `statementTimeoutMs`). Default 30 s; 0 turns it off.
    pub statement_timeout_ms: u32,
    /// How long a PostgreSQL store's calls wait for the server to come back once the
    /// connection is lost (TypeScript `reconnectWindowMs`, docs/postgres.md#faults). Default
    /// 30 s; 0 waits not at all (a call settles at once, as before the window existed).
    pub reconnect_window_ms: u32,
    /// How many Promise API calls of a PostgreSQL store may wait for the server at once
    /// (TypeScript `maxWaitingCalls`); past it, a new call settles at once as a failed one.
    /// Default 10,000.
    pub max_waiting_calls: u32,
    /// This host's name among the hosts that share a PostgreSQL schema (TypeScript
    /// `hostName`): the sessions it adopts with a local transcript are scanned by the stores
    /// of this name only (docs/postgres.md#differences). Default the machine's hostname.
    /// Refused on a SQLite store unless it is the default.
    pub host_name: HostName,
    /// The most memory a SQLite store keeps for its reads, in bytes (TypeScript
    /// `readCacheBytes`, semantics.md#reading-memory): the recent events that answer
    /// `changesSince` and the versions behind `stateVersions`. Default
    /// [`crate::DEFAULT_READ_CACHE_BYTES`] (4 MiB); 0 turns the cache off.
    pub read_cache_bytes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            retention_ms: 30 * 24 * 60 * 60 * 1000,
            max_events: 50_000,
            busy_timeout_ms: 30_000,
            wake_coalesce_ms: 250,
            sync_interval_ms: 100,
            notify_kinds: NotifyKinds::default(),
            seed_resets_provenance: false,
            notice_outbox: false,
            pg_schema: SchemaName::default(),
            connect_timeout_ms: 10_000,
            statement_timeout_ms: 30_000,
            reconnect_window_ms: 30_000,
            max_waiting_calls: 10_000,
            host_name: HostName::machine(),
            read_cache_bytes: crate::tail::DEFAULT_READ_CACHE_BYTES,
        }
    }
}

/// The largest accepted `retentionMs` (about 285 years) and `wakeCoalesceMs` (one minute).
pub const MAX_RETENTION_MS: i64 = 9_000_000_000_000;
/// See [`MAX_RETENTION_MS`].
pub const MAX_WAKE_COALESCE_MS: u32 = 60_000;
/// The largest accepted `syncIntervalMs` (one minute).
pub const MAX_SYNC_INTERVAL_MS: u32 = 60_000;
/// The largest accepted `maxWaitingCalls`.
pub const MAX_WAITING_CALLS: u32 = 1_000_000;
/// The largest accepted `readCacheBytes` (1 GiB).
pub const MAX_READ_CACHE_BYTES: u64 = 1 << 30;

impl Options {
    /// Refuses values outside the documented ranges: `retentionMs` in [1, 9e12],
    /// `maxEvents` in [1, 2^53 - 1], `busyTimeoutMs` in [0, 2^31 - 1], `wakeCoalesceMs` and
    /// `syncIntervalMs` in [0, 60000], `readCacheBytes` in [0, 2^30].
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_RETENTION_MS).contains(&self.retention_ms) {
            return Err(Error::invalid(
                "retentionMs must be an integer in [1, 9e12]",
            ));
        }
        if !(1..=log::MAX_SAFE_INTEGER as u64).contains(&self.max_events) {
            return Err(Error::invalid("maxEvents must be a positive safe integer"));
        }
        if self.busy_timeout_ms > i32::MAX as u32 {
            return Err(Error::invalid(
                "busyTimeoutMs must be an integer in [0, 2^31 - 1]",
            ));
        }
        if self.wake_coalesce_ms > MAX_WAKE_COALESCE_MS {
            return Err(Error::invalid(
                "wakeCoalesceMs must be an integer in [0, 60000]",
            ));
        }
        if self.sync_interval_ms > MAX_SYNC_INTERVAL_MS {
            return Err(Error::invalid(
                "syncIntervalMs must be an integer in [0, 60000]",
            ));
        }
        if self.read_cache_bytes > MAX_READ_CACHE_BYTES {
            return Err(Error::invalid(
                "readCacheBytes must be an integer in [0, 2^30]",
            ));
        }
        for (value, name) in [
            (self.connect_timeout_ms, "connectTimeoutMs"),
            (self.statement_timeout_ms, "statementTimeoutMs"),
            (self.reconnect_window_ms, "reconnectWindowMs"),
        ] {
            if value > i32::MAX as u32 {
                return Err(Error::invalid(format!(
                    "{name} must be an integer in [0, 2^31 - 1]"
                )));
            }
        }
        if !(1..=MAX_WAITING_CALLS).contains(&self.max_waiting_calls) {
            return Err(Error::invalid(
                "maxWaitingCalls must be an integer in [1, 1000000]",
            ));
        }
        Ok(())
    }

    /// Refuses, on a SQLite store, the options that only a PostgreSQL store reads
    /// (`ERR_INVALID_ARG` naming the first one set to another value than its default).
    pub fn check_local(&self) -> Result<()> {
        let d = Options::default();
        for (set, name) in [
            (self.pg_schema != d.pg_schema, "schema"),
            (
                self.connect_timeout_ms != d.connect_timeout_ms,
                "connectTimeoutMs",
            ),
            (
                self.statement_timeout_ms != d.statement_timeout_ms,
                "statementTimeoutMs",
            ),
            (
                self.reconnect_window_ms != d.reconnect_window_ms,
                "reconnectWindowMs",
            ),
            (
                self.max_waiting_calls != d.max_waiting_calls,
                "maxWaitingCalls",
            ),
            (self.host_name != d.host_name, "hostName"),
        ] {
            if set {
                return Err(Error::invalid(format!(
                    "{name} is an option of a PostgreSQL store, not of a SQLite file"
                )));
            }
        }
        Ok(())
    }
}

/// The longest schema name PostgreSQL keeps (NAMEDATALEN - 1).
pub const MAX_SCHEMA_BYTES: usize = 63;

/// The name of a PostgreSQL store's schema: a plain lowercase identifier
/// (`[a-z_][a-z0-9_]*`, at most 63 bytes, not starting with `pg_`), so it is put into SQL
/// without quoting. Kept inline, so [`Options`] stays `Copy`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SchemaName {
    len: u8,
    bytes: [u8; MAX_SCHEMA_BYTES],
}

impl SchemaName {
    /// Checks `name` (`ERR_INVALID_ARG` naming the option `schema` when it breaks the rule).
    pub fn parse(name: &str) -> Result<Self> {
        let b = name.as_bytes();
        let plain = match b.first() {
            Some(c) => {
                (c.is_ascii_lowercase() || *c == b'_')
                    && b.iter()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
            }
            None => false,
        };
        if !plain || b.len() > MAX_SCHEMA_BYTES || name.starts_with("pg_") {
            return Err(Error::invalid(
                "schema must be a lowercase identifier ([a-z_][a-z0-9_]*, at most 63 bytes, \
                 not starting with pg_)",
            ));
        }
        let mut bytes = [0; MAX_SCHEMA_BYTES];
        bytes[..b.len()].copy_from_slice(b);
        Ok(SchemaName {
            len: b.len() as u8,
            bytes,
        })
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        // Only ASCII is ever stored (checked by `parse`).
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or_default()
    }
}

impl Default for SchemaName {
    fn default() -> Self {
        SchemaName::parse("session_awareness").unwrap_or(SchemaName {
            len: 0,
            bytes: [0; MAX_SCHEMA_BYTES],
        })
    }
}

impl std::fmt::Debug for SchemaName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for SchemaName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The longest host name kept (a DNS name's 253 bytes, with room to spare).
pub const MAX_HOST_NAME_BYTES: usize = 255;

/// The name of a host among the hosts that share a PostgreSQL store ([`Options::host_name`]):
/// non-empty, at most 255 bytes, no U+0000. Kept inline, so [`Options`] stays `Copy`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct HostName {
    len: u8,
    bytes: [u8; MAX_HOST_NAME_BYTES],
}

impl HostName {
    /// Checks `name` (`ERR_INVALID_ARG` naming the option `hostName` when it breaks the rule).
    pub fn parse(name: &str) -> Result<Self> {
        let b = name.as_bytes();
        if b.is_empty() || b.len() > MAX_HOST_NAME_BYTES || b.contains(&0) {
            return Err(Error::invalid(
                "hostName must be a non-empty string of at most 255 bytes without U+0000",
            ));
        }
        let mut bytes = [0; MAX_HOST_NAME_BYTES];
        bytes[..b.len()].copy_from_slice(b);
        Ok(HostName {
            len: b.len() as u8,
            bytes,
        })
    }

    /// The machine's hostname (`localhost` when the system does not tell).
    pub fn machine() -> Self {
        machine_hostname()
            .and_then(|n| HostName::parse(&n).ok())
            .unwrap_or_else(|| {
                let mut bytes = [0; MAX_HOST_NAME_BYTES];
                bytes[..9].copy_from_slice(b"localhost");
                HostName { len: 9, bytes }
            })
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        // Only whole UTF-8 strings are ever stored (checked by `parse`).
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or_default()
    }
}

#[cfg(unix)]
#[allow(unsafe_code)]
fn machine_hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8(buf[..end].to_vec()).ok()
}

#[cfg(not(unix))]
fn machine_hostname() -> Option<String> {
    std::env::var("COMPUTERNAME").ok()
}

impl std::fmt::Debug for HostName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for HostName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert_eq!(SchemaName::default().as_str(), "session_awareness");
        assert_eq!(
            SchemaName::parse("_a1").map(|s| s.to_string()).ok(),
            Some("_a1".into())
        );
        assert!(SchemaName::parse(&"a".repeat(63)).is_ok());
        for bad in ["", "A", "1a", "a-b", "a b", "pg_x", "é", "a\"b"] {
            assert_eq!(
                SchemaName::parse(bad).unwrap_err().code(),
                "ERR_INVALID_ARG",
                "{bad}"
            );
        }
        assert!(SchemaName::parse(&"a".repeat(64)).is_err());
    }

    #[test]
    fn postgres_options_are_refused_on_a_file() {
        assert!(Options::default().check_local().is_ok());
        let o = Options {
            statement_timeout_ms: 1,
            ..Options::default()
        };
        let e = o.check_local().unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_ARG");
        assert!(e.to_string().contains("statementTimeoutMs"), "{e}");
    }
}

#[cfg(test)]
mod host_name_tests {
    use super::*;

    #[test]
    fn host_names_are_non_empty_short_and_without_nul() {
        assert_eq!(
            HostName::parse("gw-1.internal").unwrap().as_str(),
            "gw-1.internal"
        );
        assert_eq!(HostName::parse("hôte").unwrap().as_str(), "hôte");
        assert!(HostName::parse(&"h".repeat(255)).is_ok());
        for bad in [String::new(), "a\0b".into(), "h".repeat(256)] {
            assert_eq!(
                HostName::parse(&bad).unwrap_err().code(),
                "ERR_INVALID_ARG",
                "{bad:?}"
            );
        }
        let machine = HostName::machine();
        assert!(!machine.as_str().is_empty());
        assert_eq!(Options::default().host_name, machine);
        let o = Options {
            host_name: HostName::parse("elsewhere").unwrap(),
            ..Options::default()
        };
        let e = o.check_local().unwrap_err();
        assert!(e.to_string().contains("hostName"), "{e}");
    }
}
