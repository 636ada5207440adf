//! `stats`, `stats-tube`, `stats-job` and `list-tubes`: beanstalkd's YAML answers, filled
//! from the engine (job counts per state, a job's record) and from this server's counters
//! (`counters.rs`: commands, connections, per-tube use). docs/beanstalkd.md
//! lists where the figures differ from beanstalkd's.

use std::time::Duration;

use delayq_core::{JobState, TopicStats};

use crate::counters::{COMMANDS, get};
use crate::proto::{Reply, YamlValue, yaml_dict, yaml_list};
use crate::session::{Session, failure};
use crate::shared::LISTED_TOPICS;
use crate::tube::Tube;

/// beanstalkd's "urgent": a priority below this.
const URGENT: u32 = 1024;

fn int(v: u64) -> YamlValue {
    YamlValue::Int(v)
}

fn secs(d: Duration) -> YamlValue {
    YamlValue::Int(d.as_secs())
}

/// Job counts as beanstalkd names them.
#[derive(Default)]
struct Counts {
    urgent: u64,
    ready: u64,
    reserved: u64,
    delayed: u64,
    buried: u64,
}

impl Counts {
    fn add(&mut self, s: &TopicStats, urgent: u64) {
        self.urgent += urgent;
        self.ready += s.ready;
        self.reserved += s.reserved;
        self.delayed += s.delayed;
        self.buried += s.dead;
    }
}

impl Session {
    /// A topic's counts, and its urgent ready jobs (counted among the first 1,000 ready).
    async fn counts(&self, topic: &delayq_core::Topic) -> delayq_core::Result<(TopicStats, u64)> {
        let s = self.shared.engine.stats(topic).await?;
        let urgent = self.urgent(topic, &s).await?;
        Ok((s, urgent))
    }

    /// A topic's urgent ready jobs (counted among the first 1,000 ready), `s` its counts.
    async fn urgent(&self, topic: &delayq_core::Topic, s: &TopicStats) -> delayq_core::Result<u64> {
        let urgent = if s.ready == 0 {
            0
        } else {
            let page = self
                .shared
                .engine
                .list(topic, JobState::Ready, 1000, None)
                .await?;
            page.jobs.iter().filter(|j| j.priority < URGENT).count() as u64
        };
        Ok(urgent)
    }

    pub(crate) async fn stats_job(&self, n: u64) -> Reply {
        let job = match self.load(n).await {
            Ok(Some(job)) => job,
            Ok(None) => return Reply::NotFound,
            Err(reply) => return reply,
        };
        let now = match self.shared.engine.now().await {
            Ok(now) => now,
            Err(e) => return failure("stats-job", &e),
        };
        let state = match job.state {
            JobState::Delayed => "delayed",
            JobState::Ready => "ready",
            JobState::Reserved => "reserved",
            JobState::Dead => "buried",
            JobState::Done => return Reply::NotFound,
        };
        let tube = Tube::from_topic(&job.topic)
            .map(|t| t.as_str().to_string())
            .unwrap_or_else(|| job.topic.as_str().to_string());
        let time_left = match job.state {
            JobState::Delayed => job.ready_at.since(now),
            JobState::Reserved => job.deadline.map(|d| d.since(now)).unwrap_or_default(),
            _ => Duration::ZERO,
        };
        let reserves = u64::from(job.attempts);
        Reply::Ok(yaml_dict(&[
            ("id", int(n)),
            ("tube", YamlValue::Str(tube)),
            ("state", YamlValue::Str(state.into())),
            ("pri", int(u64::from(job.priority))),
            ("age", secs(now.since(job.created_at))),
            ("delay", secs(job.ready_at.since(job.created_at))),
            ("ttr", secs(job.ttr)),
            ("time-left", secs(time_left)),
            ("file", int(0)),
            ("reserves", int(reserves)),
            ("timeouts", int(0)),
            ("releases", int(0)),
            ("buries", int(u64::from(job.state == JobState::Dead))),
            ("kicks", int(0)),
        ]))
    }

    pub(crate) async fn stats_tube(&self, tube: &Tube) -> Reply {
        let Some((_, topic)) = self.shared.tube(tube) else {
            return Reply::BadFormat;
        };
        if !self.shared.tube_exists(tube, &topic).await {
            return Reply::NotFound;
        }
        let (s, urgent) = match self.counts(&topic).await {
            Ok(c) => c,
            Err(e) => return failure("stats-tube", &e),
        };
        let now = match self.shared.engine.now().await {
            Ok(now) => now,
            Err(e) => return failure("stats-tube", &e),
        };
        let c = self.shared.tubes.counts(tube);
        let (pause, left) = match s.paused_until {
            Some(until) => (until.since(now), until.since(now)),
            None => (Duration::ZERO, Duration::ZERO),
        };
        Reply::Ok(yaml_dict(&[
            ("name", YamlValue::Str(tube.as_str().into())),
            ("current-jobs-urgent", int(urgent)),
            ("current-jobs-ready", int(s.ready)),
            ("current-jobs-reserved", int(s.reserved)),
            ("current-jobs-delayed", int(s.delayed)),
            ("current-jobs-buried", int(s.dead)),
            ("total-jobs", int(c.puts)),
            ("current-using", int(c.using)),
            ("current-watching", int(c.watching)),
            ("current-waiting", int(c.waiting)),
            ("cmd-delete", int(c.deletes)),
            ("cmd-pause-tube", int(c.pauses)),
            ("pause", secs(pause)),
            ("pause-time-left", secs(left)),
        ]))
    }

    pub(crate) async fn stats(&self) -> Reply {
        let topics = match self.shared.engine.topics().await {
            Ok(t) => t,
            Err(e) => return failure("stats", &e),
        };
        // Read together (`Engine::stats_each`): on a Redis Cluster with a primary dead or
        // hung, the answer (`INTERNAL_ERROR`, as beanstalkd has no partial counts) comes
        // within the slot timeout, not after the response timeout.
        let topics: Vec<_> = topics.into_iter().take(LISTED_TOPICS).collect();
        let mut counts = Counts::default();
        for (topic, s) in topics
            .iter()
            .zip(self.shared.engine.stats_each(&topics).await)
        {
            let counted = match s {
                Ok(s) => self.urgent(topic, &s).await.map(|urgent| (s, urgent)),
                Err(e) => Err(e),
            };
            match counted {
                Ok((s, urgent)) => counts.add(&s, urgent),
                Err(e) => return failure("stats", &e),
            }
        }
        let st = &self.shared.stats;
        let mut fields: Vec<(String, YamlValue)> = vec![
            ("current-jobs-urgent".into(), int(counts.urgent)),
            ("current-jobs-ready".into(), int(counts.ready)),
            ("current-jobs-reserved".into(), int(counts.reserved)),
            ("current-jobs-delayed".into(), int(counts.delayed)),
            ("current-jobs-buried".into(), int(counts.buried)),
        ];
        for (name, c) in COMMANDS.iter().zip(&st.commands) {
            fields.push((format!("cmd-{name}"), int(get(c))));
        }
        let tubes = match self.shared.tubes().await {
            Ok(t) => t.len() as u64,
            Err(e) => return failure("stats", &e),
        };
        let cpu = cpu_times();
        let uptime = self.shared.started.elapsed();
        fields.extend([
            ("job-timeouts".into(), int(0)),
            ("total-jobs".into(), int(get(&st.puts))),
            (
                "max-job-size".into(),
                int(self.shared.options.max_job_size as u64),
            ),
            ("current-tubes".into(), int(tubes)),
            ("current-connections".into(), int(get(&st.connections))),
            ("current-producers".into(), int(get(&st.producers))),
            ("current-workers".into(), int(get(&st.workers))),
            ("current-waiting".into(), int(get(&st.waiting))),
            ("total-connections".into(), int(get(&st.total_connections))),
            ("pid".into(), int(u64::from(std::process::id()))),
            (
                "version".into(),
                YamlValue::Quoted(format!("delayq {}", env!("CARGO_PKG_VERSION"))),
            ),
            ("rusage-utime".into(), YamlValue::Seconds(cpu.0)),
            ("rusage-stime".into(), YamlValue::Seconds(cpu.1)),
            ("uptime".into(), secs(uptime)),
            ("binlog-oldest-index".into(), int(0)),
            ("binlog-current-index".into(), int(0)),
            ("binlog-records-migrated".into(), int(0)),
            ("binlog-records-written".into(), int(0)),
            ("binlog-max-size".into(), int(10_485_760)),
            (
                "draining".into(),
                YamlValue::Str(self.shared.draining().to_string()),
            ),
            ("id".into(), YamlValue::Str(self.shared.server_id.clone())),
            (
                "hostname".into(),
                YamlValue::Str(self.shared.hostname.clone()),
            ),
            ("os".into(), YamlValue::Str(std::env::consts::OS.into())),
            (
                "platform".into(),
                YamlValue::Str(std::env::consts::ARCH.into()),
            ),
        ]);
        let fields: Vec<(&str, YamlValue)> = fields
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        Reply::Ok(yaml_dict(&fields))
    }

    pub(crate) async fn list_tubes(&self) -> Reply {
        match self.shared.tubes().await {
            Ok(tubes) => Reply::Ok(yaml_list(tubes.iter().map(Tube::as_str))),
            Err(e) => failure("list-tubes", &e),
        }
    }
}

/// This process's user and system CPU time, from `/proc/self/stat` (fields 14 and 15, in
/// clock ticks of 1/100 s on Linux); zero where there is no such file.
fn cpu_times() -> (Duration, Duration) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return (Duration::ZERO, Duration::ZERO);
    };
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(Duration::ZERO, |t| Duration::from_millis(t * 10))
    };
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    (ticks(11), ticks(12))
}
