//! One module per subcommand.

pub mod bench;
pub mod dead;
pub mod job;
pub mod push;
pub mod reserve;
pub mod serve;
pub mod stats;
pub mod topic;
