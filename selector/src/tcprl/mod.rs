//! TCP-RL's congestion-control selection (Nie et al., JSAC 2019, §VI; `PAPERS.md` §1.2).
//!
//! - [`step`]: the time step (reports grouped per step, TCP-RL's state and reward).
pub mod step;

pub use step::{MIN_TPUT_MBPS, StepLength, StepStats, Stepper};
