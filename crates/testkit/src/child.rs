//! What the server harnesses share about their child processes.

use std::process::Child;
use std::time::{Duration, Instant};

/// Waits until `up` answers true, for at most 10 s: false when the child exits first or the
/// time runs out (the caller kills it and reports its log).
pub(crate) fn wait_until_up(child: &mut Option<Child>, up: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if up() {
            return true;
        }
        let exited = child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
            .is_some();
        if exited || Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
