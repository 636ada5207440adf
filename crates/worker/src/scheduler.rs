//! [`Scheduler`]: runs the schedules an engine keeps (issue 14), in any number of processes
//! at once; and [`put_schedule`], [`delete_schedule`], what a caller uses to change one.
//!
//! A tick reads every schedule and, on the engine's clock, does what
//! [`JobSchedule::plan`] says: push the missed fires its misfire policy keeps, then push the
//! next fire ahead of time as a delayed job, so the engine delivers it on time whether or
//! not a scheduler runs then; then records the progress (`Schedules::schedule_pushed`, for the
//! revision it planned from). Fires have derived ids, so schedulers racing on one fire push
//! one job. Between ticks it sleeps until the earliest pushed fire has passed (then the one
//! after it is due to be pushed) or [`SchedulerConfig::reload`] has elapsed (to see
//! schedules another process put), whichever comes first: an idle scheduler costs two
//! commands per reload.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::{
    Engine, Error, JobSchedule, Result, ScheduleName, Schedules, StoredSchedule, Timestamp,
};
use tokio::sync::Notify;

/// How a [`Scheduler`] runs.
#[derive(Clone, Debug)]
pub struct SchedulerConfig {
    /// The longest sleep between two ticks (default 10 s): how soon a schedule put through
    /// another process is seen, and a missed fire found after a restart. The first fire of a
    /// schedule put with [`put_schedule`] is pushed at once, by the caller.
    pub reload: Duration,
    /// The pause after a tick that failed (the engine was unavailable); default 1 s.
    pub retry: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            reload: Duration::from_secs(10),
            retry: Duration::from_secs(1),
        }
    }
}

/// What one tick did, summed over its schedules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Tick {
    /// Jobs pushed (missed fires kept by their policy, and next fires pushed ahead); a job
    /// another scheduler had pushed already counts too (the push was idempotent).
    pub pushed: u64,
    /// Missed fires their policy dropped, and fires whose job would be due at or after its
    /// schedule's `expires_at` (never pushed).
    pub skipped: u64,
    /// Schedules whose jobs the engine refused this tick (logged; tried again next tick).
    pub failed: u64,
    /// The earliest fire pushed ahead and still to come: when the next tick has work.
    pub next_work: Option<Timestamp>,
}

/// Runs the schedules an engine keeps; see the module's documentation.
pub struct Scheduler<E: ?Sized> {
    engine: Arc<E>,
    config: SchedulerConfig,
    kick: Arc<Notify>,
}

impl<E: Engine + Schedules + ?Sized> Scheduler<E> {
    /// A scheduler over `engine` (an engine with schedules: `Arc<dyn Store>` or a shared
    /// concrete engine).
    pub fn new(engine: Arc<E>, config: SchedulerConfig) -> Self {
        Scheduler {
            engine,
            config,
            kick: Arc::new(Notify::new()),
        }
    }

    /// A handle that makes the running scheduler tick now (after a schedule changed here).
    pub fn kicker(&self) -> Arc<Notify> {
        Arc::clone(&self.kick)
    }

    /// One tick over every schedule, at the engine's time. A schedule whose push the engine
    /// refuses (its body over a limit set on its topic since, say) is logged and left for
    /// the next tick; the others go on. An unavailable or full engine ends the tick with its
    /// error.
    pub async fn tick(&self) -> Result<Tick> {
        let now = self.engine.now().await?;
        let mut out = Tick::default();
        for stored in self.engine.schedules().await? {
            let t = match tick_one(&*self.engine, &stored, now).await {
                Ok(t) => t,
                // A store that is down or full refuses every schedule alike: end the tick,
                // and the next one tries again.
                Err(e @ (Error::Unavailable { .. } | Error::Full { .. })) => return Err(e),
                Err(e) => {
                    tracing::warn!(
                        schedule = %stored.schedule.name(),
                        error = %e,
                        "schedules: this schedule's jobs were refused; it is tried again at the next tick"
                    );
                    out.failed += 1;
                    continue;
                }
            };
            out.pushed += t.pushed;
            out.skipped += t.skipped;
            out.next_work = earliest(out.next_work, t.next_work);
        }
        Ok(out)
    }

    /// Ticks until `shutdown` completes; see the module's documentation.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut failing = false;
        loop {
            let sleep = match self.tick().await {
                Ok(t) => {
                    if std::mem::take(&mut failing) {
                        tracing::info!("schedules: ticking again");
                    }
                    if t.pushed > 0 || t.skipped > 0 {
                        tracing::debug!(pushed = t.pushed, skipped = t.skipped, "schedules ticked");
                    }
                    let until_work = match (t.next_work, self.engine.now().await) {
                        (Some(at), Ok(now)) => Some(
                            // Just after the fire: its successor is then the one to push.
                            at.since(now) + Duration::from_millis(1),
                        ),
                        _ => None,
                    };
                    until_work.map_or(self.config.reload, |d| d.min(self.config.reload))
                }
                Err(e) => {
                    // Once per outage: the engine's own errors say more, and often.
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!(error = %e, "schedules: a tick failed; retrying every {:?}", self.config.retry);
                    }
                    self.config.retry
                }
            };
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(sleep) => {}
                () = self.kick.notified() => {}
            }
        }
    }
}

fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Plans one schedule at `now`, pushes what the plan says, then records the progress.
async fn tick_one<E: Engine + Schedules + ?Sized>(
    engine: &E,
    stored: &StoredSchedule,
    now: Timestamp,
) -> Result<Tick> {
    let s = &stored.schedule;
    let plan = s.plan(stored.through, now);
    let pushed = plan.push.len() as u64;
    if !plan.push.is_empty() {
        engine.push_batch(plan.push).await?;
    }
    if let Some(through) = plan.through {
        // False: another scheduler recorded it first, or the schedule was replaced meanwhile
        // (its next tick plans from the new revision).
        engine
            .schedule_pushed(s.name(), stored.revision, through)
            .await?;
    }
    let through = plan.through.or(stored.through);
    Ok(Tick {
        pushed,
        skipped: plan.skipped,
        failed: 0,
        next_work: through.filter(|t| *t > now),
    })
}

/// Creates or replaces a schedule and pushes its next fire at once; answers the stored
/// schedule. A replaced schedule's fire that its old definition had pushed ahead (still
/// delayed) is deleted first, so a changed schedule never fires on its old times. When the
/// engine refuses the new definition's job (a body over its topic's limit, say), the old
/// definition (or none) is put back and the refusal answered: nothing changed.
pub async fn put_schedule<E: Engine + Schedules + ?Sized>(
    engine: &E,
    schedule: &JobSchedule,
) -> Result<StoredSchedule> {
    schedule.validate()?;
    let old = engine.schedule(schedule.name()).await?;
    let revision = engine.put_schedule(schedule).await?;
    let now = engine.now().await?;
    if let Some(old) = &old {
        forget_pending(engine, old, now).await?;
    }
    let stored = StoredSchedule {
        schedule: schedule.clone(),
        revision,
        through: None,
    };
    if let Err(e) = tick_one(engine, &stored, now).await {
        if e.is_invalid_input() {
            match &old {
                Some(old) => {
                    let revision = engine.put_schedule(&old.schedule).await?;
                    let back = StoredSchedule {
                        schedule: old.schedule.clone(),
                        revision,
                        through: None,
                    };
                    tick_one(engine, &back, now).await?;
                }
                None => {
                    engine.delete_schedule(schedule.name()).await?;
                }
            }
        }
        return Err(e);
    }
    Ok(engine.schedule(schedule.name()).await?.unwrap_or(stored))
}

/// Deletes a schedule and the fire it had pushed ahead (still delayed); answers what it was.
/// Jobs of fires already due stay.
pub async fn delete_schedule<E: Engine + Schedules + ?Sized>(
    engine: &E,
    name: &ScheduleName,
) -> Result<Option<StoredSchedule>> {
    let old = engine.delete_schedule(name).await?;
    if let Some(old) = &old {
        let now = engine.now().await?;
        forget_pending(engine, old, now).await?;
    }
    Ok(old)
}

/// Deletes the job of `stored`'s fire pushed ahead, if it is still to come. (A job that is
/// no longer delayed was due: it stays.)
async fn forget_pending<E: Engine + ?Sized>(
    engine: &E,
    stored: &StoredSchedule,
    now: Timestamp,
) -> Result<()> {
    let Some(through) = stored.through.filter(|t| *t > now) else {
        return Ok(());
    };
    let s = &stored.schedule;
    let id = s.job_id(through);
    match engine.get(s.topic(), &id).await? {
        Some(job) if job.state == delayq_core::JobState::Delayed => {
            engine.delete(s.topic(), &id).await?;
            Ok(())
        }
        Some(_) | None => Ok(()),
    }
}

/// A stored schedule's next fire time at the engine's `now` (`None`: it has ended), for
/// listings.
pub fn next_fire(stored: &StoredSchedule, now: Timestamp) -> Option<Timestamp> {
    stored.schedule.next_fire_after(now)
}
