//! [`Reply`]: every answer beanstalkd 1.12 sends, and its exact bytes.

use std::fmt::Write as _;

use bytes::{BufMut, Bytes, BytesMut};

use crate::tube::Tube;

/// One answer to a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `INSERTED <id>`: the job was put.
    Inserted(u64),
    /// `BURIED <id>`: the job was put, but buried (beanstalkd: out of memory for the queue).
    BuriedId(u64),
    /// `USING <tube>`: answer to `use` and `list-tube-used`.
    Using(Tube),
    /// `RESERVED <id> <bytes>` and the body.
    Reserved {
        /// The job.
        id: u64,
        /// Its body.
        body: Bytes,
    },
    /// `DEADLINE_SOON`: a reserved job is in its last second.
    DeadlineSoon,
    /// `TIMED_OUT`: no job within the reserve timeout.
    TimedOut,
    /// `DELETED`.
    Deleted,
    /// `NOT_FOUND`.
    NotFound,
    /// `RELEASED`.
    Released,
    /// `BURIED` (answer to `bury`, or to `release` out of memory).
    Buried,
    /// `TOUCHED`.
    Touched,
    /// `WATCHING <count>`: answer to `watch` and `ignore`.
    Watching(u64),
    /// `NOT_IGNORED`: the last watched tube cannot be ignored.
    NotIgnored,
    /// `FOUND <id> <bytes>` and the body: answer to the `peek` commands.
    Found {
        /// The job.
        id: u64,
        /// Its body.
        body: Bytes,
    },
    /// `KICKED <count>`: answer to `kick`.
    Kicked(u64),
    /// `KICKED` without a count: answer to `kick-job`.
    KickedJob,
    /// `PAUSED`.
    Paused,
    /// `OK <bytes>` and a YAML document (see [`yaml_dict`](super::yaml_dict),
    /// [`yaml_list`](super::yaml_list)): answer to the `stats` and `list` commands.
    Ok(Bytes),
    /// `OUT_OF_MEMORY`.
    OutOfMemory,
    /// `INTERNAL_ERROR`.
    InternalError,
    /// `BAD_FORMAT`: a malformed command line.
    BadFormat,
    /// `UNKNOWN_COMMAND`.
    UnknownCommand,
    /// `EXPECTED_CRLF`: the two bytes after a `put` body were not CRLF.
    ExpectedCrlf,
    /// `JOB_TOO_BIG`: the body was over the job size limit (and was thrown away).
    JobTooBig,
    /// `DRAINING`: the server takes no new jobs.
    Draining,
}

impl Reply {
    /// Appends the reply's bytes: one CRLF-terminated line, then, for the replies that
    /// carry data, the data and CRLF.
    pub fn encode(&self, out: &mut BytesMut) {
        let word = match self {
            Reply::DeadlineSoon => "DEADLINE_SOON",
            Reply::TimedOut => "TIMED_OUT",
            Reply::Deleted => "DELETED",
            Reply::NotFound => "NOT_FOUND",
            Reply::Released => "RELEASED",
            Reply::Buried => "BURIED",
            Reply::Touched => "TOUCHED",
            Reply::NotIgnored => "NOT_IGNORED",
            Reply::KickedJob => "KICKED",
            Reply::Paused => "PAUSED",
            Reply::OutOfMemory => "OUT_OF_MEMORY",
            Reply::InternalError => "INTERNAL_ERROR",
            Reply::BadFormat => "BAD_FORMAT",
            Reply::UnknownCommand => "UNKNOWN_COMMAND",
            Reply::ExpectedCrlf => "EXPECTED_CRLF",
            Reply::JobTooBig => "JOB_TOO_BIG",
            Reply::Draining => "DRAINING",
            Reply::Inserted(id) => return line(out, format_args!("INSERTED {id}")),
            Reply::BuriedId(id) => return line(out, format_args!("BURIED {id}")),
            Reply::Using(tube) => return line(out, format_args!("USING {tube}")),
            Reply::Watching(n) => return line(out, format_args!("WATCHING {n}")),
            Reply::Kicked(n) => return line(out, format_args!("KICKED {n}")),
            Reply::Reserved { id, body } => {
                return with_data(out, format_args!("RESERVED {id} {}", body.len()), body);
            }
            Reply::Found { id, body } => {
                return with_data(out, format_args!("FOUND {id} {}", body.len()), body);
            }
            Reply::Ok(data) => return with_data(out, format_args!("OK {}", data.len()), data),
        };
        out.put_slice(word.as_bytes());
        out.put_slice(b"\r\n");
    }
}

/// A formatted line and CRLF.
fn line(out: &mut BytesMut, text: std::fmt::Arguments<'_>) {
    // Writing to a `BytesMut` cannot fail.
    let _ = out.write_fmt(text);
    out.put_slice(b"\r\n");
}

/// A formatted line, then `data` and CRLF.
fn with_data(out: &mut BytesMut, text: std::fmt::Arguments<'_>, data: &[u8]) {
    out.reserve(32 + data.len());
    line(out, text);
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(reply: Reply) -> Vec<u8> {
        let mut out = BytesMut::new();
        reply.encode(&mut out);
        out.to_vec()
    }

    /// The bytes as beanstalkd 1.12 sends them (its `MSG_*` strings and formats in
    /// `prot.c`, checked against a running server).
    #[test]
    fn every_reply_exact_bytes() {
        let tube = Tube::new("default").unwrap();
        let body = Bytes::from_static(b"a\0\r\nc");
        let table: Vec<(Reply, &[u8])> = vec![
            (Reply::Inserted(1), b"INSERTED 1\r\n"),
            (
                Reply::BuriedId(18446744073709551615),
                b"BURIED 18446744073709551615\r\n",
            ),
            (Reply::Using(tube), b"USING default\r\n"),
            (
                Reply::Reserved {
                    id: 10,
                    body: body.clone(),
                },
                b"RESERVED 10 5\r\na\0\r\nc\r\n",
            ),
            (
                Reply::Reserved {
                    id: 7,
                    body: Bytes::new(),
                },
                b"RESERVED 7 0\r\n\r\n",
            ),
            (Reply::DeadlineSoon, b"DEADLINE_SOON\r\n"),
            (Reply::TimedOut, b"TIMED_OUT\r\n"),
            (Reply::Deleted, b"DELETED\r\n"),
            (Reply::NotFound, b"NOT_FOUND\r\n"),
            (Reply::Released, b"RELEASED\r\n"),
            (Reply::Buried, b"BURIED\r\n"),
            (Reply::Touched, b"TOUCHED\r\n"),
            (Reply::Watching(2), b"WATCHING 2\r\n"),
            (Reply::NotIgnored, b"NOT_IGNORED\r\n"),
            (
                Reply::Found {
                    id: 1,
                    body: Bytes::from_static(b"abcd"),
                },
                b"FOUND 1 4\r\nabcd\r\n",
            ),
            (Reply::Kicked(0), b"KICKED 0\r\n"),
            (Reply::KickedJob, b"KICKED\r\n"),
            (Reply::Paused, b"PAUSED\r\n"),
            (
                Reply::Ok(Bytes::from_static(b"---\n- default\n")),
                b"OK 14\r\n---\n- default\n\r\n",
            ),
            (Reply::OutOfMemory, b"OUT_OF_MEMORY\r\n"),
            (Reply::InternalError, b"INTERNAL_ERROR\r\n"),
            (Reply::BadFormat, b"BAD_FORMAT\r\n"),
            (Reply::UnknownCommand, b"UNKNOWN_COMMAND\r\n"),
            (Reply::ExpectedCrlf, b"EXPECTED_CRLF\r\n"),
            (Reply::JobTooBig, b"JOB_TOO_BIG\r\n"),
            (Reply::Draining, b"DRAINING\r\n"),
        ];
        for (reply, expected) in table {
            assert_eq!(bytes(reply.clone()), expected, "{reply:?}");
        }
    }

    #[test]
    fn encode_appends() {
        let mut out = BytesMut::from(&b"X"[..]);
        Reply::Deleted.encode(&mut out);
        Reply::Kicked(3).encode(&mut out);
        assert_eq!(&out[..], b"XDELETED\r\nKICKED 3\r\n");
    }
}
