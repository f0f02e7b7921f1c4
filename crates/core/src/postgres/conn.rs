//! The PostgreSQL store's connection: the URL read with the store's own `sslmode` handling
//! (libpq's six modes, which tokio-postgres alone does not know), TLS over rustls with the ring
//! provider and bundled roots, connect and statement timeouts, TCP keepalives, one client that
//! reconnects by itself when its connection was lost, statements prepared once per
//! connection, and the one redaction of passwords that every error message goes through.

use std::collections::HashMap;
use std::time::Duration;

use tokio::sync::{Mutex, MutexGuard};
use tokio::task::AbortHandle;
use tokio_postgres::config::SslMode;
use tokio_postgres::{Client, Config, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{DbFailure, Error, Result};
use crate::options::{Options, SchemaName};
use crate::postgres::backend::Backend;
use crate::postgres::cursors::Cached;
use crate::postgres::outage::{failure_of, Faults, Outage};
use crate::postgres::percent::{find_ignore_case, percent_decode, percent_encode};
use crate::postgres::tls::{self, SslChoice};

mod reconnect;

/// A new connection: its client, the task that runs it, and the server process behind it.
type Connected = (Client, AbortHandle, Option<Backend>);

/// Where a listener's connection hands the payloads of its notifications.
type Hints = tokio::sync::mpsc::UnboundedSender<String>;

/// TCP keepalives: the first probe after this long idle.
pub(crate) const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);

/// True when `path_or_url` names a PostgreSQL database rather than a file.
pub(crate) fn is_url(path_or_url: &str) -> bool {
    let lower = path_or_url
        .get(..13)
        .unwrap_or(path_or_url)
        .to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// The scheme of a `<scheme>://…` text that is neither a PostgreSQL URL nor SQLite's `file:`
/// URI: such a text names no store (a `mysql://` URL would otherwise open a SQLite file of
/// that name in the working directory). Only the scheme is returned, never the rest (which may
/// hold a password).
pub(crate) fn foreign_scheme(path_or_url: &str) -> Option<&str> {
    let (scheme, _) = path_or_url.split_once("://")?;
    let mut chars = scheme.chars();
    let well_formed = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    let known = ["postgres", "postgresql", "file"]
        .iter()
        .any(|k| scheme.eq_ignore_ascii_case(k));
    (well_formed && !known).then_some(scheme)
}

/// The URL parameters the client reads (besides `sslmode` and `sslrootcert`, which the store
/// reads itself): any other one is named in the refusal.
const KNOWN_PARAMETERS: [&str; 18] = [
    "user",
    "password",
    "dbname",
    "options",
    "application_name",
    "host",
    "hostaddr",
    "port",
    "connect_timeout",
    "tcp_user_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_retries",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
    "sslnegotiation",
];

/// Where and how to connect: the URL read once at open.
pub(crate) struct Target {
    config: Config,
    ssl: SslChoice,
    tls: Option<MakeRustlsConnect>,
    password: Option<String>,
    connect_timeout: Option<Duration>,
    statement_timeout_ms: u32,
}

impl Target {
    /// Reads `url` (`postgres://` or `postgresql://`) with the store's options. A URL the
    /// client cannot read, a bad `sslmode` or an unreadable `sslrootcert` is `ERR_INVALID_ARG`,
    /// its text redacted.
    pub(crate) fn parse(url: &str, opts: &Options) -> Result<Self> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut ssl = SslChoice::Prefer;
        let mut root_cert: Option<String> = None;
        let mut rest = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "sslmode" => ssl = SslChoice::parse(&percent_decode(v))?,
                "sslrootcert" => root_cert = Some(percent_decode(v)),
                _ => rest.push(pair),
            }
        }
        let stripped = if rest.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", rest.join("&"))
        };
        if let Some(k) = rest
            .iter()
            .map(|p| p.split_once('=').map_or(*p, |(k, _)| k))
            .find(|k| !KNOWN_PARAMETERS.contains(k))
        {
            return Err(Error::invalid(redact(
                &format!("the PostgreSQL URL: unknown parameter {k:?}"),
                None,
            )));
        }
        let mut config: Config = stripped.parse().map_err(|e: tokio_postgres::Error| {
            Error::invalid(redact(&format!("the PostgreSQL URL: {e}"), None))
        })?;
        if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
            return Err(Error::invalid(
                "the PostgreSQL URL names no host (postgres://user@host:port/database)",
            ));
        }
        let password = config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned());
        if ssl == SslChoice::Require && root_cert.is_some() {
            ssl = SslChoice::VerifyCa;
        }
        let tls = match ssl {
            SslChoice::Disable => None,
            _ => Some(tls::connector(ssl, root_cert.as_deref())?),
        };
        let connect_timeout = (opts.connect_timeout_ms > 0)
            .then(|| Duration::from_millis(opts.connect_timeout_ms.into()));
        if let Some(t) = connect_timeout {
            config.connect_timeout(t);
        }
        config.keepalives(true).keepalives_idle(KEEPALIVE_IDLE);
        if config.get_application_name().is_none() {
            config.application_name("session-awareness");
        }
        Ok(Target {
            config,
            ssl,
            tls,
            password,
            connect_timeout,
            statement_timeout_ms: opts.statement_timeout_ms,
        })
    }

    /// The `sslmode` in force.
    #[cfg(test)]
    pub(crate) fn ssl(&self) -> SslChoice {
        self.ssl
    }

    /// The connect timeout, if any.
    pub(crate) fn connect_timeout(&self) -> Option<Duration> {
        self.connect_timeout
    }

    /// Where it connects, for error messages: `host …, port …, database …`.
    pub(crate) fn place(&self) -> String {
        crate::postgres::settings::place(&self.config)
    }

    /// `text` without this target's password (see [`redact`]).
    pub(crate) fn redact(&self, text: &str) -> String {
        redact(text, self.password.as_deref())
    }

    /// A client's error as the store's [`Error::Db`], its text redacted.
    pub(crate) fn error(&self, e: &tokio_postgres::Error) -> Error {
        let mut message = match e.as_db_error() {
            // The server's own words and its SQLSTATE, without the client's "db error" prefix.
            Some(db) => format!("{db} (SQLSTATE {})", db.code().code()),
            None => crate::error::with_sources(e),
        };
        let kind = failure_of(e);
        if kind == DbFailure::Connection {
            message = format!("{message} ({})", self.place());
        }
        Error::db(kind, self.redact(&message))
    }

    /// A new client; its connection runs on the core runtime until it ends. Bounded by the
    /// connect timeout as a whole (TCP, TLS, authentication and the session's settings).
    pub(crate) async fn connect(&self) -> Result<Connected> {
        self.connect_bounded(None).await
    }

    /// How long one call may hold the connection before the client gives up on it: the
    /// statement timeout (the server's own answer comes first while the link works) and the
    /// connect timeout (at least 5 s) on top; `None` when statements have no timeout. A call
    /// past it (a cut link: nothing comes back, and TCP would wait many minutes) ends its
    /// connection, so it settles with `ERR_DB` and the next call connects again.
    pub(crate) fn call_deadline(&self) -> Option<Duration> {
        (self.statement_timeout_ms > 0).then(|| {
            let connect = self.connect_timeout.unwrap_or_default();
            Duration::from_millis(self.statement_timeout_ms.into())
                + connect.max(Duration::from_secs(5))
        })
    }

    /// A new client for the listener (docs/postgres.md#notices): its connection runs on the
    /// core runtime and hands the payloads of its notifications to the receiver, which
    /// closes when the connection ends.
    pub(crate) async fn connect_listener(
        &self,
    ) -> Result<(Client, tokio::sync::mpsc::UnboundedReceiver<String>)> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (client, _, _) = self.connect_bounded(Some(tx)).await?;
        Ok((client, rx))
    }

    async fn connect_bounded(&self, hints: Option<Hints>) -> Result<Connected> {
        let attempt = self.connect_unbounded(hints);
        match self.connect_timeout {
            Some(t) => tokio::time::timeout(t, attempt).await.map_err(|_| {
                Error::db(
                    DbFailure::Connection,
                    format!(
                        "no connection to PostgreSQL within {} ms ({})",
                        t.as_millis(),
                        self.place()
                    ),
                )
            })?,
            None => attempt.await,
        }
    }

    async fn connect_unbounded(&self, hints: Option<Hints>) -> Result<Connected> {
        let (client, task) = match (self.ssl, &self.tls) {
            (SslChoice::Disable, _) | (_, None) => {
                self.connect_with(SslMode::Disable, &hints).await?
            }
            (SslChoice::Allow, Some(_)) => {
                match self.connect_with(SslMode::Disable, &hints).await {
                    Ok(c) => c,
                    Err(_) => self.connect_with(SslMode::Require, &hints).await?,
                }
            }
            (SslChoice::Prefer, Some(_)) => self.connect_with(SslMode::Prefer, &hints).await?,
            (_, Some(_)) => self.connect_with(SslMode::Require, &hints).await?,
        };
        // Settings made by a statement, not startup options: poolers refuse unknown startup
        // parameters. The backend's identity in the same round trip (`backend.rs`).
        let timeout = i64::from(self.statement_timeout_ms);
        let answer = client
            .query_one(crate::postgres::settings::SESSION, &[&timeout])
            .await
            .map_err(|e| self.error(&e))?;
        Ok((client, task, Backend::of(&answer)))
    }

    async fn connect_with(
        &self,
        mode: SslMode,
        hints: &Option<Hints>,
    ) -> Result<(Client, AbortHandle)> {
        let mut config = self.config.clone();
        config.ssl_mode(mode);
        if hints.is_some() {
            let name = crate::postgres::listen::application_name(config.get_application_name());
            config.application_name(name);
        }
        let connected = match (&self.tls, mode) {
            (Some(tls), SslMode::Prefer | SslMode::Require) => {
                let (client, conn) = config
                    .connect(tls.clone())
                    .await
                    .map_err(|e| self.error(&e))?;
                (client, drive(conn, hints))
            }
            _ => {
                let (client, conn) = config
                    .connect(tokio_postgres::NoTls)
                    .await
                    .map_err(|e| self.error(&e))?;
                (client, drive(conn, hints))
            }
        };
        Ok(connected)
    }
}

/// Spawns the task that drives `conn` on the store's runtime, forwarding its notifications
/// to `hints` when given; the handle aborts it.
fn drive<S, T>(conn: tokio_postgres::Connection<S, T>, hints: &Option<Hints>) -> AbortHandle
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let handle = crate::runtime::handle();
    let task = match hints {
        Some(tx) => handle.spawn(crate::postgres::listen::forward(conn, tx.clone())),
        None => handle.spawn(async move {
            let _ = conn.await;
        }),
    };
    task.abort_handle()
}

/// `text` with every password hidden: the userinfo password of a URL (`://user:…@`), the
/// value of every `password=` parameter, and each occurrence of `password` (as given and
/// percent-encoded) when it is known. Every message of the PostgreSQL store goes through it.
pub(crate) fn redact(text: &str, password: Option<&str>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // `scheme://user:secret@host` → `scheme://user:***@host`.
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c == '/' || c == '?' || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match (authority.rfind('@'), authority.find(':')) {
            (Some(a), Some(c)) if c < a => {
                out.push_str(&authority[..=c]);
                out.push_str("***");
                out.push_str(&authority[a..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    // `password=secret` (a URL's query or a key/value string) → `password=***`.
    let mut redacted = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(at) = find_ignore_case(rest, "password=") {
        let (head, tail) = rest.split_at(at + "password=".len());
        redacted.push_str(head);
        redacted.push_str("***");
        let end = if let Some(quoted) = tail.strip_prefix('\'') {
            quoted.find('\'').map_or(tail.len(), |q| q + 2)
        } else {
            tail.find(|c: char| c == '&' || c.is_whitespace())
                .unwrap_or(tail.len())
        };
        rest = &tail[end..];
    }
    redacted.push_str(rest);
    if let Some(p) = password.filter(|p| !p.is_empty()) {
        redacted = redacted.replace(p, "***");
        let encoded = percent_encode(p);
        if encoded != p {
            redacted = redacted.replace(&encoded, "***");
        }
    }
    redacted
}

/// One connection's client and its prepared statements.
pub(crate) struct Session {
    /// The client (its queries polled together are pipelined).
    pub(crate) client: Client,
    statements: HashMap<&'static str, Statement>,
    /// A write transaction was begun and not yet ended (a call that unwound in the middle).
    in_tx: bool,
    /// The task that runs the connection: ended by a call's deadline.
    conn: AbortHandle,
    /// The server process behind it, when the server said.
    backend: Option<Backend>,
}

impl Session {
    /// A connected session: `client`, the task `conn` that runs its connection, and the
    /// server process behind it.
    pub(crate) fn new(client: Client, conn: AbortHandle, backend: Option<Backend>) -> Self {
        Session {
            client,
            statements: HashMap::new(),
            in_tx: false,
            conn,
            backend,
        }
    }

    /// The client, the statement cache and the open-transaction mark, borrowed apart.
    pub(crate) fn parts(
        &mut self,
    ) -> (
        &mut Client,
        &mut HashMap<&'static str, Statement>,
        &mut bool,
    ) {
        (&mut self.client, &mut self.statements, &mut self.in_tx)
    }
}

/// The store's connection: one client, made on first use and again after it was lost.
pub(crate) struct Pg {
    target: Target,
    schema: SchemaName,
    session: Mutex<Option<Session>>,
    /// What it keeps across a lost connection (`outage.rs`).
    faults: Faults,
}

/// The connection, locked for one call.
pub(crate) struct SessionGuard<'a> {
    guard: MutexGuard<'a, Option<Session>>,
    pg: &'a Pg,
    /// Ends the connection if the call still holds it at the deadline.
    watchdog: Option<AbortHandle>,
}

impl Drop for SessionGuard<'_> {
    fn drop(&mut self) {
        if let Some(w) = self.watchdog.take() {
            w.abort();
        }
    }
}

impl Pg {
    /// A connection to `target`'s database, for the tables in `schema`; connects on first use.
    pub(crate) fn new(target: Target, schema: SchemaName, outage: Outage) -> Self {
        Pg {
            target,
            schema,
            session: Mutex::new(None),
            faults: Faults::new(outage),
        }
    }

    /// What it keeps across a lost connection: the outage, the sequence floor, a lost backend.
    pub(crate) fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Where it connects.
    pub(crate) fn target(&self) -> &Target {
        &self.target
    }

    /// The schema of the store's tables.
    pub(crate) fn schema(&self) -> SchemaName {
        self.schema
    }

    /// The session, connected: a client whose connection ended is replaced first.
    pub(crate) async fn lock(&self) -> Result<SessionGuard<'_>> {
        let mut guard = self.session.lock().await;
        if guard.as_ref().is_none_or(|s| s.client.is_closed()) {
            if guard.take().is_some() {
                self.faults.outage.lost();
            }
            *guard = Some(self.reconnect().await?);
        }
        let watchdog = match (self.target.call_deadline(), guard.as_ref()) {
            (Some(after), Some(s)) => {
                let conn = s.conn.clone();
                let timer = crate::runtime::handle().spawn(async move {
                    tokio::time::sleep(after).await;
                    conn.abort();
                });
                Some(timer.abort_handle())
            }
            _ => None,
        };
        Ok(SessionGuard {
            guard,
            pg: self,
            watchdog,
        })
    }

    /// Drops the client (its connection closes); the next call connects again.
    pub(crate) async fn disconnect(&self) {
        self.session.lock().await.take();
    }
}

impl SessionGuard<'_> {
    /// The connected session.
    pub(crate) fn session(&mut self) -> Result<&mut Session> {
        self.guard
            .as_mut()
            .ok_or_else(|| Error::db(DbFailure::Connection, "not connected"))
    }

    /// The client.
    pub(crate) fn client(&mut self) -> Result<&mut Client> {
        Ok(&mut self.session()?.client)
    }

    /// `template` (with `__SCHEMA__` for the store's schema) prepared on this connection,
    /// once per connection.
    pub(crate) async fn prepare(&mut self, template: &'static str) -> Result<Statement> {
        let schema = self.pg.schema;
        let target = &self.pg.target;
        let s = self
            .guard
            .as_mut()
            .ok_or_else(|| Error::db(DbFailure::Connection, "not connected"))?;
        if let Some(st) = s.statements.get(template) {
            return Ok(st.clone());
        }
        let sql = template.replace("__SCHEMA__", schema.as_str());
        let st = s.client.prepare(&sql).await.map_err(|e| target.error(&e))?;
        s.statements.insert(template, st.clone());
        Ok(st)
    }

    /// The client with its statement cache, for statements prepared once per connection.
    pub(crate) fn cached(&mut self) -> Result<Cached<'_>> {
        let schema = self.pg.schema;
        let s = self
            .guard
            .as_mut()
            .ok_or_else(|| Error::db(DbFailure::Connection, "not connected"))?;
        Ok(Cached::new(&s.client, &mut s.statements, schema))
    }

    /// Drops the client when its connection has ended, so the next call connects again (and
    /// the outage's window starts).
    pub(crate) fn forget_if_closed(&mut self) {
        if self.guard.as_ref().is_some_and(|s| s.client.is_closed()) {
            self.drop_lost(false);
        }
    }

    /// Drops the client of a call that lost its connection (a connection-class failure, even
    /// when the socket has not closed yet: the server is ending it), and starts the outage's
    /// window. `mid_transaction`: its backend is kept, to be ended once connected again.
    pub(crate) fn drop_lost(&mut self, mid_transaction: bool) {
        if let Some(s) = self.guard.take().filter(|_| mid_transaction) {
            self.pg.faults.orphaned(s.backend);
        }
        self.pg.faults.outage.lost();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://u:s3cr%40t@h:5/db?x=1", None),
            "postgres://u:***@h:5/db?x=1"
        );
        assert_eq!(redact("postgres://h/db", None), "postgres://h/db");
        assert_eq!(redact("postgres://u@h/db", None), "postgres://u@h/db");
        assert_eq!(
            redact("a postgresql://h/db?PASSWORD=x&sslmode=disable b", None),
            "a postgresql://h/db?PASSWORD=***&sslmode=disable b"
        );
        assert_eq!(redact("password='a b' host=h", None), "password=*** host=h");
        assert_eq!(
            redact("auth failed for p@ss:word", Some("p@ss:word")),
            "auth failed for ***"
        );
        assert_eq!(redact("x p%40ss y", Some("p@ss")), "x *** y");
    }

    #[test]
    fn urls_are_recognised() {
        assert!(is_url("postgres://h/db"));
        assert!(is_url("PostgreSQL://h/db"));
        assert!(!is_url("/tmp/postgres://x"));
        assert!(!is_url(":memory:"));
        assert!(!is_url("postgres"));
        assert_eq!(foreign_scheme("mysql://u:pw@h/db"), Some("mysql"));
        assert_eq!(foreign_scheme("Redis+TLS://h"), Some("Redis+TLS"));
        assert_eq!(foreign_scheme("postgres://h/db"), None);
        assert_eq!(foreign_scheme("POSTGRESQL://h/db"), None);
        assert_eq!(foreign_scheme("file:///tmp/state.sqlite"), None);
        assert_eq!(foreign_scheme("/tmp/a://b"), None);
        assert_eq!(foreign_scheme("./state.sqlite"), None);
        assert_eq!(foreign_scheme("C:\\state.sqlite"), None);
    }

    #[test]
    fn a_url_without_a_host_or_with_an_unknown_parameter_is_refused() {
        let o = Options::default();
        for url in [
            "postgres://",
            "postgresql:///db",
            "postgres://u:hunter22@/db",
        ] {
            let e = Target::parse(url, &o).err().expect(url);
            assert_eq!(e.code(), "ERR_INVALID_ARG", "{url}");
            assert!(!e.to_string().contains("hunter22"), "{e}");
        }
        let e = Target::parse("postgres://u:hunter22@h/db?sslmode=disable&fooo=1", &o)
            .err()
            .expect("refused");
        assert_eq!(e.code(), "ERR_INVALID_ARG");
        assert!(e.to_string().contains("\"fooo\""), "{e}");
        assert!(Target::parse("postgresql:///db?host=/run/postgresql", &o).is_ok());
        assert!(Target::parse(
            "postgres://h/db?connect_timeout=3&target_session_attrs=read-write",
            &o
        )
        .is_ok());
    }

    #[test]
    fn sslmode_and_sslrootcert_are_read_by_the_store() {
        let o = Options::default();
        let t = Target::parse("postgres://u:pw@127.0.0.1:1/db?sslmode=verify-full", &o).unwrap();
        assert_eq!(t.ssl(), SslChoice::VerifyFull);
        let t = Target::parse("postgres://127.0.0.1/db", &o).unwrap();
        assert_eq!(t.ssl(), SslChoice::Prefer);
        let t = Target::parse(
            "postgres://127.0.0.1/db?sslmode=disable&application_name=x",
            &o,
        )
        .unwrap();
        assert_eq!(t.ssl(), SslChoice::Disable);
        let e = Target::parse("postgres://u:pw@h/db?sslmode=bogus", &o)
            .err()
            .expect("refused");
        assert_eq!(e.code(), "ERR_INVALID_ARG");
        let e = Target::parse(
            "postgres://u:hunter22@h/db?sslrootcert=/nonexistent&sslmode=require",
            &o,
        )
        .err()
        .expect("refused");
        assert_eq!(e.code(), "ERR_INVALID_ARG");
        assert!(!e.to_string().contains("hunter22"), "{e}");
        let e = Target::parse("postgres://u:hunter22@h:99999999/db", &o)
            .err()
            .expect("refused");
        assert_eq!(e.code(), "ERR_INVALID_ARG");
        assert!(!e.to_string().contains("hunter22"), "{e}");
    }
}
