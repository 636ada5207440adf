//! What a redis-server says about itself: `used_memory` and `INFO commandstats`.

use std::collections::BTreeMap;

use anyhow::Context;
use delayq_testkit::RedisServer;

/// `INFO <section>` as text.
async fn info(server: &RedisServer, section: &str) -> anyhow::Result<String> {
    let mut conn = server.connection().await;
    redis::cmd("INFO")
        .arg(section)
        .query_async(&mut conn)
        .await
        .with_context(|| format!("INFO {section}"))
}

/// `used_memory` in bytes.
pub(crate) async fn used_memory(server: &RedisServer) -> anyhow::Result<u64> {
    info(server, "memory")
        .await?
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .context("INFO memory has no used_memory")
}

/// Calls and microseconds per command since the last reset (commands run inside scripts
/// included, as Redis counts them).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct CommandStats(pub BTreeMap<String, (u64, u64)>);

impl CommandStats {
    /// Every command's calls, without the `INFO` and `CONFIG` calls the suite itself makes.
    pub(crate) fn calls(&self) -> u64 {
        self.0
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "info" | "config|resetstat" | "slowlog|get"))
            .map(|(_, (c, _))| c)
            .sum()
    }

    /// The commands by time spent, most first: `(name, calls, µs)`.
    pub(crate) fn by_time(&self) -> Vec<(String, u64, u64)> {
        let mut v: Vec<_> = self
            .0
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "info" | "config|resetstat" | "slowlog|get"))
            .map(|(k, &(c, us))| (k.clone(), c, us))
            .collect();
        v.sort_by(|a, b| b.2.cmp(&a.2).then(b.1.cmp(&a.1)));
        v
    }

    /// What was counted between `before` and `self`.
    pub(crate) fn since(&self, before: &CommandStats) -> CommandStats {
        CommandStats(
            self.0
                .iter()
                .map(|(k, &(c, us))| {
                    let (c0, us0) = before.0.get(k).copied().unwrap_or((0, 0));
                    (k.clone(), (c.saturating_sub(c0), us.saturating_sub(us0)))
                })
                .filter(|(_, (c, _))| *c > 0)
                .collect(),
        )
    }
}

/// `INFO commandstats`.
pub(crate) async fn command_stats(server: &RedisServer) -> anyhow::Result<CommandStats> {
    let text = info(server, "commandstats").await?;
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((name, rest)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let field = |key: &str| {
            rest.split(',')
                .find_map(|kv| kv.strip_prefix(key))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        out.insert(name.to_string(), (field("calls="), field("usec=")));
    }
    Ok(CommandStats(out))
}

/// `SLOWLOG GET 5` as lines `<µs> <command and arguments>`, then `SLOWLOG RESET`.
pub(crate) async fn slowlog(server: &RedisServer) -> anyhow::Result<Vec<String>> {
    let mut conn = server.connection().await;
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(5)
        .query_async(&mut conn)
        .await
        .context("SLOWLOG GET")?;
    let _: () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async(&mut conn)
        .await
        .context("SLOWLOG RESET")?;
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => {
            let s = String::from_utf8_lossy(b);
            if s.chars().count() > 40 {
                format!("{}…", s.chars().take(40).collect::<String>())
            } else {
                s.into_owned()
            }
        }
        redis::Value::Int(i) => i.to_string(),
        _ => String::new(),
    };
    Ok(entries
        .iter()
        .filter_map(|e| match e {
            redis::Value::Array(f) if f.len() >= 4 => {
                let us = text(&f[2]);
                let args = match &f[3] {
                    redis::Value::Array(a) => a.iter().take(4).map(text).collect::<Vec<_>>(),
                    _ => Vec::new(),
                };
                Some(format!("{us} µs: {}", args.join(" ")))
            }
            _ => None,
        })
        .collect())
}
