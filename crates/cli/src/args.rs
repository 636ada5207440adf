//! The argument types that the command line (`cli`), the subcommands (`cmd/`) and the HTTP
//! client (`client`) share: the client options (where the server is, how to trust it,
//! `--json`), their copy before the subcommand, `--on-expire`, and durations as requests carry
//! them. It names no other module
//! of the crate, so that `cli` can name the subcommands' own clap types and they can take
//! these from here without a circle.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

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

/// `--on-expire`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnExpireArg {
    /// Dead, with the reason "expired".
    Dead,
    /// Deleted.
    Drop,
}

/// A duration in whole milliseconds, as the requests carry them.
pub fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
