//! The Redis Functions library: one function per atomic operation, assembled at build time
//! from `lua/lib.lua` (the helpers, defined once per load) and one `lua/<op>.lua` per
//! function. `conn` loads it (`FUNCTION LOAD REPLACE`); `ops` call it (`FCALL`).
//!
//! The library's name carries a version (`delayq_13`), and so does every function's name (Redis wants
//! function names unique across libraries): two delayq versions can share one Redis during a
//! rolling upgrade, each calling its own functions. The version is bumped whenever the
//! stored format (keys, records) or a function's arguments, reply or flags change.
//!
//! **Flags.** A function without flags may write, so Redis refuses it whole (`OOM`, which
//! the engine answers as `Error::Full`) while its memory is over `maxmemory` under
//! `noeviction`; the check runs once before the call, so a refused call wrote nothing. The
//! functions marked `allow-oom` below run all the same: they create no job, and what they
//! add is bounded by the jobs already stored (a lease entry per reserved job, a promoted
//! job's entry in `ready`, a death reason), while most of them free memory. So a full Redis
//! still answers reads and lets workers and operators drain it (reserve, ack, nack, delete,
//! purge ...), while pushes, topic settings and schedules, which would grow it without
//! bound, answer `Full` until memory is freed.

macro_rules! library {
    (version $v:literal; $($name:ident => $op:literal $([$($flag:literal),*])?),* $(,)?) => {
        /// The library's name, `delayq_<VERSION>`.
        pub(crate) const NAME: &str = concat!("delayq_", $v);

        $(
            #[doc = concat!("The function of `lua/", $op, ".lua`.")]
            pub(crate) const $name: &str = concat!("delayq_", $v, "_", $op);
        )*

        /// The library's code: the shebang naming it, the helpers, then each operation's
        /// file as the body of its function (whose parameters are `KEYS` and `ARGV`, so the
        /// files read as EVAL scripts do), after binding the helpers to the call's keys,
        /// registered with its flags.
        pub(crate) const SOURCE: &str = concat!(
            "#!lua name=delayq_", $v, "\n",
            include_str!("../lua/lib.lua"),
            $(
                "\nredis.register_function{function_name='delayq_", $v, "_", $op,
                "', flags={", $($("'", $flag, "',",)*)? "}, callback=function(KEYS, ARGV)\nbind(KEYS)\n",
                include_str!(concat!("../lua/", $op, ".lua")),
                "\nend}\n",
            )*
        );
    };
}

library! {
    version "13";
    PUSH => "push",
    RESERVE => "reserve" ["allow-oom"],
    ACK => "ack" ["allow-oom"],
    NACK => "nack" ["allow-oom"],
    RELEASE => "release" ["allow-oom"],
    TOUCH => "touch" ["allow-oom"],
    BURY => "bury" ["allow-oom"],
    KICK => "kick" ["allow-oom"],
    BURY_WAITING => "bury_waiting" ["allow-oom"],
    RESERVE_JOB => "reserve_job" ["allow-oom"],
    RESCHEDULE => "reschedule" ["allow-oom"],
    DELETE => "delete" ["allow-oom"],
    GET => "get" ["allow-oom"],
    LIST => "list" ["allow-oom"],
    STATS => "stats" ["allow-oom"],
    PURGE => "purge" ["allow-oom"],
    HANDBACK => "handback" ["allow-oom"],
    CONFIGURE => "configure",
    CONFIG => "config" ["allow-oom"],
    PAUSE => "pause",
    SCHEDULE_PUT => "schedule_put",
    SCHEDULE_PUSHED => "schedule_pushed",
    SCHEDULE_DELETE => "schedule_delete" ["allow-oom"],
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
                SOURCE.contains(&format!("redis.register_function{{function_name='{f}', ")),
                "{f} is registered"
            );
        }
    }

    /// The functions that can grow memory without bound answer `OOM` at maxmemory; those
    /// that drain a queue or only read run.
    #[test]
    fn only_functions_that_create_nothing_run_out_of_memory() {
        let flags = |f: &str| {
            let at = SOURCE
                .find(&format!("function_name='{f}', flags={{"))
                .unwrap_or_else(|| panic!("{f} not registered"));
            let rest = &SOURCE[at..];
            rest[..rest.find('}').unwrap_or(0)].to_string()
        };
        for f in [PUSH, CONFIGURE, PAUSE, SCHEDULE_PUT, SCHEDULE_PUSHED] {
            assert!(!flags(f).contains("allow-oom"), "{f}: {}", flags(f));
        }
        for f in [
            RESERVE,
            ACK,
            NACK,
            DELETE,
            PURGE,
            GET,
            LIST,
            STATS,
            SCHEDULE_DELETE,
        ] {
            assert!(flags(f).contains("'allow-oom',"), "{f}: {}", flags(f));
        }
    }
}
