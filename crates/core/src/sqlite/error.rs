//! SQLite's errors as the core's store-neutral [`Error::Db`]: the failure's kind from SQLite's
//! primary result code, and rusqlite's message with the text of its sources (SQLite's own
//! description of the code) when the message does not already hold them.

use crate::error::{DbFailure, Error};

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        let kind = match &e {
            rusqlite::Error::SqliteFailure(f, _) => match f.code {
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked => {
                    DbFailure::Busy
                }
                rusqlite::ErrorCode::DiskFull => DbFailure::Full,
                rusqlite::ErrorCode::ReadOnly => DbFailure::ReadOnly,
                rusqlite::ErrorCode::DatabaseCorrupt => DbFailure::Corrupt,
                rusqlite::ErrorCode::NotADatabase => DbFailure::NotADatabase,
                _ => DbFailure::Other,
            },
            _ => DbFailure::Other,
        };
        let message = crate::error::with_sources(&e);
        Error::Db { kind, message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: std::os::raw::c_int) -> Error {
        Error::from(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(code),
            None,
        ))
    }

    #[test]
    fn sqlite_result_codes_map_to_their_kinds() {
        let kind = |e: Error| match e {
            Error::Db { kind, .. } => kind,
            other => panic!("{other:?}"),
        };
        assert_eq!(kind(failure(5)), DbFailure::Busy); // SQLITE_BUSY
        assert_eq!(kind(failure(6)), DbFailure::Busy); // SQLITE_LOCKED
        assert_eq!(kind(failure(13)), DbFailure::Full); // SQLITE_FULL
        assert_eq!(kind(failure(8)), DbFailure::ReadOnly); // SQLITE_READONLY
        assert_eq!(kind(failure(11)), DbFailure::Corrupt); // SQLITE_CORRUPT
        assert_eq!(kind(failure(26)), DbFailure::NotADatabase); // SQLITE_NOTADB
        assert_eq!(kind(failure(1)), DbFailure::Other); // SQLITE_ERROR
        assert_eq!(
            kind(Error::from(rusqlite::Error::QueryReturnedNoRows)),
            DbFailure::Other
        );
        assert!(failure(5).is_busy() && failure(6).is_busy() && !failure(8).is_busy());
        assert_eq!(failure(13).code(), "ERR_DB");
    }

    #[test]
    fn the_message_is_rusqlite_s() {
        let e = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(5),
            Some("database is locked".into()),
        );
        let text = e.to_string();
        let cause = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(
            Error::from(e).to_string(),
            format!("database error: {text}: {}", cause.expect("SQLite's code"))
        );
    }
}
