//! Linux: descriptors from `/proc/self/fd`, and one inotify instance for the process whose
//! `IN_OPEN` events on the stores' directories fire the stores' triggers.

use std::collections::HashMap;
use std::ffi::{c_int, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::Family;

/// The detection works here.
pub(super) const SUPPORTED: bool = true;

/// `(st_dev, st_ino)` of the file at `path`, if it exists.
pub(super) fn file_id(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// `(st_dev, st_ino)` of the file open on `fd`.
pub(super) fn fd_id(fd: i32) -> Option<(u64, u64)> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes a whole `stat` on success and nothing is read otherwise.
    let st = unsafe {
        if libc::fstat(fd, st.as_mut_ptr()) != 0 {
            return None;
        }
        st.assume_init()
    };
    Some((st.st_dev, st.st_ino))
}

/// Every descriptor of the process (the directory handle of the listing included).
pub(super) fn list_fds() -> Option<Vec<i32>> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    Some(
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
    )
}

/// One store's interest in its directory.
struct Listener {
    names: Vec<OsString>,
    fired: AtomicBool,
}

/// The process's inotify instance and who listens on each watch.
struct Registry {
    fd: c_int,
    watches: HashMap<c_int, Vec<Arc<Listener>>>,
}

/// `None` until the first store; then the instance (or `fd` -1 when inotify is unavailable).
static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

impl Registry {
    /// Reads every queued event without blocking and fires the listeners they concern.
    fn pump(&mut self) {
        // u64s keep the buffer aligned for the event headers.
        let mut buf = [0u64; 512];
        loop {
            // SAFETY: reads at most the buffer's size into it.
            let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), size_of_val(&buf)) };
            if n <= 0 {
                return;
            }
            let bytes = &buf_bytes(&buf)[..n as usize];
            let mut at = 0;
            let head = size_of::<libc::inotify_event>();
            while at + head <= bytes.len() {
                // SAFETY: the kernel writes whole events; the header is read unaligned.
                let ev: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(bytes[at..].as_ptr().cast()) };
                let end = (at + head + ev.len as usize).min(bytes.len());
                let raw = &bytes[at + head..end];
                let name = &raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())];
                if ev.mask & libc::IN_Q_OVERFLOW != 0 {
                    // Events were dropped: everyone scans once.
                    self.watches
                        .values()
                        .flatten()
                        .for_each(|l| l.fired.store(true, Ordering::Release));
                } else if let Some(listeners) = self.watches.get(&ev.wd) {
                    // IN_IGNORED: the directory went away; its listeners scan once more.
                    let gone = ev.mask & libc::IN_IGNORED != 0;
                    for l in listeners {
                        if gone || l.names.iter().any(|n| n.as_bytes() == name) {
                            l.fired.store(true, Ordering::Release);
                        }
                    }
                }
                at = end;
            }
        }
    }
}

fn buf_bytes(buf: &[u64; 512]) -> &[u8] {
    // SAFETY: any u64 array is a valid byte array of eight times its length.
    unsafe { std::slice::from_raw_parts(buf.as_ptr().cast(), size_of_val(buf)) }
}

/// Fires when something opened one of the family's files since the last look.
pub(super) struct Trigger {
    /// `None`: no inotify watch, so every look fires (a scan before every call).
    watch: Option<(c_int, Arc<Listener>)>,
}

impl Trigger {
    /// Watches the family's directory.
    pub(super) fn new(family: &Family) -> Self {
        let mut slot = REGISTRY.lock();
        let reg = slot.get_or_insert_with(|| Registry {
            // SAFETY: plain system call.
            fd: unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) },
            watches: HashMap::new(),
        });
        if reg.fd < 0 {
            return Trigger { watch: None };
        }
        let Ok(dir) = std::ffi::CString::new(family.dir().as_os_str().as_bytes()) else {
            return Trigger { watch: None };
        };
        // SAFETY: a valid descriptor and a NUL-terminated path.
        let wd = unsafe { libc::inotify_add_watch(reg.fd, dir.as_ptr(), libc::IN_OPEN) };
        if wd < 0 {
            return Trigger { watch: None };
        }
        let listener = Arc::new(Listener {
            names: family.names(),
            fired: AtomicBool::new(false),
        });
        reg.watches
            .entry(wd)
            .or_default()
            .push(Arc::clone(&listener));
        Trigger {
            watch: Some((wd, listener)),
        }
    }

    /// True when one of the files was opened since the last call (or it cannot tell).
    pub(super) fn fired(&self) -> bool {
        let Some((_, listener)) = &self.watch else {
            return true;
        };
        if let Some(reg) = REGISTRY.lock().as_mut() {
            reg.pump();
        }
        listener.fired.swap(false, Ordering::AcqRel)
    }
}

impl Drop for Trigger {
    fn drop(&mut self) {
        let Some((wd, listener)) = self.watch.take() else {
            return;
        };
        let mut slot = REGISTRY.lock();
        let Some(reg) = slot.as_mut() else {
            return;
        };
        if let Some(list) = reg.watches.get_mut(&wd) {
            list.retain(|l| !Arc::ptr_eq(l, &listener));
            if list.is_empty() {
                reg.watches.remove(&wd);
                // SAFETY: plain system call; the watch is ours.
                unsafe { libc::inotify_rm_watch(reg.fd, wd) };
            }
        }
    }
}
