//! The worker runtime against every engine: one generic case per guarantee
//! (`support::cases`), instantiated once per engine by `worker_suite!`.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod support;

mod redis {
    crate::support::worker_suite!(crate::support::redis::RedisBackend);
}

mod sqlite {
    crate::support::worker_suite!(crate::support::sqlite::SqliteBackend);
}
