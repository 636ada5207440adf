//! The arguments of the lease subcommands (`ack`, `nack`, `touch`, `release`, `bury`): a
//! delivery as `delayq reserve` printed it, and each one's options.

use std::time::Duration;

use clap::Args;

use crate::args::ClientArgs;
use crate::duration::DurationParser;

/// A delivery: the job and the lease token `delayq reserve` printed for it.
#[derive(Args, Debug)]
pub struct LeaseArgs {
    /// The topic.
    pub topic: String,
    /// The job id.
    pub id: String,
    /// The lease token printed by `delayq reserve` (`token=…`, or alone with -q).
    #[arg(value_name = "LEASE_TOKEN")]
    pub lease_token: u64,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `delayq nack`.
#[derive(Args, Debug)]
pub struct NackArgs {
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// Retry after this long instead of the job's back-off, e.g. 30s.
    #[arg(long, value_parser = DurationParser)]
    pub delay: Option<Duration>,
    /// Why it failed (at most 4 KiB), kept with the job: `delayq get` and `dead list` show it.
    #[arg(long)]
    pub reason: Option<String>,
}

/// `delayq touch`.
#[derive(Args, Debug)]
pub struct TouchArgs {
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// The new lease length from now, 1s to 24h, e.g. 5m [default: the job's ttr].
    #[arg(long, value_parser = DurationParser)]
    pub ttr: Option<Duration>,
}

/// `delayq bury`.
#[derive(Args, Debug)]
pub struct BuryArgs {
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// Why (at most 4 KiB), kept with the job: `dead list` shows it.
    #[arg(long)]
    pub reason: Option<String>,
}
