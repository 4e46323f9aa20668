//! A deterministic discrete-event network simulator in virtual time (nanoseconds).
//!
//! A dumbbell: flows share one bottleneck ([`link`]) with a drop-tail buffer, random loss and
//! a constant rate (with an `htb`-like token burst) or a mahimahi trace; each flow has its own
//! propagation delay. Senders are TCP-like ([`tcp`]): window and pacing, a full SACK
//! scoreboard, Linux's RACK-TLP loss detection ([`rack`]), RTO with backoff and Linux-style
//! delivery-rate samples; receivers acknowledge as Linux's do ([`receiver`]: delayed ACKs,
//! SACK compression) and, opt-in, advertise Linux's receive window with its buffer
//! autotuning ([`rwnd`]); the built-in
//! Reno and Cubic recover from loss as Linux does ([`recovery`]: sequence-based, PRR). Each of
//! these can be switched off ([`model::TcpModel`]). Every ACK feeds the CCP datapath runtime
//! the primitives ccp-kernel gives libccp. A portus agent can run in
//! lock-step with virtual time ([`lockstep`]), so a run depends on its seed only.
//!
//! What a run is and what it gives back are [`crate::netem`]'s types (re-exported here); the
//! simulator is one [`crate::netem::Network`] ([`Simulator`]; [`RealtimeSimulator`] paces it
//! to the wall clock for an external agent). Start reading at [`network::Simulation`]. The
//! same seed gives the same result bit for bit.

mod ack_trace;
pub mod cubic;
pub mod link;
pub mod lockstep;
pub mod model;
pub mod network;
pub mod rack;
pub mod realtime;
pub mod receiver;
pub mod recovery;
pub mod rng;
pub mod rwnd;
pub mod tcp;

pub use crate::netem::{
    FlowResult, FlowSpec, LinkRate, LinkSpec, NetworkResult, NetworkSpec, PathChange, Sample,
    Scheme, Trace,
};
pub use link::WIRE_OVERHEAD_BYTES;
pub use lockstep::LockstepAgent;
pub use model::TcpModel;
pub use network::{SimConfig, SimError, SimResult, Simulation, Simulator};
pub use realtime::RealtimeSimulator;
pub use recovery::RecoveryModel;
