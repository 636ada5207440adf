//! HTTPS: the server's certificate and key (PEM files) for rustls, serving the app over
//! them, and loading them again without a restart (on SIGHUP), so that a renewed
//! certificate is taken up by new connections while open ones go on.

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};

use axum_server::tls_rustls::RustlsConfig;

use crate::{AppState, app};

/// The certificate and key a TLS server presents, and where they were read from.
#[derive(Clone)]
pub struct Tls {
    config: RustlsConfig,
    cert: PathBuf,
    key: PathBuf,
}

/// A certificate or key that cannot be used: which file and why.
#[derive(Debug)]
pub struct TlsError(String);

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsError {}

impl Tls {
    /// Reads the certificate chain and the private key (PEM files).
    pub async fn load(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Result<Self, TlsError> {
        // rustls leaves the choice of crypto provider to the application; ring needs no C
        // toolchain. An application that installed its own provider keeps it.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (cert, key) = (cert.into(), key.into());
        let (cert_pem, key_pem) = read_pair(&cert, &key)?;
        let config = RustlsConfig::from_pem(cert_pem, key_pem)
            .await
            .map_err(|e| unusable(&cert, &key, &e))?;
        Ok(Tls { config, cert, key })
    }

    /// Reads the files again; new connections get the new certificate. On an error the
    /// previous certificate stays in use.
    pub async fn reload(&self) -> Result<(), TlsError> {
        let (cert_pem, key_pem) = read_pair(&self.cert, &self.key)?;
        self.config
            .reload_from_pem(cert_pem, key_pem)
            .await
            .map_err(|e| unusable(&self.cert, &self.key, &e))
    }
}

fn read_pair(cert: &Path, key: &Path) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    let read = |path: &Path, what: &str| {
        std::fs::read(path).map_err(|e| {
            TlsError(format!(
                "cannot read the TLS {what} file {}: {e}; give a readable PEM file",
                path.display()
            ))
        })
    };
    Ok((read(cert, "certificate")?, read(key, "key")?))
}

fn unusable(cert: &Path, key: &Path, e: &std::io::Error) -> TlsError {
    TlsError(format!(
        "cannot use the TLS certificate {} with the key {}: {e}; give a PEM certificate chain and its PEM private key",
        cert.display(),
        key.display()
    ))
}

/// Serves `state` over HTTPS on `listener` until `shutdown` resolves, then stops accepting,
/// ends open long-polls (they answer an empty list) and waits for in-flight requests, at
/// most the request timeout. A connection that does not send a whole request head within the
/// request timeout is closed (the TLS handshake has its own bound, 10 s).
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    state: AppState,
    tls: Tls,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let server = axum_server::from_tcp_rustls(listener.into_std()?, tls.config.clone())?;
    crate::listen::bounded(server, &state, shutdown)
        .serve(app(state).into_make_service())
        .await
}

/// Reloads the certificate and key on each SIGHUP, logging the outcome; runs until the
/// process ends. Does nothing where there is no SIGHUP.
pub async fn reload_on_sighup(tls: Tls) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGHUP: the TLS certificate will not be reloaded");
                return;
            }
        };
        while hangups.recv().await.is_some() {
            match tls.reload().await {
                Ok(()) => tracing::info!(
                    cert = %tls.cert.display(),
                    "reloaded the TLS certificate and key (SIGHUP)"
                ),
                Err(e) => tracing::error!("{e}; the previous certificate stays in use"),
            }
        }
    }
    #[cfg(not(unix))]
    drop(tls);
}
