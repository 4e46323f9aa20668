//! The initial-window (IW) controller: TCP-RL's group-based discounted-UCB bandit.
//!
//! Placeholder crate doc; rewritten below once every module exists.

pub mod bandit;
pub mod geo;
mod rng;
pub mod sliding;
pub mod table;

/// The standard initial window (RFC 6928), packets: unknown and unqualified flows get it.
pub const DEFAULT_IW_PKTS: u32 = 10;
/// Default largest IW the controller may choose, packets.
pub const DEFAULT_MAX_IW_PKTS: u32 = 200;
