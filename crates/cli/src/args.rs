//! The argument types that the command line (`cli`), the subcommands (`cmd/`) and the HTTP
//! client (`client`) share: the client options (where the server is, how to trust it,
//! `--json`), their copy before the subcommand, and the options of a job that `push` and
//! `schedule put` both take, with the request fields they become. It names no other module
//! of the crate but `duration` (which names none), so that `cli` can name the subcommands'
//! own clap types and they can take these from here without a circle.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use delayq_server::http::dto::OnExpireDto;

use crate::duration::DurationParser;

/// Where the server is, and how to print the answer.
///
/// Each field has the id of its copy in [`GlobalArgs`], so that clap merges the two: a value
/// typed after the subcommand wins, then one typed before it, then the environment, then the
/// default.
#[derive(Args, Debug)]
pub struct ClientArgs {
    /// The server's base URL, with its scheme (`http://` or `https://`).
    #[arg(
        long,
        env = "DELAYQ_SERVER",
        default_value = "http://127.0.0.1:7070",
        global = true
    )]
    pub server: String,
    /// Bearer token, when the server requires one.
    // The id is serve's (`--token`, its tokens): the global copy must not be a second
    // `--token` there.
    #[arg(
        id = "tokens",
        long = "token",
        value_name = "TOKEN",
        env = "DELAYQ_TOKEN",
        global = true,
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// For an `https://` server whose certificate no system authority signed (a
    /// self-signed `--tls-cert`, such as `openssl req -x509` makes): the PEM file of that
    /// certificate or of its authority.
    #[arg(long, env = "DELAYQ_CA_CERT", global = true)]
    pub ca_cert: Option<PathBuf>,
    /// Print the server's JSON answer instead of text (and errors as JSON on standard
    /// error).
    #[arg(long, global = true)]
    pub json: bool,
}

/// The client options typed before the subcommand (`delayq --json stats`), as kubectl and
/// redis-cli take them. Hidden from the help of every subcommand that does not take them:
/// the top-level help says they may go there, and each client subcommand shows its own.
#[derive(Args, Debug)]
pub struct GlobalArgs {
    /// The server's base URL (as after the subcommand).
    #[arg(long, global = true, hide = true)]
    pub server: Option<String>,
    /// Bearer token (as after the subcommand; before `serve`, one of its tokens).
    #[arg(
        id = "tokens",
        long = "token",
        value_name = "TOKEN",
        global = true,
        hide = true
    )]
    pub token: Option<String>,
    /// The certificate to trust (as after the subcommand).
    #[arg(long, global = true, hide = true)]
    pub ca_cert: Option<PathBuf>,
    /// JSON output (as after the subcommand).
    #[arg(long, global = true, hide = true)]
    pub json: bool,
}

/// How a job is delivered: the options `push` and `schedule put` share, the first run of
/// them (the second is [`ExpiryOptions`]; each command has options of its own between the
/// two, which is why they are two). The help is a push's; `schedule put` words it for the
/// jobs it pushes (`mut_args` on its clap type).
#[derive(Args, Debug)]
pub struct JobOptions {
    /// Priority among due jobs; lower runs first.
    #[arg(long)]
    pub priority: Option<u32>,
    /// Lease length of each delivery, e.g. 30s.
    #[arg(long, value_parser = DurationParser)]
    pub ttr: Option<Duration>,
    /// Deliveries before the job goes dead.
    #[arg(long)]
    pub max_attempts: Option<u32>,
}

/// When a job expires: the second run of the options `push` and `schedule put` share.
#[derive(Args, Debug)]
pub struct ExpiryOptions {
    /// Not delivered after this RFC 3339 time (after its due time): a job still waiting
    /// then goes dead with the reason "expired", or is dropped (--on-expire).
    #[arg(long, conflicts_with = "max_lateness")]
    pub expires_at: Option<String>,
    /// Not delivered more than this long after its due time, e.g. 5m.
    #[arg(long, value_parser = DurationParser)]
    pub max_lateness: Option<Duration>,
    /// With --expires-at or --max-lateness: what an expired job does, dead (default) or drop.
    #[arg(long, value_enum)]
    pub on_expire: Option<OnExpireArg>,
}

/// `--on-expire`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnExpireArg {
    /// Dead, with the reason "expired".
    Dead,
    /// Deleted.
    Drop,
}

/// The job fields of a push's request (`PushRequest`) and of a schedule's
/// (`ScheduleRequest`), as the server's types have them: what [`job_fields`] makes of the
/// shared options.
#[derive(Debug, Default, PartialEq)]
pub struct JobFields {
    /// `priority`.
    pub priority: Option<u32>,
    /// `ttr_ms`.
    pub ttr_ms: Option<u64>,
    /// `max_attempts`.
    pub max_attempts: Option<u32>,
    /// `expires_at`.
    pub expires_at: Option<String>,
    /// `max_lateness_ms`.
    pub max_lateness_ms: Option<u64>,
    /// `on_expire`.
    pub on_expire: Option<OnExpireDto>,
}

/// The request fields of the options a push and a schedule share.
pub fn job_fields(job: &JobOptions, expiry: &ExpiryOptions) -> JobFields {
    JobFields {
        priority: job.priority,
        ttr_ms: job.ttr.map(ms),
        max_attempts: job.max_attempts,
        expires_at: expiry.expires_at.clone(),
        max_lateness_ms: expiry.max_lateness.map(ms),
        on_expire: expiry.on_expire.map(|o| match o {
            OnExpireArg::Dead => OnExpireDto::Dead,
            OnExpireArg::Drop => OnExpireDto::Drop,
        }),
    }
}

/// A duration in whole milliseconds, as the requests carry them.
pub fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
