//! Systems without detection: Windows, where locks belong to the handle and two SQLite
//! libraries in one process exclude each other (nothing is lost), and unix systems other than
//! Linux and macOS, where the store does not look.

use std::path::Path;

use super::Family;

/// The detection does not run here.
pub(super) const SUPPORTED: bool = false;

/// Never asked: nothing is scanned.
pub(super) fn file_id(_path: &Path) -> Option<(u64, u64)> {
    None
}

/// Never asked: nothing is scanned.
pub(super) fn fd_id(_fd: i32) -> Option<(u64, u64)> {
    None
}

/// No descriptor list here.
pub(super) fn list_fds() -> Option<Vec<i32>> {
    None
}

/// Never fires.
pub(super) struct Trigger;

impl Trigger {
    /// Nothing to watch.
    pub(super) fn new(_family: &Family) -> Self {
        Trigger
    }

    /// Never fires.
    pub(super) fn fired(&self) -> bool {
        false
    }
}
