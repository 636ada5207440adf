//! `put`, one or a run of them: a client that pipelines puts (writes many before reading the
//! answers) has the run pushed in one engine call (`Engine::push_batch`), each job with a
//! number of its own. A run refused as a whole (a body over the topic's `max_body`, the
//! engine full) is pushed again one by one, so that each put gets its own answer.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use delayq_core::limits::{MAX_BATCH, MAX_DELAY, MAX_MAX_ATTEMPTS, MAX_TTR};
use delayq_core::{Backoff, Error, JobId, NewJob};

use crate::proto::Reply;
use crate::session::{Session, failure};

/// One `put`'s arguments.
pub(crate) struct Put {
    pub(crate) pri: u32,
    pub(crate) delay: u32,
    pub(crate) ttr: u32,
    pub(crate) body: Bytes,
}

impl Session {
    /// Puts one job into the used tube (a `put` not in a pipelined run).
    pub(crate) async fn put(&mut self, pri: u32, delay: u32, ttr: u32, body: Bytes) -> Reply {
        self.put_batch(vec![Put {
            pri,
            delay,
            ttr,
            body,
        }])
        .await
        .pop()
        .unwrap_or(Reply::InternalError)
    }

    /// Puts a run of jobs into the used tube; one answer per put, in order.
    pub(crate) async fn put_batch(&mut self, puts: Vec<Put>) -> Vec<Reply> {
        if self.shared.draining() {
            return puts.iter().map(|_| Reply::Draining).collect();
        }
        if !self.producer {
            self.producer = true;
            self.shared.stats.producers.fetch_add(1, Ordering::Relaxed);
        }
        let mut replies = Vec::with_capacity(puts.len());
        let mut puts = puts.into_iter().peekable();
        while puts.peek().is_some() {
            let chunk: Vec<Put> = puts.by_ref().take(MAX_BATCH).collect();
            let mut jobs = Vec::with_capacity(chunk.len());
            let mut numbers = Vec::with_capacity(chunk.len());
            for put in chunk {
                match self.job(put).await {
                    Ok((n, job)) => {
                        numbers.push(n);
                        jobs.push(job);
                    }
                    Err(reply) => {
                        // No number to give: this put and the rest of the run fail alike.
                        replies.extend(std::iter::repeat_n(reply, jobs.len() + 1));
                        jobs.clear();
                        numbers.clear();
                    }
                }
            }
            if jobs.is_empty() {
                continue;
            }
            match self.shared.engine.push_batch(jobs.clone()).await {
                Ok(_) => {
                    for n in numbers {
                        self.counted_put();
                        replies.push(Reply::Inserted(n));
                    }
                }
                // Refused as a whole: each job again alone, for its own answer.
                Err(_) if jobs.len() > 1 => {
                    for (n, job) in numbers.into_iter().zip(jobs) {
                        let reply = self.push_one(n, job).await;
                        replies.push(reply);
                    }
                }
                Err(e) => replies.push(put_failure(&e)),
            }
        }
        replies
    }

    async fn push_one(&self, n: u64, job: NewJob) -> Reply {
        match self.shared.engine.push(job).await {
            Ok(_) => {
                self.counted_put();
                Reply::Inserted(n)
            }
            Err(e) => put_failure(&e),
        }
    }

    fn counted_put(&self) {
        self.shared.stats.put();
        self.shared.tubes.put(&self.used.0);
    }

    /// A put as a job of the used tube, with a fresh number.
    async fn job(&self, put: Put) -> Result<(u64, NewJob), Reply> {
        let topic = self.used.1.clone();
        let n = self
            .shared
            .numbers
            .next(&topic)
            .await
            .map_err(|e| failure("claiming job numbers", &e))?;
        let id = JobId::new(n.to_string()).map_err(|_| Reply::InternalError)?;
        let job = NewJob::new(topic, put.body)
            .with_id(id)
            .with_priority(put.pri)
            .with_delay(Duration::from_secs(u64::from(put.delay)).min(MAX_DELAY))
            // As in beanstalkd, a ttr of 0 is one of 1 s.
            .with_ttr(Duration::from_secs(u64::from(put.ttr.max(1))).min(MAX_TTR))
            // As in beanstalkd, a job whose ttr runs out is ready again at once, and is
            // not given up on (until the engine's largest number of attempts).
            .with_max_attempts(MAX_MAX_ATTEMPTS)
            .with_backoff(Backoff::fixed(Duration::ZERO));
        Ok((n, job))
    }
}

/// A refused push as a put's answer.
fn put_failure(e: &Error) -> Reply {
    match e {
        Error::BodyTooLarge { .. } => Reply::JobTooBig,
        e => failure("put", e),
    }
}
