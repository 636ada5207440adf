//! `delayq stats`: a table of counts per state.

use reqwest::Method;
use serde_json::Value;

use crate::cli::StatsArgs;
use crate::client::{Client, seg};

pub async fn run(a: StatsArgs) -> anyhow::Result<()> {
    let client = Client::new(&a.client)?;
    let rows: Vec<Value> = match &a.topic {
        Some(t) => vec![
            client
                .call(Method::GET, &format!("/v1/topics/{}/stats", seg(t)), None)
                .await?,
        ],
        None => client.call(Method::GET, "/v1/topics", None).await?["topics"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    };
    if a.client.json {
        println!("{}", Value::Array(rows));
        return Ok(());
    }
    print!("{}", table(&rows));
    Ok(())
}

/// The stats as an aligned text table.
pub fn table(rows: &[Value]) -> String {
    let header = [
        "TOPIC",
        "DELAYED",
        "READY",
        "RESERVED",
        "DEAD",
        "DONE",
        "EXPIRED",
        "OLDEST OVERDUE",
        "NEXT DUE",
    ];
    let mut cells: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in rows {
        let n = |k: &str| {
            r[k].as_u64()
                .map(|v| v.to_string())
                .unwrap_or_else(|| "0".into())
        };
        cells.push(vec![
            match r["paused"].as_bool() {
                Some(true) => format!("{} (paused)", r["topic"].as_str().unwrap_or("?")),
                _ => r["topic"].as_str().unwrap_or("?").to_string(),
            },
            n("delayed"),
            n("ready"),
            n("reserved"),
            n("dead"),
            n("done"),
            n("expired_jobs"),
            r["oldest_overdue_ms"]
                .as_u64()
                .map(|ms| format!("{ms} ms"))
                .unwrap_or_else(|| "-".into()),
            r["next_due"].as_str().unwrap_or("-").to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| cells.iter().map(|row| row[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &cells {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, v)| {
                if c == 0 {
                    format!("{v:<w$}", w = widths[c])
                } else {
                    format!("{v:>w$}", w = widths[c])
                }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn table_aligns() {
        let t = table(&[
            json!({"topic": "orders", "delayed": 12, "ready": 0, "reserved": 3, "dead": 1, "done": 7, "oldest_overdue_ms": null, "next_due": "2026-01-01T00:00:00Z"}),
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("TOPIC "));
        assert!(lines[0].contains(" DEAD  DONE "), "{t}");
        assert!(lines[1].starts_with("orders "));
        assert!(lines[1].contains("12"));
        // The retained (done) count sits under its header.
        let col = lines[0].find("DONE").unwrap_or(0) + "DONE".len();
        assert_eq!(&lines[1][col - 1..col], "7", "{t}");
    }
}
