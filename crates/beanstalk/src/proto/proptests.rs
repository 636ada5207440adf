//! Properties of the parser: any bytes in any chunks are safe and bounded, chunking never
//! changes the outcome, and every valid command survives a round trip through its bytes.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use super::*;
use crate::tube::Tube;

/// A small job limit, so that too-big bodies come up often.
const MAX_JOB: usize = 64;

/// Feeds `input` in chunks of the given sizes (cycled), draining the parser after each.
/// Checks the buffer bound every time the parser asks for more.
fn feed(input: &[u8], chunks: &[usize], max_job_size: usize) -> Result<Vec<Step>, TestCaseError> {
    let mut parser = Parser::new(max_job_size);
    let mut buf = BytesMut::new();
    let mut steps = Vec::new();
    let mut rest = input;
    let mut sizes = chunks.iter().cycle();
    while !rest.is_empty() {
        let n = sizes
            .next()
            .copied()
            .unwrap_or(rest.len())
            .clamp(1, rest.len());
        buf.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        while let Some(step) = parser.next(&mut buf) {
            steps.push(step);
        }
        let bound = MAX_LINE.max(max_job_size + 2);
        prop_assert!(
            buf.len() < bound,
            "{} bytes buffered, bound {}",
            buf.len(),
            bound
        );
    }
    Ok(steps)
}

/// Pieces that steer random input into the parser's interesting states.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..40),
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        (0usize..600).prop_map(|n| vec![b'x'; n]),
        (0u32..(MAX_JOB as u32 * 2), any::<bool>()).prop_map(|(n, crlf)| format!(
            "put 1 2 3 {n}{}",
            if crlf { "\r\n" } else { "" }
        )
        .into_bytes()),
        prop::sample::select(vec![
            "reserve\r\n",
            "stats\r\n",
            "use a\r\n",
            "kick -1\r\n",
            "pause-tube a 1\r\n",
            "quit\r\n",
            "reserve-with-timeout -5\r\n",
            "put 0 0 0 4294967295\r\n",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
    ]
}

fn stream() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(piece(), 0..30).prop_map(|pieces| pieces.concat())
}

fn chunks() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..300, 1..20)
}

fn tube() -> impl Strategy<Value = Tube> {
    "[A-Za-z0-9+/;.$_()][A-Za-z0-9+/;.$_()-]{0,199}".prop_map(|s| Tube::new(&s).unwrap())
}

/// Any command with values that have a canonical form (a timeout in `int` range, a kick
/// bound in 32 bits, as beanstalkd keeps them).
fn command() -> impl Strategy<Value = Command> {
    let id = any::<u64>();
    let n32 = any::<u32>();
    prop_oneof![
        (
            n32,
            n32,
            n32,
            prop::collection::vec(any::<u8>(), 0..=MAX_JOB)
        )
            .prop_map(|(pri, delay, ttr, body)| Command::Put {
                pri,
                delay,
                ttr,
                body: Bytes::from(body)
            }),
        tube().prop_map(Command::Use),
        Just(Command::Reserve),
        (0..=i32::MAX as u32).prop_map(Command::ReserveWithTimeout),
        id.prop_map(Command::ReserveJob),
        id.prop_map(Command::Delete),
        (id, n32, n32).prop_map(|(id, pri, delay)| Command::Release { id, pri, delay }),
        (id, n32).prop_map(|(id, pri)| Command::Bury { id, pri }),
        id.prop_map(Command::Touch),
        tube().prop_map(Command::Watch),
        tube().prop_map(Command::Ignore),
        id.prop_map(Command::Peek),
        Just(Command::PeekReady),
        Just(Command::PeekDelayed),
        Just(Command::PeekBuried),
        n32.prop_map(|n| Command::Kick(u64::from(n))),
        id.prop_map(Command::KickJob),
        id.prop_map(Command::StatsJob),
        tube().prop_map(Command::StatsTube),
        Just(Command::Stats),
        Just(Command::ListTubes),
        Just(Command::ListTubeUsed),
        Just(Command::ListTubesWatched),
        (tube(), n32).prop_map(|(tube, delay)| Command::PauseTube { tube, delay }),
        Just(Command::Quit),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: delayq_testkit::fuzz_cases(512),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_bytes_any_chunks_are_bounded_and_chunking_changes_nothing(
        input in stream(),
        chunks in chunks(),
    ) {
        let split = feed(&input, &chunks, MAX_JOB)?;
        let whole = feed(&input, &[input.len().max(1)], MAX_JOB)?;
        prop_assert_eq!(split, whole);
    }

    #[test]
    fn valid_commands_round_trip(commands in prop::collection::vec(command(), 1..8), chunks in chunks()) {
        let mut bytes = BytesMut::new();
        for c in &commands {
            c.encode(&mut bytes);
        }
        let steps = feed(&bytes, &chunks, MAX_JOB)?;
        prop_assert_eq!(steps, commands.into_iter().map(Step::Command).collect::<Vec<_>>());
    }
}
