//! `delayq-bench`: measures delayq against servers it starts itself and prints Markdown
//! sections for BENCHMARKS.md. Figures are measurements, never assertions.
//!
//! # Layout
//!
//! - `machine`: what ran the benchmark (cores, CPU model, load, versions).
//! - `redis_lateness`: delayed jobs spread over a window, several reservers: how late each
//!   job is delivered, on the Redis clock.
//! - `redis_memory`: Redis `used_memory` per pending job, beside a bare ZSET + HASH layout
//!   measured in the same run.

mod machine;
mod redis_lateness;
mod redis_memory;

use clap::{Parser, Subcommand};

/// Benchmarks of delayq. Each starts its own redis-server on a free loopback port.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Lateness (delivery minus due time, Redis clock) of jobs with delays spread over a
    /// window, delivered to several reservers of the Redis engine.
    RedisLateness(redis_lateness::Args),
    /// Redis used_memory per pending delayed job.
    RedisMemory(redis_memory::Args),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::RedisLateness(args) => redis_lateness::run(args).await,
        Command::RedisMemory(args) => redis_memory::run(args).await,
    }
}
