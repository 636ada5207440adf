//! Mapping redis-rs errors onto the contract's [`Error`].

use delayq_core::Error;
use redis::{ErrorKind, RedisError, ServerErrorKind};

/// Maps a redis-rs error raised while doing `what`.
///
/// Connection failures, timeouts, a loading or read-only server become
/// [`Error::Unavailable`] (retry later), an out-of-memory one (`OOM`: `maxmemory` reached
/// under `noeviction`) [`Error::Full`]; an error raised inside a function means the data is
/// not what the functions wrote, which is [`Error::Internal`].
pub(crate) fn map_redis_err(what: &str, e: RedisError) -> Error {
    let detail = e.detail().unwrap_or("").to_string();
    if e.code() == Some("OOM") {
        return Error::full(
            format!("{what}: Redis reached its maxmemory and refuses writes (OOM)"),
            e,
        );
    }
    if e.code() == Some("NOAUTH") {
        return Error::InvalidConfig {
            reason: format!(
                "{what}: Redis requires a user and password ({e}); put them in the URL (redis://user:password@host:port)"
            ),
        };
    }
    match e.kind() {
        ErrorKind::Server(ServerErrorKind::ResponseError)
            if detail.contains("user_script")
                || detail.contains("user_function")
                || detail.contains("script:") =>
        {
            Error::Internal(format!("{what}: a delayq function failed: {e}"))
        }
        ErrorKind::AuthenticationFailed => Error::InvalidConfig {
            reason: format!(
                "{what}: Redis refused the credentials ({e}); check the user and password in the URL (redis://user:password@host:port)"
            ),
        },
        ErrorKind::InvalidClientConfig => Error::InvalidConfig {
            reason: format!("{what}: {e}"),
        },
        ErrorKind::Server(ServerErrorKind::NoPerm) => Error::InvalidConfig {
            reason: format!(
                "{what}: the Redis user lacks a permission delayq needs ({e}); allow FCALL, FUNCTION, INFO, TIME, SADD, SMEMBERS, BZPOPMIN, ZADD, CLIENT (and WAIT with the wait-replicas option, CLUSTER SLOTS, CLUSTER INFO and CLUSTER SHARDS on a Redis Cluster) on the delayq:* keys"
            ),
        },
        _ => Error::unavailable(format!("{what}: {e}"), e),
    }
}
