//! What ran a benchmark: cores, CPU model, load average and the redis-server version.

use std::process::Command;

/// A Markdown line describing the machine.
pub(crate) fn describe() -> String {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let cpu = cpu_model();
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into());
    let redis = Command::new("redis-server")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| {
            s.split_whitespace()
                .find(|w| w.starts_with("v="))
                .map(|v| v[2..].to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    format!("{cores} cores, {cpu}; load average {load} at start; redis-server {redis}")
}

/// The CPU model `/proc/cpuinfo` names.
pub(crate) fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}
