//! What the conformance suite needs from an engine: open it on a fresh store, open another
//! handle, restart it, and snapshot the store byte for byte; and [`Partitioned`], which runs
//! the suite on topics of several partitions.

use async_trait::async_trait;
use delayq_core::{Limits, Store};

/// One fresh store (its own `redis-server`, or its own data directory) per test.
#[async_trait]
pub trait Harness: Send + Sync + Sized + 'static {
    /// The engine under test, with every capability (the suite checks them all).
    type Engine: Store + Clone;

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

    /// The partition count the suite gives every topic of a case before using it (`None`,
    /// the default: left unset, one partition).
    fn partitions(&self) -> Option<u16> {
        None
    }
}

/// A harness whose cases run on topics of `n` partitions (issue 18): the same store and
/// engine as `H`, every topic a case makes given `n` partitions while it is empty. The
/// contract's order holds within each partition only, so the cases that check order check it
/// per partition ([`delayq_core::partition_of`]).
pub struct Partitioned<H> {
    inner: H,
    n: u16,
}

impl<H> Partitioned<H> {
    /// `inner`'s store, with topics of `n` partitions.
    pub fn new(inner: H, n: u16) -> Self {
        Partitioned { inner, n }
    }
}

#[async_trait]
impl<H: Harness> Harness for Partitioned<H> {
    type Engine = H::Engine;

    async fn open(&self) -> Self::Engine {
        self.inner.open().await
    }

    async fn open_with(&self, limits: Limits) -> Self::Engine {
        self.inner.open_with(limits).await
    }

    async fn restart(&self, engine: Self::Engine) -> Self::Engine {
        self.inner.restart(engine).await
    }

    async fn snapshot(&self) -> Vec<u8> {
        self.inner.snapshot().await
    }

    fn partitions(&self) -> Option<u16> {
        Some(self.n)
    }
}
