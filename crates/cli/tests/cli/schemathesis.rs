//! Property-based fuzzing of the served OpenAPI document with schemathesis on each engine
//! (embedded, Redis, PostgreSQL): no 5xx, no response outside the document. Needs the
//! `schemathesis` command (scripts/test.sh installs it into target/schemathesis-venv).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Server, stdout};

/// The schemathesis binary: `DELAYQ_SCHEMATHESIS` or `schemathesis` on the PATH.
fn schemathesis() -> PathBuf {
    let bin = std::env::var_os("DELAYQ_SCHEMATHESIS")
        .map(PathBuf::from)
        .unwrap_or_else(|| "schemathesis".into());
    match Command::new(&bin).arg("--version").output() {
        Ok(o) if o.status.success() => bin,
        _ => panic!(
            "schemathesis not found ({}): scripts/test.sh installs it into target/schemathesis-venv; \
             or run `pip install schemathesis==4.32.5` and put it on the PATH, or set DELAYQ_SCHEMATHESIS",
            bin.display()
        ),
    }
}

fn fuzz(server: &Server, dir: &Path) {
    let out = Command::new(schemathesis())
        .args(["run", &format!("{}/v1/openapi.json", server.url)])
        .args(["--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"])
        .args(["--max-examples", "25", "--seed", "7", "--request-timeout", "40"])
        .env("SCHEMATHESIS_HOOKS", "")
        .current_dir(dir)
        .output()
        .unwrap();
    let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "schemathesis failed:\n{text}");
    assert!(text.contains("passed"), "{text}");
    assert!(!text.contains("Server error"), "{text}");
}

#[test]
fn schemathesis_on_the_embedded_engine() {
    let s = Server::start(&[]);
    fuzz(&s, s._dir.path());
}

#[test]
fn schemathesis_on_redis() {
    let redis = delayq_testkit::RedisServer::start();
    let s = Server::start(&["--redis", &redis.url()]);
    fuzz(&s, s._dir.path());
}

#[test]
fn schemathesis_on_postgres() {
    let pg = delayq_testkit::PostgresServer::start();
    let s = Server::start(&["--postgres", &pg.url()]);
    s.wait_for_log("serving on");
    fuzz(&s, s._dir.path());
}
