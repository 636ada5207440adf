//! A data directory that cannot be used gives a clear error at open, and nothing is written.
//! Tests run as root, so "unwritable" is made with a path under a regular file.

use std::path::Path;

use delayq_core::Error;
use delayq_sqlite::{DB_FILE, SqliteConfig, SqliteEngine};

fn config_error(dir: &Path) -> String {
    match SqliteEngine::open(SqliteConfig::dir(dir)) {
        Err(Error::InvalidConfig { reason }) => reason,
        Err(e) => panic!("{}: expected InvalidConfig, got {e:?}", dir.display()),
        Ok(_) => panic!("{} opened", dir.display()),
    }
}

#[test]
fn a_path_under_a_regular_file_is_refused() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let file = tmp.path().join("plain-file");
    std::fs::write(&file, b"not a directory").expect("write");
    let reason = config_error(&file.join("data"));
    assert!(reason.contains("plain-file/data"), "{reason}");
    assert!(reason.contains("can create and write"), "{reason}");
    // The data directory is itself a regular file.
    let reason = config_error(&file);
    assert!(reason.contains("can create and write"), "{reason}");
    assert_eq!(std::fs::read(&file).expect("read"), b"not a directory");
}

#[test]
fn a_corrupt_database_is_refused() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let garbage: Vec<u8> = b"this is not an SQLite database\n".repeat(300);
    std::fs::write(tmp.path().join(DB_FILE), &garbage).expect("write");
    let reason = config_error(tmp.path());
    assert!(reason.contains("corrupt"), "{reason}");
    assert!(reason.contains("backup"), "{reason}");
    assert_eq!(
        std::fs::read(tmp.path().join(DB_FILE)).expect("read"),
        garbage
    );
}

#[test]
fn a_database_with_a_damaged_first_page_is_refused() {
    let tmp = tempfile::tempdir().expect("temp dir");
    drop(SqliteEngine::open(SqliteConfig::dir(tmp.path())).expect("create"));
    let path = tmp.path().join(DB_FILE);
    let mut bytes = std::fs::read(&path).expect("read");
    assert!(bytes.len() >= 4096, "the database has its first page");
    // Keep the 100-byte header, scribble over the schema's page.
    for b in &mut bytes[100..4096] {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).expect("write");
    let reason = config_error(tmp.path());
    assert!(reason.contains("corrupt"), "{reason}");
}

#[test]
fn a_foreign_or_newer_database_is_refused() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let conn = rusqlite::Connection::open(tmp.path().join(DB_FILE)).expect("create");
    conn.execute_batch("CREATE TABLE mine (a); INSERT INTO mine VALUES (1);")
        .expect("fill");
    drop(conn);
    let reason = config_error(tmp.path());
    assert!(reason.contains("did not write"), "{reason}");

    let tmp = tempfile::tempdir().expect("temp dir");
    drop(SqliteEngine::open(SqliteConfig::dir(tmp.path())).expect("create"));
    let conn = rusqlite::Connection::open(tmp.path().join(DB_FILE)).expect("open");
    conn.execute_batch("PRAGMA user_version = 99")
        .expect("bump");
    drop(conn);
    let reason = config_error(tmp.path());
    assert!(
        reason.contains("newer than this delayq supports"),
        "{reason}"
    );
}

#[test]
fn an_empty_path_or_bad_settings_are_refused() {
    let reason = config_error(Path::new(""));
    assert!(reason.contains("empty"), "{reason}");
    let mut cfg = SqliteConfig::memory();
    cfg.tick_batch = 0;
    assert!(matches!(
        SqliteEngine::open(cfg),
        Err(Error::InvalidConfig { .. })
    ));
}

#[test]
fn a_database_too_full_to_create_is_refused_at_open() {
    let tmp = tempfile::tempdir().expect("temp dir");
    match SqliteEngine::open(SqliteConfig::dir(tmp.path()).with_max_db_bytes(4096)) {
        Err(e @ Error::Full { .. }) => {
            assert!(e.to_string().contains("full"), "{e}");
        }
        Err(e) => panic!("expected Full, got {e:?}"),
        Ok(_) => panic!("opened a database that has no room for its schema"),
    }
}
