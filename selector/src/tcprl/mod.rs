//! TCP-RL's congestion-control selection (Nie et al., JSAC 2019, §VI; `PAPERS.md` §1.2): a
//! deep-RL policy that picks a scheme per step from the flow's recent measurements, and a
//! network-change detector (DNC) that makes it start over when the path changes.
//!
//! - [`step`]: the time step (reports grouped per step, the observation, TCP-RL's reward).
//!   The Gymnasium `select` environment (`ccp_suite.gym`, `python/`) steps with the same code,
//!   so a policy is trained on exactly what it sees here.
//! - [`model`]: the two networks in ONNX Runtime ([`TcpRlModel`]), written by
//!   `ccp_suite.tcprl` (A2C training, `docs/learning.md`).
//! - [`policy`]: [`TcpRlPolicy`], the selector policy `tcprl`.
//!
//! What is left out: online learning (the networks are frozen), and TCP-RL's 14 Pantheon
//! schemes (the candidates are the suite's).
pub mod model;
pub mod policy;
pub mod step;

pub use model::{TcpRlModel, TcpRlSidecar};
pub use policy::TcpRlPolicy;
pub use step::{
    MIN_TPUT_MBPS, OBS_CAP, STATE, StepLength, StepStats, Stepper, observation, observation_len,
};
