//! What the conformance suite needs from an engine: open it on a fresh store, open another
//! handle, restart it, and snapshot the store byte for byte.

use async_trait::async_trait;
use delayq_core::{Engine, Limits};

/// One fresh store (its own `redis-server`, or its own data directory) per test.
#[async_trait]
pub trait Harness: Send + Sync + Sized + 'static {
    /// The engine under test.
    type Engine: Engine + Clone;

    /// Opens a handle on this harness's store with default limits. Called more than once,
    /// it opens another instance (another client of the same Redis; another handle of the
    /// one embedded engine that owns the directory).
    async fn open(&self) -> Self::Engine;

    /// Opens a handle with custom limits.
    async fn open_with(&self, limits: Limits) -> Self::Engine;

    /// Simulates the engine's process restarting: closes `engine` (every clone of it must
    /// be dropped by the caller) and opens a new instance on the same store.
    async fn restart(&self, engine: Self::Engine) -> Self::Engine;

    /// Everything the store holds, byte for byte, in a stable order. Two equal snapshots
    /// mean nothing changed.
    async fn snapshot(&self) -> Vec<u8>;
}
