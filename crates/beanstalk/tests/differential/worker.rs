//! What workers do with jobs: `delete`, `release`, `bury`, `kick`, `kick-job`, `touch`, and
//! `watch`/`ignore`.

use super::expect::NO_SUCH_JOB;
use super::run::check;
use super::script::{Script, put};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_in_every_state() {
    check(
        Script::new("delete_in_every_state")
            .send(put(0, 0, 10, "ready"), 1)
            .send(put(0, 100, 10, "delayed"), 1)
            .send(put(0, 0, 10, "buried"), 1)
            .send(put(0, 0, 10, "mine"), 1)
            .send(put(0, 0, 10, "theirs"), 1)
            .send("reserve-job {id3}\r\nbury {id3} 0\r\n", 2)
            .send("reserve-job {id4}\r\n", 1)
            .on(1)
            .send("reserve-job {id5}\r\n", 1)
            .on(0)
            .send("delete {id4}\r\n", 1)
            .send("delete {id1}\r\n", 1)
            .send("delete {id2}\r\n", 1)
            .send("delete {id3}\r\n", 1)
            .send("delete {id5}\r\n", 1)
            .send(format!("delete {NO_SUCH_JOB}\r\n"), 1)
            .send("delete {id1}\r\n", 1)
            .send("delete x\r\ndelete\r\ndelete -1\r\ndelete {id5} 1\r\n", 4)
            .on(1)
            .send("delete {id5}\r\n", 1)
            .send("stats-job {id5}\r\n", 1),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn release_with_priority_and_delay() {
    check(
        Script::new("release_with_priority_and_delay")
            .send(put(100, 0, 10, "job"), 1)
            .send("reserve\r\n", 1)
            .send("release {id1} 5 1\r\n", 1)
            .send("stats-job {id1}\r\n", 1)
            .send("peek-delayed\r\n", 1)
            .send("reserve\r\n", 1)
            .within(4)
            .send("release {id1} 7 0\r\n", 1)
            .send("stats-job {id1}\r\n", 1)
            .send("release {id1} 1 0\r\n", 1)
            .on(1)
            .send("reserve\r\n", 1)
            .on(0)
            .send("release {id1} 0 0\r\n", 1)
            .send(format!("release {NO_SUCH_JOB} 0 0\r\n"), 1)
            .send(
                "release {id1} 0\r\nrelease {id1}\r\nrelease {id1} x 0\r\n",
                3,
            )
            .send("release {id1} 4294967296 0\r\n", 1)
            .on(1)
            .send("release {id1} 2 0\r\n", 1)
            .send("stats-job {id1}\r\n", 1),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bury_and_kick() {
    check(
        Script::new("bury_and_kick")
            .send(put(0, 0, 10, "one"), 1)
            .send(put(0, 0, 10, "two"), 1)
            .send(put(0, 100, 10, "three"), 1)
            .send(put(0, 100, 10, "four"), 1)
            .send("reserve\r\nbury {id1} 9\r\n", 2)
            .send("reserve\r\nbury {id2} 8\r\n", 2)
            .send("peek-buried\r\n", 1)
            .send("stats-job {id1}\r\n", 1)
            .send("bury {id1} 0\r\n", 1)
            .send(format!("bury {NO_SUCH_JOB} 0\r\n"), 1)
            .on(1)
            .send("reserve-job {id1}\r\n", 1)
            .on(0)
            .send("bury {id1} 0\r\n", 1)
            .on(1)
            .send("bury {id1} 9\r\n", 1)
            .on(0)
            .send("bury {id1}\r\nbury x 0\r\nbury {id1} -1\r\n", 3)
            // kick takes buried jobs first, and only them while there are any.
            .send("kick 1\r\n", 1)
            .send("stats-job {id1}\r\n", 1)
            .send("peek-buried\r\n", 1)
            // kick reads its bound into 32 bits: 2^32 + 1 is 1.
            .send("kick 4294967297\r\n", 1)
            .send("peek-buried\r\n", 1)
            .send("kick 1\r\n", 1)
            .send("stats-job {id3}\r\n", 1)
            .send("kick-job {id4}\r\n", 1)
            .send("kick-job {id4}\r\n", 1)
            .send("kick 5\r\n", 1)
            .send("kick 0\r\n", 1)
            .send("reserve\r\n", 1)
            .send("kick-job {id3}\r\n", 1)
            .send("bury {id3} 0\r\n", 1)
            .send("kick-job {id3}\r\n", 1)
            .send("stats-job {id3}\r\n", 1)
            .send(format!("kick-job {NO_SUCH_JOB}\r\n"), 1)
            .send("kick-job x\r\nkick-job\r\nkick x\r\nkick\r\n", 4)
            // kick works on the used tube only.
            .send("reserve-job {id2}\r\nbury {id2} 0\r\n", 2)
            .send("use other\r\nkick 10\r\n", 2)
            .send("use default\r\nkick 10\r\n", 2),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kick_more_than_a_thousand() {
    let puts: String = (0..1001)
        .map(|i| put(0, 100, 10, &format!("{i}")))
        .collect();
    check(
        Script::new("kick_more_than_a_thousand")
            .send(puts, 1001)
            .within(10)
            .send("kick 2000\r\n", 1)
            .within(10)
            .send("peek-delayed\r\n", 1),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn touch_held_and_not_held() {
    check(
        Script::new("touch_held_and_not_held")
            .send(put(0, 0, 5, "held"), 1)
            .send("reserve\r\n", 1)
            .send("touch {id1}\r\n", 1)
            .send("stats-job {id1}\r\n", 1)
            .send(format!("touch {NO_SUCH_JOB}\r\n"), 1)
            .send(put(0, 0, 10, "ready"), 1)
            .send("touch {id2}\r\n", 1)
            .on(1)
            .send("reserve\r\n", 1)
            .on(0)
            .send("touch {id2}\r\n", 1)
            .send("touch x\r\ntouch\r\ntouch {id1} 1\r\n", 3)
            .send("delete {id1}\r\ntouch {id1}\r\n", 2)
            // A touch restarts the ttr: without it the last second of this ttr of 3 s
            // would begin 0.5 s after the touch, and the reserve would answer
            // DEADLINE_SOON.
            .on(2)
            .send(put(0, 0, 3, "touched"), 1)
            .send("reserve-job {id3}\r\n", 1)
            .pause(1500)
            .send("touch {id3}\r\n", 1)
            .send("reserve-with-timeout 1\r\n", 1)
            .within(3)
            .send("delete {id3}\r\n", 1),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watch_and_ignore() {
    check(
        Script::new("watch_and_ignore")
            .send("watch foo\r\nwatch foo\r\nwatch bar\r\n", 3)
            .send("list-tubes-watched\r\n", 1)
            .send("ignore default\r\n", 1)
            .send("ignore nope\r\n", 1)
            .send("ignore foo\r\n", 1)
            .send("ignore bar\r\n", 1)
            .send("list-tubes-watched\r\n", 1)
            .send("use foo\r\n", 1)
            .send(put(0, 0, 10, "in foo"), 1)
            .send("reserve-with-timeout 0\r\n", 1)
            .send("watch foo\r\n", 1)
            .send("reserve-with-timeout 0\r\n", 1)
            .send("delete {id1}\r\n", 1)
            .send("watch\r\nwatch \r\nignore\r\nignore -x\r\nwatch a b\r\n", 5),
    )
    .await;
}
