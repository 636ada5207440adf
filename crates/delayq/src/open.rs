//! Opening an engine from a URL: `redis://` and `rediss://` (Redis), `redis+cluster://` and
//! `rediss+cluster://` (Redis Cluster), `postgres://` and `postgresql://` (PostgreSQL),
//! `sqlite:///path/to/dir` or a plain path (embedded), `memory://` (embedded, in memory).

use std::sync::Arc;
use std::time::Duration;

use delayq_core::{Error, Limits, Result, Store};
use delayq_postgres::{PostgresConfig, PostgresEngine};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_sqlite::{SqliteConfig, SqliteEngine, Synchronous};

/// Options that apply when opening an engine from a URL.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Input limits (body size).
    pub limits: Limits,
    /// Redis only: the key prefix (default `delayq`).
    pub redis_prefix: String,
    /// Redis only: how many replicas must acknowledge every state-changing call before it
    /// answers (default 0: none); fewer in time answer `Error::NotReplicated`. See
    /// `RedisConfig::wait_replicas`.
    pub redis_wait_replicas: usize,
    /// Redis only: how long a call waits for those acknowledgements (default 1 s).
    pub redis_wait_timeout: Duration,
    /// Embedded only: `synchronous` (default `Normal`: survives a process crash; `Full` also
    /// survives power loss).
    pub synchronous: Synchronous,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            limits: Limits::default(),
            redis_prefix: "delayq".into(),
            redis_wait_replicas: 0,
            redis_wait_timeout: Duration::from_secs(1),
            synchronous: Synchronous::Normal,
        }
    }
}

/// Where a URL points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A Redis server or Redis Cluster (the URL as given).
    Redis(String),
    /// A PostgreSQL database (the URL as given).
    Postgres(String),
    /// An embedded engine's data directory.
    Dir(std::path::PathBuf),
    /// An embedded engine in memory.
    Memory,
}

impl Location {
    /// Parses `redis://…`, `rediss://…`, `redis+cluster://…`, `rediss+cluster://…`,
    /// `postgres://…`, `postgresql://…`, `sqlite:///dir`, `sqlite://relative/dir`,
    /// `memory://`, or a plain path.
    pub fn parse(url: &str) -> Result<Self> {
        if ["postgres://", "postgresql://"]
            .iter()
            .any(|scheme| url.starts_with(scheme))
        {
            return Ok(Location::Postgres(url.to_string()));
        }
        if [
            "redis://",
            "rediss://",
            "redis+cluster://",
            "rediss+cluster://",
        ]
        .iter()
        .any(|scheme| url.starts_with(scheme))
        {
            return Ok(Location::Redis(url.to_string()));
        }
        if url == "memory://" || url == "memory:" {
            return Ok(Location::Memory);
        }
        if let Some(path) = url.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err(Error::InvalidConfig {
                    reason: "sqlite:// needs a directory, e.g. sqlite:///var/lib/delayq".into(),
                });
            }
            return Ok(Location::Dir(path.into()));
        }
        if url.contains("://") {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "unknown engine URL {url:?}; use redis://, rediss://, redis+cluster://, postgres://, sqlite:///path/to/dir, memory:// or a plain directory path"
                ),
            });
        }
        if url.is_empty() {
            return Err(Error::InvalidConfig {
                reason: "empty engine URL; use redis://, rediss://, postgres://, sqlite:///path/to/dir, memory:// or a directory path".into(),
            });
        }
        Ok(Location::Dir(url.into()))
    }
}

/// Opens the engine a URL points to, with default options.
pub async fn open(url: &str) -> Result<Arc<dyn Store>> {
    open_with(url, &OpenOptions::default()).await
}

/// Opens the engine a URL points to.
pub async fn open_with(url: &str, options: &OpenOptions) -> Result<Arc<dyn Store>> {
    Ok(match Location::parse(url)? {
        Location::Redis(url) => {
            let config = RedisConfig::new(url)
                .with_prefix(options.redis_prefix.clone())
                .with_limits(options.limits.clone())
                .with_wait_replicas(options.redis_wait_replicas, options.redis_wait_timeout);
            Arc::new(RedisEngine::connect(config).await?)
        }
        Location::Postgres(url) => {
            let config = PostgresConfig::new(url).with_limits(options.limits.clone());
            Arc::new(PostgresEngine::connect(config).await?)
        }
        Location::Dir(dir) => {
            let config = SqliteConfig::dir(dir)
                .with_synchronous(options.synchronous)
                .with_limits(options.limits.clone());
            Arc::new(SqliteEngine::open(config)?)
        }
        Location::Memory => {
            let config = SqliteConfig::memory().with_limits(options.limits.clone());
            Arc::new(SqliteEngine::open(config)?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            Location::parse("redis://h:1/0").ok(),
            Some(Location::Redis("redis://h:1/0".into()))
        );
        assert_eq!(
            Location::parse("rediss://h").ok(),
            Some(Location::Redis("rediss://h".into()))
        );
        assert_eq!(
            Location::parse("redis+cluster://a:1,b:2").ok(),
            Some(Location::Redis("redis+cluster://a:1,b:2".into()))
        );
        assert_eq!(
            Location::parse("sqlite:///var/q").ok(),
            Some(Location::Dir("/var/q".into()))
        );
        assert_eq!(
            Location::parse("sqlite://data/q").ok(),
            Some(Location::Dir("data/q".into()))
        );
        assert_eq!(
            Location::parse("./delayq-data").ok(),
            Some(Location::Dir("./delayq-data".into()))
        );
        assert_eq!(Location::parse("memory://").ok(), Some(Location::Memory));
        for pg in [
            "postgres://app@db/app",
            "postgresql://db:5432/q?sslmode=require",
        ] {
            assert_eq!(
                Location::parse(pg).ok(),
                Some(Location::Postgres(pg.into()))
            );
        }
        for bad in ["", "http://x", "sqlite://", "mysql://db"] {
            assert!(
                matches!(Location::parse(bad), Err(Error::InvalidConfig { .. })),
                "{bad}"
            );
        }
    }
}

/// Fuzzed engine URLs (issue 17): any string is a location or `InvalidConfig`.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn any_url_is_a_location_or_invalid_config(
            url in prop_oneof![
                any::<String>(),
                (prop::sample::select(vec!["redis://", "rediss+cluster://", "postgres://", "sqlite://", "sqlite:///", "memory://", "memory:", "http://", "://", ""]), any::<String>())
                    .prop_map(|(s, rest)| format!("{s}{rest}")),
            ]
        ) {
            match Location::parse(&url) {
                Ok(Location::Redis(u) | Location::Postgres(u)) => prop_assert_eq!(u, url),
                Ok(Location::Dir(p)) => prop_assert!(!p.as_os_str().is_empty()),
                Ok(Location::Memory) => prop_assert!(url.starts_with("memory:")),
                Err(e) => prop_assert!(matches!(e, Error::InvalidConfig { .. }), "{e:?}"),
            }
        }
    }
}
