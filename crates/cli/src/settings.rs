//! The server's settings resolved from flags, then environment (both already merged by clap),
//! then the TOML config file, then the defaults.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;

use crate::cli::{LogFormat, ServeArgs, SyncArg, UiArg};
use crate::duration;

/// The TOML config file: the same settings as the flags, all optional.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    listen: Option<String>,
    data_dir: Option<PathBuf>,
    redis_url: Option<String>,
    redis_prefix: Option<String>,
    postgres_url: Option<String>,
    /// Read under its former name too.
    #[serde(alias = "redis_connect_timeout")]
    connect_timeout: Option<toml::Value>,
    redis_wait_replicas: Option<usize>,
    redis_wait_timeout: Option<toml::Value>,
    sync: Option<SyncArg>,
    tokens: Option<Vec<String>>,
    metrics_public: Option<bool>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    max_body: Option<usize>,
    max_request_bytes: Option<usize>,
    max_wait: Option<toml::Value>,
    request_timeout: Option<toml::Value>,
    concurrency: Option<usize>,
    max_long_polls: Option<usize>,
    ui: Option<UiArg>,
    beanstalk: Option<String>,
    beanstalk_max_job_size: Option<usize>,
    log: Option<String>,
    log_format: Option<LogFormat>,
    /// Push destinations by topic (`[destinations."orders.cancel"]`), put into the engine
    /// at start, replacing what it holds for those topics.
    destinations: Option<std::collections::BTreeMap<String, toml::Value>>,
    /// The file this was read from, for error messages.
    #[serde(skip)]
    path: Option<PathBuf>,
}

/// Every setting of `delayq serve`, resolved.
#[derive(Debug, PartialEq)]
pub struct Settings {
    pub listen: String,
    pub data_dir: PathBuf,
    pub redis_url: Option<String>,
    pub redis_prefix: String,
    pub postgres_url: Option<String>,
    /// How long to wait at startup for Redis or PostgreSQL.
    pub connect_timeout: Duration,
    pub redis_wait_replicas: usize,
    pub redis_wait_timeout: Duration,
    pub sync: SyncArg,
    pub tokens: Vec<String>,
    pub metrics_public: bool,
    /// The certificate and key files, for HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
    pub max_body: usize,
    pub max_request_bytes: usize,
    pub max_wait: Duration,
    pub request_timeout: Duration,
    pub concurrency: usize,
    pub max_long_polls: usize,
    pub ui: UiArg,
    /// Where to speak beanstalkd's protocol; `None`: nowhere.
    pub beanstalk: Option<String>,
    pub beanstalk_max_job_size: usize,
    pub log: String,
    pub log_format: LogFormat,
    /// The config file's push destinations, checked.
    pub destinations: Vec<(delayq::Topic, delayq_push::Destination)>,
}

impl FileConfig {
    /// Reads a TOML config file.
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let file: Self = toml::from_str(&text)
            .with_context(|| format!("invalid config file {}", path.display()))?;
        Ok(FileConfig {
            path: Some(path.to_path_buf()),
            ..file
        })
    }

    /// The `[destinations.<topic>]` tables, each checked as the API checks a destination.
    fn destinations(&self) -> anyhow::Result<Vec<(delayq::Topic, delayq_push::Destination)>> {
        let file = match &self.path {
            Some(p) => format!("the config file {}", p.display()),
            None => "the config file".to_string(),
        };
        let mut out = Vec::new();
        for (name, table) in self.destinations.iter().flatten() {
            let topic = delayq::Topic::new(name.as_str())
                .map_err(|e| anyhow::anyhow!("[destinations.\"{name}\"] in {file}: {e}"))?;
            let doc = serde_json::to_string(table)
                .with_context(|| format!("[destinations.\"{name}\"] in {file}"))?;
            let d = delayq_push::Destination::from_json(&doc)
                .map_err(|e| anyhow::anyhow!("[destinations.\"{name}\"] in {file}: {e}"))?;
            out.push((topic, d));
        }
        Ok(out)
    }

    /// The duration under `key`: a string with a unit (`"30s"`); a number is refused with
    /// what to write instead.
    fn duration(&self, key: &str, value: &Option<toml::Value>) -> anyhow::Result<Option<Duration>> {
        let Some(v) = value else { return Ok(None) };
        let file = match &self.path {
            Some(p) => format!("the config file {}", p.display()),
            None => "the config file".to_string(),
        };
        let text = match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(_) | toml::Value::Float(_) => {
                anyhow::bail!("{key} = {v} in {file}: add a unit: {key} = \"{v}s\" or \"{v}ms\"")
            }
            other => anyhow::bail!(
                "{key} = {other} in {file}: write a duration with its unit, e.g. {key} = \"30s\""
            ),
        };
        duration::parse(&text)
            .map(Some)
            .map_err(|e| anyhow::anyhow!("{key} = {v} in {file}: {e}"))
    }
}

/// Resolves the settings: `args` (flags and environment) win over `file`, which wins over
/// the defaults.
pub fn resolve(args: ServeArgs, file: FileConfig) -> anyhow::Result<Settings> {
    // The durations first: they are checked against the file as a whole (for its path).
    let max_wait = match args.max_wait {
        Some(d) => d,
        None => file
            .duration("max_wait", &file.max_wait)?
            .unwrap_or(Duration::from_secs(30)),
    };
    let connect_timeout = match args.connect_timeout {
        Some(d) => d,
        None => file
            .duration("connect_timeout", &file.connect_timeout)?
            .unwrap_or(Duration::from_secs(30)),
    };
    let redis_wait_timeout = match args.redis_wait_timeout {
        Some(d) => d,
        None => file
            .duration("redis_wait_timeout", &file.redis_wait_timeout)?
            .unwrap_or(Duration::from_secs(1)),
    };
    let request_timeout = match args.request_timeout {
        Some(d) => d,
        None => file
            .duration("request_timeout", &file.request_timeout)?
            .unwrap_or(Duration::from_secs(60)),
    };
    let max_body = args.max_body.or(file.max_body).unwrap_or(256 * 1024);
    // Unset, the beanstalkd job size follows a smaller --max-body (beanstalkd's own default
    // is 65,535); set, it must fit in it.
    let beanstalk_max_job_size = match args.beanstalk_max_job_size.or(file.beanstalk_max_job_size) {
        Some(n) if n == 0 || n > max_body => anyhow::bail!(
            "--beanstalk-max-job-size {n} is outside 1 to --max-body ({max_body}); lower it or raise --max-body"
        ),
        Some(n) => n,
        None => 65_535.min(max_body),
    };
    // A push carries its body in JSON (base64 when it is not UTF-8: 4/3 of it), so a request
    // must have room for the largest body. Unset, --max-request-bytes grows with
    // --max-body; set too small, it is refused rather than failing each large push later.
    let needed = request_bytes_for(max_body);
    let max_request_bytes = match args.max_request_bytes.or(file.max_request_bytes) {
        Some(n) if n < needed => anyhow::bail!(
            "--max-request-bytes {n} cannot carry a body of --max-body {max_body} bytes (a push sends it in JSON, base64 when binary); raise it to at least {needed}, or lower --max-body"
        ),
        Some(n) => n,
        None => needed.max(1 << 20),
    };
    let destinations = file.destinations()?;
    let redis_url = args.redis_url.or(file.redis_url).filter(|u| !u.is_empty());
    let postgres_url = args
        .postgres_url
        .or(file.postgres_url)
        .filter(|u| !u.is_empty());
    if redis_url.is_some() && postgres_url.is_some() {
        anyhow::bail!(
            "both Redis (--redis, DELAYQ_REDIS_URL or redis_url) and PostgreSQL (--postgres, DELAYQ_POSTGRES_URL or postgres_url) are given; keep the one engine this server should use"
        );
    }
    Ok(Settings {
        listen: args
            .listen
            .or(file.listen)
            .unwrap_or_else(|| "127.0.0.1:7070".into()),
        data_dir: args
            .data_dir
            .or(file.data_dir)
            .unwrap_or_else(|| "./delayq-data".into()),
        redis_url,
        redis_prefix: args
            .redis_prefix
            .or(file.redis_prefix)
            .unwrap_or_else(|| "delayq".into()),
        postgres_url,
        connect_timeout,
        redis_wait_replicas: args
            .redis_wait_replicas
            .or(file.redis_wait_replicas)
            .unwrap_or(0),
        redis_wait_timeout,
        sync: args.sync.or(file.sync).unwrap_or(SyncArg::Normal),
        tokens: args
            .tokens
            .or(file.tokens)
            .unwrap_or_default()
            .into_iter()
            .filter(|t| !t.is_empty())
            .collect(),
        metrics_public: args.metrics_public || file.metrics_public.unwrap_or(false),
        tls: match (
            args.tls_cert.or(file.tls_cert),
            args.tls_key.or(file.tls_key),
        ) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            (Some(_), None) => anyhow::bail!("--tls-cert needs --tls-key: give both, or neither"),
            (None, Some(_)) => anyhow::bail!("--tls-key needs --tls-cert: give both, or neither"),
        },
        max_body,
        max_request_bytes,
        max_wait,
        request_timeout,
        concurrency: args.concurrency.or(file.concurrency).unwrap_or(1024),
        max_long_polls: args.max_long_polls.or(file.max_long_polls).unwrap_or(1024),
        ui: args.ui.or(file.ui).unwrap_or(UiArg::On),
        beanstalk: args.beanstalk.or(file.beanstalk).filter(|a| !a.is_empty()),
        beanstalk_max_job_size,
        log: args.log.or(file.log).unwrap_or_else(|| "info".into()),
        log_format: args
            .log_format
            .or(file.log_format)
            .unwrap_or(LogFormat::Text),
        destinations,
    })
}

/// The request size a push of a `max_body`-byte body needs: its base64 (4/3 of it, when the
/// body is not UTF-8) and 16 KiB for the JSON around it (id, options, field names).
fn request_bytes_for(max_body: usize) -> usize {
    max_body
        .div_ceil(3)
        .saturating_mul(4)
        .saturating_add(16 * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let s = resolve(ServeArgs::default(), FileConfig::default()).expect("resolves");
        assert_eq!(s.listen, "127.0.0.1:7070");
        assert_eq!(s.data_dir, PathBuf::from("./delayq-data"));
        assert_eq!(s.redis_url, None);
        assert_eq!(s.sync, SyncArg::Normal);
        assert_eq!(s.max_wait, Duration::from_secs(30));
        assert_eq!(s.connect_timeout, Duration::from_secs(30));
        assert_eq!(s.redis_wait_replicas, 0, "no WAIT unless asked");
        assert_eq!(s.redis_wait_timeout, Duration::from_secs(1));
        assert_eq!(s.log_format, LogFormat::Text);
        assert!(s.tokens.is_empty());
    }

    #[test]
    fn one_engine_at_a_time() {
        let file: FileConfig =
            toml::from_str(r#"postgres_url = "postgres://db/app""#).expect("parses");
        let s = resolve(ServeArgs::default(), file).expect("resolves");
        assert_eq!(s.postgres_url.as_deref(), Some("postgres://db/app"));
        assert_eq!(s.redis_url, None);
        let file: FileConfig =
            toml::from_str(r#"postgres_url = "postgres://db/app""#).expect("parses");
        let args = ServeArgs {
            redis_url: Some("redis://db".into()),
            ..ServeArgs::default()
        };
        let e = resolve(args, file).expect_err("two engines are refused");
        let text = e.to_string();
        assert!(
            text.contains("--redis") && text.contains("--postgres"),
            "{text}"
        );
    }

    #[test]
    fn flags_win_over_the_file_which_wins_over_defaults() {
        let file: FileConfig = toml::from_str(
            r#"
            listen = "0.0.0.0:9000"
            data_dir = "/var/lib/delayq"
            tokens = ["from-the-file-token"]
            max_wait = "10s"
            sync = "full"
            redis_connect_timeout = "2m"
            redis_wait_replicas = 1
            redis_wait_timeout = "250ms"
            log_format = "json"
            "#,
        )
        .expect("parses");
        let args = ServeArgs {
            listen: Some("127.0.0.1:1234".into()),
            max_wait: Some(Duration::from_secs(5)),
            ..ServeArgs::default()
        };
        let s = resolve(args, file).expect("resolves");
        assert_eq!(s.listen, "127.0.0.1:1234", "the flag wins");
        assert_eq!(s.max_wait, Duration::from_secs(5), "the flag wins");
        assert_eq!(
            s.data_dir,
            PathBuf::from("/var/lib/delayq"),
            "the file fills in"
        );
        assert_eq!(s.tokens, vec!["from-the-file-token".to_string()]);
        assert_eq!(s.sync, SyncArg::Full);
        assert_eq!(s.connect_timeout, Duration::from_secs(120));
        assert_eq!(s.redis_wait_replicas, 1);
        assert_eq!(s.redis_wait_timeout, Duration::from_millis(250));
        assert_eq!(s.log_format, LogFormat::Json);
        assert_eq!(s.concurrency, 1024, "the default fills in");
    }

    #[test]
    fn the_docs_config_examples_are_valid() {
        let docs = [
            include_str!("../../../docs/operations.md"),
            include_str!("../../../docs/push-delivery.md"),
        ]
        .concat();
        let blocks: Vec<&str> = docs
            .split("```toml\n")
            .skip(1)
            .filter_map(|rest| rest.split("```").next())
            .collect();
        assert!(
            blocks.len() >= 2,
            "docs/operations.md and docs/push-delivery.md have their toml examples"
        );
        for block in blocks {
            let file: FileConfig = toml::from_str(block)
                .unwrap_or_else(|e| panic!("the docs' example parses: {e}\n{block}"));
            let s = resolve(ServeArgs::default(), file)
                .unwrap_or_else(|e| panic!("the docs' example resolves: {e}\n{block}"));
            if block.contains("max_wait") {
                assert_eq!(s.max_wait, Duration::from_secs(20));
                assert_eq!(s.tokens.len(), 1);
            }
            if block.contains("[destinations.") {
                assert_eq!(s.destinations.len(), 1);
                assert_eq!(s.destinations[0].0.as_str(), "orders.cancel");
            }
        }
    }

    /// packaging/delayq.toml (the Debian package's /etc/delayq/delayq.toml) resolves, and so
    /// does every setting it shows commented out.
    #[test]
    fn the_packaged_config_is_valid() {
        let text = include_str!("../../../packaging/delayq.toml");
        let file: FileConfig = toml::from_str(text).expect("the packaged config parses");
        let s = resolve(ServeArgs::default(), file).expect("resolves");
        assert_eq!(s.data_dir, PathBuf::from("/var/lib/delayq"));
        assert_eq!(s.listen, "127.0.0.1:7070");

        // Every commented setting, with one engine at a time (Redis, then PostgreSQL).
        for (engine, other) in [("redis_url", "postgres_url"), ("postgres_url", "redis_url")] {
            let uncommented: String = text
                .lines()
                .map(|l| match l.strip_prefix("# ") {
                    Some(setting) if setting.contains(" = ") && !setting.starts_with(other) => {
                        setting
                    }
                    _ => l,
                })
                .map(|l| format!("{l}\n"))
                .collect();
            let file: FileConfig =
                toml::from_str(&uncommented).expect("the commented settings parse");
            let s = resolve(ServeArgs::default(), file).expect("resolves");
            if engine == "redis_url" {
                assert_eq!(s.redis_url.as_deref(), Some("redis://127.0.0.1:6379"));
            } else {
                assert!(s.postgres_url.is_some_and(|u| u.starts_with("postgres://")));
            }
            assert!(s.tls.is_some());
            assert_eq!(s.max_wait, Duration::from_secs(30));
        }
    }

    #[test]
    fn tls_needs_both_files() {
        let args = ServeArgs {
            tls_cert: Some("cert.pem".into()),
            ..ServeArgs::default()
        };
        let e = resolve(args, FileConfig::default()).expect_err("a certificate without a key");
        assert!(e.to_string().contains("--tls-key"), "{e}");
        let file: FileConfig =
            toml::from_str("tls_key = \"key.pem\"\nmetrics_public = true").expect("parses");
        let args = ServeArgs {
            tls_cert: Some("cert.pem".into()),
            ..ServeArgs::default()
        };
        let s = resolve(args, file).expect("resolves");
        assert_eq!(s.tls, Some(("cert.pem".into(), "key.pem".into())));
        assert!(s.metrics_public);
    }

    #[test]
    fn the_beanstalk_port_is_off_unless_asked_issue_19() {
        let s = resolve(ServeArgs::default(), FileConfig::default()).expect("resolves");
        assert_eq!((s.beanstalk, s.beanstalk_max_job_size), (None, 65_535));
        let file: FileConfig = toml::from_str(
            r#"
            beanstalk = "127.0.0.1:11300"
            beanstalk_max_job_size = 100000
            "#,
        )
        .expect("parses");
        let s = resolve(ServeArgs::default(), file).expect("resolves");
        assert_eq!(s.beanstalk.as_deref(), Some("127.0.0.1:11300"));
        assert_eq!(s.beanstalk_max_job_size, 100_000);
        let args = ServeArgs {
            beanstalk_max_job_size: Some(0),
            ..ServeArgs::default()
        };
        let e = resolve(args, FileConfig::default()).expect_err("0 is refused");
        assert!(e.to_string().contains("--beanstalk-max-job-size 0"), "{e}");
    }

    /// `--max-body 2048` alone starts (the beanstalkd job size follows it down); a
    /// `--max-body` larger than the default request size raises that size when it is unset,
    /// and is refused with what to do when it is set too small.
    // See: issue 36
    #[test]
    fn max_body_sizes_the_beanstalk_job_and_the_request_issue_36() {
        let small = ServeArgs {
            max_body: Some(2048),
            ..ServeArgs::default()
        };
        let s = resolve(small, FileConfig::default()).expect("--max-body 2048 alone starts");
        assert_eq!(s.beanstalk_max_job_size, 2048);
        let big = ServeArgs {
            max_body: Some(2_000_000),
            ..ServeArgs::default()
        };
        let s = resolve(big, FileConfig::default()).expect("resolves");
        assert!(
            s.max_request_bytes >= 2_000_000 / 3 * 4,
            "{}",
            s.max_request_bytes
        );
        let too_small = ServeArgs {
            max_body: Some(2_000_000),
            max_request_bytes: Some(1 << 20),
            ..ServeArgs::default()
        };
        let e = resolve(too_small, FileConfig::default()).expect_err("refused");
        assert!(e.to_string().contains("--max-request-bytes 1048576"), "{e}");
        assert!(e.to_string().contains("raise it to at least"), "{e}");
        let s = resolve(ServeArgs::default(), FileConfig::default()).expect("defaults");
        assert_eq!(
            (s.max_request_bytes, s.beanstalk_max_job_size),
            (1 << 20, 65_535)
        );
    }

    #[test]
    fn unknown_file_keys_are_refused() {
        assert!(toml::from_str::<FileConfig>("lisen = \"x\"").is_err());
    }
}

/// Fuzzed config files (issue 17): arbitrary text, and every key with a value of any TOML
/// kind (huge numbers, negative numbers, durations with any unit and size, unicode, tables,
/// dates). Reading and resolving never panic; a refusal is an error that names the key (or
/// its flag) or says the file is invalid.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    use super::*;

    const KEYS: &[&str] = &[
        "listen",
        "data_dir",
        "redis_url",
        "redis_prefix",
        "postgres_url",
        "connect_timeout",
        "redis_connect_timeout",
        "redis_wait_replicas",
        "redis_wait_timeout",
        "sync",
        "tokens",
        "metrics_public",
        "tls_cert",
        "tls_key",
        "max_body",
        "max_request_bytes",
        "max_wait",
        "request_timeout",
        "concurrency",
        "max_long_polls",
        "ui",
        "beanstalk",
        "beanstalk_max_job_size",
        "log",
        "log_format",
    ];

    fn toml_value() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            Just("18446744073709551616".to_string()),
            any::<f64>().prop_map(|f| format!("{f:?}")),
            Just("nan".to_string()),
            Just("-inf".to_string()),
            any::<bool>().prop_map(|b| b.to_string()),
            (
                0u64..u64::MAX,
                prop::sample::select(vec![
                    "ns", "ms", "s", "m", "h", "d", "w", "y", "", " s", "sec", "µs"
                ])
            )
                .prop_map(|(n, u)| format!("\"{n}{u}\"")),
            Just("\"99999999999999999999999h\"".to_string()),
            any::<String>().prop_map(|s| format!("{:?}", s)),
            Just("[]".to_string()),
            Just("[\"a\", 1]".to_string()),
            Just("{ a = 1 }".to_string()),
            Just("1979-05-27T07:32:00Z".to_string()),
            Just("\"off\"".to_string()),
            Just("\"read-only\"".to_string()),
        ]
    }

    fn file() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            prop::collection::vec((prop::sample::select(KEYS), toml_value()), 0..6)
                .prop_map(|kv| kv.iter().map(|(k, v)| format!("{k} = {v}\n")).collect()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: delayq_testkit::fuzz_cases(512), failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn any_config_file_is_settings_or_an_error(text in file()) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("delayq.toml");
            std::fs::write(&path, &text).unwrap();
            match FileConfig::read(&path) {
                Err(e) => prop_assert!(format!("{e:#}").contains("invalid config file"), "{e:#}"),
                Ok(file) => {
                    if let Err(e) = resolve(ServeArgs::default(), file) {
                        let message = format!("{e:#}");
                        // The key, or its flag (`tls_cert` is `--tls-cert`).
                        let named = KEYS
                            .iter()
                            .any(|k| message.contains(k) || message.contains(&k.replace('_', "-")));
                        prop_assert!(named, "{message}");
                    }
                }
            }
        }
    }
}
