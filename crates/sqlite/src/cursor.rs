//! List cursors: the sort key of the last job of a page, as an opaque string. The next page
//! starts strictly after that key, so a cursor stays valid when its job is deleted, acked or
//! moves to another state between pages.
//!
//! Forms: `d:<due>:<id>` (delayed), `r:<priority>:<due>:<seq>` (ready), `l:<deadline>:<id>`
//! (reserved), `x:<died>:<id>` (dead), `c:<acked>:<id>` (done). Ids may hold ':', so the id is everything after the
//! last fixed field.

use delayq_core::{Error, JobState, Result};

/// The sort key a listing resumes after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    /// Delayed, reserved, dead and done jobs: (time, id).
    TimeId(u64, String),
    /// Ready jobs: (priority, due time, push order).
    Ready(u32, u64, u64),
}

impl Key {
    /// The key before every job of `state` (the first page).
    pub(crate) fn first(state: JobState) -> Key {
        match state {
            JobState::Ready => Key::Ready(0, 0, 0),
            _ => Key::TimeId(0, String::new()),
        }
    }

    /// The cursor string of this key in a listing of `state`.
    pub(crate) fn encode(&self, state: JobState) -> String {
        match self {
            Key::TimeId(t, id) => format!("{}:{t}:{id}", tag(state)),
            Key::Ready(p, due, seq) => format!("r:{p}:{due}:{seq}"),
        }
    }

    /// Parses a cursor returned by a listing of `state`.
    pub(crate) fn decode(cursor: &str, state: JobState) -> Result<Key> {
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
                    (Some(Some(p)), Some(Some(due)), Some(Some(seq)), None) => {
                        Ok(Key::Ready(u32::try_from(p).map_err(|_| bad())?, due, seq))
                    }
                    _ => Err(bad()),
                }
            }
            _ => {
                let (t, id) = rest.split_once(':').ok_or_else(bad)?;
                let t = t.parse::<u64>().map_err(|_| bad())?;
                if id.is_empty() {
                    return Err(bad());
                }
                Ok(Key::TimeId(t, id.to_string()))
            }
        }
    }
}

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
            (JobState::Delayed, Key::TimeId(17, "a:b:c".into())),
            (JobState::Reserved, Key::TimeId(0, "x".into())),
            (JobState::Dead, Key::TimeId(u64::MAX, "~".into())),
            (JobState::Ready, Key::Ready(7, 1_700_000_000_000, 42)),
        ] {
            let c = key.encode(state);
            assert_eq!(Key::decode(&c, state).ok(), Some(key), "{c}");
        }
    }

    #[test]
    fn refuses_garbage_and_other_states_cursors() {
        let delayed = Key::TimeId(5, "a".into()).encode(JobState::Delayed);
        for (c, state) in [
            ("garbage", JobState::Delayed),
            ("nope", JobState::Ready),
            ("d:5:", JobState::Delayed),
            ("d:x:a", JobState::Delayed),
            ("r:1:2", JobState::Ready),
            ("r:1:2:3:4", JobState::Ready),
            (delayed.as_str(), JobState::Dead),
        ] {
            let r = Key::decode(c, state);
            assert!(
                matches!(r, Err(Error::InvalidArgument { what: "cursor", .. })),
                "{c}: {r:?}"
            );
        }
    }
}
