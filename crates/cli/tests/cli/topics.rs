//! Topics from the command line: `topic set` / `topic get` (settings, retention,
//! partitions), `pause` and `resume`, and a typo in `resume` or `purge` on every engine.

use crate::{Server, fails, json_of, no_job, ok};

/// `delayq pause` and `delayq resume` (issue 14): the stats show the pause, a reserve gets
/// nothing while it lasts and the job after resume.
// See: issue 14
#[test]
fn pause_and_resume_from_the_command_line_issue_14() {
    let s = Server::start(&[]);
    ok(s.run(&["push", "orders", "x", "--id", "o1"]));
    assert_eq!(
        ok(s.run(&["pause", "orders"])),
        "paused orders until resumed\n"
    );
    assert!(ok(s.run(&["stats"])).contains("orders (paused)"));
    let none = no_job(s.run(&["reserve", "orders", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&none).unwrap();
    assert_eq!(v["jobs"], serde_json::json!([]), "{v}");
    // Replace and debounce from the command line.
    let out = ok(s.run(&[
        "push",
        "orders",
        "y",
        "--id",
        "o1",
        "--on-conflict",
        "replace",
    ]));
    assert!(out.starts_with("replaced o1 in orders"), "{out}");
    let out = ok(s.run(&[
        "push",
        "orders",
        "z",
        "--id",
        "o2",
        "--delay",
        "5s",
        "--on-conflict",
        "debounce",
        "--max-wait",
        "1m",
    ]));
    assert!(out.starts_with("pushed o2"), "{out}");
    let timed = ok(s.run(&["pause", "orders", "--for", "1h"]));
    assert!(timed.starts_with("paused orders until 20"), "{timed}");
    ok(s.run(&["resume", "orders"]));
    assert!(!ok(s.run(&["stats"])).contains("(paused)"));
    let got = ok(s.run(&["reserve", "orders", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&got).unwrap();
    assert_eq!(v["jobs"][0]["job"]["id"], "o1", "{v}");
    assert_eq!(v["jobs"][0]["job"]["body"], "y", "{v}");
}

/// `delayq topic set` changes only the settings given and `delayq topic get` shows them; a
/// push then takes them; a bad value exits 1 naming the field.
#[test]
fn topic_settings_from_the_command_line() {
    let s = Server::start(&[]);
    let out = ok(s.run(&["topic", "get", "orders"]));
    assert!(out.contains("ttr           default (30s)"), "{out}");
    let out = ok(s.run(&[
        "topic",
        "set",
        "orders",
        "--ttr",
        "1m",
        "--max-attempts",
        "5",
        "--backoff-base",
        "1s",
        "--backoff-max",
        "10m",
    ]));
    assert!(out.contains("ttr           1m"), "{out}");
    assert!(
        out.contains("back-off      from 1s growing x2 up to 10m"),
        "{out}"
    );
    ok(s.run(&[
        "topic",
        "set",
        "orders",
        "--max-body",
        "64",
        "--unset",
        "ttr",
    ]));
    let out = ok(s.run(&["topic", "get", "orders", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (
            v["ttr_ms"].as_u64(),
            v["max_attempts"].as_u64(),
            v["max_body"].as_u64()
        ),
        (None, Some(5), Some(64)),
        "{v}"
    );
    ok(s.run(&["push", "orders", "x", "--id", "o1"]));
    let out = ok(s.run(&["get", "orders", "o1", "--json"]));
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (j["max_attempts"].as_u64(), j["ttr_ms"].as_u64()),
        (Some(5), Some(30_000))
    );
    let bad = s.run(&["topic", "set", "orders", "--ttr", "10ms"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("/ttr_ms"));
    // With a retention, an acked job stays readable as done.
    ok(s.run(&[
        "topic",
        "set",
        "orders",
        "--retain-jobs",
        "10",
        "--retain-for",
        "1h",
    ]));
    let out = ok(s.run(&["reserve", "orders", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let token = v["jobs"][0]["token"].as_u64().unwrap().to_string();
    ok(s.run(&["ack", "orders", "o1", &token]));
    let out = ok(s.run(&["get", "orders", "o1"]));
    assert!(out.contains("state: done"), "{out}");
    let out = ok(s.run(&["topic", "set", "orders", "--reset"]));
    assert!(out.contains("max attempts  default (3)"), "{out}");
    assert!(out.contains("retention     default (none"), "{out}");
    let missing = s.run(&["get", "orders", "o1"]);
    assert_eq!(missing.status.code(), Some(3), "no retention, no done job");
    // Partitions (issue 18): set while the topic is empty, kept by a set that does not name
    // them, refused (exit 4, conflict) once it holds a job.
    let out = ok(s.run(&["topic", "set", "hot", "--partitions", "8"]));
    assert!(out.contains("partitions    8"), "{out}");
    let out = ok(s.run(&["topic", "set", "hot", "--ttr", "1m"]));
    assert!(out.contains("partitions    8"), "{out}");
    ok(s.run(&["push", "hot", "x", "--id", "h1"]));
    let refused = s.run(&["topic", "set", "hot", "--partitions", "4"]);
    assert_eq!(refused.status.code(), Some(4), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("partitions_in_use"),
        "{refused:?}"
    );
    let out = ok(s.run(&["topic", "get", "hot"]));
    assert!(out.contains("partitions    8"), "{out}");
}

/// `pause --for 0s` and `pause --until <a past time>` never print "paused … until resumed":
/// the first is refused before anything is sent, the second says the topic is not paused
/// (the server's clock decides what is past); both exit 2.
// See: issue 36
#[test]
fn a_pause_that_ends_as_it_begins_is_said_plainly_issue_36() {
    let s = Server::start(&[]);
    let o = s.run(&["push", "held", "x"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let zero = s.run(&["pause", "held", "--for", "0s"]);
    let err = String::from_utf8_lossy(&zero.stderr);
    assert_eq!(zero.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--for 0s") && err.contains("delayq resume held"),
        "{err}"
    );
    assert!(
        !String::from_utf8_lossy(&zero.stdout).contains("paused"),
        "{zero:?}"
    );
    let past = s.run(&["pause", "held", "--until", "2001-01-01T00:00:00Z"]);
    let err = String::from_utf8_lossy(&past.stderr);
    assert_eq!(past.status.code(), Some(2), "{err}");
    assert!(err.contains("held is not paused"), "{err}");
    assert!(
        !String::from_utf8_lossy(&past.stdout).contains("until resumed"),
        "{past:?}"
    );
    let stats = s.run(&["stats", "held"]);
    let out = String::from_utf8_lossy(&stats.stdout);
    assert!(!out.contains("(paused)"), "{out}");
}

/// `delayq resume` and `delayq purge` of a topic the server does not know (no jobs, no
/// settings, no pause: a typo) fail with exit 3 naming it and change nothing; `delayq pause`
/// of one holds and says so on standard error; `delayq topics` and `delayq stats` show the
/// paused topic with no jobs until it is resumed.
// See: issue 36
#[test]
fn a_typo_in_resume_or_purge_exits_3_and_a_paused_empty_topic_shows_issue_36() {
    unknown_topics_from_the_command_line(&Server::start(&[]));
}

/// As [`a_typo_in_resume_or_purge_exits_3_and_a_paused_empty_topic_shows_issue_36`], served
/// on Redis.
// See: issue 36
#[test]
fn a_typo_in_resume_or_purge_exits_3_on_redis_issue_36() {
    let redis = delayq_testkit::RedisServer::start();
    unknown_topics_from_the_command_line(&Server::start(&["--redis", &redis.url()]));
}

/// As [`a_typo_in_resume_or_purge_exits_3_and_a_paused_empty_topic_shows_issue_36`], served
/// on PostgreSQL.
// See: issue 36
#[test]
fn a_typo_in_resume_or_purge_exits_3_on_postgres_issue_36() {
    let pg = delayq_testkit::PostgresServer::start();
    let s = Server::start(&["--postgres", &pg.url()]);
    s.wait_for_log("serving on");
    unknown_topics_from_the_command_line(&s);
}

fn unknown_topics_from_the_command_line(s: &Server) {
    ok(s.run(&["push", "orders", "x", "--id", "o1"]));

    let (code, err) = fails(s.run(&["resume", "ordres"]));
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("topic ordres not found") && err.contains("`delayq topics`"),
        "{err}"
    );
    let (code, err) = fails(s.run(&["purge", "ordres", "--yes"]));
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("nothing to purge"), "{err}");
    let o = s.run(&["resume", "ordres", "--json"]);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    let v = json_of(&String::from_utf8_lossy(&o.stderr));
    assert_eq!(v["error"]["code"], "not_found", "{v}");
    assert_eq!(ok(s.run(&["topics"])), "orders\n");
    assert!(ok(s.run(&["get", "orders", "o1"])).contains("ready"));

    // Paused ahead of its first push: it holds, a note says so, and it shows.
    let o = s.run(&["pause", "later"]);
    assert_eq!(ok(o.clone()), "paused later until resumed\n");
    let note = String::from_utf8_lossy(&o.stderr);
    assert!(
        note.starts_with("note: topic later has no jobs yet; it is paused ahead of its first push"),
        "{note}"
    );
    let again = s.run(&["pause", "later", "--for", "1h"]);
    assert!(
        ok(again.clone()).starts_with("paused later until 20"),
        "{again:?}"
    );
    assert!(
        again.stderr.is_empty(),
        "a known topic has no note: {again:?}"
    );
    assert_eq!(ok(s.run(&["topics"])), "later\norders\n");
    let stats = ok(s.run(&["stats"]));
    assert!(stats.contains("later (paused)"), "{stats}");
    let json = json_of(&ok(s.run(&["pause", "soon", "--json"])));
    assert_eq!(json["known"], false, "{json}");

    assert_eq!(ok(s.run(&["resume", "later"])), "resumed later\n");
    ok(s.run(&["resume", "soon"]));
    assert_eq!(ok(s.run(&["topics"])), "orders\n");
}
