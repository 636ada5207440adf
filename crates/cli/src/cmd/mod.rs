//! One module per subcommand or small group of subcommands.

pub mod bench;
pub mod dead;
pub mod destination;
pub mod docs;
pub mod health;
pub mod job;
pub mod lease;
pub mod list;
pub mod pause;
pub mod push;
pub mod reserve;
pub mod schedule;
pub mod serve;
pub mod stats;
pub mod topic;
pub mod topics;
