//! `delayq serve`: reads the TLS certificate, binds the listening addresses (HTTP, and
//! beanstalkd's protocol when asked: a TCP address, or `unix:<path>` for a Unix domain
//! socket), opens the engine (waiting for Redis or PostgreSQL),
//! serves the HTTP(S) API and the beanstalkd protocol until SIGINT or SIGTERM (reloading
//! the certificate on SIGHUP), then shuts down gracefully (open long-polls answer empty,
//! in-flight requests finish, the engine closes).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use delayq::{Limits, OpenOptions, Store, Synchronous};
use delayq_server::{AppState, ServerConfig, Tls};
use tracing_subscriber::EnvFilter;

use crate::cli::{LogFormat, ServeArgs, SyncArg, UiArg};
use crate::settings::{FileConfig, Settings, resolve};

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let file = match &args.config {
        Some(path) => FileConfig::read(path)?,
        None => FileConfig::default(),
    };
    let s = resolve(args, file)?;
    init_log(&s)?;
    // Before anything slow (the engine's open, migrations, the port): from here on a
    // SIGUSR1 no longer ends the process.
    ignore_sigusr1();

    let server_config = ServerConfig {
        tokens: s.tokens.clone(),
        metrics_public: s.metrics_public,
        max_request_bytes: s.max_request_bytes,
        max_wait: s.max_wait,
        request_timeout: s.request_timeout,
        concurrency: s.concurrency,
        max_long_polls: s.max_long_polls,
        ui: match s.ui {
            UiArg::On => delayq_server::UiMode::On,
            UiArg::ReadOnly => delayq_server::UiMode::ReadOnly,
            UiArg::Off => delayq_server::UiMode::Off,
        },
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
        redis_wait_replicas: s.redis_wait_replicas,
        redis_wait_timeout: s.redis_wait_timeout,
        synchronous: match s.sync {
            SyncArg::Normal => Synchronous::Normal,
            SyncArg::Full => Synchronous::Full,
        },
    };
    // Read the certificate, then bind, then open the engine: a bad certificate or a port in
    // use must not leave a data directory created or migrated behind.
    let tls = match &s.tls {
        Some((cert, key)) => Some(
            Tls::load(cert, key)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?,
        ),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(&s.listen)
        .await
        .map_err(|e| listen_error("--listen", &s.listen, &e))?;
    let addr = listener.local_addr().context("listening address")?;
    if let Some(warning) = clear_token_warning(addr, !s.tokens.is_empty(), tls.is_some()) {
        tracing::warn!("{warning}");
    }
    let beanstalk = match &s.beanstalk {
        Some(at) => Some(bind_beanstalk(at).await?),
        None => None,
    };
    let engine = open_engine(&s, &url, &described, &options).await?;
    for (topic, destination) in &s.destinations {
        // As the API puts one: the topic's unset retry settings follow the receiver schedule.
        delayq_push::put_destination(engine.as_ref(), topic, destination)
            .await
            .with_context(|| format!("putting the config file's destination of {topic}"))?;
        tracing::info!(%topic, kind = destination.kind(), "push destination from the config file");
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(
        listen = %addr,
        engine = %described,
        auth = if s.tokens.is_empty() { "off" } else { "bearer" },
        "delayq serving on {scheme}://{addr} (API under /v1, document at /v1/openapi.json)"
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let beanstalk = beanstalk.map(|listener| {
        let options = delayq_beanstalk::Options {
            max_job_size: s.beanstalk_max_job_size,
            ..delayq_beanstalk::Options::default()
        };
        let mut stop = stop_rx.clone();
        let stop = async move {
            let _ = stop.wait_for(|stopped| *stopped).await;
        };
        match listener {
            BeanstalkListener::Tcp(listener, addr) => {
                tracing::info!(listen = %addr, "beanstalkd protocol on {addr}");
                tokio::spawn(delayq_beanstalk::serve(
                    listener,
                    engine.clone(),
                    options,
                    stop,
                ))
            }
            #[cfg(unix)]
            BeanstalkListener::Unix(socket) => {
                let at = format!("unix:{}", socket.path().display());
                tracing::info!(listen = %at, "beanstalkd protocol on {at}");
                tokio::spawn(delayq_beanstalk::serve_unix(
                    socket,
                    engine.clone(),
                    options,
                    stop,
                ))
            }
        }
    });
    let state = AppState::new(engine, server_config);
    let shutdown = async move {
        delayq_server::shutdown_signal().await;
        tracing::info!("shutting down: ending long-polls and finishing in-flight requests");
        let _ = stop_tx.send(true);
    };
    match tls {
        Some(tls) => {
            tokio::spawn(delayq_server::reload_on_sighup(tls.clone()));
            delayq_server::serve_tls(listener, state, tls, shutdown).await
        }
        None => delayq_server::serve(listener, state, shutdown).await,
    }
    .context("serving")?;
    if let Some(task) = beanstalk {
        task.await
            .context("the beanstalkd protocol server")?
            .context("serving the beanstalkd protocol")?;
    }
    tracing::info!("stopped");
    Ok(())
}

/// Where the beanstalkd protocol listens.
enum BeanstalkListener {
    Tcp(tokio::net::TcpListener, SocketAddr),
    #[cfg(unix)]
    Unix(delayq_beanstalk::UnixSocket),
}

/// Binds `--beanstalk`: a host and port, or `unix:<path>` (beanstalkd's `-l unix:<path>`),
/// whose stale socket file is replaced and whose file is made with the process's umask.
async fn bind_beanstalk(at: &str) -> anyhow::Result<BeanstalkListener> {
    if let Some(path) = at.strip_prefix("unix:") {
        #[cfg(unix)]
        {
            return delayq_beanstalk::UnixSocket::bind(path)
                .map(BeanstalkListener::Unix)
                .map_err(|e| anyhow::anyhow!("cannot listen on {at} (--beanstalk): {e}"));
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            anyhow::bail!(
                "cannot listen on {at}: Unix domain sockets need a Unix system; give a host and port with --beanstalk"
            );
        }
    }
    let l = tokio::net::TcpListener::bind(at)
        .await
        .map_err(|e| listen_error("--beanstalk", at, &e))?;
    let addr = l.local_addr().context("beanstalk listening address")?;
    if !addr.ip().is_loopback() {
        tracing::warn!(
            "beanstalkd protocol on {addr}, beyond loopback: it has no authentication (as beanstalkd), so anyone who reaches this port can put, take and delete jobs; bind it to 127.0.0.1 or allow only trusted hosts with a firewall"
        );
    }
    Ok(BeanstalkListener::Tcp(l, addr))
}

/// The warning for bearer tokens sent in clear beyond this machine, if that is the case.
fn clear_token_warning(addr: SocketAddr, auth: bool, tls: bool) -> Option<String> {
    (auth && !tls && !addr.ip().is_loopback()).then(|| {
        format!(
            "listening on {addr}, beyond loopback, with bearer tokens but without TLS: tokens cross the network in clear; give --tls-cert and --tls-key, or put a TLS proxy in front"
        )
    })
}

/// Logs to standard error, as text or as JSON lines.
fn init_log(s: &Settings) -> anyhow::Result<()> {
    let filter = EnvFilter::try_new(&s.log).map_err(|e| {
        anyhow::anyhow!(
            "invalid log filter {:?} ({e}); use a level (info, debug) or directives such as info,delayq_server=debug",
            s.log
        )
    })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_writer(std::io::stderr);
    match s.log_format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
    Ok(())
}

/// The longest pause between two tries to reach Redis or PostgreSQL at startup.
const MAX_CONNECT_PAUSE: Duration = Duration::from_secs(5);

/// Opens the engine. A Redis or PostgreSQL that does not answer yet is tried again with
/// back-off (logging that it waits) until `--connect-timeout` has passed; an error that
/// waiting cannot fix (bad URL, credentials, TLS, not a Redis server) fails at once.
async fn open_engine(
    s: &Settings,
    url: &str,
    described: &str,
    options: &OpenOptions,
) -> anyhow::Result<Arc<dyn Store>> {
    let start = Instant::now();
    let deadline = start + s.connect_timeout;
    let mut pause = Duration::from_millis(100);
    let mut waited = false;
    loop {
        let e = match delayq::open_with(url, options).await {
            Ok(engine) => return Ok(engine),
            Err(e) => e,
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(server) = networked(s) else {
            return Err(open_error(s, described, &e, None));
        };
        if !e.is_retryable() || left.is_zero() {
            let waited = waited.then(|| start.elapsed());
            return Err(open_error(s, described, &e, waited));
        }
        waited = true;
        pause = pause.min(left);
        let message = match &e {
            delayq::Error::Unavailable { message, .. } => message.clone(),
            e => e.to_string(),
        };
        tracing::warn!(
            retry_in_ms = pause.as_millis() as u64,
            gives_up_in_s = left.as_secs(),
            "waiting for {}: {message}",
            server.name
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_CONNECT_PAUSE);
    }
}

/// An engine reached over the network: what to call it and which settings name it.
struct Networked {
    name: &'static str,
    flags: &'static str,
}

/// The networked engine the settings name, if any (else the embedded one).
fn networked(s: &Settings) -> Option<Networked> {
    if s.redis_url.is_some() {
        Some(Networked {
            name: "Redis",
            flags: "--redis (DELAYQ_REDIS_URL)",
        })
    } else if s.postgres_url.is_some() {
        Some(Networked {
            name: "PostgreSQL",
            flags: "--postgres (DELAYQ_POSTGRES_URL)",
        })
    } else {
        None
    }
}

/// A failed bind of `flag`'s address as one sentence: what failed and what to do.
fn listen_error(flag: &str, listen: &str, e: &std::io::Error) -> anyhow::Error {
    let (why, todo) = match e.kind() {
        std::io::ErrorKind::AddrInUse => (
            "the address is in use (by another delayq or another program)".to_string(),
            format!("stop what holds it or choose another {flag}"),
        ),
        std::io::ErrorKind::PermissionDenied => (
            "permission denied (ports below 1024 need privileges)".to_string(),
            format!("choose a port above 1024 with {flag}"),
        ),
        std::io::ErrorKind::AddrNotAvailable => (
            "no interface of this machine has that address".to_string(),
            format!("choose one of this machine's addresses with {flag}"),
        ),
        _ => (e.to_string(), format!("correct {flag}")),
    };
    anyhow::anyhow!("cannot listen on {listen}: {why}; {todo}")
}

/// An engine that did not open, as one sentence: what failed and what to do. The engine's
/// message names the cause once; its chain of sources (which repeat it) is left out.
fn open_error(
    s: &Settings,
    described: &str,
    e: &delayq::Error,
    waited: Option<Duration>,
) -> anyhow::Error {
    match (e, networked(s)) {
        (delayq::Error::Unavailable { message, .. }, Some(server)) => {
            let after = waited
                .map(|w| format!(" after waiting {} s", w.as_secs()))
                .unwrap_or_default();
            anyhow::anyhow!(
                "cannot open the engine{after}: {message}; start {} or correct {}, or wait longer with --connect-timeout",
                server.name,
                server.flags
            )
        }
        (delayq::Error::Unavailable { message, .. }, None) => anyhow::anyhow!(
            "cannot open the engine ({described}): {message}; check the data directory, then retry"
        ),
        (delayq::Error::InvalidConfig { reason }, Some(server)) => {
            anyhow::anyhow!("cannot open the engine ({}): {reason}", server.name)
        }
        (delayq::Error::InvalidConfig { reason }, None) => {
            anyhow::anyhow!("cannot open the engine ({described}): {reason}")
        }
        (e, _) => anyhow::anyhow!("cannot open the engine ({described}): {e}"),
    }
}

/// SIGUSR1, which beanstalkd operators send for its drain mode, would end the process at
/// once (its default action). delayq has no drain mode of its own: it drains when it stops.
/// So SIGUSR1 is caught and logged with what to do instead, from the start of `serve` on
/// (before the engine opens), so long before the server says it is serving.
fn ignore_sigusr1() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::user_defined1()) {
            Ok(mut usr1) => {
                tokio::spawn(async move {
                    while usr1.recv().await.is_some() {
                        tracing::warn!(
                            "SIGUSR1 received and ignored: delayq has no drain mode (beanstalkd's); to drain, stop it with SIGTERM: it stops taking work, ends long-polls and finishes what is in flight"
                        );
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGUSR1; it would end the server")
            }
        }
    }
}

/// The engine URL and how to describe it in the log (without a password).
fn engine_url(s: &Settings) -> (String, String) {
    match (&s.redis_url, &s.postgres_url) {
        (Some(url), _) => (url.clone(), format!("redis at {}", without_password(url))),
        (None, Some(url)) => (
            url.clone(),
            format!("postgresql at {}", without_password(url)),
        ),
        (None, None) => (
            format!("sqlite://{}", s.data_dir.display()),
            // Only the setting's name is lowercased: the path is shown as it is.
            format!(
                "embedded, data in {} (synchronous={})",
                s.data_dir.display(),
                format!("{:?}", s.sync).to_lowercase()
            ),
        ),
    }
}

/// `scheme://***@host…` for a URL with credentials; a key-value PostgreSQL string with
/// `password=` has it masked too.
pub(crate) fn without_password(url: &str) -> String {
    if let (Some(scheme), Some(at)) = (url.find("://"), url.rfind('@'))
        && at > scheme
    {
        return format!("{}://***@{}", &url[..scheme], &url[at + 1..]);
    }
    url.split(' ')
        .map(|part| match part.split_once('=') {
            Some(("password", _)) => "password=***",
            _ => part,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_in_clear_beyond_loopback_are_warned_of() {
        let addr = |a: &str| a.parse::<SocketAddr>().expect("an address");
        for beyond in ["0.0.0.0:7070", "10.0.0.5:7070", "[::]:7070"] {
            assert!(
                clear_token_warning(addr(beyond), true, false).is_some(),
                "{beyond}"
            );
            assert!(
                clear_token_warning(addr(beyond), true, true).is_none(),
                "{beyond} with TLS"
            );
            assert!(
                clear_token_warning(addr(beyond), false, false).is_none(),
                "{beyond} without auth"
            );
        }
        for local in ["127.0.0.1:7070", "127.0.0.2:7070", "[::1]:7070"] {
            assert!(
                clear_token_warning(addr(local), true, false).is_none(),
                "{local}"
            );
        }
    }
    use crate::settings::resolve;

    /// `--beanstalk unix:<path>` listens on a Unix socket there, and refuses a file that is
    /// not a socket, saying so (issue 36).
    // See: issue 36
    #[cfg(unix)]
    #[tokio::test]
    async fn a_unix_beanstalk_address_is_a_socket_and_refuses_another_file_issue_36() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("beanstalk.sock");
        let at = format!("unix:{}", path.display());
        match bind_beanstalk(&at).await {
            Ok(BeanstalkListener::Unix(socket)) => assert_eq!(socket.path(), path),
            Ok(BeanstalkListener::Tcp(_, addr)) => panic!("{at} bound TCP {addr}"),
            Err(e) => panic!("{at}: {e}"),
        }
        let file = dir.path().join("notes.txt");
        std::fs::write(&file, "keep me").expect("a file");
        let at = format!("unix:{}", file.display());
        let e = bind_beanstalk(&at).await.err().expect("a file is refused");
        let e = e.to_string();
        assert!(
            e.contains("--beanstalk") && e.contains("not a socket") && e.contains("remove it"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&file).expect("kept"), "keep me");
    }

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
        for (url, hidden) in [
            (
                "postgres://app:pg-s3cret@db:5432/app?sslmode=require",
                "pg-s3cret",
            ),
            (
                "host=db user=app password=kv-s3cret dbname=app",
                "kv-s3cret",
            ),
        ] {
            let args = ServeArgs {
                postgres_url: Some(url.into()),
                ..ServeArgs::default()
            };
            let s = resolve(args, FileConfig::default()).expect("resolves");
            let (full, shown) = engine_url(&s);
            assert_eq!(full, url);
            assert!(shown.starts_with("postgresql at "), "{shown}");
            assert!(!shown.contains(hidden), "{shown}");
        }
    }
}
