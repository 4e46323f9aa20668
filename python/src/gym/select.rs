//! The `select` environment's controller: a selection policy of the real selector whose
//! decisions come from the learner, one per step.

use ccp_selector::tcprl::{Stepper, observation};
use ccp_selector::{Decision, Features, SelectionPolicy};

use super::episode::{Obs, Port};

/// A [`SelectionPolicy`] that suspends the episode at the end of every step (the selector's
/// feature window as the observation) and switches to the candidate it is resumed with.
pub(crate) struct Learner {
    pub(crate) port: Port,
    pub(crate) stepper: Stepper,
    pub(crate) initial: usize,
}

impl SelectionPolicy for Learner {
    fn name(&self) -> &'static str {
        "gym-select"
    }

    fn initial(&self) -> usize {
        self.initial
    }

    fn decide(&mut self, f: &Features<'_>) -> Decision {
        let Some(st) = self.stepper.push(f) else {
            return Decision::Stay;
        };
        let m = f.measurement;
        let action = self.port.suspend(Obs {
            features: observation(self.stepper.window(), &st),
            reward: st.reward(),
            throughput_mbps: st.throughput_mbps(),
            rtt_ms: st.rtt_ms(),
            loss: st.loss_frac(),
            now_us: st.end_us,
            current: f.current,
            cwnd_bytes: m.cwnd_bytes,
            rate_bytes_per_sec: 0,
        });
        // The Python side checks the action against the action space; a value that is not a
        // candidate index stays.
        let k = action as usize;
        if action >= 0.0 && k < f.candidates.len() && k != f.current {
            Decision::SwitchTo(k)
        } else {
            Decision::Stay
        }
    }
}
