//! The embedded engine as a [`Backend`]: one data directory per test. The engine owns its
//! directory, so every handle of the test is a clone of one engine, and `close` drops it so
//! that a child process can open the directory.

use std::sync::Mutex;

use delayq_sqlite::{SqliteConfig, SqliteEngine};
use tempfile::TempDir;

use super::Backend;

pub struct SqliteBackend {
    dir: TempDir,
    engine: Mutex<Option<SqliteEngine>>,
}

impl SqliteBackend {
    fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("data")
    }
}

#[async_trait::async_trait]
impl Backend for SqliteBackend {
    type Engine = SqliteEngine;

    async fn start(_name: &str) -> Self {
        SqliteBackend {
            dir: tempfile::tempdir().unwrap(),
            engine: Mutex::new(None),
        }
    }

    async fn open(&self) -> SqliteEngine {
        let mut slot = self.engine.lock().unwrap();
        if let Some(e) = slot.as_ref() {
            return e.clone();
        }
        let e = SqliteEngine::open(SqliteConfig::dir(self.path()))
            .unwrap_or_else(|e| panic!("open {}: {e}", self.path().display()));
        *slot = Some(e.clone());
        e
    }

    fn address(&self) -> String {
        self.path().display().to_string()
    }

    async fn open_address(address: &str) -> SqliteEngine {
        SqliteEngine::open(SqliteConfig::dir(address))
            .unwrap_or_else(|e| panic!("open {address}: {e}"))
    }

    async fn close(&self) {
        self.engine.lock().unwrap().take();
    }
}
