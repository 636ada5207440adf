//! [`ListKey`]: what a listing's cursor ([`crate::Cursor`]) holds: the sort key of the last
//! job of a page, as an opaque string. The next page starts strictly after that key, so a
//! cursor stays valid when its job is deleted, acked or moves to another state between
//! pages. The embedded and the PostgreSQL engines write and read the same forms.
//!
//! Forms: `d:<due>:<id>` (delayed), `r:<priority>:<due>:<seq>` (ready), `l:<deadline>:<id>`
//! (reserved), `x:<died>:<id>` (dead), `c:<acked>:<id>` (done). Ids may hold ':', so the id is everything after the
//! last fixed field.

use crate::{Error, JobState, Result};

/// The sort key a listing resumes after.
#[derive(Clone, Debug, PartialEq, Eq)]
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
