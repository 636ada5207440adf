//! Recurring jobs: a [`JobSchedule`] pushes a job at each fire time of a cron expression in
//! an IANA time zone (issue 14). This module is the pure part: validation, the fire times
//! (daylight-saving changes included), the job each fire pushes, and what a scheduler does
//! at a tick ([`JobSchedule::plan`]): push the next fire ahead of time, and apply the
//! misfire policy to fires that passed while nothing ran. Storing schedules and running the
//! ticks is the engines' and the server's part.
//!
//! The file is long (about 720 lines of code, 450 of tests): the fire times and their
//! daylight-saving edges are tested next to the code that computes them.
//!
//! Exactly one job per fire, whatever the number of schedulers: the job's id is derived from
//! the schedule's name and the fire time ([`JobSchedule::job_id`]), so two schedulers that
//! plan the same fire push the same id, and the idempotent push keeps one job. The jitter is
//! derived from the same two values, so they agree on the due time too.
//!
//! Daylight-saving changes follow Vixie cron (the cron of Debian and macOS), as the `croner`
//! crate evaluates them in the zone: a fire time that does not exist (the hour skipped in
//! spring) fires when the clock jumps (a daily 02:30 fires at 03:00 that day); a fixed fire
//! time that happens twice (the hour repeated in autumn) fires once, at its first occurrence,
//! while an interval (`*/30 * * * *`) fires in both occurrences.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::tz::TimeZone;

use crate::limits::check_ttr;
use crate::{
    Backoff, Error, Expiry, JobId, NewJob, OnExpire, Schedule, Timestamp, Topic,
    check_expiry_value, check_max_attempts,
};

/// Longest accepted schedule name, in characters.
pub const MAX_SCHEDULE_NAME_LEN: usize = 100;
/// The largest jitter: a fire's job is due up to this much after its fire time.
pub const MAX_JITTER: Duration = Duration::from_secs(3600);
/// The most missed fires [`Misfire::Each`] pushes at once.
pub const MAX_MISFIRE_LIMIT: u32 = 1000;
/// The most a fire may be late and still be pushed whatever the misfire policy (as Quartz's
/// misfire threshold, Sidekiq-cron's grace period). A fire is late, not missed, when it is
/// the first one after the fire pushed last and the tick that finds it unpushed comes less
/// than its grace after it: this constant or the time from the fire before it (the
/// schedule's interval there), whichever is shorter ([`JobSchedule::grace`]). So a
/// scheduler slow to push the next fire ahead (a busy machine, a quick restart) loses
/// nothing, while after an outage of more than one interval the missed fires follow the
/// policy alone: with [`Misfire::Skip`] only the fire pushed ahead before the outage comes
/// (late), never a burst of the fires of the last minute.
pub const MISFIRE_GRACE: Duration = Duration::from_secs(60);
/// How far ahead a fire is looked for. Cron has no year field, so an expression that matches
/// at all matches within 28 years; one that matches nothing (e.g. `0 0 30 2 *`, the 30th of
/// February) is refused.
const HORIZON_YEARS: i16 = 30;

/// What a scheduler does with fire times that passed while no scheduler ran (the servers
/// were down, or the schedule was paused by its start time being moved).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Misfire {
    /// Push nothing for them; the next fire comes at its time (as cron does). The default.
    #[default]
    Skip,
    /// Push one job now, for the latest of them (as anacron does).
    Once,
    /// Push a job now for each of them, at most this many (the latest ones), in fire order.
    Each(u32),
}

/// The job each fire pushes: everything of a [`NewJob`] but the id, the due time and what a
/// push does on a conflict (a fire's push keeps a job of its id).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct JobTemplate {
    /// The payload.
    pub body: Bytes,
    /// Among due jobs, lower runs first.
    pub priority: u32,
    /// The lease length; `None`: the topic's default.
    pub ttr: Option<Duration>,
    /// Deliveries before dead; `None`: the topic's default.
    pub max_attempts: Option<u32>,
    /// The retry delays; `None`: the topic's default.
    pub backoff: Option<Backoff>,
    /// The latest each job may be delivered, as a push's [`Expiry`]; `None`: no limit.
    /// [`Expiry::AfterDue`] (`max_lateness`) counts from each job's due time: its fire time
    /// plus jitter, or the tick's time for a missed fire pushed late. [`Expiry::At`]
    /// (`expires_at`) is one time for every job, so the schedule pushes no job due at or
    /// after it: its fires end there.
    pub expiry: Option<Expiry>,
    /// What happens to a job whose expiry passed before a delivery (default: dead with the
    /// reason `expired`).
    pub on_expire: OnExpire,
}

/// A schedule's name: 1 to 100 characters from `[A-Za-z0-9_.:-]`, as a topic.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct ScheduleName(String);

impl ScheduleName {
    /// Validates and wraps a name.
    pub fn new(name: impl Into<String>) -> Result<Self, Error> {
        let name = name.into();
        let reason = if name.is_empty() {
            Some("it is empty")
        } else if name.len() > MAX_SCHEDULE_NAME_LEN {
            Some("it is longer than 100 characters")
        } else if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
        {
            Some("it has a character outside A-Z a-z 0-9 _ . : -")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(Error::invalid(
                "schedule name",
                format!("{:?}: {reason}", name.chars().take(120).collect::<String>()),
            )),
            None => Ok(ScheduleName(name)),
        }
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ScheduleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A recurring job: a cron expression in a time zone, the topic and the job it pushes at
/// each fire time, an optional window (`start`, `end`), a jitter and a [`Misfire`] policy.
///
/// ```
/// use delayq_core::{JobSchedule, JobTemplate, Misfire, ScheduleName, Timestamp, Topic};
///
/// let s = JobSchedule::new(
///     ScheduleName::new("nightly-report").unwrap(),
///     "30 2 * * *",          // 02:30 every day (a sixth, leading field would be seconds)
///     "Europe/Berlin",
///     Topic::new("reports").unwrap(),
///     JobTemplate { body: "build it".into(), ..JobTemplate::default() },
/// )
/// .unwrap()
/// .with_misfire(Misfire::Once);
/// // 2026-03-28 12:00 UTC: the next fire is 2026-03-29 03:00 in Berlin (02:30 does not
/// // exist that night), 01:00 UTC.
/// let next = s.next_fire_after(Timestamp::from_millis(1_774_699_200_000)).unwrap();
/// assert_eq!(next.as_millis(), 1_774_746_000_000);
/// ```
#[derive(Clone)]
pub struct JobSchedule {
    name: ScheduleName,
    cron: String,
    parsed: Cron,
    time_zone: String,
    zone: TimeZone,
    topic: Topic,
    template: JobTemplate,
    start: Option<Timestamp>,
    end: Option<Timestamp>,
    jitter: Duration,
    misfire: Misfire,
}

impl fmt::Debug for JobSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobSchedule")
            .field("name", &self.name)
            .field("cron", &self.cron)
            .field("time_zone", &self.time_zone)
            .field("topic", &self.topic)
            .field("template", &self.template)
            .field("start", &self.start)
            .field("end", &self.end)
            .field("jitter", &self.jitter)
            .field("misfire", &self.misfire)
            .finish()
    }
}

impl PartialEq for JobSchedule {
    fn eq(&self, o: &Self) -> bool {
        (
            &self.name,
            &self.cron,
            &self.time_zone,
            &self.topic,
            &self.template,
        ) == (&o.name, &o.cron, &o.time_zone, &o.topic, &o.template)
            && (self.start, self.end, self.jitter, self.misfire)
                == (o.start, o.end, o.jitter, o.misfire)
    }
}

/// A [`JobSchedule`] as plain values, for an engine to store and read back
/// ([`JobSchedule::parts`], [`JobSchedule::from_parts`]): durations and times in ms, the
/// back-off as its four parts, the misfire policy as a code (0 skip, 1 once, 2 each) and
/// its limit (0 unless each), the jobs' expiry as one of two times and what happens at it
/// as a code (0 dead, 1 drop).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleParts {
    /// The cron expression.
    pub cron: String,
    /// The time zone's name.
    pub time_zone: String,
    /// The topic's name.
    pub topic: String,
    /// The job's body.
    pub body: Bytes,
    /// The job's priority.
    pub priority: u32,
    /// The job's ttr in ms.
    pub ttr_ms: Option<u64>,
    /// The job's attempts.
    pub max_attempts: Option<u32>,
    /// The job's back-off: base ms, factor, max ms, jitter permille.
    pub backoff: Option<(u64, u32, u64, u32)>,
    /// The window's start, ms.
    pub start_ms: Option<u64>,
    /// The window's end, ms.
    pub end_ms: Option<u64>,
    /// The jitter, ms.
    pub jitter_ms: u64,
    /// The misfire policy's code.
    pub misfire: u8,
    /// The misfire policy's limit.
    pub misfire_limit: u32,
    /// The jobs' `max_lateness` in ms ([`Expiry::AfterDue`]); at most one of this and
    /// `expires_at_ms`.
    pub max_lateness_ms: Option<u64>,
    /// The jobs' `expires_at` in ms ([`Expiry::At`]).
    pub expires_at_ms: Option<u64>,
    /// What happens to an expired job: 0 dead, 1 drop.
    pub on_expire: u8,
}

/// What a scheduler does at one tick for one schedule ([`JobSchedule::plan`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The jobs to push, in fire order: the missed fires the policy keeps (due now), then
    /// the next fire (due at its time plus jitter), if there is one.
    pub push: Vec<NewJob>,
    /// The latest fire time covered by `push` (pushed, or skipped by the policy): what the
    /// schedule records as pushed through once the pushes succeeded. `None` when the tick
    /// changes nothing.
    pub through: Option<Timestamp>,
    /// The next fire time, if the schedule has one.
    pub next: Option<Timestamp>,
    /// Missed fire times the policy dropped, and fires whose job would be due at or after
    /// the template's `expires_at` (never pushed).
    pub skipped: u64,
}

impl JobSchedule {
    /// A schedule with no window, no jitter and [`Misfire::Skip`]; checks the cron
    /// expression (five fields, six with seconds first, or a nickname: `@yearly`,
    /// `@annually`, `@monthly`, `@weekly`, `@daily`, `@hourly`; a seventh field, the year,
    /// is refused), the time zone (an IANA name such as `Europe/Berlin`, or `UTC`) and the
    /// template.
    pub fn new(
        name: ScheduleName,
        cron: &str,
        time_zone: &str,
        topic: Topic,
        template: JobTemplate,
    ) -> Result<Self, Error> {
        Self::build(name, cron, time_zone, topic, template, Year::Disallowed)
    }

    /// [`JobSchedule::new`], with `years` saying whether a seventh field (the year) parses:
    /// only for a definition stored before it was refused, which must still run.
    fn build(
        name: ScheduleName,
        cron: &str,
        time_zone: &str,
        topic: Topic,
        template: JobTemplate,
        years: Year,
    ) -> Result<Self, Error> {
        const FIELDS: &str = "give five fields (minute hour day-of-month month day-of-week), six with seconds first, or a nickname such as @daily, e.g. \"*/5 * * * *\"";
        if years.is_disallowed() && cron.split_whitespace().count() == 7 {
            return Err(Error::invalid(
                "cron",
                format!(
                    "{cron:?} has seven fields, and a seventh (the year) is not supported; {FIELDS}, and bound the schedule with start and end"
                ),
            ));
        }
        let parsed = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(years)
            .build()
            .parse(cron)
            .map_err(|e| Error::invalid("cron", format!("{cron:?}: {e}; {FIELDS}")))?;
        let zone = TimeZone::get(time_zone).map_err(|_| {
            Error::invalid(
                "time_zone",
                format!(
                    "{time_zone:?} is not a time zone name; give an IANA name such as \"Europe/Berlin\" or \"UTC\""
                ),
            )
        })?;
        if let Some(ttr) = template.ttr {
            check_ttr(ttr)?;
        }
        if let Some(n) = template.max_attempts {
            check_max_attempts(n)?;
        }
        if let Some(b) = &template.backoff {
            b.validate()?;
        }
        if let Some(e) = template.expiry {
            check_expiry_value(e)?;
        }
        let s = JobSchedule {
            name,
            cron: cron.trim().to_string(),
            parsed,
            time_zone: time_zone.to_string(),
            zone,
            topic,
            template,
            start: None,
            end: None,
            jitter: Duration::ZERO,
            misfire: Misfire::Skip,
        };
        // A pattern that never matches (the 30th of February) is refused now, not found out
        // by a scheduler that waits forever. Cron has no year field, so whatever matches at
        // all matches within 28 years (the calendar repeats); look from a fixed instant.
        let probe = Timestamp::from_millis(1_700_000_000_000);
        if s.raw_next(probe, HORIZON_YEARS).is_none() {
            return Err(Error::invalid(
                "cron",
                format!(
                    "{cron:?} matches no time at all; check the day of month against the month"
                ),
            ));
        }
        Ok(s)
    }

    /// Fires only at or after `start` and at or before `end`; refuses an `end` before
    /// `start`.
    pub fn with_window(
        mut self,
        start: Option<Timestamp>,
        end: Option<Timestamp>,
    ) -> Result<Self, Error> {
        if let (Some(s), Some(e)) = (start, end)
            && e < s
        {
            return Err(Error::invalid(
                "end",
                "the schedule's end is before its start; give an end at or after the start",
            ));
        }
        self.start = start;
        self.end = end;
        Ok(self)
    }

    /// Each fire's job is due up to `jitter` after the fire time (spreading the load of many
    /// schedules on one minute), at most [`MAX_JITTER`].
    pub fn with_jitter(mut self, jitter: Duration) -> Result<Self, Error> {
        if jitter > MAX_JITTER {
            return Err(Error::invalid(
                "jitter",
                format!(
                    "{} ms is over the 1 h limit; give at most 3600000 ms",
                    jitter.as_millis()
                ),
            ));
        }
        self.jitter = jitter;
        Ok(self)
    }

    /// Sets the misfire policy; [`Misfire::Each`] takes 1 to [`MAX_MISFIRE_LIMIT`].
    pub fn with_misfire(mut self, misfire: Misfire) -> Self {
        self.misfire = misfire;
        self
    }

    /// Checks what the `with_*` setters take without a `Result` (the misfire limit).
    pub fn validate(&self) -> Result<(), Error> {
        if let Misfire::Each(n) = self.misfire
            && !(1..=MAX_MISFIRE_LIMIT).contains(&n)
        {
            return Err(Error::invalid(
                "misfire",
                format!(
                    "fire each missed one up to {n}: give a limit from 1 to {MAX_MISFIRE_LIMIT}"
                ),
            ));
        }
        Ok(())
    }

    /// The name.
    pub fn name(&self) -> &ScheduleName {
        &self.name
    }
    /// The cron expression as given (trimmed).
    pub fn cron(&self) -> &str {
        &self.cron
    }
    /// The time zone's name.
    pub fn time_zone(&self) -> &str {
        &self.time_zone
    }
    /// The topic its jobs go to.
    pub fn topic(&self) -> &Topic {
        &self.topic
    }
    /// The job each fire pushes.
    pub fn template(&self) -> &JobTemplate {
        &self.template
    }
    /// The first time it may fire.
    pub fn start(&self) -> Option<Timestamp> {
        self.start
    }
    /// The last time it may fire.
    pub fn end(&self) -> Option<Timestamp> {
        self.end
    }
    /// The jitter.
    pub fn jitter(&self) -> Duration {
        self.jitter
    }
    /// The misfire policy.
    pub fn misfire(&self) -> Misfire {
        self.misfire
    }

    /// The schedule as plain values, for storage.
    pub fn parts(&self) -> ScheduleParts {
        let t = &self.template;
        let (misfire, misfire_limit) = match self.misfire {
            Misfire::Skip => (0, 0),
            Misfire::Once => (1, 0),
            Misfire::Each(n) => (2, n),
        };
        ScheduleParts {
            cron: self.cron.clone(),
            time_zone: self.time_zone.clone(),
            topic: self.topic.as_str().to_string(),
            body: t.body.clone(),
            priority: t.priority,
            ttr_ms: t.ttr.map(crate::duration_ms),
            max_attempts: t.max_attempts,
            backoff: t
                .backoff
                .map(|b| (b.base_ms(), b.factor(), b.max_ms(), b.jitter_permille())),
            start_ms: self.start.map(Timestamp::as_millis),
            end_ms: self.end.map(Timestamp::as_millis),
            jitter_ms: crate::duration_ms(self.jitter),
            misfire,
            misfire_limit,
            max_lateness_ms: match t.expiry {
                Some(Expiry::AfterDue(d)) => Some(crate::duration_ms(d)),
                _ => None,
            },
            expires_at_ms: match t.expiry {
                Some(Expiry::At(at)) => Some(at.as_millis()),
                _ => None,
            },
            on_expire: match t.on_expire {
                OnExpire::Dead => 0,
                OnExpire::Drop => 1,
            },
        }
    }

    /// A schedule from what [`JobSchedule::parts`] gave, checked as [`JobSchedule::new`]
    /// and the setters check (a stored schedule that no longer passes is an error), but for
    /// a year field, which a definition stored before it was refused may have.
    pub fn from_parts(name: ScheduleName, p: ScheduleParts) -> Result<Self, Error> {
        let misfire = match (p.misfire, p.misfire_limit) {
            (0, _) => Misfire::Skip,
            (1, _) => Misfire::Once,
            (2, n) => Misfire::Each(n),
            (k, _) => {
                return Err(Error::invalid(
                    "misfire",
                    format!("unknown misfire policy code {k}"),
                ));
            }
        };
        let expiry = match (p.max_lateness_ms, p.expires_at_ms) {
            (None, None) => None,
            (Some(d), None) => Some(Expiry::AfterDue(Duration::from_millis(d))),
            (None, Some(at)) => Some(Expiry::At(Timestamp::from_millis(at))),
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "expires_at",
                    "a schedule has both max_lateness and expires_at; give one",
                ));
            }
        };
        let on_expire = match p.on_expire {
            0 => OnExpire::Dead,
            1 => OnExpire::Drop,
            k => {
                return Err(Error::invalid(
                    "on_expire",
                    format!("unknown on_expire code {k}"),
                ));
            }
        };
        let template = JobTemplate {
            body: p.body,
            priority: p.priority,
            ttr: p.ttr_ms.map(Duration::from_millis),
            max_attempts: p.max_attempts,
            backoff: p
                .backoff
                .map(|(base, factor, max, jitter)| Backoff::from_parts(base, factor, max, jitter)),
            expiry,
            on_expire,
        };
        let topic = Topic::new(p.topic)?;
        let s = JobSchedule::build(name, &p.cron, &p.time_zone, topic, template, Year::Optional)?
            .with_window(
                p.start_ms.map(Timestamp::from_millis),
                p.end_ms.map(Timestamp::from_millis),
            )?
            .with_jitter(Duration::from_millis(p.jitter_ms))?
            .with_misfire(misfire);
        s.validate()?;
        Ok(s)
    }

    /// The first cron match strictly after `t`, within `years`, ignoring the window.
    fn raw_next(&self, t: Timestamp, years: i16) -> Option<Timestamp> {
        let ms = i64::try_from(t.as_millis()).ok()?;
        let from = jiff::Timestamp::from_millisecond(ms)
            .ok()?
            .to_zoned(self.zone.clone());
        let limit = from.year().saturating_add(years);
        let next = self.parsed.find_next_occurrence(&from, false).ok()?;
        if next.year() > limit {
            return None;
        }
        u64::try_from(next.timestamp().as_millisecond())
            .ok()
            .map(Timestamp::from_millis)
    }

    /// The first fire time strictly after `t` within the window (and before the template's
    /// `expires_at`), if any.
    pub fn next_fire_after(&self, t: Timestamp) -> Option<Timestamp> {
        let from = match self.start {
            // A fire exactly at start counts: look from just before it.
            Some(s) if s.as_millis() > t.as_millis() => {
                Timestamp::from_millis(s.as_millis().saturating_sub(1))
            }
            _ => t,
        };
        let next = self.raw_next(from, HORIZON_YEARS)?;
        match (self.end, self.template.expiry) {
            (Some(end), _) if next > end => None,
            (_, Some(Expiry::At(expires))) if next >= expires => None,
            _ => Some(next),
        }
    }

    /// How late `fire` may be found unpushed and still be pushed whatever the misfire
    /// policy, when `previous` is the fire before it: [`MISFIRE_GRACE`] or the time between
    /// the two, whichever is shorter. A 10-second schedule's fire is late for 10 s, a daily
    /// one's for 60 s.
    pub fn grace(previous: Timestamp, fire: Timestamp) -> Duration {
        MISFIRE_GRACE.min(fire.since(previous))
    }

    /// The fire times in (`after`, `until`], in order, at most `limit` of them: the first
    /// ones.
    pub fn fires_between(
        &self,
        after: Timestamp,
        until: Timestamp,
        limit: usize,
    ) -> Vec<Timestamp> {
        let mut out = Vec::new();
        let mut t = after;
        while out.len() < limit {
            match self.next_fire_after(t) {
                Some(f) if f <= until => {
                    out.push(f);
                    t = f;
                }
                _ => break,
            }
        }
        out
    }

    /// The id of the job a fire pushes: `schedule:<name>:<fire time in ms>`.
    pub fn job_id(&self, fire: Timestamp) -> JobId {
        // The name's alphabet and length keep this within JobId's (at most 130 characters).
        JobId::new(format!("schedule:{}:{}", self.name, fire.as_millis()))
            .unwrap_or_else(|_| JobId::generate())
    }

    /// How long after `fire` its job is due: a value in [0, jitter) derived from the name and
    /// the fire time (FNV-1a), so that every scheduler computes the same.
    pub fn jitter_for(&self, fire: Timestamp) -> Duration {
        let span = u64::try_from(self.jitter.as_millis()).unwrap_or(u64::MAX);
        if span == 0 {
            return Duration::ZERO;
        }
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self
            .name
            .as_str()
            .bytes()
            .chain(fire.as_millis().to_be_bytes())
        {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Duration::from_millis(h % span)
    }

    /// The job a fire pushes, due at `at`.
    pub fn job_for(&self, fire: Timestamp, at: Timestamp) -> NewJob {
        let t = &self.template;
        NewJob {
            topic: self.topic.clone(),
            id: self.job_id(fire),
            body: t.body.clone(),
            schedule: Schedule::At(at),
            ttr: t.ttr,
            max_attempts: t.max_attempts,
            backoff: t.backoff,
            priority: t.priority,
            on_conflict: crate::OnConflict::Keep,
            expiry: t.expiry,
            on_expire: t.on_expire,
        }
    }

    /// What to do at engine time `now`, given the latest fire time already pushed
    /// (`through`; `None` for a schedule that never fired: nothing before `now` counts as
    /// missed). Fires in (`through`, `now`] were missed: the policy decides which are pushed
    /// (due now), but for the first of them when it is only late (less than its
    /// [`JobSchedule::grace`] ago), which is pushed whatever the policy. Then the next fire
    /// after `now` is pushed ahead of time (due at its time plus jitter), so that the engine
    /// delivers it on time whether or not a scheduler runs then. A tick whose `through`
    /// already covers the next fire changes nothing. No job due at or after the template's
    /// `expires_at` is pushed (it is counted as skipped).
    pub fn plan(&self, through: Option<Timestamp>, now: Timestamp) -> Plan {
        let mut push = Vec::new();
        let mut skipped = 0u64;
        let mut covered = through;
        if let Some(last) = through
            && last < now
        {
            let keep = match self.misfire {
                Misfire::Skip => 0,
                Misfire::Once => 1,
                Misfire::Each(n) => n as usize,
            };
            // Only the fire right after the one pushed last can be late: a scheduler that
            // ticked after it but within its grace was slow, not down. Any fire after that
            // one passed during an outage, and the policy alone decides.
            let late = self
                .next_fire_after(last)
                .filter(|&f| f <= now && now.since(f) < Self::grace(last, f));
            // The missed fires, counted up to a bound, keeping the latest `keep`.
            let mut missed: std::collections::VecDeque<Timestamp> =
                std::collections::VecDeque::new();
            let mut t = last;
            while let Some(f) = self.next_fire_after(t) {
                if f > now || skipped > 1_000_000 {
                    break;
                }
                if Some(f) != late {
                    missed.push_back(f);
                    if missed.len() > keep {
                        missed.pop_front();
                        skipped += 1;
                    }
                }
                t = f;
            }
            if t > last {
                covered = Some(t);
            }
            push.extend(late.into_iter().chain(missed).map(|f| self.job_for(f, now)));
        }
        let next = self.next_fire_after(now);
        if let Some(f) = next
            && covered.is_none_or(|c| c < f)
        {
            push.push(self.job_for(f, f.plus(self.jitter_for(f))));
            covered = Some(f);
        }
        // A job due at or after the one expiry of every job could never run; its push would
        // be refused.
        if let Some(Expiry::At(expires)) = self.template.expiry {
            let before = push.len();
            push.retain(|j| matches!(j.schedule, Schedule::At(due) if due < expires));
            skipped += (before - push.len()) as u64;
        }
        let through = if covered == through { None } else { covered };
        Plan {
            push,
            through,
            next,
            skipped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000;
    const HOUR: u64 = 60 * MIN;

    fn at(s: &str) -> Timestamp {
        let t: jiff::Timestamp = s.parse().unwrap();
        Timestamp::from_millis(u64::try_from(t.as_millisecond()).unwrap())
    }

    fn sched(cron: &str, tz: &str) -> JobSchedule {
        JobSchedule::new(
            ScheduleName::new("s1").unwrap(),
            cron,
            tz,
            Topic::new("t").unwrap(),
            JobTemplate {
                body: Bytes::from_static(b"x"),
                ..JobTemplate::default()
            },
        )
        .unwrap()
    }

    fn fires(s: &JobSchedule, from: &str, n: usize) -> Vec<Timestamp> {
        s.fires_between(at(from), Timestamp::from_millis(u64::MAX / 2), n)
    }

    #[test]
    fn a_fire_in_the_skipped_spring_hour_fires_when_the_clock_jumps() {
        // Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00 UTC).
        let s = sched("30 2 * * *", "Europe/Berlin");
        assert_eq!(
            fires(&s, "2026-03-27T12:00:00Z", 3),
            vec![
                at("2026-03-28T01:30:00Z"), // 02:30 CET
                at("2026-03-29T01:00:00Z"), // 03:00 CEST: 02:30 does not exist
                at("2026-03-30T00:30:00Z"), // 02:30 CEST
            ]
        );
        // New York, 2026-03-08, with a seconds field.
        let s = sched("0 30 2 * * *", "America/New_York");
        assert_eq!(
            fires(&s, "2026-03-07T12:00:00Z", 2),
            vec![at("2026-03-08T07:00:00Z"), at("2026-03-09T06:30:00Z")]
        );
    }

    #[test]
    fn the_repeated_autumn_hour_fires_a_fixed_time_once_and_an_interval_twice() {
        // Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00 UTC).
        let s = sched("30 2 * * *", "Europe/Berlin");
        assert_eq!(
            fires(&s, "2026-10-24T12:00:00Z", 2),
            vec![at("2026-10-25T00:30:00Z"), at("2026-10-26T01:30:00Z")]
        );
        let s = sched("*/30 * * * *", "Europe/Berlin");
        assert_eq!(
            fires(&s, "2026-10-24T23:10:00Z", 6),
            vec![
                at("2026-10-24T23:30:00Z"), // 01:30 CEST
                at("2026-10-25T00:00:00Z"), // 02:00 CEST
                at("2026-10-25T00:30:00Z"), // 02:30 CEST
                at("2026-10-25T01:00:00Z"), // 02:00 CET, the hour again
                at("2026-10-25T01:30:00Z"), // 02:30 CET
                at("2026-10-25T02:00:00Z"), // 03:00 CET
            ]
        );
    }

    #[test]
    fn bad_input_names_the_field() {
        let name = || ScheduleName::new("n").unwrap();
        let topic = || Topic::new("t").unwrap();
        let e = |r: Result<JobSchedule, Error>| r.unwrap_err().to_string();
        let t = JobTemplate::default;
        assert!(e(JobSchedule::new(name(), "61 * * * *", "UTC", topic(), t())).contains("cron"));
        assert!(e(JobSchedule::new(name(), "* * *", "UTC", topic(), t())).contains("cron"));
        assert!(
            e(JobSchedule::new(name(), "0 0 30 2 *", "UTC", topic(), t()))
                .contains("matches no time")
        );
        assert!(
            e(JobSchedule::new(
                name(),
                "* * * * *",
                "Mars/Olympus",
                topic(),
                t()
            ))
            .contains("time_zone")
        );
        let long_ttr = JobTemplate {
            ttr: Some(Duration::from_secs(100 * 3600)),
            ..JobTemplate::default()
        };
        assert!(
            e(JobSchedule::new(
                name(),
                "* * * * *",
                "UTC",
                topic(),
                long_ttr
            ))
            .contains("ttr")
        );
        assert!(ScheduleName::new("has space").is_err());
        assert!(ScheduleName::new("x".repeat(101)).is_err());
        let s = sched("* * * * *", "UTC");
        assert!(s.clone().with_jitter(Duration::from_secs(3601)).is_err());
        assert!(
            s.clone()
                .with_window(
                    Some(at("2026-01-02T00:00:00Z")),
                    Some(at("2026-01-01T00:00:00Z"))
                )
                .is_err()
        );
        assert!(s.clone().with_misfire(Misfire::Each(0)).validate().is_err());
        assert!(s.with_misfire(Misfire::Each(5)).validate().is_ok());
    }

    #[test]
    fn the_window_bounds_the_fires() {
        let s = sched("0 * * * *", "UTC")
            .with_window(
                Some(at("2026-01-01T03:00:00Z")),
                Some(at("2026-01-01T05:00:00Z")),
            )
            .unwrap();
        assert_eq!(
            fires(&s, "2026-01-01T00:00:00Z", 10),
            vec![
                at("2026-01-01T03:00:00Z"),
                at("2026-01-01T04:00:00Z"),
                at("2026-01-01T05:00:00Z"),
            ]
        );
    }

    #[test]
    fn a_new_schedule_pushes_its_next_fire_ahead_and_nothing_before() {
        let s = sched("0 * * * *", "UTC");
        let now = at("2026-01-01T10:20:00Z");
        let p = s.plan(None, now);
        let next = at("2026-01-01T11:00:00Z");
        assert_eq!(p.push.len(), 1);
        assert_eq!(p.push[0].id, s.job_id(next));
        assert_eq!(p.push[0].schedule, Schedule::At(next));
        assert_eq!((p.through, p.next, p.skipped), (Some(next), Some(next), 0));
        // A second tick (another server, or the same one later) changes nothing.
        let again = s.plan(p.through, at("2026-01-01T10:40:00Z"));
        assert!(
            again.push.is_empty() && again.through.is_none(),
            "{again:?}"
        );
    }

    #[test]
    fn missed_fires_follow_the_policy() {
        let base = sched("0 * * * *", "UTC");
        // Pushed through 06:00; nothing ran until 10:20: 07, 08, 09, 10 were missed.
        let through = Some(at("2026-01-01T06:00:00Z"));
        let now = at("2026-01-01T10:20:00Z");
        let ids = |p: &Plan| p.push.iter().map(|j| j.id.to_string()).collect::<Vec<_>>();
        let h = |n: u64| at("2026-01-01T00:00:00Z").plus(Duration::from_millis(n * HOUR));

        let skip = base.clone().plan(through, now);
        assert_eq!(ids(&skip), vec![base.job_id(h(11)).to_string()]);
        assert_eq!((skip.skipped, skip.through), (4, Some(h(11))));

        let once = base.clone().with_misfire(Misfire::Once).plan(through, now);
        assert_eq!(
            ids(&once),
            vec![
                base.job_id(h(10)).to_string(),
                base.job_id(h(11)).to_string()
            ]
        );
        assert_eq!(
            once.push[0].schedule,
            Schedule::At(now),
            "a missed fire is due now"
        );
        assert_eq!(once.skipped, 3);

        let each = base
            .clone()
            .with_misfire(Misfire::Each(3))
            .plan(through, now);
        assert_eq!(
            ids(&each),
            [8, 9, 10, 11]
                .map(|n| base.job_id(h(n)).to_string())
                .to_vec()
        );
        assert_eq!(each.skipped, 1);
    }

    #[test]
    fn jitter_is_the_same_for_every_scheduler_and_within_bounds() {
        let s = sched("* * * * *", "UTC")
            .with_jitter(Duration::from_secs(30))
            .unwrap();
        let f = at("2026-01-01T00:01:00Z");
        let j = s.jitter_for(f);
        assert_eq!(j, s.clone().jitter_for(f));
        assert!(j < Duration::from_secs(30));
        let spread: std::collections::BTreeSet<_> = (0..50)
            .map(|i| s.jitter_for(f.plus(Duration::from_millis(i * MIN))))
            .collect();
        assert!(spread.len() > 40, "jitter should vary by fire: {spread:?}");
        let p = s.plan(None, at("2026-01-01T00:00:30Z"));
        assert_eq!(p.push[0].schedule, Schedule::At(f.plus(j)));
    }

    #[test]
    fn an_ended_schedule_has_no_next_fire() {
        let s = sched("0 * * * *", "UTC")
            .with_window(None, Some(at("2026-01-01T05:00:00Z")))
            .unwrap();
        let p = s.plan(Some(at("2026-01-01T05:00:00Z")), at("2026-01-01T07:00:00Z"));
        assert_eq!((p.push.len(), p.next, p.through), (0, None, None));
    }

    #[test]
    fn parts_round_trip() {
        let s = sched("*/5 * * * *", "America/New_York")
            .with_window(Some(at("2026-01-01T00:00:00Z")), None)
            .unwrap()
            .with_jitter(Duration::from_secs(3))
            .unwrap()
            .with_misfire(Misfire::Each(7));
        let back = JobSchedule::from_parts(s.name().clone(), s.parts()).unwrap();
        assert_eq!(back, s);
        let mut bad = s.parts();
        bad.misfire = 9;
        assert!(JobSchedule::from_parts(s.name().clone(), bad).is_err());
    }

    #[test]
    fn a_fire_less_than_its_grace_ago_is_late_not_missed() {
        let s = sched("* * * * *", "UTC");
        let ids = |p: &Plan| p.push.iter().map(|j| j.id.to_string()).collect::<Vec<_>>();
        // Pushed through 10:00; the tick comes at 10:01:30: 10:01 passed 30 s before, less
        // than its grace (60 s): late, pushed (due now), and 10:02 ahead.
        let p = s.plan(Some(at("2026-01-01T10:00:00Z")), at("2026-01-01T10:01:30Z"));
        assert_eq!(
            ids(&p),
            vec![
                s.job_id(at("2026-01-01T10:01:00Z")).to_string(),
                s.job_id(at("2026-01-01T10:02:00Z")).to_string(),
            ]
        );
        assert_eq!(p.push[0].schedule, Schedule::At(at("2026-01-01T10:01:30Z")));
        assert_eq!(p.skipped, 0);
        // At 10:02:30, 10:01 passed 90 s before: missed, and so is 10:02 (only the first
        // fire after the one pushed last can be late).
        let p = s.plan(Some(at("2026-01-01T10:00:00Z")), at("2026-01-01T10:02:30Z"));
        assert_eq!(
            ids(&p),
            vec![s.job_id(at("2026-01-01T10:03:00Z")).to_string()]
        );
        assert_eq!(p.skipped, 2);
    }

    /// The grace scales with the interval: a fire is late for 60 s, or for the time from
    /// the fire before it when that is shorter.
    #[test]
    fn the_grace_is_the_interval_when_under_a_minute_issue_36() {
        // See: issue 36.
        let t = |s: &str| at(&format!("2026-01-01T{s}Z"));
        assert_eq!(
            JobSchedule::grace(t("10:00:00"), t("10:00:10")),
            Duration::from_secs(10)
        );
        assert_eq!(
            JobSchedule::grace(t("10:00:00"), t("11:00:00")),
            MISFIRE_GRACE
        );
        let s = sched("*/10 * * * * *", "UTC");
        let ids = |p: &Plan| p.push.iter().map(|j| j.id.to_string()).collect::<Vec<_>>();
        // 10:00:20 found 5 s after it: late, pushed; found 15 s after it: missed.
        let p = s.plan(Some(t("10:00:10")), t("10:00:25"));
        assert_eq!(
            ids(&p),
            vec![
                s.job_id(t("10:00:20")).to_string(),
                s.job_id(t("10:00:30")).to_string()
            ]
        );
        let p = s.plan(Some(t("10:00:10")), t("10:00:35"));
        assert_eq!(ids(&p), vec![s.job_id(t("10:00:40")).to_string()]);
        assert_eq!(p.skipped, 2);
    }

    /// After a 100 s outage of a 10-second schedule, `skip` pushes nothing for the ten
    /// fires it missed (it used to push the seven of its last minute at once), `once` one,
    /// `each` its limit; the next fire is pushed ahead as always.
    #[test]
    fn after_an_outage_skip_pushes_no_burst_issue_36() {
        // See: issue 36.
        let t = |s: &str| at(&format!("2026-01-01T{s}Z"));
        let s = sched("*/10 * * * * *", "UTC");
        let (through, now) = (Some(t("10:00:10")), t("10:01:50"));
        let ids = |p: &Plan| p.push.iter().map(|j| j.id.to_string()).collect::<Vec<_>>();
        let skip = s.plan(through, now);
        assert_eq!(ids(&skip), vec![s.job_id(t("10:02:00")).to_string()]);
        assert_eq!((skip.skipped, skip.through), (10, Some(t("10:02:00"))));
        let once = s.clone().with_misfire(Misfire::Once).plan(through, now);
        assert_eq!(
            ids(&once),
            vec![
                s.job_id(t("10:01:50")).to_string(),
                s.job_id(t("10:02:00")).to_string()
            ]
        );
        let each = s.clone().with_misfire(Misfire::Each(3)).plan(through, now);
        assert_eq!(each.push.len(), 4, "{:?}", ids(&each));
        assert_eq!(each.skipped, 7);
    }

    /// Five or six fields, or a nickname; a seventh field (the year) is refused with what
    /// to give instead, but a definition stored with one still runs.
    #[test]
    fn seven_fields_are_refused_and_nicknames_accepted_issue_36() {
        // See: issue 36.
        let name = || ScheduleName::new("n").unwrap();
        let topic = || Topic::new("t").unwrap();
        let e = JobSchedule::new(
            name(),
            "0 0 0 1 1 * 2030",
            "UTC",
            topic(),
            JobTemplate::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("seven fields") && e.contains("start and end"),
            "{e}"
        );
        for (nick, same) in [
            ("@daily", "0 0 * * *"),
            ("@HOURLY", "0 * * * *"),
            ("@weekly", "0 0 * * 0"),
            ("@monthly", "0 0 1 * *"),
            ("@yearly", "0 0 1 1 *"),
            ("@annually", "0 0 1 1 *"),
        ] {
            let a = sched(nick, "UTC");
            let b = sched(same, "UTC");
            assert_eq!(
                fires(&a, "2026-01-01T10:20:00Z", 3),
                fires(&b, "2026-01-01T10:20:00Z", 3),
                "{nick}"
            );
        }
        let mut stored = sched("0 0 * * *", "UTC").parts();
        stored.cron = "0 0 0 * * * *".into();
        let s = JobSchedule::from_parts(name(), stored).expect("a stored year field still runs");
        assert_eq!(
            s.next_fire_after(at("2026-01-01T10:20:00Z")),
            Some(at("2026-01-02T00:00:00Z"))
        );
    }

    /// A schedule's `max_lateness` and `on_expire` go into each job it pushes; its
    /// `expires_at` too, and no fire whose job would be due at or after it is pushed.
    #[test]
    fn a_schedules_expiry_goes_into_its_jobs_issue_36() {
        // See: issue 36.
        let with = |expiry| {
            JobSchedule::new(
                ScheduleName::new("e").unwrap(),
                "0 * * * *",
                "UTC",
                Topic::new("t").unwrap(),
                JobTemplate {
                    expiry: Some(expiry),
                    on_expire: OnExpire::Drop,
                    ..JobTemplate::default()
                },
            )
            .unwrap()
        };
        let late = with(Expiry::AfterDue(Duration::from_secs(30)));
        let p = late.plan(None, at("2026-01-01T10:20:00Z"));
        assert_eq!(
            (p.push[0].expiry, p.push[0].on_expire),
            (
                Some(Expiry::AfterDue(Duration::from_secs(30))),
                OnExpire::Drop
            )
        );
        let ends = at("2026-01-01T12:00:00Z");
        let until = with(Expiry::At(ends));
        assert_eq!(
            fires(&until, "2026-01-01T10:20:00Z", 5),
            vec![at("2026-01-01T11:00:00Z")],
            "no fire at or after expires_at"
        );
        let p = until.plan(None, at("2026-01-01T10:20:00Z"));
        assert_eq!(p.push[0].expiry, Some(Expiry::At(ends)));
        // Missed fires due now, after expires_at: none is pushed, the progress moves on.
        let p = until
            .clone()
            .with_misfire(Misfire::Each(5))
            .plan(Some(at("2026-01-01T10:00:00Z")), at("2026-01-01T12:30:00Z"));
        assert_eq!((p.push.len(), p.next), (0, None));
        assert_eq!(
            (p.skipped, p.through),
            (1, Some(at("2026-01-01T11:00:00Z")))
        );
        // A jitter that would make the last fire due after expires_at drops it.
        let jittered = with(Expiry::At(at("2026-01-01T11:00:00.001Z")))
            .with_jitter(Duration::from_secs(600))
            .unwrap();
        let p = jittered.plan(None, at("2026-01-01T10:20:00Z"));
        let due = at("2026-01-01T11:00:00Z").plus(jittered.jitter_for(at("2026-01-01T11:00:00Z")));
        assert_eq!(
            p.push.len(),
            usize::from(due < at("2026-01-01T11:00:00.001Z"))
        );
        assert_eq!(p.through, Some(at("2026-01-01T11:00:00Z")));
        // Refused: a max_lateness of 0, an expires_at in seconds.
        for bad in [
            Expiry::AfterDue(Duration::ZERO),
            Expiry::At(Timestamp::from_millis(1_700_000_000)),
        ] {
            let r = JobSchedule::new(
                ScheduleName::new("e").unwrap(),
                "0 * * * *",
                "UTC",
                Topic::new("t").unwrap(),
                JobTemplate {
                    expiry: Some(bad),
                    ..JobTemplate::default()
                },
            );
            assert!(r.is_err(), "{bad:?}");
        }
        // Round trip, and a stored pair of expiries is refused.
        let back = JobSchedule::from_parts(late.name().clone(), late.parts()).unwrap();
        assert_eq!(back, late);
        let back = JobSchedule::from_parts(until.name().clone(), until.parts()).unwrap();
        assert_eq!(back, until);
        let mut both = until.parts();
        both.max_lateness_ms = Some(5);
        assert!(JobSchedule::from_parts(until.name().clone(), both).is_err());
    }
}
