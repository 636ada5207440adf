//! [`Parser`]: the sans-IO state machine that turns the bytes of one connection into
//! [`Step`]s, framing lines and bodies exactly as beanstalkd 1.12 does.

use bytes::{Buf, BytesMut};

use super::line::{self, Line};
use super::{Command, MAX_LINE, Reply};

/// What the parser made of the bytes so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A well-formed command to run.
    Command(Command),
    /// An error line to send; the connection goes on.
    Error(Reply),
    /// Close the connection without a reply. beanstalkd 1.12 never does this on a
    /// protocol error (only `quit`, which is [`Command::Quit`], and socket errors close
    /// a connection), so this parser does not produce it; handlers treat it as `quit`.
    Close,
}

/// Where the parser is in the byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a command line; its window starts at the front of the buffer.
    Line,
    /// Throwing away a line longer than [`MAX_LINE`], one window at a time, up to the
    /// first CRLF that lies inside a window; then BAD_FORMAT.
    SkipLine,
    /// Waiting for a `put` body: `size` bytes and CRLF.
    Body {
        pri: u32,
        delay: u32,
        ttr: u32,
        size: usize,
    },
    /// Throwing away the `left` remaining bytes of a too-big body; then JOB_TOO_BIG.
    Discard { left: u64 },
}

/// What the current window holds.
enum Scan {
    /// A line of this many bytes, CRLF included.
    Line(usize),
    /// A full window without a line end.
    Full,
    /// Not enough bytes to tell.
    More,
}

/// The parser of one connection: feed it the bytes read, take [`Step`]s out.
///
/// After [`Parser::next`] returns `None`, `buf` holds less than
/// `max(MAX_LINE, max_job_size + 2)` bytes: over-long lines and too-big bodies are thrown
/// away as they arrive, never buffered.
///
/// ```
/// use bytes::BytesMut;
/// use delayq_beanstalk::proto::{Command, Parser, Reply, Step};
///
/// let mut parser = Parser::new(65_535);
/// let mut buf = BytesMut::from(&b"put 0 0 10 5\r\nhello\r\nUSE x\r\nreser"[..]);
/// let Some(Step::Command(Command::Put { body, .. })) = parser.next(&mut buf) else { panic!() };
/// assert_eq!(&body[..], b"hello");
/// assert_eq!(parser.next(&mut buf), Some(Step::Error(Reply::UnknownCommand)));
/// assert_eq!(parser.next(&mut buf), None);
/// assert!(parser.is_partial(&buf));
/// buf.extend_from_slice(b"ve\r\n");
/// assert_eq!(parser.next(&mut buf), Some(Step::Command(Command::Reserve)));
/// ```
#[derive(Debug, Clone)]
pub struct Parser {
    max_job_size: usize,
    state: State,
}

impl Parser {
    /// A parser for a server whose largest job body is `max_job_size` bytes
    /// (beanstalkd's `-z`; its default is [`DEFAULT_MAX_JOB_SIZE`](super::DEFAULT_MAX_JOB_SIZE)).
    pub fn new(max_job_size: usize) -> Self {
        Parser {
            max_job_size,
            state: State::Line,
        }
    }

    /// The largest job body accepted, in bytes.
    pub fn max_job_size(&self) -> usize {
        self.max_job_size
    }

    /// Takes what it uses from `buf`; `None` when it needs more bytes.
    pub fn next(&mut self, buf: &mut BytesMut) -> Option<Step> {
        loop {
            match self.state {
                State::Line | State::SkipLine => match scan(buf) {
                    Scan::More => return None,
                    Scan::Full => {
                        buf.advance(MAX_LINE);
                        self.state = State::SkipLine;
                    }
                    Scan::Line(n) => {
                        let line = buf.split_to(n);
                        if self.state == State::SkipLine {
                            self.state = State::Line;
                            return Some(Step::Error(Reply::BadFormat));
                        }
                        match line::parse(&line[..n - 2], self.max_job_size) {
                            Line::Command(c) => return Some(Step::Command(c)),
                            Line::Error(reply) => return Some(Step::Error(reply)),
                            Line::Put {
                                pri,
                                delay,
                                ttr,
                                size,
                            } => {
                                let size = size as usize;
                                self.state = State::Body {
                                    pri,
                                    delay,
                                    ttr,
                                    size,
                                };
                            }
                            Line::TooBig { size } => {
                                self.state = State::Discard {
                                    left: u64::from(size) + 2,
                                };
                            }
                        }
                    }
                },
                State::Body {
                    pri,
                    delay,
                    ttr,
                    size,
                } => {
                    if buf.len() < size + 2 {
                        return None;
                    }
                    self.state = State::Line;
                    let mut body = buf.split_to(size + 2);
                    let trailer = body.split_off(size);
                    // beanstalkd reads exactly size + 2 bytes and checks the last two.
                    if &trailer[..] != b"\r\n" {
                        return Some(Step::Error(Reply::ExpectedCrlf));
                    }
                    let body = body.freeze();
                    return Some(Step::Command(Command::Put {
                        pri,
                        delay,
                        ttr,
                        body,
                    }));
                }
                State::Discard { left } => {
                    let n = usize::try_from(left).map_or(buf.len(), |left| left.min(buf.len()));
                    buf.advance(n);
                    let left = left - n as u64;
                    if left > 0 {
                        self.state = State::Discard { left };
                        return None;
                    }
                    self.state = State::Line;
                    return Some(Step::Error(Reply::JobTooBig));
                }
            }
        }
    }

    /// True while a command has begun without its end: bytes wait in `buf`, or the parser
    /// is inside a `put` body or is throwing away an over-long line or a too-big body.
    pub fn is_partial(&self, buf: &[u8]) -> bool {
        !buf.is_empty() || self.state != State::Line
    }
}

/// Looks for a line end in the window at the front of `buf`, as beanstalkd's
/// `scan_line_end` does: only the first `\r` of the window counts, and only if the next
/// byte, inside the window, is `\n`.
fn scan(buf: &[u8]) -> Scan {
    let window = &buf[..buf.len().min(MAX_LINE)];
    let searched = &window[..window.len().saturating_sub(1)];
    match searched.iter().position(|&b| b == b'\r') {
        Some(i) if window[i + 1] == b'\n' => Scan::Line(i + 2),
        _ if window.len() == MAX_LINE => Scan::Full,
        _ => Scan::More,
    }
}
