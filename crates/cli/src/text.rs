//! Numbers as the text output writes them for people: a count with its noun ("1 job",
//! "2 jobs") and a duration in its two largest units ("14m 48s", not "888797 ms"), in the
//! units the flags take.

use std::time::Duration;

/// `n` and the noun, singular for one: `count(1, "job")` is "1 job", `count(2, "job")`
/// "2 jobs".
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A duration to read at a glance: its two largest units, the rest dropped ("14m 48s",
/// "2h 5m", "3days 4h", "850ms"), written as `--delay` and the other flags take them.
pub fn duration(d: Duration) -> String {
    const UNITS: [u64; 5] = [86_400_000, 3_600_000, 60_000, 1_000, 1];
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    // The unit below the largest one present is the last one shown.
    let precision = UNITS
        .iter()
        .position(|&u| ms >= u)
        .map_or(1, |i| UNITS[(i + 1).min(UNITS.len() - 1)]);
    humantime::format_duration(Duration::from_millis(ms - ms % precision)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_their_plural() {
        assert_eq!(count(0, "job"), "0 jobs");
        assert_eq!(count(1, "job"), "1 job");
        assert_eq!(count(2, "dead job"), "2 dead jobs");
    }

    #[test]
    fn durations_keep_two_units() {
        let ms = |n| duration(Duration::from_millis(n));
        assert_eq!(ms(888_797), "14m 48s");
        assert_eq!(ms(850), "850ms");
        assert_eq!(ms(0), "0s");
        assert_eq!(ms(1_500), "1s 500ms");
        assert_eq!(ms(30_000), "30s");
        assert_eq!(ms(7_512_000), "2h 5m");
        assert_eq!(ms(3 * 86_400_000 + 4 * 3_600_000 + 5_000), "3days 4h");
    }
}
