//! `sslmode` as the store reads it, against a throwaway cluster serving TLS with a certificate
//! of a test CA (made here with the `openssl` program) for the name `localhost` only:
//! `disable` connects in plain TCP, `prefer` and `require` encrypt without verifying,
//! `verify-ca` verifies the chain and not the name, `verify-full` also the name, and the
//! bundled roots do not know the test CA.

use std::path::Path;
use std::process::Command;

use session_awareness_core::{Hooks, Options, Store};
use session_awareness_pg_test::Cluster;

mod pg_harness;
use pg_harness::cluster;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a server certificate for `localhost` signed by it, in `dir`.
fn certificates(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=session-awareness test CA",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
    );
    std::fs::write(dir.join("san.ext"), "subjectAltName=DNS:localhost\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "san.ext",
        ],
    );
}

/// Serves TLS with the certificate (its files copied into the data dir, owned by the server).
fn serve_tls(c: &Cluster, certs: &Path) {
    let data = c.data_dir();
    for f in ["server.crt", "server.key"] {
        std::fs::copy(certs.join(f), data.join(f)).unwrap();
        let owner = std::fs::metadata(data).unwrap();
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        std::os::unix::fs::chown(data.join(f), Some(owner.uid()), Some(owner.gid())).unwrap();
        std::fs::set_permissions(data.join(f), std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    c.sql("ALTER SYSTEM SET ssl = on").unwrap();
    c.sql("SELECT pg_reload_conf()").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
}

fn open(url: &str) -> Result<Store, session_awareness_core::Error> {
    Store::open(url, Options::default(), Hooks::default())
}

/// Whether the store's connection is encrypted, as the server sees it (once the backends of
/// the stores closed before have gone: a closed client's backend ends a moment later).
fn encrypted(c: &Cluster) -> String {
    let mut seen = String::new();
    for _ in 0..100 {
        seen = c
            .sql(
                "SELECT string_agg(s.ssl::text, ',') FROM pg_stat_ssl s \
                 JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'session-awareness'",
            )
            .unwrap();
        if !seen.contains(',') {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    seen
}

#[test]
fn sslmode_is_honoured_over_rustls() {
    let certs = tempfile::tempdir().unwrap();
    certificates(certs.path());
    let c = cluster("rs-tls");
    serve_tls(&c, certs.path());
    let ca = certs.path().join("ca.crt");
    let ca = ca.to_str().unwrap();
    let port = c.port();
    let at =
        |host: &str, query: &str| format!("postgres://postgres@{host}:{port}/postgres?{query}");

    for (query, ssl) in [
        ("sslmode=disable", "false"),
        ("sslmode=prefer", "true"),
        ("sslmode=allow", "false"),
        ("sslmode=require", "true"),
    ] {
        let store = open(&at("127.0.0.1", query)).unwrap_or_else(|e| panic!("{query}: {e}"));
        assert_eq!(encrypted(&c), ssl, "{query}");
        store.close();
    }
    // With the test CA as the roots, `mode` on `host`.
    let with_ca =
        |host: &str, mode: &str| open(&at(host, &format!("sslmode={mode}&sslrootcert={ca}")));
    // The chain verified, the name not: 127.0.0.1 is not in the certificate.
    let store = with_ca("127.0.0.1", "verify-ca").unwrap();
    assert_eq!(encrypted(&c), "true");
    store.close();
    // `require` with a root file verifies the chain, as libpq does.
    with_ca("127.0.0.1", "require").unwrap().close();
    let e = with_ca("127.0.0.1", "verify-full")
        .err()
        .expect("the name does not match");
    assert_eq!(e.code(), "ERR_DB");
    let store = with_ca("localhost", "verify-full").unwrap();
    assert_eq!(encrypted(&c), "true");
    store.close();
    // The bundled roots do not know the test CA.
    let e = open(&at("localhost", "sslmode=verify-full"))
        .err()
        .expect("unknown issuer");
    assert_eq!(e.code(), "ERR_DB");
    let e = open(&at("localhost", "sslmode=verify-ca"))
        .err()
        .expect("unknown issuer");
    assert_eq!(e.code(), "ERR_DB");
}
