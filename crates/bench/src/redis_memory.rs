//! Redis memory per pending job: `jobs` delayed jobs with `body`-byte bodies and generated
//! (UUIDv7) ids, measured as the growth of `used_memory`; beside it, in the same run, the
//! same ids and bodies in a bare ZSET + HASH (the least any sorted-set design can use).

use std::time::Duration;

use anyhow::Context;
use delayq::{Engine, JobId, NewJob, Topic};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::RedisServer;

/// Arguments of `redis-memory`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Pending jobs.
    #[arg(long, default_value_t = 100_000)]
    jobs: usize,
    /// Body size in bytes.
    #[arg(long, default_value_t = 100)]
    body: usize,
}

async fn used_memory(conn: &mut redis::aio::MultiplexedConnection) -> anyhow::Result<u64> {
    let info: String = redis::cmd("INFO").arg("memory").query_async(conn).await?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .context("INFO memory has no used_memory")
}

pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    let machine = crate::machine::describe();

    let server = RedisServer::start();
    let engine = RedisEngine::connect(RedisConfig::new(server.url())).await?;
    let mut conn = server.connection().await;
    let topic = Topic::new("bench.memory")?;
    let before = used_memory(&mut conn).await?;
    let mut ids = Vec::with_capacity(args.jobs);
    for chunk in 0..args.jobs.div_ceil(1000) {
        let n = (args.jobs - chunk * 1000).min(1000);
        let jobs: Vec<NewJob> = (0..n)
            .map(|_| {
                NewJob::new(topic.clone(), vec![b'x'; args.body])
                    .with_delay(Duration::from_secs(3600))
            })
            .collect();
        ids.extend(jobs.iter().map(|j| j.id.clone()));
        engine.push_batch(jobs).await?;
    }
    let after = used_memory(&mut conn).await?;
    let per_job = (after - before) as f64 / args.jobs as f64;
    drop(engine);
    drop(server);

    let bare = bare_layout(&ids, args.body).await?;

    println!("### Redis engine: memory per pending job\n");
    println!(
        "{} delayed jobs with {}-byte bodies and generated UUIDv7 ids (36 characters), growth of Redis `used_memory`.\n",
        args.jobs, args.body
    );
    println!("| layout | bytes per pending job |\n|---|---|");
    println!("| delayq (jobs HASH with a msgpack record + delayed ZSET) | {per_job:.0} |");
    println!("| bare ZSET + HASH of the body only (same ids, same run) | {bare:.0} |");
    println!(
        "\ndelayq / bare = {:.2}. Machine: {machine}.",
        per_job / bare
    );
    Ok(())
}

/// The floor: the same ids in a ZSET scored by a due time and the bodies in a HASH.
async fn bare_layout(ids: &[JobId], body: usize) -> anyhow::Result<f64> {
    let server = RedisServer::start();
    let mut conn = server.connection().await;
    let before = used_memory(&mut conn).await?;
    let body = vec![b'x'; body];
    for chunk in ids.chunks(1000) {
        let mut pipe = redis::pipe();
        for (i, id) in chunk.iter().enumerate() {
            pipe.cmd("HSET")
                .arg("bare:{t}:jobs")
                .arg(id.as_str())
                .arg(&body)
                .ignore();
            pipe.cmd("ZADD")
                .arg("bare:{t}:due")
                .arg(1_900_000_000_000u64 + i as u64)
                .arg(id.as_str())
                .ignore();
        }
        let _: () = pipe.query_async(&mut conn).await?;
    }
    let after = used_memory(&mut conn).await?;
    Ok((after - before) as f64 / ids.len() as f64)
}
