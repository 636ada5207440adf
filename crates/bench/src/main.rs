//! `delayq-bench`: measures delayq against servers it starts itself and writes Markdown for
//! BENCHMARKS.md. Figures are measurements, never assertions.
//!
//! # Layout
//!
//! - `suite`: the side-by-side suite (`all`, and `smoke` for CI): delayq (library and
//!   HTTP, both engines, the official clients' workers in W1, and its beanstalkd port in
//!   W1, W2 and W7), ChasquiMQ, BullMQ, beanstalkd and the seeds' design, workloads W1–W9.
//! - `machine`: what ran the older single-engine benchmarks.
//! - `redis_lateness`: delayed jobs spread over a window, several reservers: how late each
//!   job is delivered, on the Redis clock.
//! - `redis_memory`: Redis `used_memory` per pending job, beside a bare ZSET + HASH layout
//!   measured in the same run.
//!
//! The driver shared with `delayq bench` is this crate's library (`delayq_bench`).

mod machine;
mod redis_lateness;
mod redis_memory;
mod suite;

use clap::{Parser, Subcommand};

/// Benchmarks of delayq. Each starts its own servers on free loopback ports.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every workload (W1–W7) for every system, side by side; rewrites BENCHMARKS.md's
    /// summary and side-by-side section and docs/bench/*.png. Run it through bench/run.sh,
    /// which installs BullMQ, beanstalkd and matplotlib first.
    All(suite::Args),
    /// The same with small sizes, writing only under target/bench/smoke: CI's check that
    /// every part of the suite still works.
    Smoke(suite::Args),
    /// Lateness (delivery minus due time, Redis clock) of jobs with delays spread over a
    /// window, delivered to several reservers of the Redis engine.
    RedisLateness(redis_lateness::Args),
    /// Redis used_memory per pending delayed job.
    RedisMemory(redis_memory::Args),
    /// Rewrites the summary, the side-by-side section and the plots from a run's
    /// results.json (no measuring; the numbers stay those of that run).
    Report(suite::ReportArgs),
    /// (internal) The delayq HTTP server, for the suite.
    #[command(hide = true)]
    ServeHttp(suite::child::ServeArgs),
    /// (internal) Idle workers, for W5.
    #[command(hide = true)]
    Idle(suite::child::IdleArgs),
    /// (internal) A consumer process, for W6.
    #[command(hide = true)]
    Consume(suite::child::ConsumeArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::All(args) => suite::run(args, false).await,
        Command::Smoke(args) => suite::run(args, true).await,
        Command::RedisLateness(args) => redis_lateness::run(args).await,
        Command::RedisMemory(args) => redis_memory::run(args).await,
        Command::Report(args) => suite::rerender(args),
        Command::ServeHttp(args) => suite::child::serve(args).await,
        Command::Idle(args) => suite::child::idle(args).await,
        Command::Consume(args) => suite::child::consume(args).await,
    }
}
