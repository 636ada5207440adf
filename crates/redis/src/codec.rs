//! Decoding function replies: status codes, states and jobs, mirrored from `lua/lib.lua`.

use std::time::Duration;

use delayq_core::{Backoff, Bytes, Error, Job, JobId, JobState, Result, Timestamp, Topic};
use redis::Value;

/// Status codes of the functions (`OK, NOT_FOUND, ...` in lib.lua); what each means is
/// decided in one place, in `ops`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Ok,
    NotFound,
    LeaseLost,
    WrongState,
    InvalidDelay,
}

impl Status {
    pub(crate) fn from_code(code: i64) -> Result<Self> {
        Ok(match code {
            0 => Status::Ok,
            1 => Status::NotFound,
            2 => Status::LeaseLost,
            3 => Status::WrongState,
            4 => Status::InvalidDelay,
            other => return Err(Error::Internal(format!("unknown function status {other}"))),
        })
    }
}

/// The public state codes of lib.lua (1 delayed, 2 ready, 3 reserved, 4 dead).
pub(crate) fn state_from_code(code: i64) -> Result<JobState> {
    Ok(match code {
        1 => JobState::Delayed,
        2 => JobState::Ready,
        3 => JobState::Reserved,
        4 => JobState::Dead,
        other => return Err(Error::Internal(format!("unknown job state code {other}"))),
    })
}

/// The code lib.lua uses for a public state.
pub(crate) fn state_code(state: JobState) -> u8 {
    match state {
        JobState::Delayed => 1,
        JobState::Ready => 2,
        JobState::Reserved => 3,
        JobState::Dead => 4,
    }
}

/// A function reply that must be an array.
pub(crate) fn array(v: Value) -> Result<Vec<Value>> {
    match v {
        Value::Array(items) => Ok(items),
        other => Err(unexpected("an array", &other)),
    }
}

/// An integer (Lua numbers arrive as integers; strings of digits are accepted too).
pub(crate) fn int(v: &Value) -> Result<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| unexpected("an integer", v)),
        other => Err(unexpected("an integer", other)),
    }
}

/// A non-negative integer as u64.
pub(crate) fn uint(v: &Value) -> Result<u64> {
    let i = int(v)?;
    u64::try_from(i)
        .map_err(|_| Error::Internal(format!("expected a non-negative integer, got {i}")))
}

/// An integer where -1 means "none".
pub(crate) fn opt_uint(v: &Value) -> Result<Option<u64>> {
    let i = int(v)?;
    Ok(u64::try_from(i).ok())
}

/// A bulk string.
pub(crate) fn bytes(v: Value) -> Result<Vec<u8>> {
    match v {
        Value::BulkString(b) => Ok(b),
        Value::SimpleString(s) => Ok(s.into_bytes()),
        other => Err(unexpected("a string", &other)),
    }
}

/// A UTF-8 string.
pub(crate) fn string(v: Value) -> Result<String> {
    String::from_utf8(bytes(v)?).map_err(|_| Error::Internal("expected UTF-8 text".into()))
}

fn u32_of(v: &Value) -> Result<u32> {
    let i = uint(v)?;
    u32::try_from(i).map_err(|_| Error::Internal(format!("{i} does not fit 32 bits")))
}

/// The number of values `emit` writes per job.
pub(crate) const JOB_VALUES: usize = 17;

/// Decodes the 17 values of lib.lua's `emit` (id, state, then record fields 2 to 16) into
/// the job and its lease token (0 when it holds none).
pub(crate) fn decode_job(
    topic: &Topic,
    vals: &mut impl Iterator<Item = Value>,
) -> Result<(Job, u64)> {
    let mut next = || {
        vals.next()
            .ok_or_else(|| Error::Internal("a job reply ended early".into()))
    };
    let id = JobId::new(string(next()?)?)
        .map_err(|e| Error::Internal(format!("stored job id is invalid: {e}")))?;
    let state = state_from_code(int(&next()?)?)?;
    let priority = u32_of(&next()?)?;
    let ready_at = Timestamp::from_millis(uint(&next()?)?);
    let _seq = next()?;
    let ttr = Duration::from_millis(uint(&next()?)?);
    let max_attempts = u32_of(&next()?)?;
    let attempts = u32_of(&next()?)?;
    let backoff = Backoff::from_parts(
        uint(&next()?)?,
        u32_of(&next()?)?,
        uint(&next()?)?,
        u32_of(&next()?)?,
    );
    let created_at = Timestamp::from_millis(uint(&next()?)?);
    let token = uint(&next()?)?;
    let deadline = uint(&next()?)?;
    let last_error = string(next()?)?;
    let body = Bytes::from(bytes(next()?)?);
    let job = Job {
        topic: topic.clone(),
        id,
        body,
        state,
        priority,
        ready_at,
        ttr,
        max_attempts,
        backoff,
        attempts,
        created_at,
        deadline: (deadline > 0).then(|| Timestamp::from_millis(deadline)),
        last_error: (!last_error.is_empty()).then_some(last_error),
    };
    Ok((job, token))
}

/// Decodes every job in the rest of a reply.
pub(crate) fn decode_jobs(topic: &Topic, rest: Vec<Value>) -> Result<Vec<(Job, u64)>> {
    if !rest.len().is_multiple_of(JOB_VALUES) {
        return Err(Error::Internal(format!(
            "a job list reply has {} values, not a multiple of {JOB_VALUES}",
            rest.len()
        )));
    }
    let n = rest.len() / JOB_VALUES;
    let mut it = rest.into_iter();
    (0..n).map(|_| decode_job(topic, &mut it)).collect()
}

fn unexpected(what: &str, got: &Value) -> Error {
    Error::Internal(format!("expected {what} in a function reply, got {got:?}"))
}
