//! Opening a PostgreSQL store on a throwaway cluster: the schema is created once in the schema
//! the options name, a second open changes nothing, the options of PostgreSQL are refused on a
//! file, and a failed connection's error never carries the password. Never skipped: without
//! PostgreSQL's server binaries these tests fail with the line saying what to install.

mod pg_harness;

use pg_harness::{cluster, url};
use session_awareness_core::{Hooks, Options, SchemaName, Store};

/// Opens `url`, which must be refused with `ERR_DB`; returns the error's text and its debug
/// form.
fn refused(url: &str) -> String {
    let e = Store::open(url, Options::default(), Hooks::default())
        .err()
        .expect("refused");
    assert_eq!(e.code(), "ERR_DB");
    format!("{e} {e:?}")
}

const TABLES: &str = "SELECT string_agg(table_name, ',' ORDER BY table_name) \
     FROM information_schema.tables WHERE table_schema = 'sa_test'";

#[test]
fn opening_twice_applies_the_schema_once_and_additively() {
    let c = cluster("rs-open");
    let opts = Options {
        pg_schema: SchemaName::parse("sa_test").unwrap(),
        ..Options::default()
    };
    let store = Store::open(&url(&c), opts, Hooks::default()).unwrap();
    assert!(store.is_remote());
    assert_eq!(store.options().pg_schema.as_str(), "sa_test");
    assert_eq!(
        c.sql(TABLES).unwrap(),
        "session_awareness_meta,session_awareness_served,session_state_events,\
         session_state_heads,session_upstream_links,session_watch_cursors"
    );
    let meta = "SELECT meta_value, xmin FROM sa_test.session_awareness_meta \
                WHERE meta_key = 'schema_version'";
    let first = c.sql(meta).unwrap();
    assert!(first.starts_with("1|"), "{first}");
    // Nothing outside the named schema.
    assert_eq!(
        c.sql("SELECT count(*) FROM pg_namespace WHERE nspname = 'session_awareness'")
            .unwrap(),
        "0"
    );
    store.close();
    assert!(store.is_closed());

    let again = Store::open(&url(&c), opts, Hooks::default()).unwrap();
    assert_eq!(
        c.sql(meta).unwrap(),
        first,
        "the second open rewrote the meta row"
    );
    assert_eq!(c.sql(TABLES).unwrap().split(',').count(), 6);
    assert!(again
        .watch(
            "agent:main:main",
            "agent:main:subagent:a",
            session_awareness_core::Provenance::Explicit,
            1,
        )
        .unwrap());
    assert!(again.peek("agent:main:main").unwrap().is_empty());
    assert!(again.drain("agent:main:main", 1).unwrap().is_empty());
    again.close();
}

#[test]
fn postgres_options_are_refused_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sqlite");
    let opts = Options {
        pg_schema: SchemaName::parse("other").unwrap(),
        ..Options::default()
    };
    let e = Store::open(path.to_str().unwrap(), opts, Hooks::default())
        .err()
        .expect("refused");
    assert_eq!(e.code(), "ERR_INVALID_ARG");
    assert!(!path.exists());
    let file = Store::open(path.to_str().unwrap(), Options::default(), Hooks::default()).unwrap();
    assert!(!file.is_remote());
}

#[test]
fn a_wrong_password_is_err_db_without_the_password() {
    let c = cluster("rs-password");
    let secret = "Wr0ng-s3cret";
    let wrong = c
        .password_url()
        .replace(&format!(":{}@", c.password()), &format!(":{secret}@"));
    let text = refused(&format!("{wrong}?sslmode=disable"));
    assert!(!text.contains(secret), "{text}");
    assert!(!text.contains(c.password()), "{text}");
    // As a `password=` parameter too.
    let text = refused(&format!(
        "postgres://{}@127.0.0.1:{}/postgres?sslmode=disable&password={secret}",
        session_awareness_pg_test::PASSWORD_ROLE,
        c.port()
    ));
    assert!(!text.contains(secret), "{text}");
}

#[test]
fn nothing_listening_is_err_db_within_the_connect_timeout() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let start = std::time::Instant::now();
    let e = Store::open(
        &format!("postgres://u:pw@127.0.0.1:{port}/db"),
        Options {
            connect_timeout_ms: 2_000,
            ..Options::default()
        },
        Hooks::default(),
    )
    .err()
    .expect("refused");
    assert_eq!(e.code(), "ERR_DB");
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn a_role_that_owns_only_its_schema_opens_and_records() {
    let c = cluster("rs-role");
    let role = session_awareness_pg_test::PASSWORD_ROLE;
    c.sql(&format!("CREATE SCHEMA sa_owned AUTHORIZATION {role}"))
        .unwrap();
    assert_eq!(
        c.sql(&format!(
            "SELECT rolsuper, has_database_privilege('{role}', 'postgres', 'CREATE') \
             FROM pg_roles WHERE rolname = '{role}'"
        ))
        .unwrap(),
        "f|f"
    );
    let opts = Options {
        pg_schema: SchemaName::parse("sa_owned").unwrap(),
        ..Options::default()
    };
    let url = format!("{}?sslmode=disable", c.password_url());
    let store = Store::open(&url, opts, Hooks::default()).unwrap();
    let input = session_awareness_core::RecordInput {
        session_key: "agent:main:subagent:c".into(),
        kind: "human_direct_message".into(),
        actor_type: "human".into(),
        summary: "hi".into(),
        ..Default::default()
    };
    assert_eq!(store.record(input, 1).unwrap().unwrap().sequence, 1);
    store.close();
    // Another schema, which it may not create, is refused by the server.
    let e = Store::open(&url, Options::default(), Hooks::default())
        .err()
        .expect("no CREATE on the database");
    assert_eq!(e.code(), "ERR_DB");
}

#[test]
fn the_next_call_after_a_server_restart_connects_again() {
    let mut c = cluster("rs-restart");
    let store = Store::open(&url(&c), Options::default(), Hooks::default()).unwrap();
    let input = || session_awareness_core::RecordInput {
        session_key: "agent:main:subagent:c".into(),
        kind: "human_direct_message".into(),
        actor_type: "human".into(),
        summary: "hi".into(),
        ..Default::default()
    };
    assert_eq!(store.record(input(), 1).unwrap().unwrap().sequence, 1);
    c.restart_immediate().unwrap();
    // The first call may meet the dead connection (ERR_DB); a later one reconnects.
    let mut last = None;
    for _ in 0..3 {
        match store.record(input(), 1) {
            Ok(e) => {
                last = e;
                break;
            }
            Err(e) => assert_eq!(e.code(), "ERR_DB"),
        }
    }
    let last = last.expect("recorded after the restart").sequence;
    assert!(last > 1);
    assert_eq!(
        store.state_version("agent:main:subagent:c", None).unwrap(),
        last
    );
}
