//! The command line, as clap types: what the user typed, before it meets the environment.
//! The doc comments are the help text. The client options and the job options of `push`,
//! which the subcommands' own clap types (`cmd/`) take too, are `args`'s.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::args::{ClientArgs, ExpiryOptions, GlobalArgs, JobOptions};
use crate::duration::DurationParser;

mod docs;
mod jobs;
mod lease;

pub use docs::{CompletionsArgs, ManArgs};
pub use jobs::{ListArgs, PageArgs, PurgeArgs, RescheduleArgs, StateArg, TopicsArgs};
pub use lease::{BuryArgs, LeaseArgs, NackArgs, TouchArgs};

/// A distributed delay queue: jobs handed to workers when they are due, never lost.
///
/// `delayq serve` runs the server; the other commands talk to a running server over HTTP.
///
/// Durations take a unit everywhere (flags, DELAYQ_* variables, the config file): 500ms, 30s,
/// 5m, 1h30m; a bare number is refused.
///
/// The client options --server, --token, --ca-cert and --json go after the subcommand or
/// before it (`delayq --json stats`). With --json an error is JSON too, on standard error:
/// {"error": {"code", "message", "field"?, "index"?}}.
///
/// Exit codes: 0 success, 1 error (a TLS failure too, naming its cause), 2 bad usage, 3 not
/// found (a job, a schedule, or the topic of a purge or resume), 4 conflict (lease lost, wrong state, partitions in use; a push of an id that
/// exists is idempotent and exits 0), 5 server unreachable or unavailable (retry), 6
/// `reserve` got no job.
#[derive(Parser, Debug)]
#[command(
    name = "delayq",
    version = delayq_server::build::LONG_VERSION,
    propagate_version = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the server: the HTTP API under /v1, /metrics, /healthz and /readyz.
    ///
    /// The engine is the embedded one in ./delayq-data unless --redis (or DELAYQ_REDIS_URL)
    /// names a Redis server. Settings come from flags, then DELAYQ_* environment variables,
    /// then the TOML file given with --config, then the defaults shown here.
    Serve(ServeArgs),
    /// Push a job.
    Push(PushArgs),
    /// Show a job.
    Get(JobArgs),
    /// List the jobs of a topic in one state, page by page.
    List(ListArgs),
    /// Move a delayed or ready job to a new due time, keeping its id and attempts.
    Reschedule(RescheduleArgs),
    /// Delete (cancel) a job in any state.
    Delete(JobArgs),
    /// Reserve due jobs (waiting up to --wait), printing each with its lease token; exit 6
    /// when no job came.
    Reserve(ReserveArgs),
    /// Acknowledge a delivery: the job is done and removed.
    Ack(LeaseArgs),
    /// Report a failed delivery: the job is retried after --delay or its back-off, or goes
    /// dead when it has used all its attempts.
    Nack(NackArgs),
    /// Extend a delivery's lease, for a job that needs longer than its ttr.
    Touch(TouchArgs),
    /// Give a delivery back without counting the attempt: the job is ready again at once.
    Release(LeaseArgs),
    /// Send a delivered job to dead at once (it will not be retried; `kick` brings it back).
    Bury(BuryArgs),
    /// Show counts per state and the oldest overdue job, for one topic or all.
    Stats(StatsArgs),
    /// Check that the server is ready (its /readyz): exit 0 when it is, else non-zero with
    /// the reason (5 when it is not ready or cannot be reached). For container health checks.
    Health(HealthArgs),
    /// List the topics, one per line.
    Topics(TopicsArgs),
    /// Work with dead jobs.
    Dead(DeadArgs),
    /// Make dead jobs ready again: one by id, or all of a topic.
    Kick(KickArgs),
    /// Send a delayed or ready job to dead now, without a lease (it will not run; `kick`
    /// brings it back). A delivered job is buried by its holder with `bury`.
    Archive(ArchiveArgs),
    /// Remove every job of a topic, in every state (asks for --yes). A topic with no jobs,
    /// no settings and no pause is not found (exit 3): check the name with `delayq topics`.
    Purge(PurgeArgs),
    /// Stop handing out a topic's jobs, for every server, until `delayq resume` (or
    /// --for / --until); its jobs still fall due. A topic with no jobs yet may be paused
    /// ahead of its first push: a note on standard error says so.
    Pause(crate::cmd::pause::PauseArgs),
    /// Hand out a paused topic's jobs again. A topic with no jobs, no settings and no pause
    /// is not found (exit 3): check the name with `delayq topics`.
    Resume(crate::cmd::pause::ResumeArgs),
    /// Show or change a topic's settings: the ttr, attempts and back-off of jobs pushed
    /// without their own, its body limit, and how many acked jobs it keeps, for how long.
    Topic(crate::cmd::topic::TopicArgs),
    /// Recurring jobs: create, show, list or delete a schedule (a cron expression in a time
    /// zone, run by every server; each fire pushes one job).
    Schedule(crate::cmd::schedule::ScheduleArgs),
    /// Push delivery: send a topic's due jobs to a webhook, a RabbitMQ exchange or NATS
    /// JetStream from every server, acked once the destination confirmed; show or remove
    /// that destination.
    Destination(crate::cmd::destination::DestinationArgs),
    /// Measure an engine directly (your Redis, or an embedded data directory): push a
    /// backlog and drain it, then deliver delayed jobs and report how late they came.
    ///
    /// Talks to the engine, not to a server. On Redis it works in a topic of its own
    /// (bench.<time>) and purges it at the end; nothing else is read or written, and only
    /// the topic's lease-token counter and purge count remain. Without --engine it measures a
    /// temporary embedded engine. Sizes are bounded (at most 1,000,000 jobs per phase).
    Bench(BenchArgs),
    /// Print a shell completion script. For example:
    /// `delayq completions bash > ~/.local/share/bash-completion/completions/delayq`,
    /// `delayq completions zsh > "${fpath[1]}/_delayq"`,
    /// `delayq completions fish > ~/.config/fish/completions/delayq.fish`.
    Completions(CompletionsArgs),
    /// Print the manual page delayq(1) in roff (`delayq man | man -l -`), or write it and one
    /// page per subcommand into --dir.
    Man(ManArgs),
}

/// Options of `delayq serve`. Every option is optional here so that the environment and the
/// config file can fill what the flags leave out.
#[derive(Args, Debug, Default)]
pub struct ServeArgs {
    /// TOML file with any of these keys: listen, data_dir, redis_url, redis_prefix,
    /// postgres_url, connect_timeout, redis_wait_replicas, redis_wait_timeout, sync,
    /// tls_cert, tls_key, metrics_public (true or false),
    /// tokens (a list), max_body, max_request_bytes, max_wait and request_timeout (e.g.
    /// "30s"), concurrency, max_long_polls, ui (on, read-only or off), beanstalk,
    /// beanstalk_max_job_size, log, log_format. Example: `listen = "0.0.0.0:7070"`.
    #[arg(long, env = "DELAYQ_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:7070].
    #[arg(long, env = "DELAYQ_LISTEN")]
    pub listen: Option<String>,
    /// Data directory of the embedded engine [default: ./delayq-data].
    #[arg(long, env = "DELAYQ_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Use this Redis instead of the embedded engine:
    /// `redis://[user:password@]host[:port][/db]`, or `rediss://...` for TLS; a Redis Cluster
    /// as `redis+cluster://[user:password@]host:port,host:port,...` (`rediss+cluster://` for TLS).
    #[arg(long = "redis", env = "DELAYQ_REDIS_URL", hide_env_values = true)]
    pub redis_url: Option<String>,
    /// Redis key prefix [default: delayq].
    #[arg(long, env = "DELAYQ_REDIS_PREFIX")]
    pub redis_prefix: Option<String>,
    /// Use this PostgreSQL instead of the embedded engine:
    /// `postgres://[user[:password]@]host[:port]/database[?sslmode=...&sslrootcert=...]`.
    /// `sslmode` as libpq: `prefer` (the default) and `require` encrypt without checking the
    /// certificate, `verify-ca` checks who signed it, `verify-full` also the host name;
    /// `sslrootcert` is a PEM file of authorities to trust besides the system's. The engine
    /// keeps its tables in the schema `delayq`, made or upgraded at start.
    #[arg(
        long = "postgres",
        env = "DELAYQ_POSTGRES_URL",
        hide_env_values = true,
        conflicts_with = "redis_url"
    )]
    pub postgres_url: Option<String>,
    /// How long to wait at startup for Redis or PostgreSQL to answer, retrying with
    /// back-off and logging that it waits; 0s fails at the first refusal [default: 30s].
    #[arg(
        long,
        visible_alias = "redis-connect-timeout",
        env = "DELAYQ_CONNECT_TIMEOUT",
        value_parser = DurationParser
    )]
    pub connect_timeout: Option<Duration>,
    /// Redis: how many replicas must acknowledge every state-changing call (push, reserve,
    /// ack ...) before it answers; Redis `WAIT` follows each such call on the same node.
    /// Fewer in time answer 503 `not_replicated` (the write may not survive a failover; a
    /// retried push is idempotent). 0 waits for none [default: 0].
    #[arg(long, env = "DELAYQ_REDIS_WAIT_REPLICAS")]
    pub redis_wait_replicas: Option<usize>,
    /// Redis: how long a call waits for --redis-wait-replicas acknowledgements
    /// [default: 1s].
    #[arg(long, env = "DELAYQ_REDIS_WAIT_TIMEOUT", value_parser = DurationParser)]
    pub redis_wait_timeout: Option<Duration>,
    /// Embedded engine durability: `normal` survives a crash of the process, `full` also a
    /// power loss [default: normal].
    #[arg(long, env = "DELAYQ_SYNC")]
    pub sync: Option<SyncArg>,
    /// Bearer token clients must send, at least 16 characters (repeat for several;
    /// comma-separated in DELAYQ_TOKENS). None: no authentication. /healthz, /readyz and
    /// /v1/openapi.json stay open; /metrics too with --metrics-public.
    #[arg(
        long = "token",
        env = "DELAYQ_TOKENS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub tokens: Option<Vec<String>>,
    /// Leave /metrics open when tokens are set (for Prometheus scrapers without a token).
    #[arg(long, env = "DELAYQ_METRICS_PUBLIC")]
    pub metrics_public: bool,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key. Reloaded, with the
    /// key, on SIGHUP.
    #[arg(long, env = "DELAYQ_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, env = "DELAYQ_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Largest job body in bytes [default: 262144].
    #[arg(long, env = "DELAYQ_MAX_BODY")]
    pub max_body: Option<usize>,
    /// Largest HTTP request body in bytes [default: 1048576, or more: enough to carry a body
    /// of --max-body in base64].
    #[arg(long, env = "DELAYQ_MAX_REQUEST_BYTES")]
    pub max_request_bytes: Option<usize>,
    /// Longest reserve long-poll, e.g. 30s [default: 30s].
    #[arg(long, env = "DELAYQ_MAX_WAIT", value_parser = DurationParser)]
    pub max_wait: Option<Duration>,
    /// Longest request, longer than --max-wait, e.g. 60s [default: 60s].
    #[arg(long, env = "DELAYQ_REQUEST_TIMEOUT", value_parser = DurationParser)]
    pub request_timeout: Option<Duration>,
    /// Most requests the whole server handles at once, reserves and /healthz aside; more get
    /// 503 overloaded [default: 1024].
    #[arg(long, env = "DELAYQ_CONCURRENCY")]
    pub concurrency: Option<usize>,
    /// Most reserves (long-polls) open at once, counted apart from --concurrency so that
    /// waiting workers never starve pushes and acks; more get 503 overloaded [default: 1024].
    #[arg(long, env = "DELAYQ_MAX_LONG_POLLS")]
    pub max_long_polls: Option<usize>,
    /// The web dashboard at /ui: on, read-only (it shows everything and changes nothing),
    /// or off [default: on].
    #[arg(long, env = "DELAYQ_UI")]
    pub ui: Option<UiArg>,
    /// Also speak beanstalkd's text protocol on this address, e.g. 127.0.0.1:11300, or on a
    /// Unix domain socket, unix:/run/delayq/beanstalk.sock (as beanstalkd's -l unix:), so
    /// that beanstalkd clients work unchanged. It has no authentication (as beanstalkd): keep
    /// it on loopback, behind a firewall, or on a socket only its users may write [default:
    /// off].
    #[arg(long, env = "DELAYQ_BEANSTALK")]
    pub beanstalk: Option<String>,
    /// The largest job a beanstalkd `put` may carry (its `max-job-size`), at most --max-body
    /// [default: 65535, or --max-body when smaller].
    #[arg(long, env = "DELAYQ_BEANSTALK_MAX_JOB_SIZE")]
    pub beanstalk_max_job_size: Option<usize>,
    /// Log filter, e.g. info or debug (debug logs one line per request) [default: info].
    #[arg(long, env = "DELAYQ_LOG")]
    pub log: Option<String>,
    /// Log as text lines or as one JSON object per line [default: text].
    #[arg(long, env = "DELAYQ_LOG_FORMAT")]
    pub log_format: Option<LogFormat>,
}

/// `text` or `json`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (for log collectors).
    Json,
}

/// `keep`, `replace` or `debounce`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnConflictArg {
    /// Leave the existing job as it is.
    Keep,
    /// Replace a waiting job's body, due time and options.
    Replace,
    /// Replace it, its due time counted from this push, within --max-wait.
    Debounce,
}

/// `on`, `read-only` or `off`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UiArg {
    /// Served, with its actions.
    On,
    /// Served, changing nothing.
    ReadOnly,
    /// Not served.
    Off,
}

/// `normal` or `full`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncArg {
    /// Survives a crash of the process.
    Normal,
    /// Also survives a power loss (an fsync per commit).
    Full,
}

/// `delayq push`.
#[derive(Args, Debug)]
pub struct PushArgs {
    /// The topic.
    pub topic: String,
    /// The body (text). '-' reads it from standard input as a line of text: one trailing
    /// newline is dropped (`echo body | delayq push t -` pushes "body"); --file keeps every
    /// byte.
    pub body: Option<String>,
    /// Read the body from this file ('-' for standard input), byte for byte (a trailing
    /// newline is kept); sent as base64 when it is not UTF-8.
    #[arg(long, conflicts_with = "body")]
    pub file: Option<PathBuf>,
    /// The job id (idempotency key); generated when absent.
    #[arg(long)]
    pub id: Option<String>,
    /// Delay before the job is due, e.g. 500ms, 2s, 30m, 1h30m.
    #[arg(long, value_parser = DurationParser, conflicts_with = "at")]
    pub delay: Option<Duration>,
    /// Absolute due time, RFC 3339 (e.g. 2026-12-01T09:45:00Z).
    #[arg(long)]
    pub at: Option<String>,
    #[command(flatten)]
    pub job: JobOptions,
    /// When a live job with this id exists: keep it (default), replace a waiting one, or
    /// debounce (replace it, due after this push's delay, within --max-wait of its first
    /// push). A reserved or dead job is never touched.
    #[arg(long, value_enum)]
    pub on_conflict: Option<OnConflictArg>,
    /// With --on-conflict debounce: the latest the job may run after its first push, e.g. 1m.
    #[arg(long, value_parser = DurationParser)]
    pub max_wait: Option<Duration>,
    #[command(flatten)]
    pub expiry: ExpiryOptions,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// A job by topic and id.
#[derive(Args, Debug)]
pub struct JobArgs {
    /// The topic.
    pub topic: String,
    /// The job id.
    pub id: String,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `delayq reserve`.
#[derive(Args, Debug)]
pub struct ReserveArgs {
    /// Topics to take from.
    #[arg(required = true)]
    pub topics: Vec<String>,
    /// The most jobs to take.
    #[arg(long, default_value_t = 1)]
    pub max: usize,
    /// How long to wait for a first job, e.g. 30s.
    #[arg(long, value_parser = DurationParser, default_value = "0s")]
    pub wait: Duration,
    /// At most once: remove jobs as they are handed out, with no lease token, nothing to ack
    /// and no retry; a job whose worker crashes while handling it is lost.
    #[arg(long)]
    pub at_most_once: bool,
    /// Print only each job's lease token, one per line, for scripts:
    /// `token=$(delayq reserve orders --wait 10s -q)`. When no job came it prints nothing
    /// and, as without -q, exits 6, so that a `set -e` script stops there.
    #[arg(short, long, conflicts_with_all = ["at_most_once", "json"])]
    pub quiet: bool,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `delayq stats`.
#[derive(Args, Debug)]
pub struct StatsArgs {
    /// One topic; all topics when absent.
    pub topic: Option<String>,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `delayq health`.
#[derive(Args, Debug)]
pub struct HealthArgs {
    /// How long to wait for the answer, e.g. 5s.
    #[arg(long, value_parser = DurationParser, default_value = "5s")]
    pub timeout: Duration,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `delayq dead`.
#[derive(Args, Debug)]
pub struct DeadArgs {
    #[command(subcommand)]
    pub command: DeadCommand,
}

/// Subcommands of `delayq dead`.
#[derive(Subcommand, Debug)]
pub enum DeadCommand {
    /// List the dead jobs of a topic, oldest death first.
    List(DeadListArgs),
}

/// `delayq dead list`.
#[derive(Args, Debug)]
pub struct DeadListArgs {
    /// The topic.
    pub topic: String,
    #[command(flatten)]
    pub page: PageArgs,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `delayq kick`.
#[derive(Args, Debug)]
pub struct KickArgs {
    /// The topic.
    pub topic: String,
    /// A dead job's id; every dead job of the topic when absent.
    pub id: Option<String>,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `delayq archive`.
#[derive(Args, Debug)]
pub struct ArchiveArgs {
    /// The topic.
    pub topic: String,
    /// The id of a delayed or ready job.
    pub id: String,
    /// Why (at most 4 KiB), kept with the job: `dead list` shows it.
    #[arg(long)]
    pub reason: Option<String>,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `delayq bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The engine: `redis://host:6379`, `rediss://…`, `redis+cluster://…`,
    /// `postgres://user:password@host/db`, `sqlite:///path/to/dir`; default: a temporary
    /// embedded engine, deleted at the end. A password never shows in the output.
    #[arg(long)]
    pub engine: Option<String>,
    /// Jobs pushed as a ready backlog, then drained.
    #[arg(long, default_value_t = 10_000)]
    pub jobs: usize,
    /// Delayed jobs pushed while the workers run (0: skip that phase).
    #[arg(long, default_value_t = 10_000)]
    pub delayed: usize,
    /// Delays are uniform between 0 and this, e.g. 2s.
    #[arg(long, value_parser = DurationParser, default_value = "2s")]
    pub spread: Duration,
    /// Worker slots (concurrency).
    #[arg(long, default_value_t = 50)]
    pub consumers: usize,
    /// Body size in bytes (at least 16: the body carries its due time).
    #[arg(long, default_value_t = 100)]
    pub body: usize,
    /// Give up a phase after this long, e.g. 60s.
    #[arg(long, value_parser = DurationParser, default_value = "60s")]
    pub timeout: Duration,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    /// The client options before the subcommand reach its arguments; after it, they win.
    #[test]
    fn client_options_before_the_subcommand_reach_it() {
        let stats = |args: &[&str]| {
            let cli = Cli::try_parse_from(args).expect("parses");
            let Command::Stats(s) = cli.command else {
                panic!("not stats: {cli:?}");
            };
            s.client
        };
        let c = stats(&["delayq", "--json", "--server", "http://a:1", "stats"]);
        assert!(c.json);
        assert_eq!(c.server, "http://a:1");
        let c = stats(&[
            "delayq",
            "--server",
            "http://a:1",
            "--token",
            "t",
            "stats",
            "--server",
            "http://b:2",
        ]);
        assert_eq!(c.server, "http://b:2", "after the subcommand wins");
        assert_eq!(c.token.as_deref(), Some("t"));
        assert!(!c.json);
        // Before `serve`, --token is one of its tokens, as after it.
        let cli = Cli::try_parse_from(["delayq", "--token", "a-token-of-16-chars", "serve"])
            .expect("parses");
        let Command::Serve(s) = cli.command else {
            panic!("not serve: {cli:?}");
        };
        assert_eq!(s.tokens, Some(vec!["a-token-of-16-chars".to_string()]));
    }

    #[test]
    fn bench_has_small_bounded_defaults() {
        let cli = Cli::try_parse_from(["delayq", "bench"]).expect("parses");
        let Command::Bench(b) = cli.command else {
            panic!("not a bench: {cli:?}");
        };
        assert_eq!((b.jobs, b.delayed, b.consumers), (10_000, 10_000, 50));
        assert_eq!(b.spread, Duration::from_secs(2));
        assert!(b.engine.is_none());
        let cli = Cli::try_parse_from([
            "delayq",
            "bench",
            "--engine",
            "redis://127.0.0.1:6380",
            "--spread",
            "500ms",
        ])
        .expect("parses");
        let Command::Bench(b) = cli.command else {
            panic!("not a bench: {cli:?}");
        };
        assert_eq!(b.engine.as_deref(), Some("redis://127.0.0.1:6380"));
        assert_eq!(b.spread, Duration::from_millis(500));
    }

    #[test]
    fn push_parses_delay_and_options() {
        let cli = Cli::try_parse_from([
            "delayq",
            "push",
            "orders",
            "cancel 42",
            "--delay",
            "2s",
            "--id",
            "o-42",
            "--json",
        ])
        .expect("parses");
        let Command::Push(p) = cli.command else {
            panic!("not a push: {cli:?}");
        };
        assert_eq!(p.delay, Some(Duration::from_secs(2)));
        assert_eq!(p.id.as_deref(), Some("o-42"));
        assert!(p.client.json);
        assert!(
            Cli::try_parse_from([
                "delayq",
                "push",
                "t",
                "b",
                "--delay",
                "2s",
                "--at",
                "2030-01-01T00:00:00Z"
            ])
            .is_err()
        );
    }
}
