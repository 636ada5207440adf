//! What the beanstalk tests share: a server on a free loopback port over an engine.

#![allow(dead_code)] // Each test file uses a different part.

use std::net::SocketAddr;
use std::sync::Arc;

use delayq_core::Engine;

/// Serves the beanstalkd protocol over `engine` on 127.0.0.1, until the test ends.
pub async fn serve(engine: Arc<dyn Engine>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(delayq_beanstalk::serve(
        listener,
        engine,
        delayq_beanstalk::Options::default(),
        std::future::pending(),
    ));
    addr
}

/// An embedded engine in memory.
pub fn memory_engine() -> Arc<dyn Engine> {
    Arc::new(
        delayq_sqlite::SqliteEngine::open(delayq_sqlite::SqliteConfig::memory())
            .expect("in-memory engine"),
    )
}
