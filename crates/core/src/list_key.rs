//! [`ListKey`]: what a listing's cursor ([`crate::Cursor`]) holds: the sort key of the last
//! job of a page, as an opaque string. The next page starts strictly after that key, so a
//! cursor stays valid when its job is deleted, acked or moves to another state between
//! pages. The embedded and the PostgreSQL engines write and read the same forms.
//!
//! Forms: `d:<due>:<id>` (delayed), `r:<priority>:<due>:<seq>` (ready), `l:<deadline>:<id>`
//! (reserved), `x:<died>:<id>` (dead), `c:<acked>:<id>` (done). Ids may hold ':', so the id is everything after the
//! last fixed field.
//!
//! An engine's listing reads its cursor with [`ListKey::resume`], fetches one job more than
//! a page after that key, each with its key, and ends the page with [`ListKey::page`]: the
//! cursor handling is here, once; the engines own their queries and rows.

use crate::{Cursor, Error, Job, JobState, Page, Result};

/// The sort key a listing resumes after. Keys of one state compare in the listing's order
/// (ids bytewise).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ListKey {
    /// Delayed, reserved, dead and done jobs: (time, id).
    TimeId(u64, String),
    /// Ready jobs: (priority, due time, push order).
    Ready(u32, u64, u64),
}

impl ListKey {
    /// The key before every job of `state` (the first page).
    pub fn first(state: JobState) -> ListKey {
        match state {
            JobState::Ready => ListKey::Ready(0, 0, 0),
            _ => ListKey::TimeId(0, String::new()),
        }
    }

    /// The key a listing of `state` resumes after: [`ListKey::first`] without a cursor,
    /// else the cursor's (refused as [`ListKey::decode`] refuses it).
    pub fn resume(after: Option<&Cursor>, state: JobState) -> Result<ListKey> {
        match after {
            None => Ok(ListKey::first(state)),
            Some(c) => ListKey::decode(&c.0, state),
        }
    }

    /// One page of a listing of `state` from `rows`, the jobs fetched after the cursor in
    /// the state's order with their keys, one more than `limit` asked for when another page
    /// follows: the first `limit` jobs (each made by `job`), and the cursor of the last of
    /// them when more rows came.
    pub fn page<T>(
        state: JobState,
        limit: usize,
        rows: impl IntoIterator<Item = (ListKey, T)>,
        mut job: impl FnMut(T) -> Result<Job>,
    ) -> Result<Page> {
        let mut jobs = Vec::new();
        let mut last = None;
        let mut more = false;
        for (key, row) in rows {
            if jobs.len() == limit {
                more = true;
                break;
            }
            jobs.push(job(row)?);
            last = Some(key);
        }
        let next = if more {
            last.map(|k| Cursor(k.encode(state)))
        } else {
            None
        };
        Ok(Page { jobs, next })
    }

    /// The cursor string of this key in a listing of `state`.
    pub fn encode(&self, state: JobState) -> String {
        match self {
            ListKey::TimeId(t, id) => format!("{}:{t}:{id}", tag(state)),
            ListKey::Ready(p, due, seq) => format!("r:{p}:{due}:{seq}"),
        }
    }

    /// Parses a cursor returned by a listing of `state`.
    pub fn decode(cursor: &str, state: JobState) -> Result<ListKey> {
        let bad = || {
            Error::invalid(
                "cursor",
                format!(
                    "it is not a cursor returned by listing {state} jobs; start again without one"
                ),
            )
        };
        let rest = cursor
            .strip_prefix(tag(state))
            .and_then(|r| r.strip_prefix(':'))
            .ok_or_else(bad)?;
        match state {
            JobState::Ready => {
                let mut it = rest.split(':').map(|p| p.parse::<u64>().ok());
                match (it.next(), it.next(), it.next(), it.next()) {
                    (Some(Some(p)), Some(Some(due)), Some(Some(seq)), None) => Ok(ListKey::Ready(
                        u32::try_from(p).map_err(|_| bad())?,
                        due,
                        seq,
                    )),
                    _ => Err(bad()),
                }
            }
            _ => {
                let (t, id) = rest.split_once(':').ok_or_else(bad)?;
                let t = t.parse::<u64>().map_err(|_| bad())?;
                if id.is_empty() {
                    return Err(bad());
                }
                Ok(ListKey::TimeId(t, id.to_string()))
            }
        }
    }
}

/// The tag of a state's cursors.
fn tag(state: JobState) -> &'static str {
    match state {
        JobState::Delayed => "d",
        JobState::Ready => "r",
        JobState::Reserved => "l",
        JobState::Dead => "x",
        JobState::Done => "c",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_keeps_colons_in_ids() {
        for (state, key) in [
            (JobState::Delayed, ListKey::TimeId(17, "a:b:c".into())),
            (JobState::Reserved, ListKey::TimeId(0, "x".into())),
            (JobState::Dead, ListKey::TimeId(u64::MAX, "~".into())),
            (JobState::Ready, ListKey::Ready(7, 1_700_000_000_000, 42)),
        ] {
            let c = key.encode(state);
            assert_eq!(ListKey::decode(&c, state).ok(), Some(key), "{c}");
        }
    }

    #[test]
    fn cursors_written_before_stay_readable() {
        // Cursors as engines handed them out before the listing moved here: the wire
        // format does not change.
        for (c, state, key) in [
            (
                "d:1700000000000:job-1",
                JobState::Delayed,
                ListKey::TimeId(1_700_000_000_000, "job-1".into()),
            ),
            (
                "r:10:1700000000000:7",
                JobState::Ready,
                ListKey::Ready(10, 1_700_000_000_000, 7),
            ),
            (
                "l:5:a:b",
                JobState::Reserved,
                ListKey::TimeId(5, "a:b".into()),
            ),
            ("x:6:z", JobState::Dead, ListKey::TimeId(6, "z".into())),
            ("c:7:y", JobState::Done, ListKey::TimeId(7, "y".into())),
        ] {
            let cursor = Cursor(c.to_string());
            assert_eq!(
                ListKey::resume(Some(&cursor), state).ok(),
                Some(key.clone()),
                "{c}"
            );
            assert_eq!(key.encode(state), c);
        }
    }

    #[test]
    fn resume_starts_before_every_job_without_a_cursor() {
        assert_eq!(
            ListKey::resume(None, JobState::Ready).ok(),
            Some(ListKey::Ready(0, 0, 0))
        );
        assert_eq!(
            ListKey::resume(None, JobState::Dead).ok(),
            Some(ListKey::TimeId(0, String::new()))
        );
        let garbage = Cursor("garbage".into());
        assert!(matches!(
            ListKey::resume(Some(&garbage), JobState::Dead),
            Err(Error::InvalidArgument { what: "cursor", .. })
        ));
    }

    fn job(id: &str) -> Result<Job> {
        Ok(Job {
            topic: crate::Topic::new("t")?,
            id: crate::JobId::new(id)?,
            body: crate::Bytes::from_static(b"b"),
            state: JobState::Delayed,
            priority: 0,
            ready_at: crate::Timestamp::from_millis(0),
            ttr: std::time::Duration::from_secs(1),
            max_attempts: 1,
            backoff: crate::Backoff::default(),
            attempts: 0,
            created_at: crate::Timestamp::from_millis(0),
            deadline: None,
            last_error: None,
            expires_at: None,
            on_expire: crate::OnExpire::Dead,
        })
    }

    #[test]
    fn a_page_ends_with_the_cursor_of_its_last_job_only_when_more_came() {
        let rows = |n: u64| (1..=n).map(|i| (ListKey::TimeId(i, format!("j{i}")), i));
        let full = ListKey::page(JobState::Delayed, 2, rows(3), |i| job(&format!("j{i}")));
        let full = full.expect("a page");
        let ids: Vec<_> = full
            .jobs
            .iter()
            .map(|j| j.id.as_str().to_string())
            .collect();
        assert_eq!(ids, ["j1", "j2"]);
        assert_eq!(full.next, Some(Cursor("d:2:j2".into())));
        let last = ListKey::page(JobState::Delayed, 2, rows(2), |i| job(&format!("j{i}")));
        let last = last.expect("a page");
        assert_eq!((last.jobs.len(), last.next), (2, None));
        let none = ListKey::page(JobState::Delayed, 0, rows(1), |i| job(&format!("j{i}")));
        assert_eq!(none.expect("a page").next, None);
    }

    #[test]
    fn keys_of_one_state_order_as_the_listing_does() {
        assert!(ListKey::TimeId(1, "b".into()) < ListKey::TimeId(2, "a".into()));
        assert!(ListKey::TimeId(1, "B".into()) < ListKey::TimeId(1, "a".into()));
        assert!(ListKey::Ready(1, 9, 9) < ListKey::Ready(2, 0, 0));
        assert!(ListKey::Ready(1, 2, 3) < ListKey::Ready(1, 2, 4));
    }

    #[test]
    fn refuses_garbage_and_other_states_cursors() {
        let delayed = ListKey::TimeId(5, "a".into()).encode(JobState::Delayed);
        for (c, state) in [
            ("garbage", JobState::Delayed),
            ("nope", JobState::Ready),
            ("d:5:", JobState::Delayed),
            ("d:x:a", JobState::Delayed),
            ("r:1:2", JobState::Ready),
            ("r:1:2:3:4", JobState::Ready),
            (delayed.as_str(), JobState::Dead),
        ] {
            let r = ListKey::decode(c, state);
            assert!(
                matches!(r, Err(Error::InvalidArgument { what: "cursor", .. })),
                "{c}: {r:?}"
            );
        }
    }
}
