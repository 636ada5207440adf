//! `delayq serve`: binds the listening address, opens the engine, serves the HTTP API until SIGINT or SIGTERM, then shuts
//! down gracefully (open long-polls answer empty, in-flight requests finish, the engine closes).

use anyhow::Context;
use delayq::Limits;
use delayq::{OpenOptions, Synchronous};
use delayq_server::{AppState, ServerConfig};
use tracing_subscriber::EnvFilter;

use crate::cli::{ServeArgs, SyncArg};
use crate::settings::{FileConfig, Settings, resolve};

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let file = match &args.config {
        Some(path) => FileConfig::read(path)?,
        None => FileConfig::default(),
    };
    let s = resolve(args, file)?;
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_new(&s.log)
                .with_context(|| format!("invalid log filter {:?}", s.log))?,
        )
        .with_target(false)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();

    let server_config = ServerConfig {
        tokens: s.tokens.clone(),
        max_request_bytes: s.max_request_bytes,
        max_wait: s.max_wait,
        request_timeout: s.request_timeout,
        concurrency: s.concurrency,
        max_long_polls: s.max_long_polls,
    };
    server_config
        .validate()
        .map_err(|e| anyhow::anyhow!("invalid settings: {e}"))?;

    let (url, described) = engine_url(&s);
    let options = OpenOptions {
        limits: Limits {
            max_body: s.max_body,
        },
        redis_prefix: s.redis_prefix.clone(),
        synchronous: match s.sync {
            SyncArg::Normal => Synchronous::Normal,
            SyncArg::Full => Synchronous::Full,
        },
    };
    // Bind before opening the engine: a port in use must not leave a data directory created
    // or migrated behind.
    let listener = tokio::net::TcpListener::bind(&s.listen)
        .await
        .with_context(|| format!("cannot listen on {}", s.listen))?;
    let addr = listener.local_addr().context("listening address")?;
    let engine = delayq::open_with(&url, &options)
        .await
        .with_context(|| format!("cannot open the engine ({described})"))?;
    tracing::info!(
        listen = %addr,
        engine = %described,
        auth = if s.tokens.is_empty() { "off" } else { "bearer" },
        "delayq serving on http://{addr} (API under /v1, document at /v1/openapi.json)"
    );
    let state = AppState::new(engine, server_config);
    delayq_server::serve(listener, state, async {
        delayq_server::shutdown_signal().await;
        tracing::info!("shutting down: ending long-polls and finishing in-flight requests");
    })
    .await
    .context("serving")?;
    tracing::info!("stopped");
    Ok(())
}

/// The engine URL and how to describe it in the log (without a password).
fn engine_url(s: &Settings) -> (String, String) {
    match &s.redis_url {
        Some(url) => {
            let shown = match (url.find("://"), url.rfind('@')) {
                (Some(scheme), Some(at)) if at > scheme => {
                    format!("{}://***@{}", &url[..scheme], &url[at + 1..])
                }
                _ => url.clone(),
            };
            (url.clone(), format!("redis at {shown}"))
        }
        None => (
            format!("sqlite://{}", s.data_dir.display()),
            format!(
                "embedded, data in {} (synchronous={:?})",
                s.data_dir.display(),
                s.sync
            )
            .to_lowercase(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::resolve;

    #[test]
    fn passwords_stay_out_of_the_log() {
        let args = ServeArgs {
            redis_url: Some("redis://app:s3cret@db:6379/0".into()),
            ..ServeArgs::default()
        };
        let s = resolve(args, FileConfig::default()).expect("resolves");
        let (url, shown) = engine_url(&s);
        assert_eq!(url, "redis://app:s3cret@db:6379/0");
        assert!(!shown.contains("s3cret"), "{shown}");
        let s = resolve(ServeArgs::default(), FileConfig::default()).expect("resolves");
        assert_eq!(engine_url(&s).0, "sqlite://./delayq-data");
    }
}
