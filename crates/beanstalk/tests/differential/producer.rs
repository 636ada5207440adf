//! What producers do: `put` and its errors, `use` and tube names, and the limits on
//! tubes and times.

use super::differences::{DRAIN, RESERVE_TOPICS, TIME_LIMITS, TUBE_TOPIC_LENGTH};
use super::expect::stats_job;
use super::run::check;
use super::script::{Script, put};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn put_and_its_errors() {
    let too_big = format!("put 0 0 10 65536\r\n{}\r\n", "a".repeat(65_536));
    let largest = format!("put 0 0 10 65535\r\n{}\r\n", "b".repeat(65_535));
    check(
        Script::new("put_and_its_errors")
            .send(put(0, 0, 10, "hello"), 1)
            .send(put(4_294_967_295, 1, 10, "later"), 1)
            .send(put(1, 0, 0, "ttr zero"), 1)
            .send(
                "stats-job {id1}\r\nstats-job {id2}\r\nstats-job {id3}\r\n",
                3,
            )
            .send(put(0, 0, 10, ""), 1)
            .send(&b"put 0 0 10 6\r\na\r\n\0b\xff\r\n"[..], 1)
            .send("peek {id4}\r\npeek {id5}\r\n", 2)
            // The body of a too-big job is read and thrown away; the connection goes on.
            .send(format!("{too_big}list-tube-used\r\n"), 2)
            .send(largest, 1)
            .send("put 0 0 10 2\r\nabXY\r\nlist-tube-used\r\n", 3)
            // The two bytes after the body are "c\r": the "\n" starts the next line, which
            // is then no command.
            .send("put 0 0 10 2\r\nabc\r\nlist-tube-used\r\n", 2)
            .send("put 0 0 10\r\n", 1)
            .send("put 0 0 10 2 3\r\n", 1)
            .send("put -1 0 10 2\r\n", 1)
            .send("put 0 -1 10 2\r\n", 1)
            .send("put 0 0 10 -2\r\n", 1)
            .send("put x 0 10 2\r\n", 1)
            .send("put 0 0 ten 2\r\n", 1)
            .send("put 0 0 10 2 \r\n", 1)
            .send("put  0 0 10 2\r\nhi\r\n", 1)
            .send("put 4294967296 0 10 2\r\n", 1)
            .send("put 0 4294967296 10 2\r\n", 1)
            .send("put\r\n", 1)
            .send("put \r\n", 1)
            .send("list-tube-used\r\n", 1),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn put_with_a_small_job_size_limit() {
    check(
        Script::new("put_with_a_small_job_size_limit")
            .max_job_size(10)
            .send(put(0, 0, 10, "0123456789"), 1)
            .send(
                format!("{}list-tube-used\r\n", put(0, 0, 10, "0123456789a")),
                2,
            )
            // The size is checked before the rest of the line.
            .send("put 0 0 10 11 junk\r\n0123456789a\r\nlist-tube-used\r\n", 2)
            .send("stats\r\n", 1),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn draining_refuses_puts() {
    check(
        Script::new("draining_refuses_puts")
            .send(put(0, 0, 10, "before"), 1)
            .drain()
            .send(put(0, 0, 10, "after"), 1)
            .differs(&DRAIN, &["<closed>"])
            .send("quit\r\n", 0)
            .then_closed(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn use_and_tube_names() {
    let longest = "x".repeat(200);
    let too_long = "y".repeat(201);
    check(
        Script::new("use_and_tube_names")
            .send("use foo\r\n", 1)
            .send(put(0, 0, 10, "in foo"), 1)
            .send("list-tube-used\r\nstats-job {id1}\r\n", 2)
            .send(format!("use {longest}\r\n"), 1)
            .send(put(0, 0, 10, "in the longest"), 1)
            .send("stats-job {id2}\r\n", 1)
            .send(format!("use {too_long}\r\n"), 1)
            .send(format!("watch {too_long}\r\n"), 1)
            .send(format!("stats-tube {too_long}\r\n"), 1)
            .send(format!("pause-tube {too_long} 1\r\n"), 1)
            .send("use -foo\r\nwatch -foo\r\nstats-tube -foo\r\n", 3)
            .send("use foo-\r\n", 1)
            .send("use a+b/c;d$e_f(g).h-\r\n", 1)
            .send(put(0, 0, 10, "odd name"), 1)
            .send("stats-job {id3}\r\n", 1)
            .send("list-tubes\r\n", 1)
            .send(
                "use foo bar\r\nuse foo \r\nuse  foo\r\nuse a*b\r\nuse\r\nuse \r\n",
                6,
            )
            .send("list-tube-used\r\n", 1)
            // Each of + / ; $ ( ) takes three characters of a delayq topic name.
            .send(format!("use {}\r\n", "/".repeat(67)), 1)
            .differs(&TUBE_TOPIC_LENGTH, &["BAD_FORMAT"])
            .send("use foo\r\n", 1),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn limits_of_tubes_and_times() {
    let mut watch = String::new();
    for i in 1..=64 {
        watch.push_str(&format!("watch t{i}\r\n"));
    }
    check(
        Script::new("limits_of_tubes_and_times")
            .send(put(0, 0, 86_400, "a day"), 1)
            .send(put(0, 0, 86_401, "a day and a second"), 1)
            .send("stats-job {id1}\r\n", 1)
            .send("stats-job {id2}\r\n", 1)
            .differs(
                &TIME_LIMITS,
                &[&stats_job(2, "default", "ready", 0, 86_400)],
            )
            // 65 tubes watched: default, t1 ... t64.
            .send(watch, 64)
            .send("use t64\r\n", 1)
            .send(put(0, 0, 10, "in the 65th tube watched"), 1)
            .send("delete {id1}\r\ndelete {id2}\r\n", 2)
            .send("reserve-with-timeout 0\r\n", 1)
            .differs(&RESERVE_TOPICS, &["TIMED_OUT"]),
    )
    .await;
}
