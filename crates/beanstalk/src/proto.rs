//! The sans-IO beanstalkd 1.12 protocol: bytes in, [`Command`]s or error [`Reply`]s out
//! ([`Parser`]), replies and their YAML documents back to bytes ([`Reply::encode`],
//! [`yaml_dict`], [`yaml_list`]). No sockets, no clock, no engine.
//!
//! # How beanstalkd 1.12 reads a connection (probed against a running server)
//!
//! Each point is what `beanstalkd -v` 1.12 answered; the parser does the same.
//!
//! - **Lines.** A command line ends at the *first* `\r` of its window if `\n` follows;
//!   the window is the first [`MAX_LINE`] (224) bytes, CRLF included. So a stray `\r`
//!   (`abc\rdef\r\n`) hides every later CRLF of the window, and nothing is answered
//!   until the window fills.
//! - **Over-long lines.** A window of 224 bytes without a line end is thrown away,
//!   and so is each following 224-byte window, up to the first one holding a line end:
//!   then one `BAD_FORMAT`. A CRLF split across two windows is not seen: 223 bytes then
//!   CRLF swallows the next command too. Nothing of the long line is buffered.
//! - **Command names** are matched as prefixes in beanstalkd's order: `quitx` is `quit`,
//!   `reservex`, `stats-job` (no space) and `list-tubesx` are `BAD_FORMAT`,
//!   `pause-tubefoo 5` pauses `foo`; `peek`, `use`, `kick`, `touch` without their space,
//!   an upper-case command and an empty line are `UNKNOWN_COMMAND`.
//! - **A NUL byte** anywhere in a line is `BAD_FORMAT`.
//! - **Numbers** of `put`, `release`, `bury`, ids and `pause-tube`: spaces (only `' '`,
//!   any number) then digits; no `+`/`-` sign, no tab, leading zeros fine; over 2^32-1
//!   (2^64-1 for ids) is `BAD_FORMAT`. Nothing may follow the last number, not even a
//!   space. Extra spaces between arguments are fine: `put  1  2 3 4`.
//! - **`kick`** uses C `strtoul`: white space and a sign allowed, garbage after the
//!   number ignored, `-1` is 2^64-1, kept in 32 bits (`kick 4294967296` kicks 0);
//!   no digits or over 2^64-1 is `BAD_FORMAT`.
//! - **`reserve-with-timeout`** uses C `strtol` into an `int`: garbage ignored, no
//!   digits means 0, over the `long` range is `BAD_FORMAT`, 4294967297 is 1, and a
//!   negative value (`-1`, 2147483648) waits without a limit: [`Command::Reserve`].
//! - **Tube names** (`use`, `watch`, `ignore`, `stats-tube`) are the rest of the line
//!   exactly, checked by [`Tube::new`](crate::tube::Tube::new): `use  foo`, `use foo `,
//!   `use -foo`, a 201-byte name are `BAD_FORMAT`.
//! - **`put` bodies.** beanstalkd reads exactly `<bytes> + 2` bytes; if the last two are
//!   not CRLF the job is dropped with `EXPECTED_CRLF` and parsing resumes right after
//!   them (`put 0 0 0 1\r\nabXYuse foo\r\n` answers `EXPECTED_CRLF`, `UNKNOWN_COMMAND`).
//! - **`JOB_TOO_BIG`** (`<bytes>` over the limit, checked before trailing garbage):
//!   `<bytes> + 2` bytes are thrown away as they arrive and the answer comes only after
//!   the last one.
//! - **`ttr 0`** is accepted and stored as 1 s; [`Command::Put`] carries it as sent.
//! - beanstalkd never closes a connection for a malformed request; only `quit` does.

mod command;
mod line;
mod num;
mod parse;
mod reply;
mod yaml;

pub use command::Command;
pub use parse::{Parser, Step};
pub use reply::Reply;
pub use yaml::{YamlValue, yaml_dict, yaml_list};

/// Longest command line beanstalkd reads, CRLF included (`LINE_BUF_SIZE`).
pub const MAX_LINE: usize = 224;

/// beanstalkd's default largest job body, in bytes (`-z`, 2^16 - 1).
pub const DEFAULT_MAX_JOB_SIZE: usize = 65_535;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
