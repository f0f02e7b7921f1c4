//! TLS for the PostgreSQL store: rustls with the ring provider, nothing from the host. The
//! roots are the file named by `sslrootcert` or, without it (or with `sslrootcert=system`),
//! the bundled Mozilla roots (webpki-roots). `prefer`, `allow` and `require` encrypt without
//! verifying, as libpq does; `verify-ca` verifies the chain; `verify-full` also the host name.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Error, Result};

/// libpq's `sslmode` values (<https://www.postgresql.org/docs/current/libpq-ssl.html>).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslChoice {
    /// Plain TCP only.
    Disable,
    /// Plain TCP first; TLS (unverified) when the server refuses it.
    Allow,
    /// TLS (unverified) when the server offers it, else plain TCP. libpq's default.
    Prefer,
    /// TLS, unverified (verified as `verify-ca` when `sslrootcert` is given, as libpq does).
    Require,
    /// TLS, the certificate chain verified against the roots, not the host name.
    VerifyCa,
    /// TLS, the chain and the host name verified.
    VerifyFull,
}

impl SslChoice {
    /// Reads a URL's `sslmode` value.
    pub(crate) fn parse(value: &str) -> Result<Self> {
        Ok(match value {
            "disable" => SslChoice::Disable,
            "allow" => SslChoice::Allow,
            "prefer" => SslChoice::Prefer,
            "require" => SslChoice::Require,
            "verify-ca" => SslChoice::VerifyCa,
            "verify-full" => SslChoice::VerifyFull,
            _ => {
                return Err(Error::invalid(
                    "sslmode must be disable, allow, prefer, require, verify-ca or verify-full",
                ))
            }
        })
    }
}

/// The connector for `mode` (any but `disable`), trusting `root_cert` (a PEM file) or the
/// bundled roots. An unreadable or empty root file is `ERR_INVALID_ARG`.
pub(crate) fn connector(mode: SslChoice, root_cert: Option<&str>) -> Result<MakeRustlsConnect> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = match mode {
        SslChoice::VerifyCa | SslChoice::VerifyFull => {
            let roots = roots(root_cert)?;
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                    .build()
                    .map_err(|e| Error::invalid(format!("sslrootcert: {e}")))?;
            Some(webpki)
        }
        _ => None,
    };
    let verifier: Arc<dyn ServerCertVerifier> = match chain {
        Some(webpki) if mode == SslChoice::VerifyFull => webpki,
        chain => Arc::new(Verifier {
            chain,
            provider: Arc::clone(&provider),
        }),
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::invalid(format!("TLS: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

fn roots(root_cert: Option<&str>) -> Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    match root_cert {
        None | Some("system") => {
            store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|it| it.collect::<std::result::Result<Vec<_>, _>>())
                .map_err(|e| Error::invalid(format!("sslrootcert {path}: {e}")))?;
            let (added, _) = store.add_parsable_certificates(certs);
            if added == 0 {
                return Err(Error::invalid(format!(
                    "sslrootcert {path}: no certificate in the file"
                )));
            }
        }
    }
    Ok(store)
}

/// `verify-ca` (with `chain`): the chain must lead to a root; the name is not checked.
/// `prefer`, `allow`, `require` (without): encrypted, any certificate accepted (libpq's
/// behaviour). Either way the handshake's signatures are checked with the provider's
/// algorithms, the ones the chain's verifier checks them with.
#[derive(Debug)]
struct Verifier {
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        // webpki checks the name last, after the chain: a name mismatch means the chain held.
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
