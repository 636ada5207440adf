//! The suite's own child processes (hidden subcommands of `delayq-bench`): the delayq HTTP
//! server, a process of idle workers (W5), and a consumer that can be killed (W6).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use delayq::{DeliveryMode, Job, JobError, Topic, Worker, WorkerConfig};
use delayq_server::{AppState, ServerConfig};
use serde_json::json;

use super::systems::{self, BeanstalkClient, Kind, Seeds, SeenJob};

/// `serve-http`: what `delayq serve` runs, with the default server settings.
#[derive(clap::Args, Debug)]
pub(crate) struct ServeArgs {
    /// The engine URL (`redis://…`, `sqlite:///dir`).
    #[arg(long)]
    engine: String,
    /// The address to listen on.
    #[arg(long)]
    listen: String,
}

pub(crate) async fn serve(a: ServeArgs) -> anyhow::Result<()> {
    let engine = delayq::open(&a.engine)
        .await
        .with_context(|| format!("opening {}", a.engine))?;
    let listener = tokio::net::TcpListener::bind(&a.listen).await?;
    let state = AppState::new(engine, ServerConfig::default());
    delayq_server::serve(listener, state, delayq_server::shutdown_signal()).await?;
    Ok(())
}

/// `idle`: `workers` idle workers of one system, until killed. Prints `ready` once they all
/// run.
#[derive(clap::Args, Debug)]
pub(crate) struct IdleArgs {
    /// The system (`delayq-redis`, `delayq-embedded`, `delayq-postgres`, `http-redis`,
    /// `http-embedded`, `chasquimq`, `beanstalkd`, `seeds`).
    #[arg(long)]
    system: String,
    /// Redis URL, engine URL (`sqlite://…`, `postgres://…`), server base URL or beanstalkd
    /// port.
    #[arg(long)]
    target: String,
    /// How many workers.
    #[arg(long)]
    workers: usize,
    /// The partition count of their topic (delayq on Redis).
    #[arg(long, default_value_t = 1)]
    partitions: u16,
}

pub(crate) async fn idle(a: IdleArgs) -> anyhow::Result<()> {
    let kind = Kind::from_key(&a.system).with_context(|| format!("unknown system {}", a.system))?;
    let topic = Topic::new("bench")?;
    let noop = |_: Job<Bytes>| async { Ok::<(), JobError>(()) };
    let mut tasks = tokio::task::JoinSet::new();
    match kind {
        Kind::DelayqRedis => {
            if a.partitions > 1 {
                let config = delayq::TopicConfig {
                    partitions: Some(a.partitions),
                    ..delayq::TopicConfig::default()
                };
                delayq::open(&a.target)
                    .await?
                    .set_topic_config(&topic, &config)
                    .await?;
            }
            // Each worker on its own engine (its own connections), as separate processes
            // would be; the product's default worker settings.
            for _ in 0..a.workers {
                let engine = delayq::open(&a.target).await?;
                let w =
                    Worker::with_config(engine, [topic.clone()], WorkerConfig::default(), noop)?;
                tasks.spawn(async move {
                    w.run(std::future::pending()).await;
                    anyhow::Ok(())
                });
            }
        }
        Kind::DelayqEmbedded => {
            // One process owns an embedded data directory: the workers share its engine.
            let engine = delayq::open(&a.target).await?;
            for _ in 0..a.workers {
                let w = Worker::with_config(
                    engine.clone(),
                    [topic.clone()],
                    WorkerConfig::default(),
                    noop,
                )?;
                tasks.spawn(async move {
                    w.run(std::future::pending()).await;
                    anyhow::Ok(())
                });
            }
        }
        Kind::DelayqPostgres => {
            // A service keeps one engine (one pool and one LISTEN connection) for all its
            // workers: an idle worker waits on that listener, not on a connection of its own.
            let engine: Arc<dyn delayq::Engine> = Arc::new(
                delayq_postgres::PostgresEngine::connect(delayq_postgres::PostgresConfig::new(
                    &a.target,
                ))
                .await
                .with_context(|| format!("connecting to {}", a.target))?,
            );
            for _ in 0..a.workers {
                let w = Worker::with_config(
                    engine.clone(),
                    [topic.clone()],
                    WorkerConfig::default(),
                    noop,
                )?;
                tasks.spawn(async move {
                    w.run(std::future::pending()).await;
                    anyhow::Ok(())
                });
            }
        }
        // An idle batch consumer waits with the same long-poll as a one-job consumer.
        Kind::HttpRedis | Kind::HttpEmbedded | Kind::HttpRedisBatch | Kind::HttpEmbeddedBatch => {
            let http = reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()?;
            for _ in 0..a.workers {
                let (http, base) = (http.clone(), a.target.clone());
                tasks.spawn(async move {
                    // A long-poll client waits as long as the server allows (30 s).
                    let req = json!({ "topics": ["bench"], "max": 1, "wait_ms": 30_000 });
                    loop {
                        http.post(format!("{base}/v1/reserve"))
                            .json(&req)
                            .send()
                            .await?
                            .error_for_status()?;
                    }
                });
            }
        }
        Kind::Beanstalkd | Kind::BeanstalkdBinlog => {
            let port: u16 = a.target.parse().context("beanstalkd port")?;
            for _ in 0..a.workers {
                let mut c = BeanstalkClient::connect(port).await?;
                tasks.spawn(async move {
                    c.send_reserve_blocking().await?;
                    std::future::pending::<()>().await;
                    anyhow::Ok(())
                });
            }
        }
        Kind::Seeds => {
            // Each worker is one instance of the design: its own mover and its BLPOP.
            for _ in 0..a.workers {
                let s = Seeds::connect(&a.target).await?;
                tasks.spawn(s.clone().mover());
                tasks.spawn(async move { s.idle().await });
            }
        }
        Kind::Chasquimq => {
            // Each worker is one ChasquiMQ consumer with its default settings (its own
            // connections, delayed-job promoter and repeat scheduler) and no events stream.
            let concurrency = chasquimq::ConsumerConfig::default().concurrency;
            for _ in 0..a.workers {
                let consumer = chasquimq::Consumer::<String>::new(
                    a.target.clone(),
                    systems::chasquimq::consumer_config(concurrency),
                );
                let noop = |_: chasquimq::Job<String>| async {
                    Ok::<_, chasquimq::HandlerError>(chasquimq::Bytes::new())
                };
                let never = tokio_util::sync::CancellationToken::new();
                tasks.spawn(async move {
                    consumer.run(noop, never).await?;
                    anyhow::Ok(())
                });
            }
        }
        Kind::Bullmq | Kind::PgBoss => {
            anyhow::bail!("{}'s idle workers run in node", kind.name())
        }
        Kind::ClientPython | Kind::ClientNode => {
            anyhow::bail!("{} runs in W1 only", kind.name())
        }
        Kind::DelayqBeanstalkRedis | Kind::DelayqBeanstalkEmbedded => {
            anyhow::bail!("{} runs in W1, W2 and W7 only", kind.name())
        }
    }
    println!("ready");
    std::io::stdout().flush()?;
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    Ok(())
}

/// `consume`: one consumer process of W6. Prints the id of every job it handled, one per
/// line, before acknowledging it.
#[derive(clap::Args, Debug)]
pub(crate) struct ConsumeArgs {
    /// `delayq` or `seeds`.
    #[arg(long)]
    system: String,
    /// The Redis URL.
    #[arg(long)]
    url: String,
    /// `at-least-once` or `at-most-once` (delayq).
    #[arg(long, default_value = "at-least-once")]
    mode: String,
    /// Handler slots.
    #[arg(long)]
    concurrency: usize,
}

fn report(id: &str) {
    // One write per line, so that a SIGKILL loses no id already handled.
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(format!("{id}\n").as_bytes());
    let _ = out.flush();
}

pub(crate) async fn consume(a: ConsumeArgs) -> anyhow::Result<()> {
    match a.system.as_str() {
        "delayq" => {
            let mode = match a.mode.as_str() {
                "at-least-once" => DeliveryMode::AtLeastOnce,
                "at-most-once" => DeliveryMode::AtMostOnce,
                m => anyhow::bail!("unknown mode {m}"),
            };
            let engine = delayq::open(&a.url).await?;
            let config = WorkerConfig::default()
                .with_concurrency(a.concurrency)
                .with_wait(Duration::from_secs(1))
                .with_mode(mode);
            let w =
                Worker::with_config(engine, [Topic::new("bench")?], config, |job: Job<Bytes>| {
                    report(job.id().as_str());
                    async { Ok::<(), JobError>(()) }
                })?;
            w.run(std::future::pending()).await;
            Ok(())
        }
        "seeds" => {
            let s = Seeds::connect(&a.url).await?;
            let mover = tokio::spawn(s.clone().mover());
            let seen: SeenJob = Arc::new(|member: &str, _: &[u8]| report(member));
            let r = s.consume(a.concurrency, || false, seen).await;
            mover.abort();
            r
        }
        s => anyhow::bail!("unknown system {s}"),
    }
}
