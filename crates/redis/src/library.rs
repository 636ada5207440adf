//! The Redis Functions library: one function per atomic operation, assembled at build time
//! from `lua/lib.lua` (the helpers, defined once per load) and one `lua/<op>.lua` per
//! function, loaded with `FUNCTION LOAD REPLACE` and called with `FCALL`.
//!
//! The library's name carries a version (`delayq_2`), and so does every function's name (Redis wants
//! function names unique across libraries): two delayq versions can share one Redis during a
//! rolling upgrade, each calling its own functions. The version is bumped whenever the
//! stored format (keys, records) or a function's arguments or reply change.

use delayq_core::{Error, Result};
use redis::{RedisError, RedisResult, Value};

macro_rules! library {
    (version $v:literal; $($name:ident => $op:literal),* $(,)?) => {
        /// The library's name, `delayq_<VERSION>`.
        pub(crate) const NAME: &str = concat!("delayq_", $v);

        $(
            #[doc = concat!("The function of `lua/", $op, ".lua`.")]
            pub(crate) const $name: &str = concat!("delayq_", $v, "_", $op);
        )*

        /// The library's code: the shebang naming it, the helpers, then each operation's
        /// file as the body of its function (whose parameters are `KEYS` and `ARGV`, so the
        /// files read as scripts do), after binding the helpers to the call's keys.
        pub(crate) const SOURCE: &str = concat!(
            "#!lua name=delayq_", $v, "\n",
            include_str!("../lua/lib.lua"),
            $(
                "\nredis.register_function('delayq_", $v, "_", $op,
                "', function(KEYS, ARGV)\nbind(KEYS)\n",
                include_str!(concat!("../lua/", $op, ".lua")),
                "\nend)\n",
            )*
        );
    };
}

library! {
    version "2";
    PUSH => "push",
    RESERVE => "reserve",
    ACK => "ack",
    NACK => "nack",
    RELEASE => "release",
    TOUCH => "touch",
    BURY => "bury",
    KICK => "kick",
    RESCHEDULE => "reschedule",
    DELETE => "delete",
    GET => "get",
    LIST => "list",
    STATS => "stats",
    PURGE => "purge",
    HANDBACK => "handback",
}

/// The oldest Redis with Functions (`FUNCTION LOAD`, `FCALL`).
const MIN_VERSION: (u32, u32) = (7, 0);

/// Loads (or replaces) the library on the connection's server, checking the name it answers.
pub(crate) async fn load<C: redis::aio::ConnectionLike>(con: &mut C) -> RedisResult<()> {
    let name: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(SOURCE)
        .query_async(con)
        .await?;
    if name != NAME {
        return Err(RedisError::from((
            redis::ErrorKind::Client,
            "FUNCTION LOAD answered another library name",
            format!("expected {NAME}, got {name}"),
        )));
    }
    Ok(())
}

/// True for the error `FCALL` answers when the function is not loaded: a Redis restarted
/// without persistence, a `FUNCTION FLUSH`, a failover to a replica that lacks it.
pub(crate) fn is_missing(e: &RedisError) -> bool {
    e.detail().is_some_and(is_missing_message) || is_missing_message(&e.to_string())
}

/// [`is_missing`] for one reply of a pipeline (with errors kept as values).
pub(crate) fn is_missing_reply(v: &Value) -> bool {
    match v {
        Value::ServerError(e) => {
            e.details().is_some_and(is_missing_message) || is_missing_message(e.code())
        }
        _ => false,
    }
}

fn is_missing_message(s: &str) -> bool {
    s.contains("Function not found")
}

/// Refuses a server older than Redis 7.0, whose `INFO server` is `info`, with a message
/// saying what was found and what is needed.
pub(crate) fn check_version(info: &str) -> Result<()> {
    let found = info
        .lines()
        .find_map(|l| l.trim().strip_prefix("redis_version:"))
        .unwrap_or("unknown");
    let mut parts = found.split('.').map(|p| p.parse::<u32>().ok());
    let major_minor = match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => Some((major, minor)),
        _ => None,
    };
    match major_minor {
        Some(v) if v >= MIN_VERSION => Ok(()),
        _ => Err(Error::InvalidConfig {
            reason: format!(
                "the Redis server is version {found}; delayq needs Redis 7.0 or newer (it runs as a Redis Functions library); upgrade Redis"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_version() {
        let version = NAME.strip_prefix("delayq_").unwrap_or("");
        assert!(version.parse::<u32>().is_ok(), "{NAME}");
        assert_eq!(PUSH, format!("delayq_{version}_push"));
        assert!(SOURCE.starts_with(&format!("#!lua name={NAME}\n")));
        for f in [
            PUSH, RESERVE, ACK, NACK, RELEASE, TOUCH, BURY, KICK, RESCHEDULE, DELETE, GET, LIST,
            STATS, PURGE, HANDBACK,
        ] {
            assert!(
                SOURCE.contains(&format!(
                    "redis.register_function('{f}', function(KEYS, ARGV)"
                )),
                "{f} is registered"
            );
        }
    }

    #[test]
    fn versions_before_7_are_refused_with_what_was_found() {
        let info = |v: &str| format!("# Server\r\nredis_version:{v}\r\nredis_mode:standalone\r\n");
        assert!(check_version(&info("7.0.15")).is_ok());
        assert!(check_version(&info("8.6.2")).is_ok());
        for old in ["6.2.14", "5.0.7", "garbage"] {
            match check_version(&info(old)) {
                Err(Error::InvalidConfig { reason }) => {
                    assert!(reason.contains(old), "{reason}");
                    assert!(reason.contains("7.0 or newer"), "{reason}");
                }
                other => panic!("{old}: {other:?}"),
            }
        }
        assert!(check_version("no version here").is_err());
    }

    #[test]
    fn missing_function_is_recognised() {
        let e = RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "An error was signalled by the server",
            "Function not found".to_string(),
        ));
        assert!(is_missing(&e));
    }
}
