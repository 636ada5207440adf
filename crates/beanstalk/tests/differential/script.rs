//! A scripted session: the steps one or more client connections take, written once and
//! played against every server.
//!
//! A step acts on one connection (named by a number; each opens on first use), then reads a
//! number of reply *units* from it: a unit is one line, or for `RESERVED`, `FOUND` and `OK`
//! a line and its `<bytes>` body. `{idN}` in sent text stands for the id of the N-th job
//! that the server itself named (see `normalise.rs`).

use std::time::Duration;

use super::differences::Difference;

/// How long a step waits for each of its units unless told otherwise: replies that need no
/// timer come within milliseconds; this only bounds a server that never answers.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(3);

/// The pause between the pieces of one split write, so that each arrives on its own.
pub const PIECE_GAP: Duration = Duration::from_millis(30);

/// What a step does before it reads.
#[derive(Clone, Debug)]
pub enum Action {
    /// Write these pieces, pausing [`PIECE_GAP`] between two.
    Send(Vec<Vec<u8>>),
    /// Write nothing (read a reply that an earlier step left pending).
    Nothing,
    /// Sleep.
    Pause(Duration),
    /// Close the connection's sending side (a half-closed connection).
    HalfClose,
    /// Put the server into drain mode: beanstalkd by `SIGUSR1`, delayq by its shutdown
    /// future (the only drain it has).
    Drain,
}

/// What the replies of a step must be.
#[derive(Clone, Debug)]
pub enum Expect {
    /// delayq's normalised units equal beanstalkd's.
    Same,
    /// A documented difference: delayq's normalised units are exactly these, and
    /// beanstalkd's are not.
    Differs {
        /// The entry of `DIFFERENCES` that explains it.
        difference: &'static Difference,
        /// delayq's normalised units.
        delayq: Vec<String>,
    },
}

/// One step.
#[derive(Clone, Debug)]
pub struct Step {
    /// The connection it acts on.
    pub conn: usize,
    /// What it does.
    pub action: Action,
    /// How many reply units it reads.
    pub units: usize,
    /// Whether it then expects the server to close the connection (read returns EOF).
    pub closed: bool,
    /// The bound on the wait for each unit (and for the close).
    pub wait: Duration,
    /// What the units must be.
    pub expect: Expect,
}

/// A session: steps, and the job size limit both servers get.
#[derive(Clone, Debug)]
pub struct Script {
    /// The test's name, for messages.
    pub name: &'static str,
    /// beanstalkd's `-z` and delayq's `Options::max_job_size` (beanstalkd's default if
    /// `None`).
    pub max_job_size: Option<usize>,
    /// The steps in order.
    pub steps: Vec<Step>,
    current: usize,
}

impl Script {
    /// An empty session on connection 0.
    pub fn new(name: &'static str) -> Self {
        Script {
            name,
            max_job_size: None,
            steps: Vec::new(),
            current: 0,
        }
    }

    /// Both servers take jobs of at most `bytes` bytes.
    pub fn max_job_size(mut self, bytes: usize) -> Self {
        self.max_job_size = Some(bytes);
        self
    }

    /// The steps that follow act on connection `conn` (opened on first use).
    pub fn on(mut self, conn: usize) -> Self {
        self.current = conn;
        self
    }

    fn push(mut self, action: Action, units: usize) -> Self {
        self.steps.push(Step {
            conn: self.current,
            action,
            units,
            closed: false,
            wait: DEFAULT_WAIT,
            expect: Expect::Same,
        });
        self
    }

    /// Sends `text` (one or more commands, pipelined) and reads `units` replies.
    pub fn send(self, text: impl Into<Vec<u8>>, units: usize) -> Self {
        self.push(Action::Send(vec![text.into()]), units)
    }

    /// Sends `pieces` as separate writes and reads `units` replies.
    pub fn split(self, pieces: &[&[u8]], units: usize) -> Self {
        let pieces = pieces.iter().map(|p| p.to_vec()).collect();
        self.push(Action::Send(pieces), units)
    }

    /// Reads `units` replies without sending anything.
    pub fn read(self, units: usize) -> Self {
        self.push(Action::Nothing, units)
    }

    /// Sleeps for `ms` milliseconds.
    pub fn pause(self, ms: u64) -> Self {
        self.push(Action::Pause(Duration::from_millis(ms)), 0)
    }

    /// Closes the sending side of the current connection (the server reads EOF), then
    /// reads `units` replies.
    pub fn half_close(self, units: usize) -> Self {
        self.push(Action::HalfClose, units)
    }

    /// Puts both servers into drain mode.
    pub fn drain(self) -> Self {
        self.push(Action::Drain, 0)
    }

    /// The last step then expects the connection to be closed by the server.
    pub fn then_closed(mut self) -> Self {
        self.last().closed = true;
        self
    }

    /// The last step waits up to `secs` seconds for each unit (replies that wait on a timer).
    pub fn within(mut self, secs: u64) -> Self {
        self.last().wait = Duration::from_secs(secs);
        self
    }

    /// The last step's answer is a documented difference: delayq answers `delayq`
    /// (normalised units), beanstalkd something else.
    pub fn differs(mut self, difference: &'static Difference, delayq: &[&str]) -> Self {
        self.last().expect = Expect::Differs {
            difference,
            delayq: delayq.iter().map(|s| (*s).to_owned()).collect(),
        };
        self
    }

    fn last(&mut self) -> &mut Step {
        self.steps
            .last_mut()
            .unwrap_or_else(|| panic!("the script has no step to modify yet"))
    }
}

/// `put <pri> <delay> <ttr> <len>\r\n<body>\r\n`.
pub fn put(pri: u32, delay: u32, ttr: u32, body: &str) -> String {
    format!("put {pri} {delay} {ttr} {}\r\n{body}\r\n", body.len())
}
