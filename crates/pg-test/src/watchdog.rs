//! The watchdog of a cluster: a shell in a process group of its own that waits for the test
//! process to end (however it ends: a panic that aborts, a signal, kill -9), then stops the
//! server as a crash would and removes the data dir. [`Watchdog::end`] stops it first.

use std::path::Path;
use std::process::{Child, Command, Stdio};

/// `$1`: the pid to wait for; `$2`: the data dir, whose postmaster.pid is read when `$1` has
/// ended, so a restart in between is followed. The same script as scripts/pg/cluster.js's.
const SCRIPT: &str = r#"
while kill -0 "$1" 2>/dev/null; do sleep 1; done
p=$(head -n 1 "$2/postmaster.pid" 2>/dev/null)
if [ -n "$p" ]; then
  kill -QUIT "$p" 2>/dev/null
  i=0; while kill -0 "$p" 2>/dev/null && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
fi
rm -rf "$2"
"#;

/// A running watchdog.
#[derive(Debug)]
pub(crate) struct Watchdog(Option<Child>);

impl Watchdog {
    /// Starts one for the cluster in `data_dir`, waiting for this process.
    pub(crate) fn start(data_dir: &Path) -> Watchdog {
        use std::os::unix::process::CommandExt;
        let child = Command::new("sh")
            .arg("-c")
            .arg(SCRIPT)
            .arg("sa-pg-watchdog")
            .arg(std::process::id().to_string())
            .arg(data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .ok();
        Watchdog(child)
    }

    /// Its pid, if it started.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.0.as_ref().map(Child::id)
    }

    /// Ends its process group (the shell and the sleep it waits in) and reaps the shell.
    pub(crate) fn end(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = Command::new("kill")
                .args(["-s", "KILL", "--", &format!("-{}", child.id())])
                .output();
            let _ = child.wait();
        }
    }
}
