//! Schedules (issue 14): stored in one hash (`keys::schedules`), put, recorded and deleted
//! by `lua/schedule_put.lua`, `schedule_pushed.lua` and `schedule_delete.lua`, read with
//! plain `HMGET` and `HGETALL`. A definition is `ScheduleParts` as a msgpack sequence
//! (a format version, then each part in order; an optional part is a bool, then its value
//! when true), written and read only here. Format 2 adds the jobs' expiry (issue 36) after
//! the parts of format 1; a definition without one is still written as format 1, which
//! every delayq reads.

use std::collections::BTreeMap;

use delayq_core::{
    Bytes, Error, JobSchedule, Result, ScheduleName, ScheduleParts, StoredSchedule, Timestamp,
};
use redis::{Cmd, Value};

use super::Ops;
use crate::codec;
use crate::library;

/// The version of the definition's encoding without the jobs' expiry.
const FORMAT: u64 = 1;
/// The version with it: format 1's parts, then `max_lateness_ms`, `expires_at_ms` (each
/// optional) and `on_expire`.
const FORMAT_EXPIRY: u64 = 2;

/// A definition's bytes.
fn encode(p: &ScheduleParts) -> Vec<u8> {
    fn opt(b: &mut Vec<u8>, v: Option<u64>) {
        // Writing into a Vec cannot fail.
        let _ = rmp::encode::write_bool(b, v.is_some());
        if let Some(v) = v {
            let _ = rmp::encode::write_uint(b, v);
        }
    }
    let expiry = p.max_lateness_ms.is_some() || p.expires_at_ms.is_some() || p.on_expire != 0;
    let mut b = Vec::with_capacity(64 + p.body.len());
    let _ = rmp::encode::write_uint(&mut b, if expiry { FORMAT_EXPIRY } else { FORMAT });
    let _ = rmp::encode::write_str(&mut b, &p.cron);
    let _ = rmp::encode::write_str(&mut b, &p.time_zone);
    let _ = rmp::encode::write_str(&mut b, &p.topic);
    let _ = rmp::encode::write_bin(&mut b, &p.body);
    let _ = rmp::encode::write_uint(&mut b, u64::from(p.priority));
    opt(&mut b, p.ttr_ms);
    opt(&mut b, p.max_attempts.map(u64::from));
    let _ = rmp::encode::write_bool(&mut b, p.backoff.is_some());
    if let Some((base, factor, max, jitter)) = p.backoff {
        for n in [base, u64::from(factor), max, u64::from(jitter)] {
            let _ = rmp::encode::write_uint(&mut b, n);
        }
    }
    opt(&mut b, p.start_ms);
    opt(&mut b, p.end_ms);
    let _ = rmp::encode::write_uint(&mut b, p.jitter_ms);
    let _ = rmp::encode::write_uint(&mut b, u64::from(p.misfire));
    let _ = rmp::encode::write_uint(&mut b, u64::from(p.misfire_limit));
    if expiry {
        opt(&mut b, p.max_lateness_ms);
        opt(&mut b, p.expires_at_ms);
        let _ = rmp::encode::write_uint(&mut b, u64::from(p.on_expire));
    }
    b
}

/// Reads back what [`encode`] wrote.
fn decode(mut rd: &[u8]) -> std::result::Result<ScheduleParts, String> {
    let rd = &mut rd;
    let uint = |rd: &mut &[u8]| -> std::result::Result<u64, String> {
        rmp::decode::read_int::<u64, _>(rd).map_err(|e| e.to_string())
    };
    let narrow = |n: u64| u32::try_from(n).map_err(|_| format!("{n} is out of range"));
    let flag = |rd: &mut &[u8]| rmp::decode::read_bool(rd).map_err(|e| e.to_string());
    let text = |rd: &mut &[u8]| -> std::result::Result<String, String> {
        let len = rmp::decode::read_str_len(rd).map_err(|e| e.to_string())? as usize;
        let s = rd.get(..len).ok_or("a text is cut")?;
        let s = String::from_utf8(s.to_vec()).map_err(|e| e.to_string())?;
        *rd = &rd[len..];
        Ok(s)
    };
    let opt = |rd: &mut &[u8]| -> std::result::Result<Option<u64>, String> {
        if flag(rd)? {
            uint(rd).map(Some)
        } else {
            Ok(None)
        }
    };
    let format = uint(rd)?;
    if format != FORMAT && format != FORMAT_EXPIRY {
        return Err(format!(
            "format {format}, written by another delayq version"
        ));
    }
    let cron = text(rd)?;
    let time_zone = text(rd)?;
    let topic = text(rd)?;
    let len = rmp::decode::read_bin_len(rd).map_err(|e| e.to_string())? as usize;
    let body = Bytes::copy_from_slice(rd.get(..len).ok_or("the body is cut")?);
    *rd = &rd[len..];
    let priority = narrow(uint(rd)?)?;
    let ttr_ms = opt(rd)?;
    let max_attempts = opt(rd)?.map(narrow).transpose()?;
    let backoff = if flag(rd)? {
        Some((uint(rd)?, narrow(uint(rd)?)?, uint(rd)?, narrow(uint(rd)?)?))
    } else {
        None
    };
    let start_ms = opt(rd)?;
    let end_ms = opt(rd)?;
    let jitter_ms = uint(rd)?;
    let misfire = u8::try_from(uint(rd)?).map_err(|e| e.to_string())?;
    let misfire_limit = narrow(uint(rd)?)?;
    let (max_lateness_ms, expires_at_ms, on_expire) = if format == FORMAT_EXPIRY {
        let (late, at) = (opt(rd)?, opt(rd)?);
        (
            late,
            at,
            u8::try_from(uint(rd)?).map_err(|e| e.to_string())?,
        )
    } else {
        (None, None, 0)
    };
    Ok(ScheduleParts {
        cron,
        time_zone,
        topic,
        body,
        priority,
        ttr_ms,
        max_attempts,
        backoff,
        start_ms,
        end_ms,
        jitter_ms,
        misfire,
        misfire_limit,
        max_lateness_ms,
        expires_at_ms,
        on_expire,
    })
}

/// A stored schedule from its three fields (definition, revision, through or nil).
fn stored(name: &str, def: Value, rev: &Value, through: &Value) -> Result<StoredSchedule> {
    let bad = |e: String| Error::Internal(format!("stored schedule {name} is invalid: {e}"));
    let name = ScheduleName::new(name).map_err(|e| bad(e.to_string()))?;
    let parts = decode(&codec::bytes(def)?).map_err(bad)?;
    let schedule = JobSchedule::from_parts(name, parts).map_err(|e| bad(e.to_string()))?;
    let revision = codec::opt_field(rev)?.unwrap_or(0);
    let through = codec::opt_field(through)?.map(Timestamp::from_millis);
    Ok(StoredSchedule {
        schedule,
        revision,
        through,
    })
}

impl Ops {
    fn schedule_call(&self, function: &str) -> Cmd {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(function).arg(1).arg(self.keys.schedules());
        cmd
    }

    /// `Schedules::put_schedule`.
    pub(crate) async fn put_schedule(&self, s: &JobSchedule) -> Result<u64> {
        let mut cmd = self.schedule_call(library::SCHEDULE_PUT);
        cmd.arg(s.name().as_str()).arg(encode(&s.parts()));
        codec::uint(&self.conn.call(&cmd, "putting a schedule").await?)
    }

    /// `Schedules::schedule`.
    pub(crate) async fn schedule(&self, name: &ScheduleName) -> Result<Option<StoredSchedule>> {
        let n = name.as_str();
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(self.keys.schedules())
            .arg(format!("d:{n}"))
            .arg(format!("r:{n}"))
            .arg(format!("t:{n}"));
        let mut v = codec::array(self.conn.query(&cmd, "reading a schedule").await?)?;
        if v.len() != 3 {
            return Err(Error::Internal(
                "a schedule read has the wrong length".into(),
            ));
        }
        if matches!(v[0], Value::Nil) {
            return Ok(None);
        }
        let def = std::mem::replace(&mut v[0], Value::Nil);
        stored(n, def, &v[1], &v[2]).map(Some)
    }

    /// `Schedules::schedules`, by name.
    pub(crate) async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(self.keys.schedules());
        let v = codec::array(self.conn.query(&cmd, "listing schedules").await?)?;
        let mut by_name: BTreeMap<String, [Value; 3]> = BTreeMap::new();
        let mut it = v.into_iter();
        while let (Some(field), Some(value)) = (it.next(), it.next()) {
            let field = codec::string(field)?;
            let Some((kind, name)) = field.split_once(':') else {
                continue;
            };
            let slot = match kind {
                "d" => 0,
                "r" => 1,
                "t" => 2,
                _ => continue,
            };
            by_name
                .entry(name.to_string())
                .or_insert([Value::Nil, Value::Nil, Value::Nil])[slot] = value;
        }
        by_name
            .into_iter()
            .filter(|(_, [def, _, _])| !matches!(def, Value::Nil))
            .map(|(name, [def, rev, through])| stored(&name, def, &rev, &through))
            .collect()
    }

    /// `Schedules::delete_schedule`.
    pub(crate) async fn delete_schedule(
        &self,
        name: &ScheduleName,
    ) -> Result<Option<StoredSchedule>> {
        let mut cmd = self.schedule_call(library::SCHEDULE_DELETE);
        cmd.arg(name.as_str());
        let mut v = codec::array(self.conn.call(&cmd, "deleting a schedule").await?)?;
        if v.is_empty() {
            return Ok(None);
        }
        if v.len() != 3 {
            return Err(Error::Internal(
                "a schedule delete has the wrong length".into(),
            ));
        }
        let def = std::mem::replace(&mut v[0], Value::Nil);
        stored(name.as_str(), def, &v[1], &v[2]).map(Some)
    }

    /// `Schedules::schedule_pushed`.
    pub(crate) async fn schedule_pushed(
        &self,
        name: &ScheduleName,
        revision: u64,
        through: Timestamp,
    ) -> Result<bool> {
        let mut cmd = self.schedule_call(library::SCHEDULE_PUSHED);
        cmd.arg(name.as_str())
            .arg(revision)
            .arg(through.as_millis());
        let done = self
            .conn
            .call(&cmd, "recording a schedule's progress")
            .await?;
        Ok(codec::int(&done)? == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_round_trips_and_a_foreign_one_is_refused() {
        let p = ScheduleParts {
            cron: "*/5 * * * *".into(),
            time_zone: "Europe/Berlin".into(),
            topic: "t".into(),
            body: Bytes::from_static(&[0, 1, 255]),
            priority: 3,
            ttr_ms: Some(45_000),
            max_attempts: None,
            backoff: Some((1000, 2, 60_000, 100)),
            start_ms: None,
            end_ms: Some(4_000_000_000_000),
            jitter_ms: 1500,
            misfire: 2,
            misfire_limit: 7,
            max_lateness_ms: None,
            expires_at_ms: None,
            on_expire: 0,
        };
        assert_eq!(decode(&encode(&p)), Ok(p.clone()));
        assert_eq!(
            encode(&p)[0],
            1,
            "no expiry: format 1, which older versions read"
        );
        let mut other = encode(&p);
        other[0] = 3;
        assert!(decode(&other).is_err());
        let cut = encode(&p);
        assert!(decode(&cut[..cut.len() - 3]).is_err());
        // With the jobs' expiry: format 2, read back whole.
        for (late, at, on) in [(Some(30_000), None, 1), (None, Some(4_100_000_000_000), 0)] {
            let q = ScheduleParts {
                max_lateness_ms: late,
                expires_at_ms: at,
                on_expire: on,
                ..p.clone()
            };
            assert_eq!(encode(&q)[0], 2);
            assert_eq!(decode(&encode(&q)), Ok(q.clone()));
            let cut = encode(&q);
            assert!(decode(&cut[..cut.len() - 1]).is_err());
        }
    }
}
