//! Decoding function replies: status codes, states and jobs, mirrored from `lua/lib.lua`.

use std::time::Duration;

use delayq_core::{
    Backoff, Bytes, Error, Job, JobId, JobState, OnExpire, Result, Timestamp, Topic,
};
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
    BodyTooLarge,
    InvalidExpiry,
    PartitionsInUse,
    WrongPartitions,
}

impl Status {
    pub(crate) fn from_code(code: i64) -> Result<Self> {
        Ok(match code {
            0 => Status::Ok,
            1 => Status::NotFound,
            2 => Status::LeaseLost,
            3 => Status::WrongState,
            4 => Status::InvalidDelay,
            5 => Status::BodyTooLarge,
            6 => Status::InvalidExpiry,
            7 => Status::PartitionsInUse,
            8 => Status::WrongPartitions,
            other => return Err(Error::Internal(format!("unknown function status {other}"))),
        })
    }
}

/// A lease operation's status as lib.lua answers it: a status code, or for `WRONG_STATE` the
/// pair `{WRONG_STATE, public state}` (`refusal_value`). Answers the status and, for
/// `WRONG_STATE`, the state code (else 0).
pub(crate) fn settle_status(v: &Value) -> Result<(Status, i64)> {
    match v {
        Value::Array(pair) if pair.len() == 2 => {
            Ok((Status::from_code(int(&pair[0])?)?, int(&pair[1])?))
        }
        other => Ok((Status::from_code(int(other)?)?, 0)),
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

/// A non-negative integer as u64, or `None` for a nil (a missing field of an `HMGET`).
pub(crate) fn opt_field(v: &Value) -> Result<Option<u64>> {
    match v {
        Value::Nil => Ok(None),
        v => uint(v).map(Some),
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

/// Decodes the 5 values of lib.lua's `emit` (id, public state, lease token, deadline, the
/// stored record) into the job and its lease token (0 when it holds none). The record's
/// attempts count the attempts that ended; a reserved job's current one is its lease, and a
/// done job's record is the one it was leased with (the ack does not rewrite it).
pub(crate) fn decode_job(
    topic: &Topic,
    vals: &mut impl Iterator<Item = Value>,
) -> Result<(Job, u64)> {
    let mut next = || {
        vals.next()
            .ok_or_else(|| Error::Internal("a job reply ended early".into()))
    };
    let id = job_id(next()?)?;
    let state = JobState::from_code(int(&next()?)?)?;
    let token = uint(&next()?)?;
    let deadline = uint(&next()?)?;
    let job = job_of(topic, id, state, next()?, |_| deadline)?;
    Ok((job, token))
}

/// The number of values reserve.lua writes per delivered job.
pub(crate) const DELIVERY_VALUES: usize = 3;

/// Decodes the jobs of a reserve reply, 3 values each (id, lease token, the stored record),
/// into each reserved job and its lease token (0 at most once, where the job is gone and has
/// no deadline). The lease deadline is not sent: it is the call's clock `now_ms` (the
/// reply's, in whole ms as the function reads it) plus the job's ttr, as the function sets it.
pub(crate) fn decode_deliveries(
    topic: &Topic,
    now_ms: u64,
    leased: bool,
    rest: Vec<Value>,
) -> Result<Vec<(Job, u64)>> {
    if !rest.len().is_multiple_of(DELIVERY_VALUES) {
        return Err(Error::Internal(format!(
            "a reserve reply has {} job values, not a multiple of {DELIVERY_VALUES}",
            rest.len()
        )));
    }
    let mut out = Vec::with_capacity(rest.len() / DELIVERY_VALUES);
    let mut it = rest.into_iter();
    while let (Some(id), Some(token), Some(rec)) = (it.next(), it.next(), it.next()) {
        let token = uint(&token)?;
        let job = job_of(topic, job_id(id)?, JobState::Reserved, rec, |ttr| {
            if leased {
                now_ms.saturating_add(ttr)
            } else {
                0
            }
        })?;
        out.push((job, token));
    }
    Ok(out)
}

fn job_id(v: Value) -> Result<JobId> {
    JobId::new(string(v)?).map_err(|e| Error::Internal(format!("stored job id is invalid: {e}")))
}

/// The job `id` in `state` from its stored record; `deadline` answers the deadline in ms (0:
/// none) from the record's ttr in ms.
fn job_of(
    topic: &Topic,
    id: JobId,
    state: JobState,
    rec: Value,
    deadline: impl FnOnce(u64) -> u64,
) -> Result<Job> {
    let rec = Bytes::from(bytes(rec)?);
    let r = Record::decode(&rec)
        .map_err(|e| Error::Internal(format!("stored record of job {id} is invalid: {e}")))?;
    // Saturating: a record delayq did not write may hold any number (issue 17's fuzzing).
    let attempts = r.attempts.saturating_add(u32::from(matches!(
        state,
        JobState::Reserved | JobState::Done
    )));
    let deadline = deadline(r.ttr);
    Ok(Job {
        topic: topic.clone(),
        id,
        body: r.body,
        state,
        priority: r.priority,
        ready_at: Timestamp::from_millis(r.ready_at),
        ttr: Duration::from_millis(r.ttr),
        max_attempts: r.max_attempts,
        backoff: Backoff::from_parts(r.bo_base, r.bo_factor, r.bo_max, r.bo_jitter),
        attempts,
        created_at: Timestamp::from_millis(r.created),
        deadline: (deadline > 0).then(|| Timestamp::from_millis(deadline)),
        last_error: (!r.last_error.is_empty()).then_some(r.last_error),
        expires_at: (r.expires > 0).then(|| Timestamp::from_millis(r.expires)),
        on_expire: if r.drop_on_expire {
            OnExpire::Drop
        } else {
            OnExpire::Dead
        },
    })
}

/// A stored job record: the msgpack values lib.lua's `pack` writes (`cmsgpack.pack` of the
/// `F_` fields, one value after another, not an array), in that order. The stored state
/// (field 1) and push order (field 4) are not needed here. A record written before expiries
/// existed ends after the body: no expiry.
struct Record {
    priority: u32,
    ready_at: u64,
    ttr: u64,
    max_attempts: u32,
    attempts: u32,
    bo_base: u64,
    bo_factor: u32,
    bo_max: u64,
    bo_jitter: u32,
    created: u64,
    last_error: String,
    body: Bytes,
    expires: u64,
    drop_on_expire: bool,
}

impl Record {
    /// Decodes a record; the body is a slice of `rec`, not a copy.
    fn decode(rec: &Bytes) -> std::result::Result<Self, String> {
        let mut rd: &[u8] = rec;
        let rd = &mut rd;
        let _state = number(rd, "state")?;
        let priority = narrow(number(rd, "priority")?, "priority")?;
        let ready_at = number(rd, "due time")?;
        let _seq = number(rd, "push order")?;
        let ttr = number(rd, "ttr")?;
        let max_attempts = narrow(number(rd, "max attempts")?, "max attempts")?;
        let attempts = narrow(number(rd, "attempts")?, "attempts")?;
        let bo_base = number(rd, "back-off base")?;
        let bo_factor = narrow(number(rd, "back-off factor")?, "back-off factor")?;
        let bo_max = number(rd, "back-off max")?;
        let bo_jitter = narrow(number(rd, "back-off jitter")?, "back-off jitter")?;
        let created = number(rd, "created")?;
        let last_error = String::from_utf8_lossy(text(rd, "last error")?).into_owned();
        let body = text(rd, "body")?;
        // The body is a slice of the reply's buffer: no copy of its bytes.
        let body = rec.slice_ref(body);
        let (expires, drop_on_expire) = if rd.is_empty() {
            (0, false)
        } else {
            (number(rd, "expiry")?, number(rd, "on expire")? == 1)
        };
        Ok(Record {
            priority,
            ready_at,
            ttr,
            max_attempts,
            attempts,
            bo_base,
            bo_factor,
            bo_max,
            bo_jitter,
            created,
            last_error,
            body,
            expires,
            drop_on_expire,
        })
    }
}

/// A non-negative whole number of a record. cmsgpack writes a Lua number as the smallest
/// integer that holds it, or as a float when it is not whole; whole floats are accepted.
fn number(rd: &mut &[u8], field: &str) -> std::result::Result<u64, String> {
    let bad = |e: &dyn std::fmt::Display| format!("field {field}: {e}");
    let n = match rd.first() {
        Some(0xca) => f64::from(rmp::decode::read_f32(rd).map_err(|e| bad(&e))?),
        Some(0xcb) => rmp::decode::read_f64(rd).map_err(|e| bad(&e))?,
        _ => return rmp::decode::read_int::<u64, _>(rd).map_err(|e| bad(&e)),
    };
    if n.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(&n) {
        Ok(n as u64)
    } else {
        Err(bad(&format!("{n} is not a whole number")))
    }
}

/// A number of a record that must fit 32 bits.
fn narrow(n: u64, field: &str) -> std::result::Result<u32, String> {
    u32::try_from(n).map_err(|_| format!("field {field}: {n} does not fit 32 bits"))
}

/// A string of a record (cmsgpack writes Lua strings as msgpack str), borrowed from it.
fn text<'a>(rd: &mut &'a [u8], field: &str) -> std::result::Result<&'a [u8], String> {
    let len = rmp::decode::read_str_len(rd).map_err(|e| format!("field {field}: {e}"))?;
    let len = len as usize;
    if rd.len() < len {
        return Err(format!("field {field}: the record ends early"));
    }
    let (s, rest) = rd.split_at(len);
    *rd = rest;
    Ok(s)
}

fn unexpected(what: &str, got: &Value) -> Error {
    Error::Internal(format!("expected {what} in a function reply, got {got:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as cmsgpack writes it: priority 7, ttr 30000, attempts 2, a whole float as
    /// the back-off base, an error and a body.
    fn record(body: &str) -> Vec<u8> {
        let mut b = Vec::new();
        for n in [1u64, 7, 1_700_000_000_000, 9, 30_000, 3, 2] {
            rmp::encode::write_uint(&mut b, n).unwrap();
        }
        rmp::encode::write_f64(&mut b, 1000.0).unwrap();
        for n in [2u64, 3_600_000, 100, 1_699_999_999_000] {
            rmp::encode::write_uint(&mut b, n).unwrap();
        }
        rmp::encode::write_str(&mut b, "boom").unwrap();
        rmp::encode::write_str(&mut b, body).unwrap();
        b
    }

    fn reply(state: i64, rec: Vec<u8>) -> Vec<Value> {
        vec![
            Value::BulkString(b"j1".to_vec()),
            Value::Int(state),
            Value::Int(42),
            Value::Int(1_700_000_030_000),
            Value::BulkString(rec),
        ]
    }

    #[test]
    fn a_reserved_job_counts_its_current_attempt_and_keeps_its_record() {
        let t = Topic::new("t").unwrap();
        let body = "x".repeat(300);
        let (job, token) = decode_job(&t, &mut reply(3, record(&body)).into_iter()).unwrap();
        assert_eq!(token, 42);
        assert_eq!(job.state, JobState::Reserved);
        assert_eq!(job.attempts, 3);
        assert_eq!(job.priority, 7);
        assert_eq!(job.ttr, Duration::from_millis(30_000));
        assert_eq!(job.backoff, Backoff::from_parts(1000, 2, 3_600_000, 100));
        assert_eq!(job.last_error.as_deref(), Some("boom"));
        assert_eq!(job.body, Bytes::from(body));
        assert_eq!(
            job.deadline,
            Some(Timestamp::from_millis(1_700_000_030_000))
        );

        let (dead, _) = decode_job(&t, &mut reply(4, record("")).into_iter()).unwrap();
        assert_eq!(dead.attempts, 2);
        assert!(dead.body.is_empty());
    }

    #[test]
    fn a_cut_or_fractional_record_is_an_internal_error() {
        let t = Topic::new("t").unwrap();
        let mut cut = record("body");
        cut.truncate(cut.len() - 2);
        let err = decode_job(&t, &mut reply(2, cut).into_iter()).unwrap_err();
        assert!(err.to_string().contains("field body"), "{err}");

        let mut frac = Vec::new();
        rmp::encode::write_uint(&mut frac, 1).unwrap();
        rmp::encode::write_f64(&mut frac, 1.5).unwrap();
        let err = decode_job(&t, &mut reply(2, frac).into_iter()).unwrap_err();
        assert!(err.to_string().contains("field priority"), "{err}");
    }

    #[test]
    fn a_delivery_has_its_lease_deadline_from_the_clock_and_its_ttr() {
        let t = Topic::new("t").unwrap();
        let vals = |token: i64| {
            vec![
                Value::BulkString(b"j1".to_vec()),
                Value::Int(token),
                Value::BulkString(record("b")),
            ]
        };
        let got = decode_deliveries(&t, 1_700_000_000_123, true, vals(42)).unwrap();
        let (job, token) = &got[0];
        assert_eq!(*token, 42);
        assert_eq!(job.state, JobState::Reserved);
        assert_eq!(job.attempts, 3);
        assert_eq!(
            job.deadline,
            Some(Timestamp::from_millis(1_700_000_030_123))
        );

        let (gone, token) = &decode_deliveries(&t, 1_700_000_000_123, false, vals(0)).unwrap()[0];
        assert_eq!((*token, gone.deadline), (0, None));

        let mut cut = vals(1);
        cut.pop();
        assert!(decode_deliveries(&t, 0, true, cut).is_err());
    }
}

/// Fuzzed replies (issue 17): arbitrary msgpack records and arbitrary `redis::Value` trees
/// fed to every decoder of this module. None panics; every rejection is
/// `Error::Internal` (a reply or record delayq did not write); a record written as lib.lua
/// writes it decodes to what was written.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    use super::*;

    /// One msgpack value of any kind, as raw bytes.
    fn item() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            any::<u64>().prop_map(|n| {
                let mut b = Vec::new();
                rmp::encode::write_uint(&mut b, n).unwrap();
                b
            }),
            any::<i64>().prop_map(|n| {
                let mut b = Vec::new();
                rmp::encode::write_sint(&mut b, n).unwrap();
                b
            }),
            any::<f64>().prop_map(|f| {
                let mut b = Vec::new();
                rmp::encode::write_f64(&mut b, f).unwrap();
                b
            }),
            any::<f32>().prop_map(|f| {
                let mut b = Vec::new();
                rmp::encode::write_f32(&mut b, f).unwrap();
                b
            }),
            ".{0,20}".prop_map(|s| {
                let mut b = Vec::new();
                rmp::encode::write_str(&mut b, &s).unwrap();
                b
            }),
            prop::collection::vec(any::<u8>(), 0..20).prop_map(|v| {
                let mut b = Vec::new();
                rmp::encode::write_bin(&mut b, &v).unwrap();
                b
            }),
            // A str header longer than what follows.
            (0u32..100_000).prop_map(|n| {
                let mut b = Vec::new();
                rmp::encode::write_str_len(&mut b, n).unwrap();
                b
            }),
            Just(vec![0xc0]),
            prop::collection::vec(any::<u8>(), 0..4),
        ]
    }

    /// A record: up to 16 arbitrary items, or arbitrary bytes.
    fn record() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            prop::collection::vec(item(), 0..17).prop_map(|v| v.concat()),
            prop::collection::vec(any::<u8>(), 0..64),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Nil),
            any::<i64>().prop_map(Value::Int),
            record().prop_map(Value::BulkString),
            "[!-~]{0,12}".prop_map(|s| Value::BulkString(s.into_bytes())),
            ".{0,12}".prop_map(Value::SimpleString),
            Just(Value::Okay),
            any::<f64>().prop_map(Value::Double),
            any::<bool>().prop_map(Value::Boolean),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Set),
                prop::collection::vec((inner.clone(), inner), 0..3).prop_map(Value::Map),
            ]
        })
    }

    fn internal<T: std::fmt::Debug>(r: Result<T>) -> std::result::Result<(), TestCaseError> {
        if let Err(e) = r {
            prop_assert!(matches!(e, Error::Internal(_)), "{e:?}");
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: delayq_testkit::fuzz_cases(512), failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_records_never_panic(rec in record(), state in 0i64..7, token in any::<i64>(), deadline in any::<i64>()) {
            let t = Topic::new("t").unwrap();
            let reply = vec![
                Value::BulkString(b"j1".to_vec()),
                Value::Int(state),
                Value::Int(token),
                Value::Int(deadline),
                Value::BulkString(rec.clone()),
            ];
            internal(decode_job(&t, &mut reply.into_iter()))?;
            let delivery = vec![Value::BulkString(b"j1".to_vec()), Value::Int(token), Value::BulkString(rec)];
            internal(decode_deliveries(&t, u64::MAX - 1, true, delivery))?;
        }

        #[test]
        fn arbitrary_replies_never_panic(vals in prop::collection::vec(value(), 0..12), now in any::<u64>(), leased in any::<bool>()) {
            let t = Topic::new("t").unwrap();
            internal(decode_deliveries(&t, now, leased, vals.clone()))?;
            internal(decode_job(&t, &mut vals.clone().into_iter()))?;
            for v in &vals {
                internal(settle_status(v))?;
                internal(int(v))?;
                internal(uint(v))?;
                internal(opt_uint(v))?;
                internal(opt_field(v))?;
                internal(bytes(v.clone()))?;
                internal(string(v.clone()))?;
                internal(array(v.clone()))?;
                if let Ok(n) = int(v) {
                    internal(JobState::from_code(n))?;
                    internal(Status::from_code(n))?;
                }
            }
        }

        /// Well-formed records with extreme numbers: decoded without an overflow.
        #[test]
        fn extreme_numbers_never_overflow(
            n in prop::array::uniform12(prop_oneof![Just(0u64), Just(u64::from(u32::MAX)), Just(u64::MAX), any::<u64>()]),
            now in prop_oneof![Just(u64::MAX), any::<u64>()],
            state in 1i64..6,
        ) {
            let mut rec = Vec::new();
            for x in &n {
                rmp::encode::write_uint(&mut rec, *x).unwrap();
            }
            rmp::encode::write_str(&mut rec, "e").unwrap();
            rmp::encode::write_str(&mut rec, "b").unwrap();
            let t = Topic::new("t").unwrap();
            let reply = vec![
                Value::BulkString(b"j1".to_vec()),
                Value::Int(state),
                Value::Int(1),
                Value::Int(1),
                Value::BulkString(rec.clone()),
            ];
            internal(decode_job(&t, &mut reply.into_iter()))?;
            let delivery = vec![Value::BulkString(b"j1".to_vec()), Value::Int(1), Value::BulkString(rec)];
            internal(decode_deliveries(&t, now, true, delivery))?;
        }

        /// A record as lib.lua writes it, whatever its numbers, decodes to them.
        #[test]
        fn written_records_decode_to_what_was_written(
            n in prop::array::uniform12(any::<u32>()),
            err in ".{0,40}",
            body in prop::collection::vec(any::<u8>(), 0..64),
            expires in any::<u32>(),
        ) {
            let mut rec = Vec::new();
            for x in &n {
                rmp::encode::write_uint(&mut rec, u64::from(*x)).unwrap();
            }
            rmp::encode::write_str(&mut rec, &err).unwrap();
            rmp::encode::write_str_len(&mut rec, body.len() as u32).unwrap();
            rec.extend_from_slice(&body);
            rmp::encode::write_uint(&mut rec, u64::from(expires)).unwrap();
            rmp::encode::write_uint(&mut rec, 1).unwrap();
            let r = Record::decode(&Bytes::from(rec)).unwrap();
            prop_assert_eq!(
                (r.priority, r.ready_at, r.ttr, r.max_attempts, r.attempts, r.bo_base, r.bo_factor, r.bo_max, r.bo_jitter, r.created),
                (n[1], u64::from(n[2]), u64::from(n[4]), n[5], n[6], u64::from(n[7]), n[8], u64::from(n[9]), n[10], u64::from(n[11]))
            );
            prop_assert_eq!(r.last_error, err);
            prop_assert_eq!(&r.body[..], &body[..]);
            prop_assert_eq!((r.expires, r.drop_on_expire), (u64::from(expires), true));
        }
    }
}
