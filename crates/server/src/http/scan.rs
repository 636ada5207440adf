//! The server-side id-prefix filter (issue 15): walks one state of a topic through
//! `Engine::list`, a page of [`PAGE`] jobs at a time, and keeps the jobs whose id starts with
//! a prefix, bounded by a budget of jobs looked at per request, so no request walks a million
//! jobs; where it stopped is an engine cursor, so the next request goes on from there.

use delayq_core::{Cursor, Engine, Job, JobState, Result, Topic};

use super::error::ApiError;

/// Jobs asked of the engine per page.
pub const PAGE: usize = 1000;

/// The most jobs one request looks at.
pub const BUDGET: usize = 10_000;

/// What a walk found.
pub struct Scan {
    /// The matching jobs, in the state's order.
    pub jobs: Vec<Job>,
    /// Where the next walk starts; `None` when the state has no job after these.
    pub next: Option<Cursor>,
    /// How many jobs were looked at.
    pub scanned: u64,
}

/// Checks an id prefix: empty (every job), or the start of a valid id.
pub fn check_prefix(prefix: &str) -> std::result::Result<(), ApiError> {
    if prefix.is_empty() || delayq_core::JobId::new(prefix).is_ok() {
        return Ok(());
    }
    Err(ApiError::invalid_argument(format!(
        "prefix {prefix:?} cannot start a job id; prefix takes 1 to 200 visible ASCII characters (no space), or nothing for every job"
    ))
    .at("prefix"))
}

/// Walks `state` of `topic` from `after`, keeping the jobs whose id starts with `prefix`,
/// until `want` match or `budget` jobs were looked at or the state ends. When the `want`-th
/// match is inside a page, that page is read again up to it, so the cursor answered points
/// right after the last match.
pub async fn scan(
    engine: &dyn Engine,
    topic: &Topic,
    state: JobState,
    prefix: &str,
    want: usize,
    budget: usize,
    after: Option<Cursor>,
) -> Result<Scan> {
    let mut found = Scan {
        jobs: Vec::new(),
        next: after,
        scanned: 0,
    };
    let matches = |j: &Job| j.id.as_str().starts_with(prefix);
    while found.jobs.len() < want && (found.scanned as usize) < budget {
        let size = PAGE.min(budget - found.scanned as usize);
        let start = found.next.take();
        let page = engine.list(topic, state, size, start.as_ref()).await?;
        let missing = want - found.jobs.len();
        let cut = page
            .jobs
            .iter()
            .enumerate()
            .filter(|(_, j)| matches(j))
            .nth(missing - 1)
            .map(|(i, _)| i + 1)
            .filter(|&n| n < page.jobs.len());
        let page = match cut {
            Some(n) => engine.list(topic, state, n, start.as_ref()).await?,
            None => page,
        };
        found.scanned += page.jobs.len() as u64;
        found.next = page.next;
        let empty = page.jobs.is_empty();
        found
            .jobs
            .extend(page.jobs.into_iter().filter(|j| matches(j)));
        if found.next.is_none() || empty {
            break;
        }
    }
    Ok(found)
}
