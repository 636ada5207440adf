//! [`TlsFiles`]: the certificate authority and server certificate generated for a test
//! server that speaks TLS (Redis, a Redis Cluster, PostgreSQL).

use std::path::Path;

/// A CA, and a server certificate that it signed with its key (for `127.0.0.1` and
/// `localhost` unless told otherwise), as PEM. One set serves every node of a cluster, so one CA file makes a client trust them all.
#[derive(Clone)]
pub(crate) struct TlsFiles {
    pub(crate) ca: String,
    cert: String,
    key: String,
}

impl TlsFiles {
    /// Generates a CA and a server certificate signed by it. Each has its own subject name:
    /// OpenSSL (`redis-cli`, and the nodes verifying each other on the cluster bus) takes a
    /// certificate whose subject equals its issuer's for a self-signed one and rejects it.
    pub(crate) fn generate() -> Self {
        Self::generate_for(&["127.0.0.1", "localhost"])
    }

    /// Generates a CA and a server certificate for `names` (host names or IP addresses)
    /// signed by it.
    pub(crate) fn generate_for(names: &[&str]) -> Self {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa,
            KeyPair,
        };
        let fail =
            |e: rcgen::Error| -> ! { panic!("cannot generate the test TLS certificates: {e}") };
        let named = |cn: &str| {
            let mut name = DistinguishedName::new();
            name.push(DnType::CommonName, cn);
            name
        };
        let mut ca_params =
            CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| fail(e));
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name = named("delayq test CA");
        let ca_key = KeyPair::generate().unwrap_or_else(|e| fail(e));
        let ca = CertifiedIssuer::self_signed(ca_params, ca_key).unwrap_or_else(|e| fail(e));
        let key = KeyPair::generate().unwrap_or_else(|e| fail(e));
        let cert = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .and_then(|mut p| {
                p.distinguished_name = named("127.0.0.1");
                p.signed_by(&key, &ca)
            })
            .unwrap_or_else(|e| fail(e));
        TlsFiles {
            ca: ca.pem(),
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    /// Writes `ca.pem`, `server.pem` and `server.key` into `dir`.
    pub(crate) fn write(&self, dir: &Path) {
        for (name, pem) in [
            ("ca.pem", &self.ca),
            ("server.pem", &self.cert),
            ("server.key", &self.key),
        ] {
            std::fs::write(dir.join(name), pem)
                .unwrap_or_else(|e| panic!("cannot write {name}: {e}"));
        }
    }
}
