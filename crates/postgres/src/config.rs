//! [`PostgresConfig`]: where the database is and how the engine uses it.

use std::path::PathBuf;

use delayq_core::{Error, Limits, Result};

/// How to reach PostgreSQL and how many connections to keep.
#[derive(Clone, Debug)]
pub struct PostgresConfig {
    /// A libpq URL or key-value string: `postgres://user:password@host:5432/db?sslmode=require`.
    /// `sslmode` is `prefer` unless it says otherwise: TLS when the server offers it.
    pub url: String,
    /// The most pooled connections (default 16). One more is kept for `LISTEN`.
    pub pool_size: usize,
    /// A PEM file of certificate authorities to trust for TLS, besides the system's.
    pub ca_file: Option<PathBuf>,
    /// The input limits.
    pub limits: Limits,
}

impl PostgresConfig {
    /// The defaults for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        PostgresConfig {
            url: url.into(),
            pool_size: 16,
            ca_file: None,
            limits: Limits::default(),
        }
    }

    /// Sets the input limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the most pooled connections.
    pub fn with_pool_size(mut self, n: usize) -> Self {
        self.pool_size = n;
        self
    }

    /// Trusts the certificate authorities in a PEM file too.
    pub fn with_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }

    /// Checks the ranges and parses the URL: libpq's TLS parameters are read here (see
    /// [`Target`]), the rest by the driver.
    pub(crate) fn parse(&self) -> Result<Target> {
        if self.pool_size == 0 || self.pool_size > 1000 {
            return Err(Error::invalid(
                "pool_size",
                format!("{} is outside 1 to 1000", self.pool_size),
            ));
        }
        let (url, mode, roots) = take_tls_params(&self.url)?;
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|e: tokio_postgres::Error| {
                // The driver's own text is general; its source names the parameter.
                let detail = std::error::Error::source(&e)
                    .map(|s| format!(": {s}"))
                    .unwrap_or_default();
                Error::InvalidConfig {
                    reason: format!(
                        "the PostgreSQL URL cannot be read ({e}{detail}); write it as postgres://user:password@host:5432/database?sslmode=require"
                    ),
                }
            })?;
        let mut ca_files: Vec<PathBuf> = self.ca_file.iter().cloned().collect();
        ca_files.extend(roots);
        let mode = mode.unwrap_or(match config.get_ssl_mode() {
            tokio_postgres::config::SslMode::Disable => SslMode::Disable,
            tokio_postgres::config::SslMode::Require => SslMode::Require,
            _ => SslMode::Prefer,
        });
        config.ssl_mode(match mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                tokio_postgres::config::SslMode::Require
            }
        });
        // As libpq: `require` with a CA file checks the chain as `verify-ca` does.
        let verify = match mode {
            SslMode::VerifyFull => Verify::Full,
            SslMode::VerifyCa => Verify::Chain,
            SslMode::Require if !ca_files.is_empty() => Verify::Chain,
            _ => Verify::Nothing,
        };
        Ok(Target {
            config,
            verify,
            ca_files,
        })
    }
}

/// The URL made ready to connect: the driver's configuration, how much of the server's
/// certificate to check and the certificate authorities to trust besides the system's.
pub(crate) struct Target {
    pub(crate) config: tokio_postgres::Config,
    pub(crate) verify: Verify,
    pub(crate) ca_files: Vec<PathBuf>,
}

/// How much of the server's certificate is checked, as libpq's `sslmode` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verify {
    /// `prefer` and `require` (libpq's default): encrypted, the certificate not checked.
    Nothing,
    /// `verify-ca` (or `require` with `sslrootcert`): signed by a trusted authority.
    Chain,
    /// `verify-full`: signed by a trusted authority and naming the host connected to.
    Full,
}

/// libpq's `sslmode` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// Takes libpq's `sslmode` and `sslrootcert` out of a `postgres://` URL's query, which
/// the driver would refuse or misread: the URL without them, the mode, and the CA file
/// (`sslrootcert=system`, as libpq 16, names none beyond the system's). A key-value string
/// (`host=… dbname=…`) goes to the driver as it is.
fn take_tls_params(url: &str) -> Result<(String, Option<SslMode>, Option<PathBuf>)> {
    let is_url = url.starts_with("postgres://") || url.starts_with("postgresql://");
    let Some((base, query)) = url.split_once('?').filter(|_| is_url) else {
        return Ok((url.to_string(), None, None));
    };
    let mut kept = Vec::new();
    let mut mode = None;
    let mut root = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_encoding::percent_decode_str(value)
            .decode_utf8()
            .map_err(|_| bad(key, "is not UTF-8 once decoded"))?;
        match key {
            "sslmode" => {
                mode = Some(match value.as_ref() {
                    "disable" => SslMode::Disable,
                    // libpq's `allow` tries without TLS first; here TLS is preferred.
                    "allow" | "prefer" => SslMode::Prefer,
                    "require" => SslMode::Require,
                    "verify-ca" => SslMode::VerifyCa,
                    "verify-full" => SslMode::VerifyFull,
                    other => {
                        return Err(bad(
                            "sslmode",
                            &format!(
                                "is {other:?}, which is not a mode; use disable, prefer, require, verify-ca or verify-full"
                            ),
                        ));
                    }
                })
            }
            "sslrootcert" if value == "system" => {}
            "sslrootcert" if value.is_empty() => {
                return Err(bad(
                    "sslrootcert",
                    "is empty; give the path of a PEM file of certificate authorities",
                ));
            }
            "sslrootcert" => root = Some(PathBuf::from(value.as_ref())),
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, mode, root))
}

/// A parameter of the URL that cannot be used: which, and why.
fn bad(key: &str, reason: &str) -> Error {
    Error::InvalidConfig {
        reason: format!("{key} in the PostgreSQL URL {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Target {
        PostgresConfig::new(url).parse().expect(url)
    }

    #[test]
    fn libpq_tls_parameters_are_understood() {
        use tokio_postgres::config::SslMode as Driver;
        let t = target("postgres://u:p@db:5432/app");
        assert_eq!(t.config.get_ssl_mode(), Driver::Prefer);
        assert_eq!(t.verify, Verify::Nothing);
        let t = target("postgres://db/app?sslmode=require&application_name=x");
        assert_eq!(t.config.get_ssl_mode(), Driver::Require);
        assert_eq!(t.verify, Verify::Nothing, "libpq's require checks nothing");
        assert_eq!(t.config.get_application_name(), Some("x"));
        let t = target("postgres://db/app?sslrootcert=%2Fetc%2Fca%20dir%2Fca.pem&sslmode=require");
        assert_eq!(
            t.verify,
            Verify::Chain,
            "require with a CA file is verify-ca"
        );
        assert_eq!(t.ca_files, [PathBuf::from("/etc/ca dir/ca.pem")]);
        let t = target("postgresql://db/app?sslmode=verify-ca");
        assert_eq!(
            (t.config.get_ssl_mode(), t.verify),
            (Driver::Require, Verify::Chain)
        );
        let t = target("postgresql://db/app?sslmode=verify-full&sslrootcert=system");
        assert_eq!(
            (t.config.get_ssl_mode(), t.verify),
            (Driver::Require, Verify::Full)
        );
        assert!(t.ca_files.is_empty());
        let t = target("postgres://db/app?sslmode=disable");
        assert_eq!(t.config.get_ssl_mode(), Driver::Disable);
        let t = target("host=db dbname=app sslmode=require");
        assert_eq!(
            (t.config.get_ssl_mode(), t.verify),
            (Driver::Require, Verify::Nothing)
        );
        // A key-value string is not a URL: a `?` in a value is not a query.
        let t = target("host=db dbname=app password=a?sslmode=disable&b");
        assert_eq!(
            t.config.get_password(),
            Some(&b"a?sslmode=disable&b"[..]),
            "the password is kept whole"
        );
        assert_eq!(t.config.get_ssl_mode(), Driver::Prefer);
    }

    #[test]
    fn bad_tls_parameters_name_the_field() {
        for (url, field) in [
            ("postgres://db/app?sslmode=always", "sslmode"),
            ("postgres://db/app?sslrootcert=", "sslrootcert"),
        ] {
            let e = PostgresConfig::new(url).parse().err().expect(url);
            assert!(e.to_string().contains(field), "{url}: {e}");
        }
        let e = PostgresConfig::new("postgres://db/app?nonsense=1")
            .parse()
            .err()
            .expect("an unknown parameter is refused");
        assert!(e.to_string().contains("nonsense"), "{e}");
    }
}
