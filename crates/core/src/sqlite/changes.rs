//! The count of the event and head rows the store's connection changes, kept by an update
//! hook (`read_cache.rs` says what the count proves). The hook runs for every row the
//! connection changes in any table, cursor rows included: a record that opens 100 notices
//! calls it about 100 times. rusqlite's safe `update_hook` converts both names to `&str` (two
//! `strlen` and two UTF-8 checks) and sets up an unwind guard on each call, about 230
//! instructions a row, which came to 0.45 µs per notice opened; this hook is registered
//! through SQLite's C interface and compares the table name's bytes only, so a row of
//! another table costs a few instructions.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rusqlite::ffi;
use rusqlite::Connection;

use crate::error::{Error, Result};

/// The rows of the event and head tables the store's connection has changed, by its update
/// hook.
#[derive(Clone, Default)]
pub(crate) struct ChangeCount(Arc<AtomicU64>);

/// Where the connection keeps its reference to the count (freed when it closes).
const CLIENT_DATA: &CStr = c"session_awareness_change_count";

/// The update hook: counts a row of the event or head table.
unsafe extern "C" fn counted(
    count: *mut c_void,
    _op: c_int,
    _db: *const c_char,
    table: *const c_char,
    _rowid: ffi::sqlite3_int64,
) {
    // SAFETY: SQLite passes the table's name as a NUL-terminated string, valid for the call.
    let table = unsafe { CStr::from_ptr(table) }.to_bytes();
    if table == b"session_state_events" || table == b"session_state_heads" {
        // SAFETY: `count` is the pointer `install` registered, which the connection's client
        // data keeps alive until the connection closes, after its last hook call.
        unsafe { &*count.cast::<AtomicU64>() }.fetch_add(1, Ordering::Relaxed);
    }
}

/// Frees the connection's reference to the count when the connection closes.
unsafe extern "C" fn release(count: *mut c_void) {
    // SAFETY: `count` came from `Arc::into_raw` in `install` and is released once, here.
    drop(unsafe { Arc::from_raw(count.cast::<AtomicU64>().cast_const()) });
}

impl ChangeCount {
    /// Counts on `conn` from now on.
    pub(crate) fn install(&self, conn: &mut Connection) -> Result<()> {
        let count = Arc::into_raw(Arc::clone(&self.0))
            .cast_mut()
            .cast::<c_void>();
        // SAFETY: `conn` is open and borrowed mutably, so no statement runs meanwhile. The
        // client data owns one reference to the count (replacing an earlier one of this
        // connection frees that one) and is freed only when the connection closes, so the
        // hook's pointer stays valid for every call SQLite makes to it.
        let rc = unsafe {
            let db = conn.handle();
            let rc = ffi::sqlite3_set_clientdata(db, CLIENT_DATA.as_ptr(), count, Some(release));
            if rc == ffi::SQLITE_OK {
                ffi::sqlite3_update_hook(db, Some(counted), count);
            } else {
                release(count);
            }
            rc
        };
        if rc != ffi::SQLITE_OK {
            return Err(Error::from(rusqlite::Error::SqliteFailure(
                ffi::Error::new(rc),
                Some("cannot install the change count".to_owned()),
            )));
        }
        Ok(())
    }

    /// The rows counted so far.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_event_and_head_rows_only_and_outlives_nothing() -> Result<()> {
        let mut conn = Connection::open_in_memory()?;
        conn.execute_batch(
            "CREATE TABLE session_state_events (x); CREATE TABLE session_state_heads (x);
             CREATE TABLE session_watch_cursors (x);",
        )?;
        let c = ChangeCount::default();
        c.install(&mut conn)?;
        conn.execute_batch(
            "INSERT INTO session_state_events VALUES (1), (2);
             INSERT INTO session_watch_cursors VALUES (1), (2), (3);
             UPDATE session_state_heads SET x = 1;
             INSERT INTO session_state_heads VALUES (1);
             UPDATE session_state_heads SET x = 2;
             UPDATE session_watch_cursors SET x = 0;
             DELETE FROM session_state_events WHERE x = 1;",
        )?;
        assert_eq!(c.get(), 5);
        // Installed again (a reopened connection counts on): one count, the old reference
        // freed.
        c.install(&mut conn)?;
        conn.execute("DELETE FROM session_state_heads WHERE x = 2", [])?;
        assert_eq!(c.get(), 6);
        assert_eq!(Arc::strong_count(&c.0), 2);
        drop(conn);
        assert_eq!(
            Arc::strong_count(&c.0),
            1,
            "closing the connection frees its reference"
        );
        Ok(())
    }
}
