//! Pipelined commands (a client that writes many before reading): a run of `put`s is pushed
//! in one engine call and a held job's `delete` with the `reserve` after it in another, yet
//! each command still gets its own answer, in order, as beanstalkd gives them: a put refused
//! inside a run does not refuse its neighbours; a delete whose reserve finds nothing leaves
//! the reserve to wait as usual.

use std::time::Duration;

use delayq_core::{Engine, Topic, TopicConfig};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

mod common;

const BOUND: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_puts_deletes_and_reserves_are_answered_each_in_order() {
    let engine = common::memory_engine();
    // A topic whose bodies are at most 10 bytes: a longer put in a run is refused alone.
    let small = Topic::new("small").expect("topic");
    engine
        .set_topic_config(
            &small,
            &TopicConfig {
                max_body: Some(10),
                ..TopicConfig::default()
            },
        )
        .await
        .expect("settings");
    let addr = common::serve(engine.clone()).await;
    let (r, mut w) = TcpStream::connect(addr)
        .await
        .expect("connect")
        .into_split();
    let mut r = BufReader::new(r);
    let line = async |r: &mut BufReader<_>| {
        let mut l = String::new();
        tokio::time::timeout(BOUND, r.read_line(&mut l))
            .await
            .expect("an answer within the bound")
            .expect("read");
        l.trim_end().to_string()
    };

    w.write_all(
        b"use small\r\nwatch small\r\nignore default\r\n\
          put 1 0 60 5\r\nfirst\r\nput 2 0 60 20\r\ntwenty bytes of body\r\n\
          put 3 0 60 6\r\nsecond\r\nput 4 0 60 5\r\nthird\r\n",
    )
    .await
    .expect("write");
    assert_eq!(line(&mut r).await, "USING small");
    assert_eq!(line(&mut r).await, "WATCHING 2");
    assert_eq!(line(&mut r).await, "WATCHING 1");
    let mut ids = Vec::new();
    for want in ["INSERTED", "JOB_TOO_BIG", "INSERTED", "INSERTED"] {
        let l = line(&mut r).await;
        assert!(l.starts_with(want), "{want} expected, got {l:?}");
        if let Some(id) = l.strip_prefix("INSERTED ") {
            ids.push(id.parse::<u64>().expect("id"));
        }
    }
    assert_eq!(ids.len(), 3);
    assert!(
        ids.windows(2).all(|p| p[0] < p[1]),
        "numbers in put order: {ids:?}"
    );

    // A worker's pipelined cycle: delete the job it holds and reserve the next, in one write.
    w.write_all(b"reserve-with-timeout 0\r\n")
        .await
        .expect("write");
    let mut held = None;
    let mut bodies = Vec::new();
    for _ in 0..4 {
        let l = line(&mut r).await;
        if l == "TIMED_OUT" {
            break;
        }
        let parts: Vec<&str> = l.split(' ').collect();
        assert_eq!(parts[0], "RESERVED", "{l}");
        let mut body = vec![0; parts[2].parse::<usize>().expect("length") + 2];
        r.read_exact(&mut body).await.expect("body");
        body.truncate(body.len() - 2);
        bodies.push(String::from_utf8(body).expect("utf-8"));
        let id = parts[1].to_string();
        w.write_all(format!("delete {id}\r\nreserve-with-timeout 0\r\n").as_bytes())
            .await
            .expect("write");
        assert_eq!(line(&mut r).await, "DELETED", "delete {id}");
        held = Some(id);
    }
    assert!(held.is_some());
    assert_eq!(bodies, ["first", "second", "third"], "priority order");
    assert_eq!(
        engine.stats(&small).await.expect("stats").ready
            + engine.stats(&small).await.expect("stats").reserved,
        0,
        "every job deleted"
    );

    // A delete whose reserve finds nothing: the reserve waits, and gets the job put later.
    w.write_all(b"put 0 0 60 4\r\nlate\r\nreserve-with-timeout 0\r\n")
        .await
        .expect("write");
    let late = line(&mut r).await;
    let late = late
        .strip_prefix("INSERTED ")
        .expect("inserted")
        .to_string();
    assert_eq!(line(&mut r).await, format!("RESERVED {late} 4"));
    let mut body = [0u8; 6];
    r.read_exact(&mut body).await.expect("body");
    w.write_all(format!("delete {late}\r\nreserve-with-timeout 3\r\n").as_bytes())
        .await
        .expect("write");
    assert_eq!(line(&mut r).await, "DELETED");
    let (r2, mut w2) = TcpStream::connect(addr)
        .await
        .expect("connect")
        .into_split();
    w2.write_all(b"use small\r\nput 0 0 60 5\r\nlater\r\n")
        .await
        .expect("write");
    let mut r2 = BufReader::new(r2);
    assert_eq!(line(&mut r2).await, "USING small");
    let later = line(&mut r2).await;
    let later = later
        .strip_prefix("INSERTED ")
        .expect("inserted")
        .to_string();
    assert_eq!(line(&mut r).await, format!("RESERVED {later} 5"));
}
