//! What delayq answers where a session expects a documented difference (normalised, as
//! `normalise.rs` writes them), and values the sessions share.

/// A job id no server has given.
pub const NO_SUCH_JOB: u64 = 4_000_000_000;

/// The normalised `stats-job` answer for a job of tube `tube`.
pub fn stats_job(id: usize, tube: &str, state: &str, pri: u32, ttr: u32) -> String {
    format!(
        "OK stats-job keys=[age buries delay file id kicks pri releases reserves state \
         time-left timeouts ttr tube] id=#{id} tube={tube} state={state} pri={pri} ttr={ttr} \
         file=0"
    )
}

/// The normalised `stats-tube` answer for `tube` with these job counts: urgent, ready,
/// reserved, delayed, buried.
pub fn stats_tube(tube: &str, [urgent, ready, reserved, delayed, buried]: [u64; 5]) -> String {
    format!(
        "OK stats-tube keys=[cmd-delete cmd-pause-tube current-jobs-buried \
         current-jobs-delayed current-jobs-ready current-jobs-reserved current-jobs-urgent \
         current-using current-waiting current-watching name pause pause-time-left \
         total-jobs] name={tube} current-jobs-urgent={urgent} current-jobs-ready={ready} \
         current-jobs-reserved={reserved} current-jobs-delayed={delayed} \
         current-jobs-buried={buried}"
    )
}

/// The normalised `stats` answer with these job counts (urgent, ready, reserved, delayed,
/// buried) and job size limit, not draining.
pub fn stats([urgent, ready, reserved, delayed, buried]: [u64; 5], max_job_size: usize) -> String {
    let keys = [
        "binlog-current-index",
        "binlog-max-size",
        "binlog-oldest-index",
        "binlog-records-migrated",
        "binlog-records-written",
        "cmd-bury",
        "cmd-delete",
        "cmd-ignore",
        "cmd-kick",
        "cmd-list-tube-used",
        "cmd-list-tubes",
        "cmd-list-tubes-watched",
        "cmd-pause-tube",
        "cmd-peek",
        "cmd-peek-buried",
        "cmd-peek-delayed",
        "cmd-peek-ready",
        "cmd-put",
        "cmd-release",
        "cmd-reserve",
        "cmd-reserve-with-timeout",
        "cmd-stats",
        "cmd-stats-job",
        "cmd-stats-tube",
        "cmd-touch",
        "cmd-use",
        "cmd-watch",
        "current-connections",
        "current-jobs-buried",
        "current-jobs-delayed",
        "current-jobs-ready",
        "current-jobs-reserved",
        "current-jobs-urgent",
        "current-producers",
        "current-tubes",
        "current-waiting",
        "current-workers",
        "draining",
        "hostname",
        "id",
        "job-timeouts",
        "max-job-size",
        "os",
        "pid",
        "platform",
        "rusage-stime",
        "rusage-utime",
        "total-connections",
        "total-jobs",
        "uptime",
        "version",
    ];
    format!(
        "OK stats keys=[{}] current-jobs-urgent={urgent} current-jobs-ready={ready} \
         current-jobs-reserved={reserved} current-jobs-delayed={delayed} \
         current-jobs-buried={buried} max-job-size={max_job_size} draining=false",
        keys.join(" ")
    )
}
