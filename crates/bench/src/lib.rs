//! The delayq benchmark driver, shared by the side-by-side suite (`delayq-bench all`) and
//! by `delayq bench`, which measures a user's own Redis or embedded engine.
//!
//! # Layout
//!
//! - [`clock`]: the host clock, and job bodies that carry their due time, so that every
//!   system's lateness is measured the same way (delivery minus due, on this host's clock).
//! - [`lateness`]: [`lateness::Lateness`], a recorder of lateness and early deliveries.
//! - [`driver`]: workloads on any delayq [`delayq::Engine`] through the worker runtime:
//!   fill, drain a backlog, deliver delayed jobs while they are pushed.
//! - [`stats`]: medians with min–max over repetitions.
#![deny(missing_docs)]

pub mod clock;
pub mod driver;
pub mod lateness;
pub mod stats;
