//! The host clock, and job bodies that carry their due time.
//!
//! Every system in the suite is measured on this host's clock: a producer stamps each job
//! with `floor(now in ms) + delay` (the same rounding the engines and BullMQ apply, so that a
//! queue that delivers on time is never counted early), and the consumer subtracts that from
//! the time it receives the job. The stamp travels in the body: `<due ms>:` padded with `x`.

use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch, on the host's wall clock.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Milliseconds since the Unix epoch (rounded down), on the host's wall clock.
pub fn now_ms() -> u64 {
    now_us() / 1000
}

/// A body of `size` bytes (at least the stamp) that says the job is due at `due_ms`.
pub fn body(due_ms: u64, size: usize) -> Vec<u8> {
    let mut b = format!("{due_ms}:").into_bytes();
    if b.len() < size {
        b.resize(size, b'x');
    }
    b
}

/// The due time a [`body`] carries, or `None` when it carries none.
pub fn due_ms(body: &[u8]) -> Option<u64> {
    let end = body.iter().position(|&c| c == b':')?;
    std::str::from_utf8(&body[..end]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_carry_their_due_time() {
        let b = body(1_732_000_000_123, 100);
        assert_eq!(b.len(), 100);
        assert_eq!(due_ms(&b), Some(1_732_000_000_123));
        assert_eq!(due_ms(b"no stamp"), None);
        assert_eq!(body(7, 0), b"7:");
    }
}
