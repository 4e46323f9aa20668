//! Network emulation: one description of a network run and one result, whichever network
//! runs it.
//!
//! A run ([`NetworkSpec`]) is a dumbbell: flows ([`FlowSpec`], each with its congestion
//! control [`Scheme`]) share one bottleneck ([`LinkSpec`]: a constant rate or a mahimahi
//! [`Trace`], a drop-tail buffer, random loss) whose rate, delay, loss and buffer may change
//! over time ([`PathChange`]). A [`Network`] runs it and reports what each flow got
//! ([`NetworkResult`], [`FlowResult`]):
//! - [`crate::sim::Simulator`]: the simulator in virtual time, its CCP flows driven by a
//!   lock-step portus agent (deterministic; the default everywhere);
//! - [`crate::sim::realtime::RealtimeSimulator`]: the simulator paced to the wall clock, its
//!   CCP flows driven by an external agent over a unix socket (demos);
//! - `crate::kernel::testbed::KernelNetwork` (feature `kernel`): real kernel TCP through the
//!   network-namespace testbed, CCP flows through the BPF datapath and an agent.
//!
//! What each network measures differently (RTT samples, loss) is said where it fills
//! [`FlowResult`].

mod rate;
mod result;
mod spec;

pub use rate::{LinkRate, MAX_TRACE_MS, TRACE_MTU_BYTES, Trace, TraceError};
pub use result::{FlowResult, NetworkResult, SRTT_SAMPLE_INTERVAL_NS, Sample};
pub use spec::{FlowSpec, LinkSpec, NetworkSpec, PathChange, Scheme};

/// Something that runs a [`NetworkSpec`] to its end: the simulator (virtual or real time) or
/// the kernel testbed. A value is one run's network and its control plane (e.g. the agent
/// that drives its CCP flows), so `run` takes it by value.
pub trait Network {
    /// Why a run failed (the spec asks for something this network cannot do, or it broke).
    type Error: std::error::Error + Send + Sync + 'static;

    /// Runs `spec` and returns what each flow got, in spec order.
    fn run(self, spec: NetworkSpec) -> Result<NetworkResult, Self::Error>;
}
