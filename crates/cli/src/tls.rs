//! TLS for `--ca-cert`, and what a failed handshake means to the user.
//!
//! A `--ca-cert` file names the certificates to trust: as authorities, as webpki checks any
//! chain, and also each one as exactly the certificate a server may present. The second is
//! what `openssl req -x509` makes people expect: its self-signed certificate is marked as an
//! authority (CA:TRUE), which webpki refuses as a server's own certificate
//! (`CaUsedAsEndEntity`) while curl, Python and Node accept it when told to trust it. So
//! [`ExactOrChained`] relaxes that one rule, for exactly the certificates given: the
//! certificate must still be in its validity period and name the host, and the server must
//! still prove in the handshake that it holds the certificate's key.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{WebPkiServerVerifier, verify_server_name};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};

use crate::failure::{Failure, exit};

/// The TLS configuration of a client given `--ca-cert path`: the system's authorities and
/// the file's certificates, each of which is also accepted as the server's own.
pub fn client_config(path: &Path) -> Result<rustls::ClientConfig, Failure> {
    let usage = |why: String| {
        Failure::new(
            exit::USAGE,
            "usage",
            format!(
                "--ca-cert {}: {why}; give the PEM file of the certificate (or its authority) that the server's --tls-cert was issued by",
                path.display()
            ),
        )
    };
    let pem = std::fs::read(path).map_err(|e| usage(e.to_string()))?;
    let given = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| usage(format!("not a PEM certificate ({e})")))?;
    if given.is_empty() {
        return Err(usage("it holds no certificate".into()));
    }
    let mut roots = rustls::RootCertStore::empty();
    // The system's authorities as well, as without --ca-cert; one it cannot read is skipped
    // (as reqwest does), the file's own certificates are not.
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    for cert in &given {
        roots
            .add(cert.clone())
            .map_err(|e| usage(format!("a certificate in it cannot be trusted ({e})")))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let setup = |e: String| {
        Failure::new(
            exit::ERROR,
            "error",
            format!("cannot set up TLS for --ca-cert {}: {e}", path.display()),
        )
    };
    let chained = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| setup(e.to_string()))?;
    let verifier = ExactOrChained {
        exact: given,
        chained,
    };
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| setup(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth())
}

/// Verifies a server's certificate as webpki does, and accepts too a certificate that is
/// exactly one of `exact` although it is marked as an authority.
#[derive(Debug)]
struct ExactOrChained {
    exact: Vec<CertificateDer<'static>>,
    chained: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for ExactOrChained {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.chained.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            // webpki checks the validity period before the basic constraints, so a
            // certificate refused as an authority is in its validity period; what it did
            // not reach yet is the name.
            Err(e)
                if is_ca_used_as_end_entity(&e)
                    && self.exact.iter().any(|c| c.as_ref() == end_entity.as_ref()) =>
            {
                verify_server_name(&ParsedCertificate::try_from(end_entity)?, server_name)?;
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    // The handshake's signatures are checked against the certificate's key as always.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chained.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chained.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chained.supported_verify_schemes()
    }
}

/// Whether webpki refused the certificate only for being an authority (CA:TRUE).
fn is_ca_used_as_end_entity(e: &rustls::Error) -> bool {
    match e {
        rustls::Error::InvalidCertificate(CertificateError::Other(other)) => matches!(
            other.0.downcast_ref::<webpki::Error>(),
            Some(webpki::Error::CaUsedAsEndEntity)
        ),
        _ => false,
    }
}

/// The TLS error somewhere in the causes of `e` (a failed request), if the request failed
/// in the TLS handshake.
pub fn cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    if let Some(tls) = e.downcast_ref::<rustls::Error>() {
        return Some(tls);
    }
    // An I/O error (reqwest's holds tokio-rustls's, which holds the TLS error) shows its
    // inner error but does not give it as its source.
    if let Some(tls) = e
        .downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
        .and_then(|inner| cause(inner))
    {
        return Some(tls);
    }
    e.source().and_then(cause)
}

/// What a TLS failure with `server` means, and what to do about it.
pub fn explain(e: &rustls::Error, server: &str) -> String {
    let hint = match e {
        _ if is_ca_used_as_end_entity(e) => {
            "the server's certificate is a self-signed authority (CA:TRUE, as `openssl req -x509` makes it) that this client does not trust: give that certificate with --ca-cert (DELAYQ_CA_CERT)"
        }
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => {
                "the server's certificate is signed by an authority this client does not trust: give that certificate, or the authority that issued it, with --ca-cert (DELAYQ_CA_CERT)"
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                "the server's certificate does not name the host in --server: use a host name the certificate names, or give the server a certificate for this one"
            }
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => {
                "the server's certificate is outside its validity period (or this machine's clock is wrong): renew it and reload the server (SIGHUP)"
            }
            _ => "the server's certificate cannot be trusted",
        },
        rustls::Error::InvalidMessage(_) => {
            "the server did not answer in TLS: if it serves plain HTTP, use an http:// URL"
        }
        _ => "the TLS handshake failed",
    };
    format!("TLS with {server} failed: {e}; {hint}")
}
