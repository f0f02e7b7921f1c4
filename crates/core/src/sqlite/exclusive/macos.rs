//! macOS: descriptors from `proc_pidinfo(PROC_PIDLISTFDS)`. There is no notification of
//! another handle's open here, so the trigger always fires and the store scans before every
//! call; the scan `fstat`s only file descriptors the bundled SQLite did not open.
//!
//! Not compiled on the Linux build machine: keep it small.

use std::ffi::c_int;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::Family;

/// The detection works here.
pub(super) const SUPPORTED: bool = true;

/// `(st_dev, st_ino)` of the file at `path`, if it exists.
pub(super) fn file_id(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// `(st_dev, st_ino)` of the file open on `fd`, converted as `MetadataExt` converts them.
pub(super) fn fd_id(fd: i32) -> Option<(u64, u64)> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes a whole `stat` on success and nothing is read otherwise.
    let st = unsafe {
        if libc::fstat(fd, st.as_mut_ptr()) != 0 {
            return None;
        }
        st.assume_init()
    };
    Some((st.st_dev as u64, st.st_ino))
}

/// The process's descriptors that are files (vnodes); sockets, pipes and the rest are left out.
pub(super) fn list_fds() -> Option<Vec<i32>> {
    let item = std::mem::size_of::<libc::proc_fdinfo>();
    // SAFETY: getpid cannot fail; with a null buffer proc_pidinfo returns the size it needs.
    let pid = unsafe { libc::getpid() };
    let need =
        unsafe { libc::proc_pidinfo(pid, libc::PROC_PIDLISTFDS, 0, std::ptr::null_mut(), 0) };
    if need <= 0 {
        return None;
    }
    // Room for descriptors opened between the two calls.
    let cap = need as usize / item + 32;
    let mut list: Vec<libc::proc_fdinfo> = Vec::with_capacity(cap);
    // SAFETY: the buffer holds `cap` entries; the call returns the bytes it filled.
    let got = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDLISTFDS,
            0,
            list.as_mut_ptr().cast(),
            (cap * item) as c_int,
        )
    };
    if got <= 0 {
        return None;
    }
    // SAFETY: `got` bytes of whole entries were written, at most `cap` of them.
    unsafe { list.set_len((got as usize / item).min(cap)) };
    Some(
        list.iter()
            .filter(|f| f.proc_fdtype == libc::PROX_FDTYPE_VNODE as u32)
            .map(|f| f.proc_fd)
            .collect(),
    )
}

/// Always fires: without a notification of opens, every call scans.
pub(super) struct Trigger;

impl Trigger {
    /// Nothing to watch.
    pub(super) fn new(_family: &Family) -> Self {
        Trigger
    }

    /// Always true.
    pub(super) fn fired(&self) -> bool {
        true
    }
}
