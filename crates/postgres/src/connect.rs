//! Connections: TLS through rustls with libpq's meaning of `sslmode` (the system's
//! certificate authorities and the configured ones), the pool every operation borrows
//! from, and single connections for `LISTEN` and for setting up the schema.

use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use delayq_core::{Error, Result};
use tokio_postgres_rustls::MakeRustlsConnect;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};

use crate::config::{PostgresConfig, Verify};
use crate::error::db_err;

/// What opens connections: the parsed URL and the TLS connector.
#[derive(Clone)]
pub(crate) struct Connector {
    pub(crate) config: tokio_postgres::Config,
    pub(crate) tls: MakeRustlsConnect,
}

impl Connector {
    /// Parses `config` and builds the TLS connector, which checks the server's certificate
    /// as much as the URL's `sslmode` asks (see [`Verify`]).
    pub(crate) fn new(config: &PostgresConfig) -> Result<Self> {
        let target = config.parse()?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::InvalidConfig {
                reason: format!("TLS cannot be set up: {e}"),
            })?;
        let webpki = match target.verify {
            Verify::Nothing => None,
            Verify::Chain | Verify::Full => Some(
                WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots(&target.ca_files)?),
                    provider.clone(),
                )
                .build()
                .map_err(|e| Error::InvalidConfig {
                    reason: format!("TLS cannot be set up: {e}"),
                })?,
            ),
        };
        let tls = builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Libpq {
                verify: target.verify,
                webpki,
                provider,
            }))
            .with_no_client_auth();
        Ok(Connector {
            config: target.config,
            tls: MakeRustlsConnect::new(tls),
        })
    }

    /// A pool of at most `size` connections.
    pub(crate) fn pool(&self, size: usize) -> Result<Pool> {
        let manager = Manager::from_config(
            self.config.clone(),
            self.tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        Pool::builder(manager)
            .max_size(size)
            .build()
            .map_err(|e| Error::InvalidConfig {
                reason: format!("the connection pool cannot be built: {e}"),
            })
    }

    /// One connection of its own, its driver task spawned: for the schema set-up.
    pub(crate) async fn connect(&self) -> Result<tokio_postgres::Client> {
        let (client, connection) = self
            .config
            .connect(self.tls.clone())
            .await
            .map_err(|e| db_err("connecting to PostgreSQL", e))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "a delayq set-up connection ended");
            }
        });
        Ok(client)
    }
}

/// The system's certificate authorities and those in `files`.
fn roots(files: &[std::path::PathBuf]) -> Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        // A system certificate rustls cannot use is skipped, as browsers do.
        let _ = roots.add(cert);
    }
    for path in files {
        let pem = std::fs::read(path).map_err(|e| Error::InvalidConfig {
            reason: format!("the CA file {} cannot be read: {e}", path.display()),
        })?;
        let mut found = 0;
        for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
            let cert = cert.map_err(|e| Error::InvalidConfig {
                reason: format!("the CA file {} is not PEM: {e}", path.display()),
            })?;
            roots.add(cert).map_err(|e| Error::InvalidConfig {
                reason: format!("a certificate in {} is not usable: {e}", path.display()),
            })?;
            found += 1;
        }
        if found == 0 {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "the CA file {} holds no certificate; give a PEM file",
                    path.display()
                ),
            });
        }
    }
    Ok(roots)
}

/// The server's certificate checked as libpq's `sslmode` says ([`Verify`]): not at all
/// (`prefer`, `require`: encrypted, the handshake's signatures checked, but not who signed
/// the certificate, so not who the server is), its chain only (`verify-ca`: the host name
/// it was issued for is not compared with the one connected to), or both (`verify-full`).
#[derive(Debug)]
struct Libpq {
    verify: Verify,
    /// The chain's checker, unless `verify` is `Nothing`.
    webpki: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Libpq {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(webpki) = &self.webpki else {
            return Ok(ServerCertVerified::assertion());
        };
        // rustls compares the name last, after the chain and its validity have passed.
        match webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.verify == Verify::Chain => Ok(ServerCertVerified::assertion()),
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
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
