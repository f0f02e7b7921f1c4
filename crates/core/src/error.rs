//! The one error type of the core, with a stable machine code per variant.

use std::fmt;

/// Every failure the core reports. Match on [`Error::code`], which is stable across releases;
/// the message text is for people and may change.
#[non_exhaustive]
#[derive(Debug)]
pub enum Error {
    /// An argument broke a documented rule (bad key, unknown kind, oversized payload, …).
    InvalidArg(String),
    /// The store was closed; nothing was done.
    Closed,
    /// The database failed (busy beyond the busy timeout, read-only file, disk full, corrupt
    /// file, …): the kind of failure, whatever the store, and the store's own message.
    Db {
        /// What kind of failure it was.
        kind: DbFailure,
        /// The store's description of it.
        message: String,
    },
    /// A file-system operation around the database failed (creating its directory, its mode).
    Io(std::io::Error),
    /// A line of an upstream transcript could not be classified (semantics.md#upstream); the scan goes on.
    UpstreamParse(String),
    /// The file to open or inspect is not a SQLite database (or, to inspect, not a regular
    /// file); nothing was written to it.
    NotSqlite(String),
    /// Another SQLite library (or any other code) of this process has the database file, its
    /// `-wal`, `-shm` or `-journal` open: POSIX locks belong to the process, so the two would
    /// break each other's locks ([`crate::sqlite::exclusive`]). Nothing was done.
    FileShared(String),
    /// The file holds a table of this schema's name that no known generation wrote (a column
    /// the store cannot add is missing); opening it changes nothing.
    ForeignSchema(String),
    /// An import found that the destination's history and the source's disagree (a sequence
    /// held by both with different content, or a session the destination already carries
    /// past a sequence the source still has to add); nothing was written.
    ImportDiverged(String),
    /// An import's source, read as an immutable snapshot because no `-wal` file was beside
    /// it, was written meanwhile, three times in a row; run the import again. Reported as
    /// `ERR_DB`.
    SourceChanged(String),
    /// A synchronous method of a PostgreSQL store that needs the database: it is served by the
    /// Promise API only (its `…Async` twin); nothing was done. The text names the method.
    AsyncOnly(String),
    /// A PostgreSQL store sent a group's `COMMIT` and lost the connection before the answer,
    /// and the server was not back within `reconnectWindowMs` to say whether it committed
    /// (docs/postgres.md#faults): the events may be stored or not, so a retry without a
    /// `dedupeKey` may store one twice.
    OutcomeUnknown(String),
    /// The PostgreSQL URL reaches the server through a pooler in transaction or statement
    /// mode (docs/postgres.md#poolers), which keeps neither the store's LISTEN nor its
    /// prepared statements; refused at open. The text names the mode and what to configure.
    PoolerMode(String),
}

/// The kind of an [`Error::Db`], the same for every store (SQLite's result codes map to it in
/// `sqlite/error.rs`).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbFailure {
    /// A lock was not granted within the busy timeout.
    Busy,
    /// The disk (or the database's size limit) is full.
    Full,
    /// The file or the connection is read-only.
    ReadOnly,
    /// The file is damaged.
    Corrupt,
    /// The file is not a database of this store.
    NotADatabase,
    /// The connection to a database server failed or was lost (refused, timed out, the
    /// backend terminated, TLS or authentication failed).
    Connection,
    /// The server refused the login itself (SQLSTATE class 28: authentication; 3D000: no such
    /// database): waiting for it does not help, so no call waits for a reconnect.
    Login,
    /// Any other failure.
    Other,
}

/// The codes of the core that no record can fail with (so [`crate::FAILURE_CODES`], which
/// `record.failures` counts by, leaves them out): those of opening a store only.
pub const OPEN_CODES: [&str; 1] = ["ERR_POOLER_MODE"];

/// The result type of the core.
pub type Result<T> = std::result::Result<T, Error>;

/// The text of `e` followed by that of each error in its source chain (`: `-separated), but
/// those whose text it already holds.
pub fn with_sources(e: &(dyn std::error::Error + 'static)) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = s.source();
    }
    message
}

impl Error {
    /// The stable machine code seen by JavaScript as `err.code`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidArg(_) => "ERR_INVALID_ARG",
            Error::Closed => "ERR_CLOSED",
            Error::Db { .. } | Error::Io(_) | Error::SourceChanged(_) => "ERR_DB",
            Error::UpstreamParse(_) => "ERR_UPSTREAM_PARSE",
            Error::NotSqlite(_) => "ERR_NOT_SQLITE",
            Error::FileShared(_) => "ERR_FILE_SHARED",
            Error::ForeignSchema(_) => "ERR_FOREIGN_SCHEMA",
            Error::ImportDiverged(_) => "ERR_IMPORT_DIVERGED",
            Error::AsyncOnly(_) => "ERR_ASYNC_ONLY",
            Error::OutcomeUnknown(_) => "ERR_OUTCOME_UNKNOWN",
            Error::PoolerMode(_) => "ERR_POOLER_MODE",
        }
    }

    /// Shorthand for an [`Error::Db`] of `kind` with a message.
    pub fn db(kind: DbFailure, message: impl Into<String>) -> Self {
        Error::Db {
            kind,
            message: message.into(),
        }
    }

    /// Shorthand for an [`Error::InvalidArg`] with a message.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArg(msg.into())
    }

    /// This error, met while opening the file at `path`, naming the file: an I/O or SQLite
    /// failure gets the path in front of its message (unless it already names it), and
    /// SQLite's "file is not a database" becomes [`Error::NotSqlite`], as `inspectDatabase`
    /// reports it (semantics.md#errors). Other errors are returned as they are.
    pub fn at_path(self, path: &str) -> Error {
        match self {
            Error::Io(e) if !e.to_string().contains(path) => {
                Error::Io(std::io::Error::new(e.kind(), format!("{path}: {e}")))
            }
            Error::Db {
                kind: DbFailure::NotADatabase,
                ..
            } => Error::NotSqlite(format!("{path} is not a SQLite database")),
            Error::Db { kind, message } if !message.contains(path) => Error::Db {
                kind,
                message: format!("{path}: {message}"),
            },
            other => other,
        }
    }

    /// True when the store gave up waiting for a lock (SQLite's `SQLITE_BUSY` / `SQLITE_LOCKED`).
    pub fn is_busy(&self) -> bool {
        matches!(
            self,
            Error::Db {
                kind: DbFailure::Busy,
                ..
            }
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArg(msg) => write!(f, "invalid argument: {msg}"),
            Error::Closed => f.write_str("the session state store is closed"),
            Error::Db { message, .. } => write!(f, "database error: {message}"),
            Error::Io(e) => write!(f, "file error: {e}"),
            Error::UpstreamParse(msg) => write!(f, "upstream transcript: {msg}"),
            Error::NotSqlite(msg) | Error::FileShared(msg) | Error::PoolerMode(msg) => {
                f.write_str(msg)
            }
            Error::ForeignSchema(msg) => write!(f, "foreign schema: {msg}"),
            Error::ImportDiverged(msg) => write!(f, "import refused: {msg}"),
            Error::SourceChanged(msg) => write!(f, "import source changed: {msg}"),
            Error::AsyncOnly(method) => write!(
                f,
                "{method} needs the database and a PostgreSQL store serves it only through the Promise API"
            ),
            Error::OutcomeUnknown(msg) => write!(f, "outcome unknown: {msg}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable() {
        assert_eq!(Error::invalid("x").code(), "ERR_INVALID_ARG");
        assert_eq!(Error::Closed.code(), "ERR_CLOSED");
        assert_eq!(
            Error::ForeignSchema("x".into()).code(),
            "ERR_FOREIGN_SCHEMA"
        );
        assert_eq!(Error::db(DbFailure::Other, "x").code(), "ERR_DB");
        assert_eq!(Error::Io(std::io::Error::other("x")).code(), "ERR_DB");
        assert_eq!(Error::SourceChanged("x".into()).code(), "ERR_DB");
        assert_eq!(
            Error::ImportDiverged("x".into()).code(),
            "ERR_IMPORT_DIVERGED"
        );
        assert_eq!(
            Error::UpstreamParse("x".into()).code(),
            "ERR_UPSTREAM_PARSE"
        );
        assert_eq!(Error::FileShared("x".into()).code(), "ERR_FILE_SHARED");
        assert_eq!(Error::AsyncOnly("watch".into()).code(), "ERR_ASYNC_ONLY");
        assert_eq!(
            Error::OutcomeUnknown("x".into()).code(),
            "ERR_OUTCOME_UNKNOWN"
        );
        assert_eq!(Error::PoolerMode("x".into()).code(), "ERR_POOLER_MODE");
        assert_eq!(Error::db(DbFailure::Connection, "x").code(), "ERR_DB");
    }

    #[test]
    fn errors_of_opening_name_the_file() {
        let io = Error::Io(std::io::Error::from(std::io::ErrorKind::NotFound)).at_path("/a/b");
        assert_eq!(io.code(), "ERR_DB");
        assert!(io.to_string().contains("/a/b"), "{io}");
        let e = Error::db(DbFailure::NotADatabase, "file is not a database").at_path("/a/b");
        assert_eq!(e.code(), "ERR_NOT_SQLITE");
        assert!(e.to_string().contains("/a/b"), "{e}");
        let e = Error::db(DbFailure::Busy, "database is locked").at_path("/a/b");
        assert!(e.is_busy());
        assert_eq!(e.to_string(), "database error: /a/b: database is locked");
        let e = Error::db(DbFailure::Busy, "/a/b is locked").at_path("/a/b");
        assert_eq!(e.to_string(), "database error: /a/b is locked");
        assert_eq!(
            Error::Closed.at_path("/a/b").to_string(),
            Error::Closed.to_string()
        );
    }
}
