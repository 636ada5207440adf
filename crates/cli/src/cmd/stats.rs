//! `delayq stats`: a table of counts per state.

use delayq_server::http::dto::{StatsDto, TopicsResponse};
use reqwest::Method;
use serde_json::json;

use crate::cli::StatsArgs;
use crate::client::{Client, read, seg};

/// The widest the topic column grows: a longer name gets a line of its own, its counts on
/// the next, so that one long name does not push every row to the right.
const TOPIC_WIDTH: usize = 24;

pub async fn run(a: StatsArgs) -> anyhow::Result<()> {
    let client = Client::new(&a.client)?;
    let rows: Vec<StatsDto> = match &a.topic {
        Some(t) => {
            let v = client
                .call(Method::GET, &format!("/v1/topics/{}/stats", seg(t)), None)
                .await?;
            vec![read(&v)?]
        }
        None => {
            let v = client.call(Method::GET, "/v1/topics", None).await?;
            read::<TopicsResponse>(&v)?.topics
        }
    };
    // The shape of `GET /v1/topics`, as `delayq topics --json` prints it, for one topic too
    // (each row written back from the server's type: the JSON it answered).
    if a.client.json {
        println!("{}", json!({ "topics": rows }));
        return Ok(());
    }
    print!("{}", table(&rows));
    Ok(())
}

/// The stats as an aligned text table.
pub fn table(rows: &[StatsDto]) -> String {
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
        cells.push(vec![
            if r.paused {
                format!("{} (paused)", r.topic)
            } else {
                r.topic.clone()
            },
            r.delayed.to_string(),
            r.ready.to_string(),
            r.reserved.to_string(),
            r.dead.to_string(),
            r.done.to_string(),
            r.expired_jobs.to_string(),
            r.oldest_overdue_ms
                .map(|ms| crate::text::duration(std::time::Duration::from_millis(ms)))
                .unwrap_or_else(|| "-".into()),
            r.next_due.clone().unwrap_or_else(|| "-".into()),
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

    /// A topic's stats: `topic`, with `fill` setting the counts the test is about.
    fn row(topic: &str, fill: impl FnOnce(&mut StatsDto)) -> StatsDto {
        let mut r = StatsDto {
            topic: topic.into(),
            delayed: 0,
            ready: 0,
            reserved: 0,
            dead: 0,
            done: 0,
            oldest_overdue_ms: None,
            next_due: None,
            expired_leases: 0,
            expired_jobs: 0,
            paused: false,
            paused_until: None,
        };
        fill(&mut r);
        r
    }

    #[test]
    fn table_aligns() {
        let t = table(&[row("orders", |r| {
            (r.delayed, r.reserved, r.dead, r.done) = (12, 3, 1, 7);
            r.next_due = Some("2026-01-01T00:00:00Z".into());
        })]);
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
        let two_ready = |topic: &str| {
            row(topic, |r| {
                r.ready = 2;
                r.oldest_overdue_ms = Some(888_797);
            })
        };
        let t = table(&[two_ready("orders"), two_ready(long), two_ready("mail")]);
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
