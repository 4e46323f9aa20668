//! The `rate` and `cwnd` environments' controller: an algorithm of the suite's `Algorithm`
//! trait whose pacing rate or window is the learner's, one decision per report.
//!
//! - `rate` (ARC §4, Aurora's action): ARC's own state and rate rule
//!   (`ccp_algorithms::arc::features`: the same code the `arc` algorithm runs, so a trained
//!   actor sees in deployment what it saw here, the rate's ceiling included). Decisions come every `interval_rtts` RTTs
//!   (default 0.5: the suite's half-RTT program, `ccp_algorithms::programs::every_rtts`).
//! - `cwnd` (RL-TCP/Orca style): the same state; the action scales the window by
//!   `2^(delta * a)` once per RTT; unpaced.
//!
//! The observation is the last `history` intervals, oldest first, 7 values each
//! ([`FEATURES`]).

use ccp_algorithms::arc::{Observer, RateControl};
use ccp_algorithms::{
    Algorithm, AlgorithmConfig, Control, FlowStart, Handoff, Measurement, Pacing, ProgramSpec,
};
use ccp_selector::tcprl::MIN_TPUT_MBPS;

use super::episode::{Obs, Port};

pub(crate) use ccp_algorithms::arc::FEATURES;

/// Which quantity the learner sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Knob {
    Rate,
    Cwnd,
}

/// The algorithm's config (its factory), holding the episode's port.
pub(crate) struct ControlConfig {
    pub(crate) knob: Knob,
    pub(crate) port: Port,
    pub(crate) history: usize,
    pub(crate) delta: f64,
    pub(crate) programs: &'static [&'static ProgramSpec],
}

impl AlgorithmConfig for ControlConfig {
    const NAME: &'static str = "gym-control";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        self.programs
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        let observer = Observer::new(start, self.history);
        Box::new(Controlled {
            knob: self.knob,
            port: self.port,
            programs: self.programs,
            mss: f64::from(start.mss_bytes.max(1)),
            control: RateControl::new(start.mss_bytes, observer.handoff.cwnd_bytes, self.delta),
            observer,
            last_action: 0.0,
        })
    }
}

/// The programs reporting every `interval_rtts` RTTs (the suite's, shared with `arc`).
pub(crate) fn programs_every(
    interval_rtts: f64,
) -> Result<&'static [&'static ProgramSpec], String> {
    ccp_algorithms::programs::every_rtts(interval_rtts)
}

struct Controlled {
    knob: Knob,
    port: Port,
    programs: &'static [&'static ProgramSpec],
    mss: f64,
    observer: Observer,
    /// The rate (`rate`) or the window (`cwnd`, its `cwnd` only) in force.
    control: RateControl,
    last_action: f64,
}

impl Controlled {
    fn control(&self) -> Control {
        match self.knob {
            Knob::Rate => self.control.control(),
            Knob::Cwnd => Control::cwnd(self.control.cwnd_bytes()).with_pacing(Pacing::Unpaced),
        }
    }

    /// This interval's observation and statistics.
    fn observe(&mut self, m: &Measurement) -> Obs {
        let i = self.observer.observe(m, self.last_action);
        let mut features = Vec::with_capacity(self.observer.state_len());
        self.observer.state_into(&mut features);
        Obs {
            features,
            reward: (i.throughput_mbps.max(MIN_TPUT_MBPS) / i.rtt_ms.max(1e-3)).ln(),
            throughput_mbps: i.throughput_mbps,
            rtt_ms: i.rtt_ms,
            loss: i.loss,
            now_us: m.now_us,
            current: 0,
            cwnd_bytes: self.control.cwnd as u64,
            rate_bytes_per_sec: self.control.rate as u64,
        }
    }
}

impl Algorithm for Controlled {
    fn name(&self) -> &'static str {
        ControlConfig::NAME
    }

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        self.programs
    }

    fn activate(&mut self, handoff: &Handoff) -> Control {
        self.observer.handoff = *handoff;
        self.control.cwnd = f64::from(handoff.cwnd_bytes);
        Control {
            cwnd_bytes: Some(handoff.cwnd_bytes),
            pacing: Some(Pacing::Unpaced),
            program: None,
        }
    }

    fn on_report(&mut self, m: &Measurement) -> Control {
        let obs = self.observe(m);
        let a = self.port.suspend(obs);
        let a = if a.is_finite() {
            a.clamp(-1.0, 1.0)
        } else {
            0.0
        };
        self.last_action = a;
        match self.knob {
            Knob::Rate => self.control.steer(a, &self.observer),
            Knob::Cwnd => {
                self.control.cwnd =
                    (self.control.cwnd * (self.control.delta * a).exp2()).max(2.0 * self.mss);
            }
        }
        let c = self.control();
        self.observer.handoff.cwnd_bytes = c.cwnd_bytes.unwrap_or(self.observer.handoff.cwnd_bytes);
        self.observer.handoff.pacing = c.pacing.unwrap_or(Pacing::Unpaced);
        c
    }

    fn handoff(&self) -> Handoff {
        self.observer.handoff
    }
}
