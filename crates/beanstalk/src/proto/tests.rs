//! Table tests of the parser: every command in its good and bad forms, with the answers
//! beanstalkd 1.12 gave to the same bytes.

use bytes::{Bytes, BytesMut};

use super::*;
use crate::tube::Tube;

/// Every step `input` yields at once, and what is left in the buffer.
fn steps_with(input: &[u8], max_job_size: usize) -> (Vec<Step>, BytesMut) {
    let mut parser = Parser::new(max_job_size);
    let mut buf = BytesMut::from(input);
    let mut steps = Vec::new();
    while let Some(step) = parser.next(&mut buf) {
        steps.push(step);
    }
    (steps, buf)
}

fn steps(input: &[u8]) -> Vec<Step> {
    steps_with(input, DEFAULT_MAX_JOB_SIZE).0
}

fn tube(name: &str) -> Tube {
    Tube::new(name).unwrap()
}

fn put(pri: u32, delay: u32, ttr: u32, body: &'static [u8]) -> Command {
    Command::Put {
        pri,
        delay,
        ttr,
        body: Bytes::from_static(body),
    }
}

use Step::Error as E;

#[test]
fn every_command_in_good_forms() {
    let table: Vec<(&[u8], Command)> = vec![
        (b"put 1 2 3 4\r\nabcd\r\n", put(1, 2, 3, b"abcd")),
        (b"put 0 0 0 0\r\n\r\n", put(0, 0, 0, b"")),
        (b"put  1  2   3 4\r\nabcd\r\n", put(1, 2, 3, b"abcd")),
        (b"put 0 0 0 00001\r\na\r\n", put(0, 0, 0, b"a")),
        (
            b"put 4294967295 4294967295 4294967295 1\r\na\r\n",
            put(u32::MAX, u32::MAX, u32::MAX, b"a"),
        ),
        (b"put 0 0 5 3\r\na\0c\r\n", put(0, 0, 5, b"a\0c")),
        (b"put 0 0 5 4\r\n\r\n\r\n\r\n", put(0, 0, 5, b"\r\n\r\n")),
        (b"use foo\r\n", Command::Use(tube("foo"))),
        (b"use foo-\r\n", Command::Use(tube("foo-"))),
        (b"use +/;.$_()Az09\r\n", Command::Use(tube("+/;.$_()Az09"))),
        (b"reserve\r\n", Command::Reserve),
        (
            b"reserve-with-timeout 0\r\n",
            Command::ReserveWithTimeout(0),
        ),
        (
            b"reserve-with-timeout 7\r\n",
            Command::ReserveWithTimeout(7),
        ),
        (
            b"reserve-with-timeout 0 junk\r\n",
            Command::ReserveWithTimeout(0),
        ),
        (
            b"reserve-with-timeout x\r\n",
            Command::ReserveWithTimeout(0),
        ),
        (b"reserve-with-timeout \r\n", Command::ReserveWithTimeout(0)),
        (
            b"reserve-with-timeout 1x\r\n",
            Command::ReserveWithTimeout(1),
        ),
        (
            b"reserve-with-timeout  +1\r\n",
            Command::ReserveWithTimeout(1),
        ),
        (
            b"reserve-with-timeout \t1\r\n",
            Command::ReserveWithTimeout(1),
        ),
        (
            b"reserve-with-timeout -0\r\n",
            Command::ReserveWithTimeout(0),
        ),
        (
            b"reserve-with-timeout 4294967296\r\n",
            Command::ReserveWithTimeout(0),
        ),
        (
            b"reserve-with-timeout 4294967297\r\n",
            Command::ReserveWithTimeout(1),
        ),
        (
            b"reserve-with-timeout 2147483647\r\n",
            Command::ReserveWithTimeout(i32::MAX as u32),
        ),
        (b"reserve-with-timeout -1\r\n", Command::Reserve),
        (b"reserve-with-timeout 2147483648\r\n", Command::Reserve),
        (b"reserve-with-timeout 6442450944\r\n", Command::Reserve),
        (b"reserve-job 5\r\n", Command::ReserveJob(5)),
        (
            b"delete 18446744073709551615\r\n",
            Command::Delete(u64::MAX),
        ),
        (b"delete  1\r\n", Command::Delete(1)),
        (
            b"release 1 2 3\r\n",
            Command::Release {
                id: 1,
                pri: 2,
                delay: 3,
            },
        ),
        (
            b"release  1  2  3\r\n",
            Command::Release {
                id: 1,
                pri: 2,
                delay: 3,
            },
        ),
        (b"bury 1 2\r\n", Command::Bury { id: 1, pri: 2 }),
        (b"touch 9\r\n", Command::Touch(9)),
        (b"watch a\r\n", Command::Watch(tube("a"))),
        (b"ignore default\r\n", Command::Ignore(tube("default"))),
        (b"peek 1\r\n", Command::Peek(1)),
        (b"peek  1\r\n", Command::Peek(1)),
        (b"peek-ready\r\n", Command::PeekReady),
        (b"peek-delayed\r\n", Command::PeekDelayed),
        (b"peek-buried\r\n", Command::PeekBuried),
        (b"kick 0\r\n", Command::Kick(0)),
        (b"kick 10\r\n", Command::Kick(10)),
        (b"kick -1\r\n", Command::Kick(u64::from(u32::MAX))),
        (b"kick +2 junk\r\n", Command::Kick(2)),
        (b"kick \t3\r\n", Command::Kick(3)),
        (b"kick 4294967296\r\n", Command::Kick(0)),
        (b"kick 4294967297\r\n", Command::Kick(1)),
        (
            b"kick 18446744073709551615\r\n",
            Command::Kick(u64::from(u32::MAX)),
        ),
        (b"kick-job 3\r\n", Command::KickJob(3)),
        (b"stats-job 6\r\n", Command::StatsJob(6)),
        (
            b"stats-tube default\r\n",
            Command::StatsTube(tube("default")),
        ),
        (b"stats\r\n", Command::Stats),
        (b"list-tubes\r\n", Command::ListTubes),
        (b"list-tube-used\r\n", Command::ListTubeUsed),
        (b"list-tubes-watched\r\n", Command::ListTubesWatched),
        (
            b"pause-tube default 0\r\n",
            Command::PauseTube {
                tube: tube("default"),
                delay: 0,
            },
        ),
        (
            b"pause-tube  default   5\r\n",
            Command::PauseTube {
                tube: tube("default"),
                delay: 5,
            },
        ),
        (
            b"pause-tubedefault 0\r\n",
            Command::PauseTube {
                tube: tube("default"),
                delay: 0,
            },
        ),
        (
            b"pause-tubes 7\r\n",
            Command::PauseTube {
                tube: tube("s"),
                delay: 7,
            },
        ),
        (b"quit\r\n", Command::Quit),
        (b"quit junk\r\n", Command::Quit),
        (b"quitelist-tube-used\r\n", Command::Quit),
    ];
    for (input, command) in table {
        let (got, rest) = steps_with(input, DEFAULT_MAX_JOB_SIZE);
        assert_eq!(
            got,
            vec![Step::Command(command)],
            "{:?}",
            String::from_utf8_lossy(input)
        );
        assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(input));
    }
}

#[test]
fn every_command_in_bad_forms() {
    let bad = Step::Error(Reply::BadFormat);
    let unknown = Step::Error(Reply::UnknownCommand);
    let table: Vec<(&[u8], Vec<Step>)> = vec![
        // The line after a refused `put` line is its body, read as a command.
        (b"put 1 2 3\r\n", vec![bad.clone()]),
        (b"put \r\n", vec![bad.clone()]),
        (b"put\r\n", vec![unknown.clone()]),
        (b"PUT 1 2 3 4\r\n", vec![unknown.clone()]),
        (
            b"put +1 2 3 4\r\nabcd\r\n",
            vec![bad.clone(), unknown.clone()],
        ),
        (
            b"put -1 2 3 4\r\nabcd\r\n",
            vec![bad.clone(), unknown.clone()],
        ),
        (
            b"put 1 2 3 4 \r\nabcd\r\n",
            vec![bad.clone(), unknown.clone()],
        ),
        (
            b"put 1 2 3 4x\r\nabcd\r\n",
            vec![bad.clone(), unknown.clone()],
        ),
        (
            b"put 1\t2 3 4\r\nabcd\r\n",
            vec![bad.clone(), unknown.clone()],
        ),
        (
            b"put 4294967296 0 0 1\r\na\r\n",
            vec![bad.clone(), unknown.clone()],
        ),
        (
            b"put 99999999999999999999999 0 0 1\r\na\r\n",
            vec![bad.clone(), unknown.clone()],
        ),
        (
            b"put 0 0 0 1\0\r\na\r\n",
            vec![bad.clone(), unknown.clone()],
        ),
        (b"\r\n", vec![unknown.clone()]),
        (b"stats\0\r\n", vec![bad.clone()]),
        (b"use a\0b\r\n", vec![bad.clone()]),
        (b"statsfoo\r\n", vec![bad.clone()]),
        (b"stats \r\n", vec![bad.clone()]),
        (b"stats-job\r\n", vec![bad.clone()]),
        (b"stats-job \r\n", vec![bad.clone()]),
        (b"stats-tube\r\n", vec![bad.clone()]),
        (b"stats-tube  default\r\n", vec![bad.clone()]),
        (b"stats-tube default \r\n", vec![bad.clone()]),
        (b"stats-tube -a\r\n", vec![bad.clone()]),
        (b"reservex\r\n", vec![bad.clone()]),
        (b"reserve \r\n", vec![bad.clone()]),
        (b"reserve-with-timeout\r\n", vec![bad.clone()]),
        (
            b"reserve-with-timeout 99999999999999999999\r\n",
            vec![bad.clone()],
        ),
        (b"reserve-job\r\n", vec![bad.clone()]),
        (b"reserve-job x\r\n", vec![bad.clone()]),
        (b"list-tube\r\n", vec![unknown.clone()]),
        (b"list-tubesx\r\n", vec![bad.clone()]),
        (b"list-tube-usedx\r\n", vec![bad.clone()]),
        (b"list-tubes-watchedx\r\n", vec![bad.clone()]),
        (b"peek\r\n", vec![unknown.clone()]),
        (b"peek \r\n", vec![bad.clone()]),
        (b"peek 1 \r\n", vec![bad.clone()]),
        (b"peek +1\r\n", vec![bad.clone()]),
        (b"peek 18446744073709551616\r\n", vec![bad.clone()]),
        (b"peek-readyx\r\n", vec![bad.clone()]),
        (b"peek-delayed \r\n", vec![bad.clone()]),
        (b"peek-buried \r\n", vec![bad.clone()]),
        (b"kick\r\n", vec![unknown.clone()]),
        (b"kick \r\n", vec![bad.clone()]),
        (b"kick x\r\n", vec![bad.clone()]),
        (b"kick -\r\n", vec![bad.clone()]),
        (b"kick 18446744073709551616\r\n", vec![bad.clone()]),
        (b"kick-job\r\n", vec![unknown.clone()]),
        (b"kick-job 1 \r\n", vec![bad.clone()]),
        (b"kick-job x\r\n", vec![bad.clone()]),
        (b"use\r\n", vec![unknown.clone()]),
        (b"use \r\n", vec![bad.clone()]),
        (b"use -foo\r\n", vec![bad.clone()]),
        (b"use foo bar\r\n", vec![bad.clone()]),
        (b"use  foo\r\n", vec![bad.clone()]),
        (b"use foo \r\n", vec![bad.clone()]),
        (b"use f:o\r\n", vec![bad.clone()]),
        (b"use f*o\r\n", vec![bad.clone()]),
        (b"use \xc3\xa9\r\n", vec![bad.clone()]),
        (b"watch -a\r\n", vec![bad.clone()]),
        (b"ignore -a\r\n", vec![bad.clone()]),
        (b"pause-tube\r\n", vec![bad.clone()]),
        (b"pause-tube default\r\n", vec![bad.clone()]),
        (b"pause-tube default 0 \r\n", vec![bad.clone()]),
        (b"pause-tube default +0\r\n", vec![bad.clone()]),
        (b"pause-tube default 4294967296\r\n", vec![bad.clone()]),
        (b"pause-tube default\t0\r\n", vec![bad.clone()]),
        (b"pause-tube -a 0\r\n", vec![bad.clone()]),
        (b"pause-tube a:b 0\r\n", vec![bad.clone()]),
        (b"pause-tubes default 0\r\n", vec![bad.clone()]),
        (b"release 1 2\r\n", vec![bad.clone()]),
        (b"release 1 2 3 \r\n", vec![bad.clone()]),
        (b"release 1 4294967296 3\r\n", vec![bad.clone()]),
        (b"bury 1\r\n", vec![bad.clone()]),
        (b"bury 1 2 \r\n", vec![bad.clone()]),
        (b"touch\r\n", vec![unknown.clone()]),
        (b"touch 1x\r\n", vec![bad.clone()]),
        (b"delete -1\r\n", vec![bad.clone()]),
        (b"delete\r\n", vec![unknown.clone()]),
        (
            b"quitx\r\nstats\r\n",
            vec![Step::Command(Command::Quit), Step::Command(Command::Stats)],
        ),
    ];
    for (input, expected) in table {
        assert_eq!(
            steps(input),
            expected,
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn tube_name_lengths() {
    let name = "a".repeat(200);
    let ok = format!("use {name}\r\n");
    assert_eq!(
        steps(ok.as_bytes()),
        vec![Step::Command(Command::Use(tube(&name)))]
    );
    let long = format!("use {name}a\r\n");
    assert_eq!(steps(long.as_bytes()), vec![E(Reply::BadFormat)]);
    // The longest line: `pause-tube`, a 200-byte name and a ten-digit delay, 224 bytes.
    let longest = format!("pause-tube {name} 4294967295\r\n");
    assert_eq!(longest.len(), MAX_LINE);
    assert_eq!(
        steps(longest.as_bytes()),
        vec![Step::Command(Command::PauseTube {
            tube: tube(&name),
            delay: u32::MAX
        })]
    );
    let over = format!("pause-tube {name}a 0\r\n");
    assert_eq!(steps(over.as_bytes()), vec![E(Reply::BadFormat)]);
}

#[test]
fn body_not_followed_by_crlf() {
    // The two bytes after the body are eaten; parsing goes on right after them.
    assert_eq!(
        steps(b"put 0 0 0 1\r\nabXYuse foo\r\n"),
        vec![E(Reply::ExpectedCrlf), E(Reply::UnknownCommand)]
    );
    assert_eq!(
        steps(b"put 0 0 0 1\r\nabXlist-tubes\r\n"),
        vec![E(Reply::ExpectedCrlf), Step::Command(Command::ListTubes)]
    );
    assert_eq!(steps(b"put 0 0 0 1\r\na\n\r"), vec![E(Reply::ExpectedCrlf)]);
}

#[test]
fn job_too_big_discards_the_body_then_answers() {
    let mut input = b"put 0 0 0 65536\r\n".to_vec();
    input.extend(std::iter::repeat_n(b'x', 65536));
    input.extend(b"\r\nlist-tube-used\r\n");
    assert_eq!(
        steps(&input),
        vec![E(Reply::JobTooBig), Step::Command(Command::ListTubeUsed)]
    );
    // The limit is inclusive.
    let mut input = b"put 0 0 0 65535\r\n".to_vec();
    input.extend(std::iter::repeat_n(b'x', 65535));
    input.extend(b"\r\n");
    assert!(
        matches!(&steps(&input)[..], [Step::Command(Command::Put { body, .. })] if body.len() == 65535)
    );
    // The size is checked before the trailing garbage.
    assert_eq!(
        steps(b"put 0 0 0 6 junk\r\nabcdef\r\nstats\r\n"),
        vec![
            E(Reply::BadFormat),
            E(Reply::UnknownCommand),
            Step::Command(Command::Stats)
        ]
    );
    assert_eq!(
        steps_with(b"put 0 0 0 6 junk\r\nabcdef\r\nstats\r\n", 5).0,
        vec![E(Reply::JobTooBig), Step::Command(Command::Stats)]
    );
    // The 2 bytes after the body are discarded whatever they are.
    assert_eq!(
        steps_with(b"put 0 0 0 6\r\nabcdefXYstats\r\n", 5).0,
        vec![E(Reply::JobTooBig), Step::Command(Command::Stats)]
    );
}

#[test]
fn job_too_big_answers_only_after_the_whole_body() {
    let mut parser = Parser::new(4);
    let mut buf = BytesMut::from(&b"put 0 0 0 4294967295\r\n"[..]);
    assert_eq!(parser.next(&mut buf), None);
    for _ in 0..100 {
        buf.extend_from_slice(&[b'x'; 1000]);
        assert_eq!(parser.next(&mut buf), None);
        // Nothing of the discarded body is kept.
        assert!(buf.is_empty());
        assert!(parser.is_partial(&buf));
    }
}

#[test]
fn line_windows() {
    let used = Step::Command(Command::ListTubeUsed);
    let x = |n: usize| vec![b'x'; n];
    let with_tail = |mut head: Vec<u8>| {
        head.extend(b"\r\nlist-tube-used\r\n");
        head
    };
    // 222 bytes and CRLF: a 224-byte line, read.
    assert_eq!(
        steps(&with_tail(x(222))),
        vec![E(Reply::UnknownCommand), used.clone()]
    );
    // 223 bytes: the CRLF straddles two windows, so the next line is swallowed too.
    assert_eq!(steps(&with_tail(x(223))), vec![E(Reply::BadFormat)]);
    assert_eq!(
        steps(&with_tail(x(1000))),
        vec![E(Reply::BadFormat), used.clone()]
    );
    assert_eq!(
        steps(&with_tail(x(446))),
        vec![E(Reply::BadFormat), used.clone()]
    );
    assert_eq!(steps(&with_tail(x(447))), vec![E(Reply::BadFormat)]);
    let mut head = b"use ".to_vec();
    head.extend(b"a".repeat(219));
    assert_eq!(steps(&with_tail(head)), vec![E(Reply::BadFormat)]);
    // A long line without an end: no answer, nothing kept beyond one window.
    let (got, rest) = steps_with(&x(10_000), DEFAULT_MAX_JOB_SIZE);
    assert_eq!(got, vec![]);
    assert!(rest.len() < MAX_LINE);
}

#[test]
fn stray_carriage_return_hides_the_window() {
    // Only the first `\r` of a window counts: nothing is answered until the window fills.
    assert_eq!(steps(b"abc\rdef\r\nlist-tube-used\r\n"), vec![]);
    assert_eq!(
        steps(b"list-tube-used\r\nlist-tube-used\rX\r\nlist-tube-used\r\n"),
        vec![Step::Command(Command::ListTubeUsed)]
    );
    let mut input = b"abc\rdef\r\nlist-tube-used\r\n".to_vec();
    input.extend(vec![b'y'; 300]);
    input.extend(b"\r\nlist-tube-used\r\n");
    assert_eq!(
        steps(&input),
        vec![E(Reply::BadFormat), Step::Command(Command::ListTubeUsed)]
    );
    let mut input = vec![b'x'; 230];
    input.extend(b"\r\r\nlist-tube-used\r\n");
    assert_eq!(steps(&input), vec![]);
}

#[test]
fn pipelined_and_split() {
    let input = b"use a\r\nput 0 0 1 2\r\nhi\r\nwatch a\r\nignore default\r\nreserve\r\n";
    let expected = vec![
        Step::Command(Command::Use(tube("a"))),
        Step::Command(put(0, 0, 1, b"hi")),
        Step::Command(Command::Watch(tube("a"))),
        Step::Command(Command::Ignore(tube("default"))),
        Step::Command(Command::Reserve),
    ];
    assert_eq!(steps(input), expected);
    // Byte by byte.
    let mut parser = Parser::new(DEFAULT_MAX_JOB_SIZE);
    let mut buf = BytesMut::new();
    let mut got = Vec::new();
    for &b in input {
        buf.extend_from_slice(&[b]);
        while let Some(step) = parser.next(&mut buf) {
            got.push(step);
        }
    }
    assert_eq!(got, expected);
    assert!(!parser.is_partial(&buf));
}

#[test]
fn is_partial_tracks_unfinished_commands() {
    let mut parser = Parser::new(DEFAULT_MAX_JOB_SIZE);
    let mut buf = BytesMut::new();
    assert!(!parser.is_partial(&buf));
    buf.extend_from_slice(b"put 0 0 1 3\r\n");
    assert_eq!(parser.next(&mut buf), None);
    // Inside the body, with nothing buffered.
    assert!(buf.is_empty());
    assert!(parser.is_partial(&buf));
    buf.extend_from_slice(b"abc\r\n");
    assert_eq!(
        parser.next(&mut buf),
        Some(Step::Command(put(0, 0, 1, b"abc")))
    );
    assert!(!parser.is_partial(&buf));
}

#[test]
fn encoded_commands_parse_back() {
    let commands = vec![
        put(1, 2, 3, b"x\r\ny"),
        Command::Use(tube("a/b")),
        Command::ReserveWithTimeout(5),
        Command::Release {
            id: 1,
            pri: 2,
            delay: 3,
        },
        Command::Kick(7),
        Command::PauseTube {
            tube: tube("(x)"),
            delay: 9,
        },
        Command::Quit,
    ];
    let mut buf = BytesMut::new();
    for c in &commands {
        c.encode(&mut buf);
    }
    let (got, rest) = steps_with(&buf, DEFAULT_MAX_JOB_SIZE);
    assert_eq!(
        got,
        commands.into_iter().map(Step::Command).collect::<Vec<_>>()
    );
    assert!(rest.is_empty());
}
