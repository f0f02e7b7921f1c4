//! One SQLite per file per process (semantics.md#storage): finds handles of this process on the database file,
//! its `-wal`, `-shm` or `-journal` that the store's own SQLite did not open.
//!
//! POSIX `fcntl` locks belong to the process, not to the file descriptor. Two copies of SQLite
//! in one process (the bundled one here, and `node:sqlite` or better-sqlite3 beside it) never
//! see each other's locks, and closing any descriptor on a file drops every lock the process
//! holds on it. Committed events are then lost. SQLite avoids this between its own
//! connections by sharing one record per file; another library cannot join it.
//!
//! How the handles are told apart:
//! - [`install`] replaces the `open` and `close` system calls of the bundled SQLite's unix VFS
//!   (`xSetSystemCall`, shared by every unix VFS of that SQLite) with wrappers that keep the
//!   set of descriptors it holds: main files, WAL, shared memory, journals, and descriptors it
//!   keeps for a deferred close. Every store of the process uses that SQLite, so two stores on
//!   one file are not foreign to each other.
//! - A scan lists the process's descriptors (`/proc/self/fd` on Linux, `proc_pidinfo` on
//!   macOS), `fstat`s each and compares `(st_dev, st_ino)` with the four files. A descriptor
//!   on them outside the set is foreign.
//! - A scan costs tens of microseconds, so a store runs one at open and then only when
//!   something opened one of the four files since the last: on Linux an inotify watch
//!   (`IN_OPEN`) on the directory, read without blocking before every database call. The
//!   event is queued inside the other handle's `open()`, so it is seen before the next write.
//!   macOS has no such notification: it scans before every call, skipping the store's own
//!   descriptors and everything that is not a file.
//! - Windows locks belong to the handle, so two libraries in one process exclude each other
//!   and nothing is lost: no detection there. Other unix systems: no detection.
//!
//! Once a foreign handle was seen on a file while this process's SQLite had it open, the
//! process's locks on it cannot be trusted (the other library's open resets the `-shm`; its
//! close drops this process's locks and may delete the `-wal` and `-shm` the store still has
//! open). While the handle is open the store refuses writes and answers reads
//! ([`FileGuard::admit`]); once it is gone, the store closes every connection it has on the
//! file and opens its own again, which takes the locks anew ([`crate::sqlite::conn::Db`]).
//! SQLite keeps one lock record per file for all connections of the process, so the locks
//! only come back when no connection of this process's SQLite is left on the file at that
//! moment: with another store of the process on the same file, the file stays refused until
//! that one is closed (a store opened after that starts clean).

#![allow(unsafe_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::error::{Error, Result};

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as os;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as os;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod none;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
use none as os;

/// The descriptors the bundled SQLite holds open. Also held across its `open` and `close`
/// calls and across a scan, so a scan never sees a descriptor SQLite opened but has not
/// recorded yet, nor one it recorded as closed that another library already reuses.
static OURS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());
/// Database files (`st_dev`, `st_ino`) on which a foreign handle was seen while this
/// process's SQLite had them open.
static TAINTED: Mutex<BTreeSet<(u64, u64)>> = Mutex::new(BTreeSet::new());
/// The switch for measuring the detection's cost (see [`set_enabled`]).
static ENABLED: AtomicBool = AtomicBool::new(true);

#[cfg(unix)]
mod wrap {
    use std::ffi::{c_char, c_int};
    use std::sync::OnceLock;

    use rusqlite::ffi;

    use super::OURS;

    type OpenFn = unsafe extern "C" fn(*const c_char, c_int, c_int) -> c_int;
    type CloseFn = unsafe extern "C" fn(c_int) -> c_int;

    /// The calls the wrappers forward to, set before the wrappers are installed.
    static REAL: OnceLock<(OpenFn, CloseFn)> = OnceLock::new();
    static INSTALLED: OnceLock<bool> = OnceLock::new();

    unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: c_int) -> c_int {
        let Some((real, _)) = REAL.get() else {
            return -1;
        };
        let mut ours = OURS.lock();
        let fd = real(path, flags, mode);
        if fd >= 0 {
            ours.insert(fd);
        }
        fd
    }

    unsafe extern "C" fn close(fd: c_int) -> c_int {
        let Some((_, real)) = REAL.get() else {
            return -1;
        };
        let mut ours = OURS.lock();
        ours.remove(&fd);
        real(fd)
    }

    /// Installs the wrappers once; true when they are in place.
    pub(super) fn install() -> bool {
        *INSTALLED.get_or_init(|| unsafe {
            // The default VFS is "unix"; all unix VFSes of one SQLite share one table of
            // system calls. Finding a VFS also initializes SQLite.
            let vfs = ffi::sqlite3_vfs_find(std::ptr::null());
            if vfs.is_null() || (*vfs).iVersion < 3 {
                return false;
            }
            let (Some(get), Some(set)) = ((*vfs).xGetSystemCall, (*vfs).xSetSystemCall) else {
                return false;
            };
            let (Some(real_open), Some(real_close)) =
                (get(vfs, c"open".as_ptr()), get(vfs, c"close".as_ptr()))
            else {
                return false;
            };
            // SAFETY: SQLite stores every system call as a generic function pointer; "open"
            // is `int(const char*, int, int)` and "close" is `int(int)` (sqlite3.c, aSyscall).
            let real = (
                std::mem::transmute::<unsafe extern "C" fn(), OpenFn>(real_open),
                std::mem::transmute::<unsafe extern "C" fn(), CloseFn>(real_close),
            );
            if REAL.set(real).is_err() {
                return false;
            }
            let ours_open = std::mem::transmute::<OpenFn, unsafe extern "C" fn()>(open);
            let ours_close = std::mem::transmute::<CloseFn, unsafe extern "C" fn()>(close);
            if set(vfs, c"open".as_ptr(), Some(ours_open)) != ffi::SQLITE_OK {
                return false;
            }
            if set(vfs, c"close".as_ptr(), Some(ours_close)) != ffi::SQLITE_OK {
                set(vfs, c"open".as_ptr(), Some(real_open));
                return false;
            }
            true
        })
    }
}

/// Makes the bundled SQLite record the descriptors it opens. Idempotent and cheap after the
/// first call; must run before the process's first connection, so every path that opens one
/// calls it. False where the detection is not available.
pub fn install() -> bool {
    #[cfg(unix)]
    {
        os::SUPPORTED && wrap::install()
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// `access(path, W_OK)`: whether this process may write the file, asked without opening it
/// (closing a handle on a file drops the process's locks on it).
#[cfg(unix)]
pub fn check_writable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: a NUL-terminated path; access reads it and nothing else.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Turns the detection on or off for the whole process. Only for measuring its cost; a store
/// with the detection off is exposed to the lost writes this module prevents.
#[cfg(any(test, feature = "test-hooks"))]
#[doc(hidden)]
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Release);
}

fn enabled() -> bool {
    ENABLED.load(Ordering::Acquire)
}

/// The four files of one database.
#[derive(Debug, Clone)]
pub struct Family {
    /// The database path as given (for messages).
    shown: String,
    /// The database file, resolved, then its `-wal`, `-shm` and `-journal`.
    files: [PathBuf; 4],
}

impl Family {
    /// The family of the database at `path` (which need not exist).
    pub fn of(path: &Path) -> Result<Self> {
        // SQLite names the -wal and -shm after the resolved path of the database file.
        let db = std::fs::canonicalize(path).or_else(|_| std::path::absolute(path))?;
        let with = |suffix: &str| {
            let mut name = db.clone().into_os_string();
            name.push(suffix);
            PathBuf::from(name)
        };
        Ok(Family {
            shown: path.display().to_string(),
            files: [with(""), with("-wal"), with("-shm"), with("-journal")],
        })
    }

    /// The directory holding the four files.
    pub fn dir(&self) -> &Path {
        self.files[0].parent().unwrap_or(Path::new("/"))
    }

    /// The file names within [`Family::dir`].
    pub fn names(&self) -> Vec<std::ffi::OsString> {
        self.files
            .iter()
            .filter_map(|f| f.file_name().map(ToOwned::to_owned))
            .collect()
    }

    fn ids(&self) -> Vec<(u64, u64)> {
        self.files.iter().filter_map(|f| os::file_id(f)).collect()
    }

    fn shared_error(&self, what: &str) -> Error {
        Error::FileShared(format!(
            "{} {what}. POSIX locks belong to the process, so two SQLite libraries in one \
             process break each other's locks and committed events are lost. Give the store \
             a file of its own (for a gateway, <stateDir>/state/session-state.sqlite), or \
             open this file from another process",
            self.shown
        ))
    }
}

/// What one scan found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scan {
    /// A descriptor on the family that the bundled SQLite did not open.
    pub foreign: Option<i32>,
    /// The bundled SQLite has a descriptor on the family.
    pub ours: bool,
}

/// Lists this process's descriptors on `family`. `None` where the detection is not
/// available (not installed, unsupported system, or the descriptor list unreadable).
pub fn scan(family: &Family) -> Option<Scan> {
    if !install() {
        return None;
    }
    let mut found = Scan {
        foreign: None,
        ours: false,
    };
    let ids = family.ids();
    if ids.is_empty() {
        return Some(found);
    }
    let ours = OURS.lock();
    let fds = os::list_fds()?;
    for fd in fds {
        let Some(id) = os::fd_id(fd) else {
            continue;
        };
        if !ids.contains(&id) {
            continue;
        }
        if ours.contains(&fd) {
            found.ours = true;
        } else if found.foreign.is_none() {
            found.foreign = Some(fd);
        }
    }
    Some(found)
}

/// Refuses with `ERR_FILE_SHARED` when a foreign handle is on `family`, or was while this
/// process's SQLite had it open and still has. Returns what the scan found (`None` when the
/// detection is off or not available).
pub fn check(family: &Family) -> Result<Option<Scan>> {
    if !enabled() {
        return Ok(None);
    }
    let Some(found) = scan(family) else {
        return Ok(None);
    };
    let db = os::file_id(&family.files[0]);
    let mut tainted = TAINTED.lock();
    if let Some(fd) = found.foreign {
        if let (true, Some(db)) = (found.ours, db) {
            tainted.insert(db);
        }
        return Err(family.shared_error(&format!(
            "is open through another library of this process (file descriptor {fd})"
        )));
    }
    if let Some(db) = db.filter(|db| tainted.contains(db)) {
        if found.ours {
            return Err(family.shared_error(
                "was opened through another library of this process while stores of this \
                 process had it open; close every store on it and open it again",
            ));
        }
        tainted.remove(&db);
    }
    Ok(Some(found))
}

/// What the store's own connection does after [`FileGuard::admit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Go on with the call.
    Go,
    /// The foreign handle is gone: reopen the store's connections before the call.
    Reopen,
}

/// The guard of one open store: a scan at open, then one whenever the trigger fired, and on
/// every call while a foreign handle is (or was) open.
pub struct FileGuard {
    family: Family,
    trigger: os::Trigger,
    /// Why the file is refused: a foreign handle is open, or was and the store has not taken
    /// its locks anew yet.
    refused: Mutex<Option<String>>,
    refused_flag: AtomicBool,
    scans: AtomicU64,
}

impl FileGuard {
    /// Sets up the trigger, then scans (so an open racing with the scan fires the trigger).
    /// `ERR_FILE_SHARED` when a foreign handle is on the file.
    pub fn open(path: &Path) -> Result<Self> {
        install();
        let family = Family::of(path)?;
        let trigger = os::Trigger::new(&family);
        check(&family)?;
        Ok(FileGuard {
            family,
            trigger,
            refused: Mutex::new(None),
            refused_flag: AtomicBool::new(false),
            scans: AtomicU64::new(0),
        })
    }

    fn refusal(&self) -> Error {
        Error::FileShared(self.refused.lock().clone().unwrap_or_default())
    }

    fn refuse(&self, e: &Error) {
        *self.refused.lock() = Some(e.to_string());
        self.refused_flag.store(true, Ordering::Release);
    }

    /// A scan when the trigger fired; `ERR_FILE_SHARED` (and the file refused) when it finds
    /// a foreign handle.
    fn scan_if_fired(&self) -> Result<()> {
        if !enabled() || !self.trigger.fired() {
            return Ok(());
        }
        self.scans.fetch_add(1, Ordering::Relaxed);
        match check(&self.family) {
            Ok(_) => Ok(()),
            Err(e) => {
                self.refuse(&e);
                Err(e)
            }
        }
    }

    /// Called before the work of the store's other connections (the checkpoint, the poll):
    /// `ERR_FILE_SHARED` while the file is refused. Without an open since the last check this
    /// is one non-blocking `read` on Linux.
    pub fn check(&self) -> Result<()> {
        if self.refused_flag.load(Ordering::Acquire) {
            return Err(self.refusal());
        }
        self.scan_if_fired()
    }

    /// Called before every call on the store's own connection. While a foreign handle is
    /// open, a `write` is refused with `ERR_FILE_SHARED` and a read goes on; once the file is
    /// refused and the handle is gone, [`Admit::Reopen`].
    pub fn admit(&self, write: bool) -> Result<Admit> {
        if !self.refused_flag.load(Ordering::Acquire) {
            return match self.scan_if_fired() {
                Err(e) if write => Err(e),
                _ => Ok(Admit::Go),
            };
        }
        self.scans.fetch_add(1, Ordering::Relaxed);
        match scan(&self.family).and_then(|s| s.foreign) {
            Some(fd) => {
                let e = self.family.shared_error(&format!(
                    "is open through another library of this process (file descriptor {fd})"
                ));
                self.refuse(&e);
                if write {
                    Err(e)
                } else {
                    Ok(Admit::Go)
                }
            }
            None => Ok(Admit::Reopen),
        }
    }

    /// After the store closed its connections on the file: true when none of this process's
    /// SQLite is left on it, so connections opened now take the locks anew. Otherwise the
    /// file stays refused, saying why.
    pub fn released(&self) -> bool {
        match scan(&self.family) {
            Some(Scan {
                foreign: None,
                ours: true,
            }) => {
                self.refuse(&self.family.shared_error(
                    "was opened through another library of this process, which dropped this \
                     process's locks on it; another store of this process still has it open, \
                     so they cannot be taken anew: close the other stores on it",
                ));
                false
            }
            Some(Scan {
                foreign: Some(fd), ..
            }) => {
                self.refuse(&self.family.shared_error(&format!(
                    "is open through another library of this process (file descriptor {fd})"
                )));
                false
            }
            _ => true,
        }
    }

    /// The store's connections were opened anew with nothing else of this process on the
    /// file: its locks are its own again.
    pub fn restored(&self) {
        if let Some(db) = os::file_id(&self.family.files[0]) {
            TAINTED.lock().remove(&db);
        }
        *self.refused.lock() = None;
        self.refused_flag.store(false, Ordering::Release);
    }

    /// True while the file is refused.
    pub fn is_refused(&self) -> bool {
        self.refused_flag.load(Ordering::Acquire)
    }

    /// The database path as the store was given it.
    pub fn shown(&self) -> &str {
        &self.family.shown
    }

    /// How many scans [`FileGuard::check`] and [`FileGuard::admit`] ran (the one at open not
    /// counted).
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn scans(&self) -> u64 {
        self.scans.load(Ordering::Relaxed)
    }

    /// The files guarded.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn family(&self) -> &Family {
        &self.family
    }
}

#[cfg(test)]
mod tests;
