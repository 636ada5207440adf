//! Looking at jobs and tubes: the `peek` family, `stats-job`, `stats-tube`, `stats`, the
//! `list` family, and `pause-tube`.

use super::differences::URGENT_COUNT;
use super::expect::{NO_SUCH_JOB, stats, stats_tube};
use super::run::check;
use super::script::{Script, put};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn peek_empty_and_not() {
    check(
        Script::new("peek_empty_and_not")
            .send("peek-ready\r\npeek-delayed\r\npeek-buried\r\n", 3)
            .send(format!("peek {NO_SUCH_JOB}\r\n"), 1)
            .send(put(5, 0, 10, "a"), 1)
            .send(put(1, 0, 10, "b"), 1)
            .send(put(0, 100, 10, "c"), 1)
            .send(put(0, 50, 10, "d"), 1)
            .send("peek-ready\r\n", 1)
            .send("peek-delayed\r\n", 1)
            .send("reserve\r\n", 1)
            .send("peek {id2}\r\n", 1)
            .send("bury {id2} 0\r\n", 1)
            .send("peek-buried\r\n", 1)
            .send("peek {id1}\r\npeek {id2}\r\npeek {id3}\r\n", 3)
            // The state peeks look at the used tube only; peek by id anywhere.
            .send("use other\r\n", 1)
            .send(
                "peek-ready\r\npeek-delayed\r\npeek-buried\r\npeek {id1}\r\n",
                4,
            )
            .send(
                "peek x\r\npeek\r\npeek-readyx\r\npeek-ready \r\npeek {id1} 2\r\n",
                5,
            ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stats_job_in_every_state() {
    check(
        Script::new("stats_job_in_every_state")
            .send("use t+1\r\n", 1)
            .send(put(1024, 0, 5, "ready"), 1)
            .send(put(1023, 100, 6, "delayed"), 1)
            .send(put(0, 0, 7, "reserved"), 1)
            .send(put(1, 0, 8, "buried"), 1)
            .send("watch t+1\r\nignore default\r\n", 2)
            .send("reserve\r\n", 1)
            .send("reserve\r\nbury {id4} 4\r\n", 2)
            .send(
                "stats-job {id1}\r\nstats-job {id2}\r\nstats-job {id3}\r\nstats-job {id4}\r\n",
                4,
            )
            .send(format!("stats-job {NO_SUCH_JOB}\r\n"), 1)
            .send("stats-job x\r\nstats-job\r\nstats-job {id1} 1\r\n", 3),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stats_tube_existing_and_unknown() {
    check(
        Script::new("stats_tube_existing_and_unknown")
            .send("stats-tube default\r\n", 1)
            .send("stats-tube foo\r\n", 1)
            .send("use foo\r\nwatch foo\r\n", 2)
            .send(put(0, 0, 10, "urgent"), 1)
            .send(put(2000, 0, 10, "not urgent"), 1)
            .send(put(0, 100, 10, "delayed"), 1)
            .send(put(1, 0, 10, "to reserve"), 1)
            .send(put(1, 0, 10, "to bury"), 1)
            .send(
                "reserve-job {id4}\r\nreserve-job {id5}\r\nbury {id5} 1\r\n",
                3,
            )
            .send("stats-tube foo\r\n", 1)
            .on(1)
            .send("stats-tube foo\r\n", 1)
            .on(0)
            // A tube no one uses or watches exists while it holds jobs.
            .send("use default\r\nignore foo\r\n", 2)
            .on(1)
            .send("stats-tube foo\r\n", 1)
            .on(0)
            .send(
                "delete {id1}\r\ndelete {id2}\r\ndelete {id3}\r\ndelete {id4}\r\ndelete {id5}\r\n",
                5,
            )
            .on(1)
            .send("stats-tube foo\r\n", 1)
            .send("pause-tube foo 1\r\n", 1)
            .send("stats-tube\r\nstats-tube \r\nstats-tube a b\r\n", 3),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stats_counts_jobs() {
    check(
        Script::new("stats_counts_jobs")
            .send("stats\r\n", 1)
            .send(put(0, 0, 10, "urgent"), 1)
            .send(put(5000, 0, 10, "ready"), 1)
            .send(put(0, 100, 10, "delayed"), 1)
            .send("use other\r\n", 1)
            .send(put(1, 0, 10, "other urgent"), 1)
            .send(put(1, 0, 10, "other buried"), 1)
            .send("reserve\r\n", 1)
            .send("reserve-job {id5}\r\nbury {id5} 1\r\n", 2)
            .send("stats\r\n", 1)
            .on(1)
            .send("stats\r\n", 1)
            .send("stats x\r\nstats \r\n", 2),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn urgent_jobs_beyond_a_thousand() {
    let puts: String = (0..1001).map(|i| put(0, 0, 10, &format!("{i}"))).collect();
    check(
        Script::new("urgent_jobs_beyond_a_thousand")
            .send(puts, 1001)
            .within(10)
            .send("stats-tube default\r\n", 1)
            .differs(
                &URGENT_COUNT,
                &[&stats_tube("default", [1000, 1001, 0, 0, 0])],
            )
            .send("stats\r\n", 1)
            .differs(&URGENT_COUNT, &[&stats([1000, 1001, 0, 0, 0], 65_535)]),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn list_tubes() {
    check(
        Script::new("list_tubes")
            .send("list-tubes\r\nlist-tube-used\r\nlist-tubes-watched\r\n", 3)
            .send("use a\r\nwatch b\r\n", 2)
            .send("list-tubes\r\nlist-tube-used\r\nlist-tubes-watched\r\n", 3)
            .on(1)
            .send("list-tubes\r\nlist-tube-used\r\nlist-tubes-watched\r\n", 3)
            .on(0)
            .send(put(0, 0, 10, "in a"), 1)
            .send("use default\r\nignore b\r\n", 2)
            .send("list-tubes\r\n", 1)
            .send("delete {id1}\r\n", 1)
            .send("list-tubes\r\n", 1)
            // A tube only a closed connection used or watched is gone.
            .on(2)
            .send("use ghost\r\nwatch spectre\r\nquit\r\n", 2)
            .then_closed()
            .on(0)
            .pause(100)
            .send("list-tubes\r\n", 1)
            .send("stats-tube ghost\r\nstats-tube spectre\r\n", 2)
            .send(
                "list-tubes x\r\nlist-tube-used \r\nlist-tubes-watched x\r\n",
                3,
            ),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pause_tube_holds_ready_jobs() {
    check(
        Script::new("pause_tube_holds_ready_jobs")
            .send(put(0, 0, 10, "paused"), 1)
            .send("pause-tube default 1\r\n", 1)
            .send("reserve-with-timeout 0\r\n", 1)
            .send("peek-ready\r\n", 1)
            .send("reserve\r\n", 1)
            .within(4)
            .send("delete {id1}\r\n", 1)
            .send("pause-tube nope 1\r\n", 1)
            // pause-tube 0 ends a pause.
            .send(put(0, 0, 10, "unpaused"), 1)
            .send("pause-tube default 100\r\n", 1)
            .send("reserve-with-timeout 0\r\n", 1)
            .send("pause-tube default 0\r\n", 1)
            .send("reserve-with-timeout 0\r\n", 1)
            .send("delete {id2}\r\n", 1)
            // reserve-job takes a job of a paused tube; a reserve of another tube goes on.
            .send(put(0, 0, 10, "by id"), 1)
            .send("use other\r\nwatch other\r\n", 2)
            .send(put(0, 0, 10, "in other"), 1)
            .send("pause-tube default 100\r\n", 1)
            .send("reserve-with-timeout 0\r\n", 1)
            .send("reserve-job {id3}\r\n", 1)
            .send("delete {id3}\r\ndelete {id4}\r\n", 2)
            .send("pause-tube default 0\r\n", 1)
            .send(
                "pause-tube default\r\npause-tube -x 1\r\npause-tube default x\r\npause-tube\r\n",
                4,
            ),
    )
    .await;
}
