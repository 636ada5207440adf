//! The wire itself: `quit`, unknown commands, over-long lines, commands split across writes
//! and pipelined.

use super::run::check;
use super::script::{Script, put};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quit_closes_and_gives_back() {
    check(
        Script::new("quit_closes_and_gives_back")
            .send(put(0, 0, 10, "held by 1"), 1)
            .on(1)
            .send("reserve\r\n", 1)
            .send("quit\r\n", 0)
            .then_closed()
            .on(0)
            .pause(100)
            .send("peek-ready\r\n", 1)
            .on(2)
            .send("list-tube-used\r\nquit\r\nlist-tube-used\r\n", 1)
            .then_closed()
            // quit is matched by its prefix: anything after it is ignored.
            .on(3)
            .send("quitx\r\n", 0)
            .then_closed()
            .on(4)
            .send("quit now\r\n", 0)
            .then_closed(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unknown_commands() {
    check(
        Script::new("unknown_commands")
            .send("foo\r\n", 1)
            .send("PUT 0 0 10 1\r\n", 1)
            .send("\r\n", 1)
            .send(" reserve\r\n", 1)
            .send("stats-jobs 1\r\n", 1)
            .send("kick-jobs 1\r\n", 1)
            .send("list\r\n", 1)
            .send("use\tfoo\r\npeek\t1\r\nkick\t1\r\n", 3)
            .send("list-tube-used\r\n", 1),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn line_over_the_maximum_length() {
    // 222 bytes and CRLF: the longest line; one byte more is too long.
    let longest = format!("peek {:0>217}", 1);
    let too_long = format!("peek {:0>218}", 1);
    check(
        Script::new("line_over_the_maximum_length")
            .send(format!("{longest}\r\n"), 1)
            .send(format!("{}\r\n", "u".repeat(222)), 1)
            // A too-long line is thrown away in windows of 224 bytes up to the first CRLF
            // inside a window. Here the CRLF straddles the first window's end, so the
            // next line is thrown away with it.
            .send(format!("{too_long}\r\nlist-tube-used\r\n"), 1)
            .send(format!("{}\r\nlist-tube-used\r\n", "v".repeat(224)), 2)
            .send(format!("{}\r\nlist-tube-used\r\n", "x".repeat(300)), 2)
            .send(format!("{}\r\nlist-tube-used\r\n", "y".repeat(1000)), 2)
            .split(
                &[
                    "z".repeat(150).as_bytes(),
                    "z".repeat(150).as_bytes(),
                    b"\r\nlist-tube-used\r\n",
                ],
                2,
            ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn split_and_pipelined_commands() {
    check(
        Script::new("split_and_pipelined_commands")
            .split(&[b"put 0 0 10 5\r", b"\nhel", b"lo\r", b"\n"], 1)
            .split(&[b"list-", b"tube-", b"used\r\n"], 1)
            .send(
                format!(
                    "{}{}reserve\r\nreserve\r\ndelete {{id1}}\r\nstats-job {{id1}}\r\n",
                    put(1, 0, 10, "x"),
                    put(2, 0, 10, "y"),
                ),
                6,
            )
            // A command pipelined behind a waiting reserve is answered after it.
            .send("delete {id2}\r\n", 1)
            .send("reserve\r\nlist-tube-used\r\n", 0)
            .pause(100)
            .on(1)
            .send(put(0, 0, 10, "z"), 1)
            .on(0)
            .read(2)
            .send("delete {id4}\r\n", 1),
    )
    .await;
}
