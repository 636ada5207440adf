//! The standard process metrics of Prometheus (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_open_fds`,
//! `process_max_fds`, `process_start_time_seconds`), read from `/proc` at each scrape. On
//! systems without `/proc` there are none.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Collects the process metrics at each scrape.
#[derive(Debug, Default)]
pub struct ProcessCollector;

/// One reading of the process's figures.
#[derive(Debug, Default)]
struct Sample {
    cpu_seconds: f64,
    resident_bytes: u64,
    virtual_bytes: u64,
    open_fds: u64,
    max_fds: Option<u64>,
    start_time_seconds: f64,
}

#[cfg(target_os = "linux")]
fn sample() -> Option<Sample> {
    use procfs::process::{LimitValue, Process};
    let me = Process::myself().ok()?;
    let stat = me.stat().ok()?;
    let ticks = procfs::ticks_per_second() as f64;
    let max_fds = me
        .limits()
        .ok()
        .and_then(|l| match l.max_open_files.soft_limit {
            LimitValue::Value(n) => Some(n),
            LimitValue::Unlimited => None,
        });
    Some(Sample {
        cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
        resident_bytes: stat.rss * procfs::page_size(),
        virtual_bytes: stat.vsize,
        open_fds: me.fd_count().ok()? as u64,
        max_fds,
        start_time_seconds: procfs::boot_time_secs().ok()? as f64 + stat.starttime as f64 / ticks,
    })
}

#[cfg(not(target_os = "linux"))]
fn sample() -> Option<Sample> {
    None
}

fn gauge<N: EncodeGaugeValue + std::fmt::Debug>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: N,
) -> Result<(), std::fmt::Error> {
    let gauge = ConstGauge::new(value);
    gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)
}

/// A count or a size as a gauge value.
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(s) = sample() else {
            return Ok(());
        };
        let cpu = ConstCounter::new(s.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            cpu.metric_type(),
        )?)?;
        gauge(
            &mut encoder,
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            int(s.resident_bytes),
        )?;
        gauge(
            &mut encoder,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            int(s.virtual_bytes),
        )?;
        gauge(
            &mut encoder,
            "process_open_fds",
            "Number of open file descriptors",
            int(s.open_fds),
        )?;
        if let Some(max) = s.max_fds {
            gauge(
                &mut encoder,
                "process_max_fds",
                "Maximum number of open file descriptors",
                int(max),
            )?;
        }
        gauge(
            &mut encoder,
            "process_start_time_seconds",
            "Start time of the process since the Unix epoch in seconds",
            s.start_time_seconds,
        )
    }
}
