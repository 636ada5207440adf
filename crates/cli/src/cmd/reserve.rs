//! `delayq reserve`.

use reqwest::Method;
use serde_json::json;

use crate::cli::ReserveArgs;
use crate::client::Client;

pub async fn reserve(a: ReserveArgs) -> anyhow::Result<()> {
    let req = json!({
        "topics": a.topics,
        "max": a.max,
        "wait_ms": a.wait.as_millis() as u64,
        "mode": if a.at_most_once { "at_most_once" } else { "at_least_once" },
    });
    let v = Client::new(&a.client)?
        .call(Method::POST, "/v1/reserve", Some(&req))
        .await?;
    if a.client.json {
        println!("{v}");
        return Ok(());
    }
    let jobs = v["jobs"].as_array().cloned().unwrap_or_default();
    if a.quiet {
        for d in &jobs {
            println!("{}", d["token"]);
        }
        return Ok(());
    }
    if jobs.is_empty() {
        println!("no job due");
    }
    for d in jobs {
        let j = &d["job"];
        println!(
            "{} {} token={} attempt={} late={:.1}ms body={}",
            j["topic"].as_str().unwrap_or("?"),
            j["id"].as_str().unwrap_or("?"),
            d["token"]
                .as_u64()
                .map(|t| t.to_string())
                .unwrap_or_else(|| "-".into()),
            j["attempts"],
            d["lateness_ms"].as_f64().unwrap_or(0.0),
            j["body"].as_str().unwrap_or("")
        );
    }
    Ok(())
}
