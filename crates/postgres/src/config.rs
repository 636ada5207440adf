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

    /// Checks the ranges and parses the URL.
    pub(crate) fn parse(&self) -> Result<tokio_postgres::Config> {
        if self.pool_size == 0 || self.pool_size > 1000 {
            return Err(Error::invalid(
                "pool_size",
                format!("{} is outside 1 to 1000", self.pool_size),
            ));
        }
        self.url.parse().map_err(|e| Error::InvalidConfig {
            reason: format!(
                "the PostgreSQL URL cannot be read ({e}); write it as postgres://user:password@host:5432/database"
            ),
        })
    }
}
