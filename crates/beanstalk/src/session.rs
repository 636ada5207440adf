//! One client connection's state (the tube it uses, the tubes it watches, the jobs it holds)
//! and what each command does to the engine. `put` lives in `put.rs`, the reserve family in
//! `reserve.rs`, the YAML statistics in `stats.rs`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use delayq_core::limits::MAX_DELAY;
use delayq_core::{Bury, Engine, Error, Job, JobState, Lease, Release, Schedule, Store, Topic};
use tracing::warn;

use crate::numbers::Found;
use crate::proto::{Command, Reply};
use crate::shared::Shared;
use crate::tube::Tube;

/// A job this connection holds (reserved by it).
pub(crate) struct Held {
    pub(crate) lease: Lease,
    /// When its lease ends, on this process's clock (a little after the engine's).
    pub(crate) deadline: Instant,
    /// The job's ttr: a touch makes the lease end that long after it.
    pub(crate) ttr: Duration,
}

/// What the connection does after a command.
pub(crate) enum Next {
    /// Send this reply and read the next command.
    Reply(Reply),
    /// Close the connection (`quit`).
    Close,
}

/// One connection.
pub(crate) struct Session {
    pub(crate) shared: Arc<Shared>,
    pub(crate) used: (Tube, Topic),
    /// Watched tubes in the order they were watched (no duplicates).
    pub(crate) watched: Vec<(Tube, Topic)>,
    pub(crate) held: HashMap<u64, Held>,
    /// Whether this connection has put a job / reserved one (beanstalkd's producers and
    /// workers in `stats`).
    pub(crate) producer: bool,
    pub(crate) worker: bool,
}

/// An engine error as a reply: a full engine is `OUT_OF_MEMORY`, anything else
/// `INTERNAL_ERROR` (logged, since the client only sees the line).
pub(crate) fn failure(what: &str, e: &Error) -> Reply {
    match e {
        Error::Full { .. } => Reply::OutOfMemory,
        _ => {
            warn!(error = %e, "beanstalk: {what} failed");
            Reply::InternalError
        }
    }
}

impl Session {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let default = shared.default_tube.clone();
        Session {
            shared,
            used: default.clone(),
            watched: vec![default],
            held: HashMap::new(),
            producer: false,
            worker: false,
        }
    }

    fn engine(&self) -> &Arc<dyn Store> {
        &self.shared.engine
    }

    /// Runs one command.
    pub(crate) async fn run(&mut self, cmd: Command) -> Next {
        self.shared.stats.count(&cmd);
        let reply = match cmd {
            Command::Quit => return Next::Close,
            Command::Put {
                pri,
                delay,
                ttr,
                body,
            } => self.put(pri, delay, ttr, body).await,
            Command::Use(tube) => match self.shared.tube(&tube) {
                Some(t) => {
                    self.shared.tubes.unuse(&self.used.0);
                    self.shared.tubes.r#use(&tube);
                    self.used = t;
                    Reply::Using(tube)
                }
                None => Reply::BadFormat,
            },
            Command::Reserve => self.reserve(None).await,
            Command::ReserveWithTimeout(s) => {
                self.reserve(Some(Duration::from_secs(u64::from(s)))).await
            }
            Command::ReserveJob(n) => self.reserve_job(n).await,
            Command::Delete(n) => self.delete(n).await,
            Command::Release { id, pri, delay } => self.release(id, pri, delay).await,
            Command::Bury { id, pri } => self.bury(id, pri).await,
            Command::Touch(n) => self.touch(n).await,
            Command::Watch(tube) => self.watch(tube),
            Command::Ignore(tube) => self.ignore(&tube),
            Command::Peek(n) => self.peek(n).await,
            Command::PeekReady => self.peek_state(JobState::Ready).await,
            Command::PeekDelayed => self.peek_state(JobState::Delayed).await,
            Command::PeekBuried => self.peek_state(JobState::Dead).await,
            Command::Kick(bound) => self.kick(bound).await,
            Command::KickJob(n) => self.kick_job(n).await,
            Command::StatsJob(n) => self.stats_job(n).await,
            Command::StatsTube(tube) => self.stats_tube(&tube).await,
            Command::Stats => self.stats().await,
            Command::ListTubes => self.list_tubes().await,
            Command::ListTubeUsed => Reply::Using(self.used.0.clone()),
            Command::ListTubesWatched => Reply::Ok(crate::proto::yaml_list(
                self.watched.iter().map(|(t, _)| t.as_str()),
            )),
            Command::PauseTube { tube, delay } => self.pause_tube(&tube, delay).await,
        };
        Next::Reply(reply)
    }

    /// The job a number names: one this connection holds, or one found by its number.
    async fn find(&self, n: u64) -> Result<Option<Found>, Reply> {
        if let Some(h) = self.held.get(&n) {
            return Ok(Some(Found {
                topic: h.lease.topic.clone(),
                id: h.lease.id.clone(),
            }));
        }
        self.shared
            .numbers
            .find(n)
            .await
            .map_err(|e| failure("finding a job by its number", &e))
    }

    /// The job a number names, as stored now (`None`: no such job, or a done one).
    pub(crate) async fn load(&self, n: u64) -> Result<Option<Job>, Reply> {
        let Some(f) = self.find(n).await? else {
            return Ok(None);
        };
        match self.engine().get(&f.topic, &f.id).await {
            Ok(Some(job)) if job.state != JobState::Done => Ok(Some(job)),
            Ok(_) => Ok(None),
            Err(e) => Err(failure("reading a job", &e)),
        }
    }

    pub(crate) async fn delete(&mut self, n: u64) -> Reply {
        if let Some(h) = self.held.remove(&n) {
            match self.engine().ack(&h.lease).await {
                Ok(()) => {
                    self.deleted(&h.lease.topic);
                    return Reply::Deleted;
                }
                // The lease ran out: the job is someone else's now, or waiting again.
                Err(e) if e.ends_delivery() => {}
                Err(e) => return failure("delete", &e),
            }
        }
        let job = match self.load(n).await {
            Ok(Some(job)) => job,
            Ok(None) => return Reply::NotFound,
            Err(reply) => return reply,
        };
        // Another connection's reserved job is not this one's to delete.
        if job.state == JobState::Reserved {
            return Reply::NotFound;
        }
        match self.engine().delete(&job.topic, &job.id).await {
            Ok(true) => {
                self.deleted(&job.topic);
                Reply::Deleted
            }
            Ok(false) => Reply::NotFound,
            Err(e) => failure("delete", &e),
        }
    }

    pub(crate) fn deleted(&self, topic: &Topic) {
        self.shared.stats.deleted();
        if let Some(t) = Tube::from_topic(topic) {
            self.shared.tubes.deleted(&t);
        }
    }

    async fn release(&mut self, n: u64, pri: u32, delay: u32) -> Reply {
        let Some(h) = self.held.remove(&n) else {
            return Reply::NotFound;
        };
        let release = Release {
            delay: (delay > 0).then(|| Duration::from_secs(u64::from(delay)).min(MAX_DELAY)),
            priority: Some(pri),
        };
        match self.engine().release_with(&h.lease, release).await {
            Ok(()) => Reply::Released,
            Err(e) if e.ends_delivery() => Reply::NotFound,
            Err(e) => failure("release", &e),
        }
    }

    async fn bury(&mut self, n: u64, pri: u32) -> Reply {
        let Some(h) = self.held.remove(&n) else {
            return Reply::NotFound;
        };
        let bury = Bury {
            reason: Some("buried over the beanstalkd protocol".into()),
            priority: Some(pri),
        };
        match self.engine().bury_with(&h.lease, bury).await {
            Ok(()) => Reply::Buried,
            Err(e) if e.ends_delivery() => Reply::NotFound,
            Err(e) => failure("bury", &e),
        }
    }

    async fn touch(&mut self, n: u64) -> Reply {
        let Some(h) = self.held.get(&n) else {
            return Reply::NotFound;
        };
        let lease = h.lease.clone();
        match self.engine().touch(&lease, None).await {
            Ok(_) => {
                // The engine's deadline is its clock at the touch plus the ttr; this
                // process's, measured from the answer, is a little later, as at reserve.
                if let Some(h) = self.held.get_mut(&n) {
                    h.deadline = Instant::now() + h.ttr;
                }
                Reply::Touched
            }
            Err(e) if e.ends_delivery() => {
                self.held.remove(&n);
                Reply::NotFound
            }
            Err(e) => failure("touch", &e),
        }
    }

    fn watch(&mut self, tube: Tube) -> Reply {
        let Some(t) = self.shared.tube(&tube) else {
            return Reply::BadFormat;
        };
        if !self.watched.iter().any(|(w, _)| *w == tube) {
            self.shared.tubes.watch(&tube);
            self.watched.push(t);
        }
        Reply::Watching(self.watched.len() as u64)
    }

    fn ignore(&mut self, tube: &Tube) -> Reply {
        match self.watched.iter().position(|(w, _)| w == tube) {
            Some(_) if self.watched.len() == 1 => Reply::NotIgnored,
            Some(i) => {
                self.watched.remove(i);
                self.shared.tubes.unwatch(tube);
                Reply::Watching(self.watched.len() as u64)
            }
            None => Reply::Watching(self.watched.len() as u64),
        }
    }

    async fn peek(&self, n: u64) -> Reply {
        match self.load(n).await {
            Ok(Some(job)) => Reply::Found {
                id: n,
                body: job.body,
            },
            Ok(None) => Reply::NotFound,
            Err(reply) => reply,
        }
    }

    /// The first job of a state in the used tube: the next to be reserved (ready), to fall
    /// due (delayed) or to be kicked (buried).
    async fn peek_state(&self, state: JobState) -> Reply {
        let topic = &self.used.1;
        match self.engine().list(topic, state, 1, None).await {
            Ok(page) => match page.jobs.into_iter().next() {
                Some(job) => Reply::Found {
                    id: self.shared.numbers.number_of(&job.topic, &job.id),
                    body: job.body,
                },
                None => Reply::NotFound,
            },
            Err(e) => failure("peek", &e),
        }
    }

    /// Kicks up to `bound` buried jobs of the used tube; when it has none, up to `bound`
    /// delayed jobs (made due now), as beanstalkd does. A page of at most 1,000 at a time,
    /// each listed from the start (the jobs kicked have left the state).
    async fn kick(&self, bound: u64) -> Reply {
        let topic = &self.used.1;
        let mut kicked = 0;
        for state in [JobState::Dead, JobState::Delayed] {
            loop {
                let left = bound - kicked;
                if left == 0 {
                    break;
                }
                let limit = usize::try_from(left.min(1000)).unwrap_or(1000);
                let page = match self.engine().list(topic, state, limit, None).await {
                    Ok(p) => p,
                    Err(e) => return failure("kick", &e),
                };
                let mut moved = 0;
                for job in &page.jobs {
                    let r = match state {
                        JobState::Dead => self.engine().kick(topic, &job.id).await,
                        _ => self
                            .engine()
                            .reschedule(topic, &job.id, Schedule::NOW)
                            .await
                            .map(|_| ()),
                    };
                    match r {
                        Ok(()) => moved += 1,
                        // Gone or moved on meanwhile: not kicked by this call.
                        Err(Error::NotFound { .. } | Error::WrongState { .. }) => {}
                        Err(e) => return failure("kick", &e),
                    }
                }
                kicked += moved;
                if moved == 0 || page.jobs.len() < limit {
                    break;
                }
            }
            if kicked > 0 {
                break;
            }
        }
        Reply::Kicked(kicked)
    }

    async fn kick_job(&self, n: u64) -> Reply {
        let job = match self.load(n).await {
            Ok(Some(job)) => job,
            Ok(None) => return Reply::NotFound,
            Err(reply) => return reply,
        };
        let r = match job.state {
            JobState::Dead => self.engine().kick(&job.topic, &job.id).await,
            JobState::Delayed => self
                .engine()
                .reschedule(&job.topic, &job.id, Schedule::NOW)
                .await
                .map(|_| ()),
            _ => return Reply::NotFound,
        };
        match r {
            Ok(()) => Reply::KickedJob,
            Err(Error::NotFound { .. } | Error::WrongState { .. }) => Reply::NotFound,
            Err(e) => failure("kick-job", &e),
        }
    }

    async fn pause_tube(&self, tube: &Tube, delay: u32) -> Reply {
        let Some((_, topic)) = self.shared.tube(tube) else {
            return Reply::BadFormat;
        };
        if !self.shared.tube_exists(tube, &topic).await {
            return Reply::NotFound;
        }
        // As in beanstalkd, a pause of 0 s ends the tube's pause at once.
        let r = if delay == 0 {
            self.engine().resume(&topic).await
        } else {
            let pause = Duration::from_secs(u64::from(delay)).min(MAX_DELAY);
            match self.engine().now().await {
                Ok(now) => self.engine().pause(&topic, Some(now.plus(pause))).await,
                Err(e) => Err(e),
            }
        };
        match r {
            Ok(()) => {
                self.shared.tubes.paused(tube);
                Reply::Paused
            }
            Err(e) => failure("pause-tube", &e),
        }
    }

    /// Gives back every job the connection still holds (it closed): ready again at once,
    /// as beanstalkd does when a client disconnects.
    pub(crate) async fn give_back(&mut self) {
        for (_, h) in self.held.drain() {
            match self.shared.engine.release(&h.lease).await {
                Ok(()) => {}
                Err(e) if e.ends_delivery() => {}
                Err(e) => warn!(error = %e, "beanstalk: giving back a closed connection's job"),
            }
        }
        if self.producer {
            self.shared.stats.producers.fetch_sub(1, Ordering::Relaxed);
        }
        if self.worker {
            self.shared.stats.workers.fetch_sub(1, Ordering::Relaxed);
        }
        self.shared.tubes.unuse(&self.used.0);
        for (t, _) in &self.watched {
            self.shared.tubes.unwatch(t);
        }
    }
}
