//! The arguments of the subcommands that look after jobs and topics without a lease:
//! `reschedule`, `list` (and `dead list`'s paging), `topics`, `purge`.

use std::time::Duration;

use clap::{ArgGroup, Args, ValueEnum};

use crate::args::ClientArgs;
use crate::duration::DurationParser;

/// `delayq reschedule`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("when").required(true).args(["delay", "at"])))]
pub struct RescheduleArgs {
    /// The topic.
    pub topic: String,
    /// The job id (delayed or ready).
    pub id: String,
    /// Due this long from now, e.g. 30s, 2h.
    #[arg(long, value_parser = DurationParser)]
    pub delay: Option<Duration>,
    /// Due at this time, RFC 3339 (e.g. 2026-12-01T09:45:00Z).
    #[arg(long)]
    pub at: Option<String>,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// A job state, as `delayq list --state` takes it.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateArg {
    /// Waiting for their due time, earliest first.
    Delayed,
    /// Due and waiting for a worker, in the order they will be handed out.
    Ready,
    /// Leased to a worker, earliest lease deadline first.
    Reserved,
    /// Out of attempts or buried, oldest death first.
    Dead,
    /// Acked and kept by the topic's retention, oldest ack first.
    Done,
}

impl StateArg {
    /// The state's name in the HTTP API.
    pub fn as_str(self) -> &'static str {
        match self {
            StateArg::Delayed => "delayed",
            StateArg::Ready => "ready",
            StateArg::Reserved => "reserved",
            StateArg::Dead => "dead",
            StateArg::Done => "done",
        }
    }
}

/// One page of a listing.
#[derive(Args, Debug)]
pub struct PageArgs {
    /// Jobs per page (1 to 1000).
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
    /// Continue after this cursor (printed at the end of the previous page).
    #[arg(long)]
    pub cursor: Option<String>,
}

/// `delayq list`.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// The topic.
    pub topic: String,
    /// The state to list.
    #[arg(long, value_enum)]
    pub state: StateArg,
    #[command(flatten)]
    pub page: PageArgs,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `delayq topics`.
#[derive(Args, Debug)]
pub struct TopicsArgs {
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `delayq purge`.
#[derive(Args, Debug)]
pub struct PurgeArgs {
    /// The topic.
    pub topic: String,
    /// Confirm: every job of the topic, in every state, is removed for good.
    #[arg(long)]
    pub yes: bool,
    #[command(flatten)]
    pub client: ClientArgs,
}
