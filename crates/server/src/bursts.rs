//! Logging of repeated errors: during an outage every request fails the same way, and one
//! log line per request drowns the log. The first error of a burst is logged at once;
//! identical ones that follow are counted, and one line per [`WINDOW`] reports how many
//! there were, until a window passes without one (the burst is over: the next error is
//! logged at once again).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

/// How often a running burst is reported.
pub const WINDOW: Duration = Duration::from_secs(10);

/// How bad an error is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// The store is unavailable: expected during an outage.
    Warn,
    /// A bug or corrupted data.
    Error,
}

/// The running bursts, by level and message: how many errors were not logged yet.
static BURSTS: LazyLock<Mutex<HashMap<(Level, String), u64>>> = LazyLock::new(Default::default);

fn bursts() -> std::sync::MutexGuard<'static, HashMap<(Level, String), u64>> {
    BURSTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Logs `message` unless an identical one is already in a running burst, which then counts
/// it. Outside a Tokio runtime every error is logged.
pub fn log(level: Level, message: String) {
    let key = (level, message);
    {
        let mut bursts = bursts();
        if let Some(repeats) = bursts.get_mut(&key) {
            *repeats += 1;
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            bursts.insert(key.clone(), 0);
            runtime.spawn(report(key.clone()));
        }
    }
    emit(key.0, &key.1, 0);
}

/// Reports the burst of `key` once per window while it lasts, then ends it.
async fn report(key: (Level, String)) {
    loop {
        tokio::time::sleep(WINDOW).await;
        let repeats = {
            let mut bursts = bursts();
            match bursts.get_mut(&key) {
                Some(repeats) if *repeats > 0 => std::mem::take(repeats),
                _ => {
                    bursts.remove(&key);
                    return;
                }
            }
        };
        emit(key.0, &key.1, repeats);
    }
}

fn emit(level: Level, message: &str, repeats: u64) {
    let window_s = WINDOW.as_secs();
    match (level, repeats) {
        (Level::Warn, 0) => tracing::warn!("{message}"),
        (Level::Warn, n) => {
            tracing::warn!(
                repeats = n,
                "{message} (and {n} more in the last {window_s} s)"
            )
        }
        (Level::Error, 0) => tracing::error!("{message}"),
        (Level::Error, n) => {
            tracing::error!(
                repeats = n,
                "{message} (and {n} more in the last {window_s} s)"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_is_one_line_then_one_count_per_window() {
        let message = || "engine unavailable: test burst".to_string();
        log(Level::Warn, message());
        for _ in 0..99 {
            log(Level::Warn, message());
        }
        let key = (Level::Warn, message());
        assert_eq!(bursts().get(&key), Some(&99), "counted, not logged");
        tokio::time::sleep(WINDOW + Duration::from_millis(1)).await;
        assert_eq!(bursts().get(&key), Some(&0), "reported, still running");
        tokio::time::sleep(WINDOW).await;
        assert_eq!(bursts().get(&key), None, "a quiet window ends the burst");
    }
}
