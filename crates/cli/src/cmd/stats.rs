//! `delayq stats`: a table of counts per state.

use reqwest::Method;
use serde_json::{Value, json};

use crate::cli::StatsArgs;
use crate::client::{Client, seg};

/// The widest the topic column grows: a longer name gets a line of its own, its counts on
/// the next, so that one long name does not push every row to the right.
const TOPIC_WIDTH: usize = 24;

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
    // The shape of `GET /v1/topics`, as `delayq topics --json` prints it, for one topic too.
    if a.client.json {
        println!("{}", json!({ "topics": rows }));
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
                .map(|ms| crate::text::duration(std::time::Duration::from_millis(ms)))
                .unwrap_or_else(|| "-".into()),
            r["next_due"].as_str().unwrap_or("-").to_string(),
        ]);
    }
    let mut widths: Vec<usize> = (0..header.len())
        .map(|c| {
            cells
                .iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    widths[0] = widths[0].min(TOPIC_WIDTH);
    let mut out = String::new();
    for row in &mut cells {
        if row[0].chars().count() > widths[0] {
            out.push_str(&row[0]);
            out.push('\n');
            row[0].clear();
        }
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

    #[test]
    fn a_long_topic_name_takes_a_line_of_its_own() {
        let long = "a-topic-name-much-longer-than-the-column";
        let row = |topic: &str| json!({"topic": topic, "ready": 2, "oldest_overdue_ms": 888_797});
        let t = table(&[row("orders"), row(long), row("mail")]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}");
        assert_eq!(lines[2], long, "{t}");
        // Every row of counts lines up with the header, the long name's too.
        let col = lines[0].find("READY").unwrap_or(0) + "READY".len();
        for l in [lines[1], lines[3], lines[4]] {
            assert_eq!(&l[col - 1..col], "2", "{t}");
        }
        assert!(lines[0].len() < long.len() + 60, "{t}");
        assert!(lines[1].contains("14m 48s"), "{t}");
    }
}
