//! The window: how many jobs the worker may hold leased at once (waiting in its buffer or
//! running), and so how many the next reserve asks for.
//!
//! It aims at the work of the next [`HORIZON`] at the handlers' observed speed, never below
//! the concurrency (every handler can have a job) and never above the configured prefetch.
//! It starts at the concurrency, doubles (up to that aim) each time a reserve comes back
//! full, and falls to what a reserve returned when one comes back short: a worker on a
//! short queue then asks only for what it can run, so it leaves the rest to other workers.

use std::time::Duration;

/// How far ahead the window looks: the worker holds about this much work.
pub(crate) const HORIZON: Duration = Duration::from_millis(100);

/// The weight of the newest handler duration in the running average.
const WEIGHT: f64 = 0.1;

/// The window of one worker.
#[derive(Debug)]
pub(crate) struct Window {
    concurrency: usize,
    prefetch: usize,
    size: usize,
    /// The running average of handler durations, in seconds; `None` before the first.
    handler_secs: Option<f64>,
}

impl Window {
    /// A window of `concurrency` jobs that may grow to `prefetch` (at least `concurrency`).
    pub(crate) fn new(concurrency: usize, prefetch: usize) -> Self {
        Window {
            concurrency,
            prefetch: prefetch.max(concurrency),
            size: concurrency,
            handler_secs: None,
        }
    }

    /// The most jobs to hold now.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// How many more jobs to ask for while `held` are held.
    pub(crate) fn need(&self, held: usize) -> usize {
        self.size.saturating_sub(held)
    }

    /// The work of the next [`HORIZON`] at the observed handler speed, within concurrency
    /// and prefetch. Before any handler finished, the concurrency: the worker does not
    /// fetch ahead of handlers it knows nothing about.
    fn aim(&self) -> usize {
        let Some(secs) = self.handler_secs else {
            return self.concurrency;
        };
        let jobs = self.concurrency as f64 * HORIZON.as_secs_f64() / secs.max(1e-9);
        if jobs >= self.prefetch as f64 {
            self.prefetch
        } else {
            // `jobs` is finite and below `prefetch` here, so the cast is exact enough.
            (jobs.ceil() as usize).clamp(self.concurrency, self.prefetch)
        }
    }

    /// A handler ran for `ran`: updates the speed, and brings the window down at once when
    /// the handlers got slower.
    pub(crate) fn observe(&mut self, ran: Duration) {
        let secs = ran.as_secs_f64();
        self.handler_secs = Some(match self.handler_secs {
            None => secs,
            Some(avg) => avg + WEIGHT * (secs - avg),
        });
        self.size = self.size.min(self.aim());
    }

    /// A reserve asked for `asked` jobs and got `got`.
    pub(crate) fn reserved(&mut self, asked: usize, got: usize) {
        if asked == 0 {
            return;
        }
        let size = if got >= asked {
            self.size.saturating_mul(2)
        } else {
            got
        };
        self.size = size.min(self.aim()).max(self.concurrency);
    }

    /// Jobs had to be given back because they waited too long: hold no more than `held`.
    pub(crate) fn shrink_to(&mut self, held: usize) {
        self.size = self.size.min(held.max(self.concurrency));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAST: Duration = Duration::from_micros(10);

    #[test]
    fn starts_at_the_concurrency_and_waits_for_a_first_handler() {
        let mut w = Window::new(4, 1000);
        assert_eq!((w.size(), w.need(1)), (4, 3));
        w.reserved(4, 4);
        assert_eq!(w.size(), 4, "no growth before a handler finished");
    }

    #[test]
    fn grows_by_doubling_when_full_up_to_prefetch() {
        let mut w = Window::new(2, 50);
        w.observe(FAST);
        let mut sizes = Vec::new();
        for _ in 0..6 {
            w.reserved(w.size(), w.size());
            sizes.push(w.size());
        }
        assert_eq!(sizes, [4, 8, 16, 32, 50, 50]);
    }

    #[test]
    fn holds_about_a_horizon_of_work() {
        // 10 handlers of 20 ms: 500 jobs a second, 50 in 100 ms.
        let mut w = Window::new(10, 1000);
        w.observe(Duration::from_millis(20));
        for _ in 0..10 {
            w.reserved(w.size(), w.size());
        }
        assert_eq!(w.size(), 50);
        // Handlers slower than the horizon: the concurrency, never less.
        w.observe(Duration::from_secs(60));
        assert_eq!(w.size(), 10);
    }

    #[test]
    fn a_short_reserve_shrinks_it_to_what_came_never_below_the_concurrency() {
        let mut w = Window::new(3, 1000);
        w.observe(FAST);
        for _ in 0..10 {
            w.reserved(w.size(), w.size());
        }
        assert_eq!(w.size(), 1000);
        w.reserved(500, 120);
        assert_eq!(w.size(), 120);
        w.reserved(100, 0);
        assert_eq!(w.size(), 3);
        w.reserved(3, 3);
        assert_eq!(w.size(), 6, "grows again when full");
    }

    #[test]
    fn shrink_to_what_is_held() {
        let mut w = Window::new(2, 100);
        w.observe(FAST);
        w.reserved(2, 2);
        w.reserved(4, 4);
        assert_eq!(w.size(), 8);
        w.shrink_to(5);
        assert_eq!(w.size(), 5);
        w.shrink_to(0);
        assert_eq!(w.size(), 2);
    }
}
