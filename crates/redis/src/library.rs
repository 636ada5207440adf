//! The Redis Functions library: one function per atomic operation, assembled at build time
//! from `lua/lib.lua` (the helpers, defined once per load) and one `lua/<op>.lua` per
//! function. `conn` loads it (`FUNCTION LOAD REPLACE`); `ops` call it (`FCALL`).
//!
//! The library's name carries a version (`delayq_8`), and so does every function's name (Redis wants
//! function names unique across libraries): two delayq versions can share one Redis during a
//! rolling upgrade, each calling its own functions. The version is bumped whenever the
//! stored format (keys, records) or a function's arguments or reply change.

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
        /// files read as EVAL scripts do), after binding the helpers to the call's keys.
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
    version "8";
    PUSH => "push",
    RESERVE => "reserve",
    ACK => "ack",
    NACK => "nack",
    RELEASE => "release",
    TOUCH => "touch",
    BURY => "bury",
    KICK => "kick",
    BURY_WAITING => "bury_waiting",
    RESCHEDULE => "reschedule",
    DELETE => "delete",
    GET => "get",
    LIST => "list",
    STATS => "stats",
    PURGE => "purge",
    HANDBACK => "handback",
    CONFIGURE => "configure",
    CONFIG => "config",
    PAUSE => "pause",
    SCHEDULE_PUT => "schedule_put",
    SCHEDULE_PUSHED => "schedule_pushed",
    SCHEDULE_DELETE => "schedule_delete",
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
            PUSH,
            RESERVE,
            ACK,
            NACK,
            RELEASE,
            TOUCH,
            BURY,
            KICK,
            BURY_WAITING,
            RESCHEDULE,
            DELETE,
            GET,
            LIST,
            STATS,
            PURGE,
            HANDBACK,
            CONFIGURE,
            CONFIG,
            SCHEDULE_PUT,
            SCHEDULE_PUSHED,
            SCHEDULE_DELETE,
        ] {
            assert!(
                SOURCE.contains(&format!(
                    "redis.register_function('{f}', function(KEYS, ARGV)"
                )),
                "{f} is registered"
            );
        }
    }
}
