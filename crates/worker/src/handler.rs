//! The [`Handler`] trait (implemented by every `async` closure and function taking a
//! [`Job`]), and [`JobError`], with which a handler says "retry", "retry after" or "permanent".

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::time::Duration;

use delayq_core::BoxError;

use crate::{Job, Payload};

/// What the worker runs for each job: `async fn(Job<P>) -> Result<(), E>`.
///
/// Every closure or function of that shape is a handler, with any error type that
/// implements `Display`:
/// - `Ok(())` acks the job;
/// - an error that is a [`JobError`] says what to do ([`JobError::retry`],
///   [`JobError::retry_after`], [`JobError::permanent`]);
/// - any other error (and a panic) means "retry with the job's back-off", or dead when the
///   job has used its attempts. Its message becomes the job's `last_error`.
///
/// Blocking work (synchronous I/O, long computations) belongs in
/// `tokio::task::spawn_blocking`: the worker polls a handler's first step in place (a quick
/// handler then costs no task), so a handler that blocks there holds up the worker's
/// fetching until it returns; the worker then gives the next handlers tasks of their own.
///
/// ```
/// use delayq_worker::{Handler, Job, JobError, Json, ResultExt};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Charge { card: Option<String>, cents: u64 }
///
/// async fn charge(job: Job<Json<Charge>>) -> Result<(), JobError> {
///     let charge = job.payload();
///     let card = charge.card.as_deref().ok_or_else(|| JobError::permanent("no card on file"))?;
///     let amount: u32 = charge.cents.try_into().permanent()?; // Cannot get better by retrying.
///     let _ = (card, amount);
///     Ok(())
/// }
///
/// fn assert_handler<P: delayq_worker::Payload>(_: impl Handler<P>) {}
/// assert_handler(charge);
/// assert_handler(|job: Job<String>| async move {
///     println!("{}", job.payload());
///     Ok::<(), std::io::Error>(())
/// });
/// ```
pub trait Handler<P: Payload>: Send + Sync + 'static {
    /// The handler's error; see the trait documentation for what each kind means.
    type Error: fmt::Display + Send + 'static;

    /// Handles one delivery of a job.
    fn call(&self, job: Job<P>) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

impl<P, F, Fut, E> Handler<P> for F
where
    P: Payload,
    F: Fn(Job<P>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send,
    E: fmt::Display + Send + 'static,
{
    type Error = E;

    fn call(&self, job: Job<P>) -> impl Future<Output = Result<(), E>> + Send {
        self(job)
    }
}

/// What a failed handler asks the worker to do with the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureKind {
    /// Nack: retry after the job's back-off (or dead when it has used its attempts).
    Retry,
    /// Nack: retry after this delay instead of the back-off (or dead when it has used its
    /// attempts). Delays over the contract's 10 years are cut to 10 years.
    RetryAfter(Duration),
    /// Bury: dead at once, whatever attempts are left. For failures that retrying cannot
    /// fix (bad input, a refused operation).
    Permanent,
}

/// The error a handler returns to choose what happens to a failed job.
///
/// Any `std::error::Error` converts into it with `?` (as a plain retry), and
/// [`ResultExt`] marks a `Result` as permanent or retry-after in place.
///
/// ```
/// use std::time::Duration;
/// use delayq_worker::{FailureKind, JobError};
///
/// let e = JobError::retry_after(Duration::from_secs(30), "rate limited by the gateway");
/// assert_eq!(e.kind(), FailureKind::RetryAfter(Duration::from_secs(30)));
/// let e: JobError = std::io::Error::other("connection reset").into();
/// assert_eq!(e.kind(), FailureKind::Retry);
/// assert_eq!(e.to_string(), "connection reset");
/// ```
pub struct JobError {
    kind: FailureKind,
    message: String,
}

impl JobError {
    /// Retry with the job's back-off.
    pub fn retry(message: impl fmt::Display) -> Self {
        JobError::new(FailureKind::Retry, message)
    }

    /// Retry after `delay` instead of the back-off.
    pub fn retry_after(delay: Duration, message: impl fmt::Display) -> Self {
        JobError::new(FailureKind::RetryAfter(delay), message)
    }

    /// Dead now: no more attempts.
    pub fn permanent(message: impl fmt::Display) -> Self {
        JobError::new(FailureKind::Permanent, message)
    }

    /// An error of a given kind.
    pub fn new(kind: FailureKind, message: impl fmt::Display) -> Self {
        JobError {
            kind,
            message: message.to_string(),
        }
    }

    /// What the worker will do.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// The message kept with the job.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobError")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .finish()
    }
}

/// A plain error: retry with the back-off; the message lists the error's chain of causes.
impl<E: std::error::Error + Send + Sync + 'static> From<E> for JobError {
    fn from(err: E) -> Self {
        JobError::retry(chain(&err))
    }
}

/// Marks the error of a `Result` as permanent or retry-after, for use with `?`.
pub trait ResultExt<T> {
    /// On error, bury the job: retrying cannot help.
    fn permanent(self) -> Result<T, JobError>;
    /// On error, retry after `delay` instead of the job's back-off.
    fn retry_after(self, delay: Duration) -> Result<T, JobError>;
}

impl<T, E: fmt::Display> ResultExt<T> for Result<T, E> {
    fn permanent(self) -> Result<T, JobError> {
        self.map_err(JobError::permanent)
    }

    fn retry_after(self, delay: Duration) -> Result<T, JobError> {
        self.map_err(|e| JobError::retry_after(delay, e))
    }
}

/// How the worker treats a handler's error.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) kind: FailureKind,
    pub(crate) message: String,
}

/// Reads a handler error: a [`JobError`] says what to do; a boxed error is read through its
/// causes; anything else is a plain retry with its `Display` text.
pub(crate) fn classify<E: fmt::Display + 'static>(err: E) -> Failure {
    let any: &dyn Any = &err;
    if let Some(e) = any.downcast_ref::<JobError>() {
        return Failure {
            kind: e.kind,
            message: e.message.clone(),
        };
    }
    let message = match any.downcast_ref::<BoxError>() {
        Some(boxed) => chain(boxed.as_ref()),
        None => err.to_string(),
    };
    Failure {
        kind: FailureKind::Retry,
        message,
    }
}

/// `error: cause: cause ...`, skipping a cause whose text its parent already ends with.
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut next = err.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot reach the gateway")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn job_errors_keep_their_kind() {
        let f = classify(JobError::permanent("card declined"));
        assert_eq!(f.kind, FailureKind::Permanent);
        assert_eq!(f.message, "card declined");
        let f = classify(JobError::retry_after(Duration::from_secs(3), "busy"));
        assert_eq!(f.kind, FailureKind::RetryAfter(Duration::from_secs(3)));
    }

    #[test]
    fn plain_errors_retry_with_their_message() {
        let f = classify("just a string");
        assert_eq!(f.kind, FailureKind::Retry);
        assert_eq!(f.message, "just a string");
        let f = classify(std::io::Error::other("reset"));
        assert_eq!(
            f,
            Failure {
                kind: FailureKind::Retry,
                message: "reset".into()
            }
        );
    }

    #[test]
    fn causes_are_listed() {
        let e: JobError = Outer(std::io::Error::other("connection refused")).into();
        assert_eq!(e.message(), "cannot reach the gateway: connection refused");
        let boxed: BoxError = Box::new(Outer(std::io::Error::other("timed out")));
        assert_eq!(
            classify(boxed).message,
            "cannot reach the gateway: timed out"
        );
    }

    #[test]
    fn result_ext_marks_errors() {
        let r: Result<(), &str> = Err("bad input");
        let e = r.permanent().expect_err("error");
        assert_eq!(e.kind(), FailureKind::Permanent);
        let r: Result<(), &str> = Err("slow down");
        let e = r.retry_after(Duration::from_millis(5)).expect_err("error");
        assert_eq!(e.kind(), FailureKind::RetryAfter(Duration::from_millis(5)));
    }
}
