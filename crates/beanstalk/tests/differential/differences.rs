//! Where delayq's beanstalkd protocol differs from beanstalkd 1.12 on purpose, each with its
//! reason: the one list ([`DIFFERENCES`]) that docs/beanstalkd.md cites.
//! The normalisation (`normalise.rs`) and the sessions that show a difference
//! (`Script::differs`) name the entry they rely on; nothing else is allowed to differ.

/// One deliberate difference.
#[derive(Debug)]
pub struct Difference {
    /// A short name.
    pub name: &'static str,
    /// What differs.
    pub what: &'static str,
    /// Why delayq does it this way.
    pub why: &'static str,
}

/// Job ids.
pub static JOB_IDS: Difference = Difference {
    name: "job ids",
    what: "A job's id is a number from the engine's shared sequence, claimed by each server \
           process in blocks per tube: ids grow but are not consecutive, and the first job \
           is not necessarily 1 (beanstalkd: 1, 2, 3 ... per process, in put order). A job \
           pushed another way (the HTTP API) with an id of its own gets an alias from 2^62 up \
           the first time a beanstalkd client sees it, valid on that process only.",
    why: "Several delayq processes serve one engine; an id must name one job across all of \
          them and survive a restart, so it cannot be a per-process counter.",
};

/// Process-local statistics.
pub static PROCESS_COUNTERS: Difference = Difference {
    name: "per-process counters",
    what: "In `stats` and `stats-tube`, the command counters (`cmd-*`), `total-jobs`, \
           `job-timeouts`, `current-tubes`, the connection figures (`current-connections`, \
           `-producers`, `-workers`, `-waiting`, `total-connections`) and a tube's \
           `total-jobs`, `current-using`/`-watching`/`-waiting`, `cmd-delete` and \
           `cmd-pause-tube` are those of the delayq process that answers, since it started. \
           Only the job counts (`current-jobs-*`) are the engine's, shared by every process. \
           `job-timeouts` is 0.",
    why: "Counting every command in the engine would add a write to every command; the job \
          counts are what schedulers and dashboards read.",
};

/// Order among ready jobs of one priority.
pub static READY_ORDER: Difference = Difference {
    name: "ready order within a priority",
    what: "Among ready jobs of one priority, the job that became ready first is reserved \
           first (by due time, then push order). beanstalkd reserves the smallest id first, \
           so a job released or fallen due later goes ahead of jobs that waited longer.",
    why: "The engines keep one queue ordered by (priority, due time, sequence): fair to the \
          jobs that waited longest, and the same on every engine and every process.",
};

/// Per-job counters of `stats-job`.
pub static JOB_COUNTERS: Difference = Difference {
    name: "stats-job counters",
    what: "`stats-job`'s `reserves` is the job's deliveries that counted (a `release` gives \
           its delivery back), `buries` is 1 while the job is buried and 0 otherwise, \
           `timeouts`, `releases` and `kicks` are 0, and `delay` is the time from the job's \
           creation to its due time.",
    why: "The engines record a job's state and attempts, not a history of what was done to \
          it.",
};

/// No binlog.
pub static NO_BINLOG: Difference = Difference {
    name: "no binlog",
    what: "`file` in `stats-job` and the `binlog-*` figures of `stats` are 0 (the defaults \
           of a beanstalkd without `-b`).",
    why: "The engines persist jobs themselves (SQLite's write-ahead log, Redis AOF).",
};

/// Drain mode.
pub static DRAIN: Difference = Difference {
    name: "drain mode",
    what: "delayq has no drain mode of its own (beanstalkd's `SIGUSR1`, after which it \
           keeps every connection and answers `put` with `DRAINING`): it drains when it \
           shuts down, closing each connection once its current command has answered; only \
           a `put` already read when the shutdown begins gets `DRAINING`.",
    why: "A delayq process is one of several on a shared engine: to take it out of service \
          it is stopped, and clients reconnect to another process.",
};

/// Tube names whose topic name is too long.
pub static TUBE_TOPIC_LENGTH: Difference = Difference {
    name: "tube names and topic names",
    what: "A tube maps to a delayq topic in which each of `+ / ; $ ( )` takes three \
           characters (`:` and its hex code); a tube name whose topic would be over 200 \
           characters (e.g. 67 slashes) is `BAD_FORMAT`, though beanstalkd takes any name \
           of up to 200 bytes.",
    why: "Tubes are topics, so that the HTTP API, the CLI and the dashboard see the same \
          queues; topic names are limited to 200 characters of `[A-Za-z0-9_.:-]`.",
};

/// Limits on times.
pub static TIME_LIMITS: Difference = Difference {
    name: "delay and ttr limits",
    what: "Delays, ttr and pauses are whole seconds on the wire and milliseconds inside; a \
           delay or pause over 10 years is cut to 10 years, a ttr over 24 hours to 24 hours \
           (`stats-job` then shows 86400). beanstalkd takes any 32-bit number of seconds.",
    why: "The engines' limits (`delayq_core::limits`: MAX_DELAY, MAX_TTR), the same for \
          every way in.",
};

/// How many tubes a reserve waits on.
pub static RESERVE_TOPICS: Difference = Difference {
    name: "reserve on at most 64 tubes",
    what: "A `reserve` takes jobs from the first 64 tubes watched only; a job in a 65th \
           watched tube is not reserved (beanstalkd: any watched tube).",
    why: "One engine reserve names at most 64 topics (`delayq_core::limits::\
          MAX_RESERVE_TOPICS`): a waiting reserve is one blocking call on every engine.",
};

/// A delete that races a reserve.
pub static DELETE_RACE: Difference = Difference {
    name: "delete racing a reserve",
    what: "A `delete` of a ready job that another connection reserves at that moment may \
           win (a check, then a delete); the holder's later `delete` answers `NOT_FOUND`. \
           beanstalkd refuses the delete of a job another connection holds. Not shown by a \
           session: it needs the two commands to cross.",
    why: "The engines' delete takes a job in any state; the server checks the state first, \
          without a lock shared by every process.",
};

/// Urgent jobs are counted among the first ready ones.
pub static URGENT_COUNT: Difference = Difference {
    name: "urgent count",
    what: "`current-jobs-urgent` (ready jobs of priority below 1024) is counted among the \
           first 1,000 ready jobs of each tube, and `stats` adds up at most 1,000 tubes.",
    why: "The engines count jobs per state, not per priority band: the urgent ones are \
          counted by listing the ready queue, which is bounded to keep `stats` cheap.",
};

/// The order in which waiting connections get jobs.
pub static WAITER_ORDER: Difference = Difference {
    name: "order of waiting reserves",
    what: "The connections that wait on one tube get its jobs in the order they began to \
           wait, the longest waiting first. beanstalkd takes its waiting connections from a \
           set in turn and fills each gap with the last one, so beyond the second its order \
           follows no rule: four waiters get four jobs as the first, second, fourth and \
           third. Reserves on other servers sharing the engine, and reserves over several \
           tubes, are not in that line.",
    why: "First come, first served is what beanstalkd's first two waiters see and what a \
          pool of workers expects; the rest of beanstalkd's order is how it stores the set.",
};

/// Every deliberate difference, in the order docs/beanstalkd.md lists them.
pub static DIFFERENCES: [&Difference; 12] = [
    &JOB_IDS,
    &TUBE_TOPIC_LENGTH,
    &TIME_LIMITS,
    &READY_ORDER,
    &PROCESS_COUNTERS,
    &URGENT_COUNT,
    &NO_BINLOG,
    &JOB_COUNTERS,
    &DELETE_RACE,
    &RESERVE_TOPICS,
    &WAITER_ORDER,
    &DRAIN,
];
