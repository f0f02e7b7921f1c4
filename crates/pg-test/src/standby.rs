//! Streaming standbys and failover: [`Cluster::standby`] makes a standby of a running cluster
//! with `pg_basebackup -R` (its own temp dir, free port and watchdog), optionally the one
//! synchronous standby of its primary; [`Cluster::crash`] stops a primary as a crash would and
//! [`Cluster::promote`] makes the standby the primary. [`Cluster::detach`] stops a standby's
//! replication, so what its primary commits afterwards is lost at a failover: an asynchronous
//! standby that lags by as much as the test wants. It needs the bin dir's `pg_basebackup`,
//! which npm's server binaries lack.

use std::time::{Duration, Instant};

use crate::{run, temp_dir, Cluster, Error, Result, Timing, Watchdog};

/// How long a standby may take to stream, and a promotion to end.
const PATIENCE: Duration = Duration::from_secs(60);

impl Cluster {
    /// A streaming standby of this cluster, started on a free port of its own, its data dir
    /// labelled `name`. It connects as `application_name` `name` (its `cluster_name`), which
    /// must be a plain identifier. With `synchronous`, the primary's
    /// `synchronous_standby_names` names it, so a commit on the primary is acknowledged only
    /// once the standby has it. Returns once the primary sees it streaming (and, with
    /// `synchronous`, as its synchronous standby).
    pub fn standby(&self, name: &str, synchronous: bool) -> Result<Cluster> {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Error::Failed(format!(
                "standby name {name:?}: a plain identifier"
            )));
        }
        if !self.bin.join("pg_basebackup").is_file() {
            return Err(Error::Failed(format!(
                "no pg_basebackup in {} (npm's server binaries ship none): install the \
                 system's, e.g. `apt-get install postgresql-15`",
                self.bin.display()
            )));
        }
        let began = Instant::now();
        let data_dir = temp_dir(name)?;
        let watchdog = Watchdog::start(&data_dir);
        let mut standby = Cluster {
            bin: self.bin.clone(),
            data_dir,
            port: 0,
            pid: 0,
            password: self.password.clone(),
            durable: self.durable,
            timing: Timing {
                initdb: Duration::ZERO,
                start: Duration::ZERO,
            },
            stopped: false,
            watchdog,
        };
        let dir = standby.data_dir.to_string_lossy().into_owned();
        let port = self.port.to_string();
        let copy = [
            "-D",
            &dir,
            "-R",
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "-U",
            "postgres",
            "-X",
            "stream",
            "--checkpoint=fast",
            "--no-sync",
        ];
        run(&standby.bin, "pg_basebackup", &copy)?;
        // The walreceiver's application_name is the cluster_name when set.
        let auto = standby.data_dir.join("postgresql.auto.conf");
        let mut conf = std::fs::read_to_string(&auto)
            .map_err(|e| Error::Failed(format!("{}: {e}", auto.display())))?;
        conf.push_str(&format!("cluster_name = '{name}'\n"));
        std::fs::write(&auto, conf)
            .map_err(|e| Error::Failed(format!("{}: {e}", auto.display())))?;
        standby.timing.initdb = began.elapsed();
        standby.serve()?;
        standby.timing.start = began.elapsed() - standby.timing.initdb;
        if synchronous {
            self.sql(&format!(
                "ALTER SYSTEM SET synchronous_standby_names = '{name}'"
            ))?;
            self.sql("SELECT pg_reload_conf()")?;
        }
        let want = if synchronous { "sync" } else { "async" };
        self.until(&format!("standby {name} streaming ({want})"), || {
            self.sql(&format!(
                "SELECT count(*) FROM pg_stat_replication \
                 WHERE application_name = '{name}' AND state = 'streaming' \
                 AND sync_state = '{want}'"
            ))
            .is_ok_and(|n| n == "1")
        })?;
        Ok(standby)
    }

    /// Stops the server as a crash would (SIGQUIT: immediate shutdown), and leaves it stopped:
    /// a primary lost at a failover. Dropping the cluster still removes its data dir.
    pub fn crash(&mut self) -> Result<()> {
        self.halt("QUIT")
    }

    /// Promotes this standby (`pg_ctl promote`): returns once it accepts writes.
    pub fn promote(&self) -> Result<()> {
        let dir = self.data_dir.to_string_lossy().into_owned();
        run(
            &self.bin,
            "pg_ctl",
            &["-D", &dir, "-w", "-t", "60", "promote"],
        )?;
        self.until("the promoted standby to accept writes", || {
            self.sql("SELECT pg_is_in_recovery()")
                .is_ok_and(|r| r == "f")
        })
    }

    /// Stops this standby's replication (its `primary_conninfo` emptied and reloaded): what
    /// the primary commits from now on never reaches it. Returns once its walreceiver is gone.
    pub fn detach(&self) -> Result<()> {
        self.sql("ALTER SYSTEM SET primary_conninfo = ''")?;
        self.sql("SELECT pg_reload_conf()")?;
        self.until("the standby's walreceiver to stop", || {
            self.sql("SELECT count(*) FROM pg_stat_wal_receiver")
                .is_ok_and(|n| n == "0")
        })
    }

    /// The last WAL position this standby replayed (`pg_last_wal_replay_lsn()`), as text.
    pub fn replayed(&self) -> Result<String> {
        self.sql("SELECT pg_last_wal_replay_lsn()")
    }

    /// Polls `done` every 20 ms until it holds, failing after [`PATIENCE`].
    fn until(&self, what: &str, mut done: impl FnMut() -> bool) -> Result<()> {
        let end = Instant::now() + PATIENCE;
        while !done() {
            if Instant::now() > end {
                return Err(Error::Failed(format!("timed out waiting for {what}")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}
