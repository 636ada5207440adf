//! What this binary is: its version, the git commit it was built from and the build date
//! (from the build script; "unknown" when git was not there).

/// The crate version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The short git commit hash, or "unknown".
pub const COMMIT: &str = env!("DELAYQ_GIT_COMMIT");

/// The build date (UTC, YYYY-MM-DD), or "unknown".
pub const DATE: &str = env!("DELAYQ_BUILD_DATE");

/// `<version> (commit <commit>, built <date>)`, as `delayq --version` prints it.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("DELAYQ_GIT_COMMIT"),
    ", built ",
    env!("DELAYQ_BUILD_DATE"),
    ")"
);
