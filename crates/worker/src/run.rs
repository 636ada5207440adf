//! [`HandlerRun`]: one handler's run, isolated from the worker. Its future (decode, the
//! handler, its error's `Display`) is wrapped in `catch_unwind`, polled once in place by the
//! delivery's supervisor and, only if it is not done by then, moved into a task of its own
//! (which can be aborted at the end of the lease). A no-op or quick handler so costs no hand-off
//! between tasks at all; [`InPlace`] stops the in-place polls for a while after one was slow,
//! so a handler that computes before its first `.await` does not hold up the fetch loop.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::FutureExt;
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

/// An in-place poll that took longer than this turns in-place polls off for a while.
pub(crate) const IN_PLACE_MAX: Duration = Duration::from_micros(200);

/// How many deliveries start in a task of their own after a slow in-place poll.
pub(crate) const IN_PLACE_COOLDOWN: u32 = 1000;

/// Why a handler's run ended without a result.
pub(crate) enum Stopped {
    /// It panicked, with this payload.
    Panicked(Box<dyn Any + Send>),
    /// Its task was aborted (or the runtime is shutting down).
    Cancelled,
}

/// The result of a handler's future, its panic caught.
type Caught<T> = Result<T, Box<dyn Any + Send>>;

/// A handler's run: finished in place, or running in its own task.
pub(crate) enum HandlerRun<T> {
    /// It finished in its first poll; `None` once the result was taken.
    Finished(Option<Result<T, Stopped>>),
    /// It is running in its own task.
    Task(JoinHandle<Caught<T>>),
}

impl<T: Send + 'static> HandlerRun<T> {
    /// Starts `run`: polled once here when `in_place` says so, then, when not done, spawned
    /// on `tracker`.
    pub(crate) async fn start<F>(run: F, in_place: &InPlace, tracker: &TaskTracker) -> Self
    where
        F: Future<Output = T> + Send + 'static,
    {
        let mut run = Box::pin(AssertUnwindSafe(run).catch_unwind());
        if in_place.allowed() {
            let started = std::time::Instant::now();
            // Polled with the supervisor's waker; a task that takes it over polls it again at
            // once and so registers its own.
            let polled = std::future::poll_fn(|cx| Poll::Ready(run.as_mut().poll(cx))).await;
            in_place.polled(started.elapsed());
            if let Poll::Ready(r) = polled {
                return HandlerRun::Finished(Some(r.map_err(Stopped::Panicked)));
            }
        }
        HandlerRun::Task(tracker.spawn(run))
    }

    /// Aborts the handler's task (nothing to do when it finished in place).
    pub(crate) fn abort(&self) {
        if let HandlerRun::Task(handle) = self {
            handle.abort();
        }
    }
}

impl<T: Unpin> Future for HandlerRun<T> {
    type Output = Result<T, Stopped>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            HandlerRun::Finished(r) => Poll::Ready(r.take().unwrap_or(Err(Stopped::Cancelled))),
            HandlerRun::Task(handle) => Pin::new(handle).poll(cx).map(|joined| match joined {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(payload)) => Err(Stopped::Panicked(payload)),
                Err(e) if e.is_panic() => Err(Stopped::Panicked(e.into_panic())),
                Err(_) => Err(Stopped::Cancelled),
            }),
        }
    }
}

/// Whether the next handler is polled in place: yes, unless one of the last
/// [`IN_PLACE_COOLDOWN`] deliveries' in-place poll took over [`IN_PLACE_MAX`].
#[derive(Debug, Default)]
pub(crate) struct InPlace {
    /// Deliveries still to start in a task of their own.
    skip: AtomicU32,
}

impl InPlace {
    /// True when the next handler may be polled in place (and counts a skipped one).
    pub(crate) fn allowed(&self) -> bool {
        // Only the fetch loop's task starts handlers, so a load and a store do not race.
        let skip = self.skip.load(Ordering::Relaxed);
        if skip == 0 {
            return true;
        }
        self.skip.store(skip - 1, Ordering::Relaxed);
        false
    }

    /// An in-place poll took `took`.
    pub(crate) fn polled(&self, took: Duration) {
        if took > IN_PLACE_MAX {
            tracing::debug!(
                took_us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
                "a handler's first poll was slow: the next handlers start in tasks of their own"
            );
            self.skip.store(IN_PLACE_COOLDOWN, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_poll_turns_in_place_polls_off_for_a_while() {
        let p = InPlace::default();
        assert!(p.allowed());
        p.polled(IN_PLACE_MAX);
        assert!(p.allowed(), "at the limit is still quick");
        p.polled(IN_PLACE_MAX + Duration::from_micros(1));
        for _ in 0..IN_PLACE_COOLDOWN {
            assert!(!p.allowed());
        }
        assert!(p.allowed());
    }

    #[tokio::test]
    async fn finished_in_place_or_in_a_task_panics_caught() {
        let tracker = TaskTracker::new();
        let p = InPlace::default();
        let run = HandlerRun::start(async { 7 }, &p, &tracker).await;
        assert!(
            matches!(run, HandlerRun::Finished(_)),
            "done in its first poll"
        );
        assert!(matches!(run.await, Ok(7)));

        let run = HandlerRun::start(
            async {
                tokio::task::yield_now().await;
                8
            },
            &p,
            &tracker,
        )
        .await;
        assert!(
            matches!(run, HandlerRun::Task(_)),
            "not done: moved to a task"
        );
        assert!(matches!(run.await, Ok(8)));

        let run: HandlerRun<()> =
            HandlerRun::start(async { panic!("in place") }, &p, &tracker).await;
        assert!(matches!(run.await, Err(Stopped::Panicked(_))));
        let run: HandlerRun<()> = HandlerRun::start(
            async {
                tokio::task::yield_now().await;
                panic!("in its task")
            },
            &p,
            &tracker,
        )
        .await;
        assert!(matches!(run.await, Err(Stopped::Panicked(_))));

        let run: HandlerRun<()> = HandlerRun::start(std::future::pending(), &p, &tracker).await;
        run.abort();
        assert!(matches!(run.await, Err(Stopped::Cancelled)));
    }
}
