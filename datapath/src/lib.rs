//! The datapath side of the Congestion Control Plane (CCP).
//!
//! CCP splits congestion control in two: the *datapath* (a kernel, a userspace transport, a
//! simulator) runs small fold programs on every ACK and sends reports; the *agent* (the
//! `portus` crate) runs the algorithms and answers with windows, rates and program changes.
//! This crate is the datapath half, written in Rust and wire-compatible with libccp.
//!
//! Start with [`runtime::Datapath`]: create a flow, call `invoke` on every ACK with the
//! flow's measurements, apply the returned cwnd and rate, and `poll` for the agent's messages.
//! [`agent`] holds helpers to run a portus agent beside a datapath, for demos and tests.
//!
//! Layout (see `DESIGN.md` §2): `runtime/` is the protocol, VM and fallback; the simulator
//! (`sim/`) and the eBPF kernel datapath (`kernel/`, Linux, feature `kernel`) are built on it;
//! [`netem`] is what a network run is and gives back, and the trait both run behind;
//! [`stats`] holds the one percentile rule every summary uses.

pub mod agent;
#[cfg(all(feature = "kernel", target_os = "linux"))]
pub mod kernel;
pub mod netem;
pub mod runtime;
pub mod sim;
pub mod stats;
