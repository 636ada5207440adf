//! Connections: TLS through rustls (the system's certificate authorities and the
//! configured ones), the pool every operation borrows from, and single connections for
//! `LISTEN` and for setting up the schema.

use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use delayq_core::{Error, Result};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::config::PostgresConfig;
use crate::error::db_err;

/// What opens connections: the parsed URL and the TLS connector.
#[derive(Clone)]
pub(crate) struct Connector {
    pub(crate) config: tokio_postgres::Config,
    pub(crate) tls: MakeRustlsConnect,
}

impl Connector {
    /// Parses `config` and builds the TLS connector.
    pub(crate) fn new(config: &PostgresConfig) -> Result<Self> {
        let pg = config.parse()?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            // A system certificate rustls cannot use is skipped, as browsers do.
            let _ = roots.add(cert);
        }
        if let Some(path) = &config.ca_file {
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
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::InvalidConfig {
            reason: format!("TLS cannot be set up: {e}"),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(Connector {
            config: pg,
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
