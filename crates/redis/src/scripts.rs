//! The Lua scripts, one per atomic operation, each prefixed with `lua/lib.lua`.
//!
//! `Script` hashes the code once; `invoke_async` reloads on NOSCRIPT, pipelines do not, so
//! [`load_all`] runs at connect and [`crate::engine`] reloads and resends on NOSCRIPT.

use std::sync::LazyLock;

use redis::Script;

macro_rules! scripts {
    ($($name:ident => $file:literal),* $(,)?) => {
        $(
            #[doc = concat!("`lua/", $file, "`, prefixed with `lua/lib.lua`.")]
            pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
                Script::new(concat!(
                    include_str!("../lua/lib.lua"),
                    include_str!(concat!("../lua/", $file))
                ))
            });
        )*

        /// Every script, for loading ahead of pipelines.
        pub(crate) fn all() -> Vec<&'static Script> {
            vec![$(&*$name),*]
        }
    };
}

scripts! {
    PUSH => "push.lua",
    RESERVE => "reserve.lua",
    ACK => "ack.lua",
    NACK => "nack.lua",
    RELEASE => "release.lua",
    TOUCH => "touch.lua",
    BURY => "bury.lua",
    KICK => "kick.lua",
    RESCHEDULE => "reschedule.lua",
    DELETE => "delete.lua",
    GET => "get.lua",
    LIST => "list.lua",
    STATS => "stats.lua",
    PURGE => "purge.lua",
    HANDBACK => "handback.lua",
}

/// Loads every script on the connection's server (one round trip) and checks the hashes.
pub(crate) async fn load_all<C: redis::aio::ConnectionLike>(con: &mut C) -> redis::RedisResult<()> {
    let scripts = all();
    let mut pipe = redis::pipe();
    for s in &scripts {
        pipe.load_script(s);
    }
    let hashes: Vec<String> = pipe.query_async(con).await?;
    for (s, h) in scripts.iter().zip(&hashes) {
        if s.get_hash() != h {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "SCRIPT LOAD returned an unexpected hash",
                format!("expected {}, got {h}", s.get_hash()),
            )));
        }
    }
    Ok(())
}
