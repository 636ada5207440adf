//! [`Stopped`]: a process stopped with SIGSTOP (its connections stay open and nothing
//! answers: a hung server), continued with SIGCONT when dropped, so that a failing test
//! leaves no stopped process behind.

use std::process::Command;

/// A SIGSTOPped process, continued (SIGCONT) when dropped, a failed test's unwinding too.
#[derive(Debug)]
pub struct Stopped(u32);

impl Stopped {
    /// Stops process `pid` (SIGSTOP) until the guard is dropped.
    pub fn new(pid: u32) -> Self {
        signal(pid, "-STOP");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(self.0, "-CONT");
    }
}

/// Sends `sig` (as `kill` takes it: `-STOP`, `-CONT`) to process `pid`; panics when `kill`
/// fails.
fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap_or_else(|e| panic!("kill {sig} {pid}: {e}"));
    assert!(st.success(), "kill {sig} {pid}");
}
