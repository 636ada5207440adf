//! The reserve family: `reserve`, `reserve-with-timeout`, `reserve-job`, `DEADLINE_SOON`,
//! ttrs that run out, waiting reserves and the order jobs are reserved in.

use super::differences::{READY_ORDER, WAITER_ORDER};
use super::expect::NO_SUCH_JOB;
use super::run::check;
use super::script::{Script, put};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reserve_returns_a_ready_job() {
    check(
        Script::new("reserve_returns_a_ready_job")
            .send(put(10, 0, 10, "b"), 1)
            .send(put(5, 0, 10, "a"), 1)
            .send(put(5, 0, 10, "a2"), 1)
            .send("reserve\r\n", 1)
            .send("reserve\r\n", 1)
            .send("reserve\r\n", 1)
            .send("stats-job {id1}\r\n", 1)
            .send("delete {id1}\r\ndelete {id2}\r\ndelete {id3}\r\n", 3)
            .send("reservex\r\nreserve \r\n", 2),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reserve_waits_for_a_delayed_job() {
    check(
        Script::new("reserve_waits_for_a_delayed_job")
            .send(put(0, 1, 10, "soon"), 1)
            .send("reserve-with-timeout 0\r\n", 1)
            .send("peek-delayed\r\n", 1)
            .send("reserve\r\n", 1)
            .within(4)
            .send("stats-job {id1}\r\n", 1),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reserve_with_timeout_times_out() {
    check(
        Script::new("reserve_with_timeout_times_out")
            .send("reserve-with-timeout 0\r\n", 1)
            .send("reserve-with-timeout 1\r\n", 1)
            .within(4)
            // strtol: no digits is 0, trailing garbage ignored.
            .send("reserve-with-timeout x\r\nreserve-with-timeout 0x\r\n", 2)
            .send("reserve-with-timeout\r\n", 1)
            // A waiting reserve is served by another connection's put.
            .send("reserve-with-timeout 2\r\n", 0)
            .pause(200)
            .on(1)
            .send(put(0, 0, 10, "for the waiter"), 1)
            .on(0)
            .read(1)
            .send("delete {id1}\r\n", 1)
            // A negative timeout waits without a limit: a ready job is returned at once.
            .send(put(0, 0, 10, "now"), 1)
            .send("reserve-with-timeout -1\r\n", 1)
            // strtol into an int: 2^32 - 1 is -1.
            .send(put(0, 0, 10, "now again"), 1)
            .send("reserve-with-timeout 4294967295\r\n", 1),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn half_closed_connection_times_out() {
    check(
        Script::new("half_closed_connection_times_out")
            .send("reserve-with-timeout 3\r\n", 0)
            .pause(100)
            .half_close(1)
            .within(2)
            .on(1)
            .send("reserve\r\n", 0)
            .pause(100)
            .half_close(1)
            .within(2),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deadline_soon() {
    check(
        Script::new("deadline_soon")
            // ttr 1: the job is within its last second at once.
            .send(put(0, 0, 1, "ttr one"), 1)
            .send("reserve\r\n", 1)
            .send("reserve\r\n", 1)
            .send("delete {id1}\r\n", 1)
            // ttr 2: a waiting reserve is cut short when the last second begins.
            .send(put(0, 0, 2, "ttr two"), 1)
            .send("reserve\r\n", 1)
            .send("reserve\r\n", 1)
            .within(4)
            .send("delete {id2}\r\n", 1)
            // A ready job is reserved even within a held job's last second.
            .send(put(0, 0, 1, "short"), 1)
            .send(put(1, 0, 10, "next"), 1)
            .send("reserve\r\n", 1)
            .send("reserve\r\n", 1)
            .send("delete {id3}\r\ndelete {id4}\r\n", 2),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reserve_job_by_id() {
    check(
        Script::new("reserve_job_by_id")
            .send(put(10, 0, 10, "ready"), 1)
            .send(put(10, 100, 10, "delayed"), 1)
            .send(put(10, 0, 10, "to bury"), 1)
            .send("reserve-job {id3}\r\n", 1)
            .send("bury {id3} 10\r\n", 1)
            .send("reserve-job {id1}\r\n", 1)
            .send("stats-job {id1}\r\n", 1)
            .send("reserve-job {id2}\r\n", 1)
            .send("stats-job {id2}\r\n", 1)
            .send("reserve-job {id3}\r\n", 1)
            .send("stats-job {id3}\r\n", 1)
            .send("reserve-job {id3}\r\n", 1)
            .send(format!("reserve-job {NO_SUCH_JOB}\r\n"), 1)
            .send("reserve-job x\r\nreserve-job\r\nreserve-job 1 2\r\n", 3)
            .on(1)
            .send("reserve-job {id1}\r\n", 1)
            .on(0)
            .send("delete {id1}\r\ndelete {id2}\r\ndelete {id3}\r\n", 3),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiting_reserves_are_served_in_order() {
    check(
        Script::new("waiting_reserves_are_served_in_order")
            // The pauses let each reserve begin waiting before the next command arrives,
            // with room for a loaded machine (at 100 ms a reserve on Redis was once still
            // starting when the put came).
            .send("reserve-with-timeout 3\r\n", 0)
            .pause(300)
            .on(1)
            .send("reserve-with-timeout 3\r\n", 0)
            .pause(300)
            .on(2)
            .send(put(0, 0, 10, "first"), 1)
            .on(0)
            .read(1)
            .on(2)
            .send(put(0, 0, 10, "second"), 1)
            .on(1)
            .read(1),
    )
    .await;
}

/// Four connections wait in turn, then one write puts four jobs: each waiter gets the job
/// of its rank, on every engine (beanstalkd swaps the last two). On Redis a put woke two waiters at once (its own wake-up and the signal
/// after it), and a younger one could take the job of an older one: once in a whole run
/// with two waiters, far more often with four.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiting_reserves_get_a_run_of_puts_in_order() {
    let mut script = Script::new("waiting_reserves_get_a_run_of_puts_in_order");
    for conn in 0..4 {
        script = script
            .on(conn)
            .send("reserve-with-timeout 4\r\n", 0)
            .pause(300);
    }
    script = script.on(4).send(
        [
            put(0, 0, 10, "first"),
            put(0, 0, 10, "second"),
            put(0, 0, 10, "third"),
            put(0, 0, 10, "fourth"),
        ]
        .concat(),
        4,
    );
    // beanstalkd's set hands the third job to the fourth waiter (see WAITER_ORDER).
    script = script.on(0).read(1).on(1).read(1);
    script = script
        .on(2)
        .read(1)
        .differs(&WAITER_ORDER, &["RESERVED #3 5 \"third\""]);
    script = script
        .on(3)
        .read(1)
        .differs(&WAITER_ORDER, &["RESERVED #4 6 \"fourth\""]);
    check(script).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ready_order_within_a_priority() {
    check(
        Script::new("ready_order_within_a_priority")
            .send(put(0, 1, 10, "first, delayed"), 1)
            .send(put(0, 0, 10, "second"), 1)
            .pause(1200)
            .send("reserve\r\n", 1)
            .differs(&READY_ORDER, &[r#"RESERVED #2 6 "second""#])
            .send("reserve\r\n", 1)
            .differs(&READY_ORDER, &[r#"RESERVED #1 14 "first, delayed""#])
            .send("delete {id1}\r\ndelete {id2}\r\n", 2)
            // Released without a delay, a job keeps its place (beanstalkd: by its id).
            .send(put(0, 0, 10, "a"), 1)
            .send(put(0, 0, 10, "b"), 1)
            .send("reserve\r\n", 1)
            .send("release {id3} 0 0\r\n", 1)
            .send("reserve\r\n", 1)
            .send("delete {id3}\r\n", 1)
            // Released with a delay, it goes behind the jobs that were ready before it fell
            // due (beanstalkd: ahead of every larger id).
            .send("reserve\r\n", 1)
            .send("release {id4} 0 1\r\n", 1)
            .send(put(0, 0, 10, "c"), 1)
            .pause(1200)
            .send("reserve\r\n", 1)
            .differs(&READY_ORDER, &[r#"RESERVED #5 1 "c""#])
            .send("reserve\r\n", 1)
            .differs(&READY_ORDER, &[r#"RESERVED #4 1 "b""#]),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ttr_expiry_gives_the_job_back() {
    check(
        Script::new("ttr_expiry_gives_the_job_back")
            .send(put(0, 0, 1, "slow worker"), 1)
            .send("reserve\r\n", 1)
            .pause(2000)
            // beanstalkd may look at a connection's ttrs only when the connection next
            // does something: any command, then a moment.
            .send("list-tube-used\r\n", 1)
            .pause(100)
            // The ttr ran out: the job is ready again, no longer the connection's to touch,
            // release or bury, but it can delete it as any ready job.
            .send("stats-job {id1}\r\n", 1)
            .send("peek-ready\r\n", 1)
            .send("touch {id1}\r\n", 1)
            .send("release {id1} 0 0\r\n", 1)
            .send("bury {id1} 0\r\n", 1)
            .send("delete {id1}\r\n", 1),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reserve_after_a_ttr_ran_out() {
    check(
        Script::new("reserve_after_a_ttr_ran_out")
            .send(put(0, 0, 1, "slow worker"), 1)
            .send("reserve\r\n", 1)
            .pause(2000)
            .send("list-tube-used\r\n", 1)
            .pause(100)
            // The ttr ran out: the job is ready again, and another connection takes it.
            .on(1)
            .send("reserve-with-timeout 0\r\n", 1)
            .send("delete {id1}\r\n", 1)
            // The first connection holds nothing any more, so nothing of it is near a
            // deadline: its reserves wait and time out.
            .on(0)
            .send("reserve-with-timeout 0\r\n", 1)
            .send("reserve-with-timeout 1\r\n", 1)
            .within(4),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reserve_across_watched_tubes() {
    check(
        Script::new("reserve_across_watched_tubes")
            .send("watch a\r\nwatch b\r\n", 2)
            .send("use a\r\n", 1)
            .send(put(10, 0, 10, "a, pri 10"), 1)
            .send("use b\r\n", 1)
            .send(put(5, 0, 10, "b, pri 5"), 1)
            .send("use a\r\n", 1)
            .send(put(7, 0, 10, "a, pri 7"), 1)
            // The most urgent job of every watched tube.
            .send("reserve\r\nreserve\r\nreserve\r\n", 3)
            .send("delete {id1}\r\ndelete {id2}\r\ndelete {id3}\r\n", 3)
            // One priority: the job put first, whichever tube (delayq: the one due first;
            // the pauses make the due times, here the put times, distinct).
            .send("use b\r\n", 1)
            .send(put(1, 0, 10, "b first"), 1)
            .pause(20)
            .send("use a\r\n", 1)
            .send(put(1, 0, 10, "a second"), 1)
            .pause(20)
            .send("use b\r\n", 1)
            .send(put(1, 0, 10, "b third"), 1)
            .send("reserve\r\nreserve\r\nreserve\r\n", 3)
            .send("delete {id4}\r\ndelete {id5}\r\ndelete {id6}\r\n", 3),
    )
    .await;
}
