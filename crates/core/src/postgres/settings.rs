//! What the store sets on each of its connections, whatever the server's or the role's defaults
//! (docs/postgres.md#settings), and where a connection goes, as error messages name it. The
//! check at open for a read-only server is `schema.rs`'s.

use tokio_postgres::config::Host;
use tokio_postgres::Config;

/// The settings of each new connection, made before anything else in one statement, with the
/// store's statement timeout (`$1`, in ms, 0 for none) bound as a parameter; each `set_config`
/// is for the session (`false`), as a `SET` is:
///
/// - `statement_timeout`: the store's own (`statementTimeoutMs`, 0 for none), over a server or
///   role default, shorter or longer.
/// - `idle_in_transaction_session_timeout`: a default shorter than the store's statement
///   timeout is raised to it (a default of 0, none, stays; with no statement timeout of its
///   own the store lifts it): the store never leaves a transaction idle on purpose, but the
///   gaps between the statements of one of its transactions must not end the session.
/// - `search_path`: `pg_catalog, pg_temp`. The store names its schema in every statement; a
///   default path that puts another schema first (with a table or a function of the same
///   name as one the store uses) can then change nothing.
///
/// Its row also names the backend that answers (pid and start, `backend.rs`), read by
/// [`crate::postgres::backend::Backend::of`].
pub(crate) const SESSION: &str = "SELECT \
     pg_catalog.set_config('statement_timeout', $1::bigint::text, false), \
     pg_catalog.set_config('idle_in_transaction_session_timeout', \
       (CASE WHEN v = 0 OR ($1::bigint > 0 AND v >= $1::bigint) \
         THEN v ELSE $1::bigint END)::text, false), \
     pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false), \
     pg_catalog.pg_backend_pid(), \
     (SELECT a.backend_start::text FROM pg_catalog.pg_stat_activity a \
       WHERE a.pid = pg_catalog.pg_backend_pid()) \
     FROM (SELECT setting::bigint AS v FROM pg_catalog.pg_settings \
       WHERE name = 'idle_in_transaction_session_timeout') s";

/// `host H, port P, database D` (several hosts: `hosts H1:P1, H2:P2`), for error messages;
/// never the user's password.
pub(crate) fn place(config: &Config) -> String {
    let ports = config.get_ports();
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            Host::Tcp(name) => name.clone(),
            #[cfg(unix)]
            Host::Unix(dir) => dir.display().to_string(),
        })
        .collect();
    let database = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    match hosts.as_slice() {
        [] => format!("port {}, database {database}", port(0)),
        [one] => format!("host {one}, port {}, database {database}", port(0)),
        many => {
            let list: Vec<String> = many
                .iter()
                .enumerate()
                .map(|(i, h)| format!("{h}:{}", port(i)))
                .collect();
            format!("hosts {}, database {database}", list.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place_of(url: &str) -> String {
        place(&url.parse::<Config>().expect(url))
    }

    #[test]
    fn places_name_host_port_and_database_never_the_password() {
        assert_eq!(
            place_of("postgres://gw:hunter22@db.internal:5433/app"),
            "host db.internal, port 5433, database app"
        );
        assert_eq!(
            place_of("postgres://gw@db.internal/app"),
            "host db.internal, port 5432, database app"
        );
        // libpq's rule: without a database, the user's name.
        assert_eq!(
            place_of("postgres://gw@127.0.0.1:6000"),
            "host 127.0.0.1, port 6000, database gw"
        );
        assert_eq!(
            place_of("postgres://gw@h1:5001,h2:5002/app?target_session_attrs=read-write"),
            "hosts h1:5001, h2:5002, database app"
        );
        assert_eq!(
            place_of("postgresql:///app?host=/run/postgresql"),
            "host /run/postgresql, port 5432, database app"
        );
        assert!(!place_of("postgres://gw:hunter22@h/app").contains("hunter22"));
    }
}
