//! The `rate` and `cwnd` environments' controller: an algorithm of the suite's `Algorithm`
//! trait whose pacing rate or window is the learner's, one decision per report.
//!
//! - `rate` (ARC §4, Aurora's action): the action `a` in [-1, 1] scales the pacing rate by
//!   `1 + delta * a` (a >= 0) or `1 / (1 - delta * a)` (a < 0); the window is kept at twice
//!   the rate times the smoothed RTT (at least 4 MSS) so it never binds while the rate does.
//!   Decisions come every `interval_rtts` RTTs (default 0.5: a program of its own, the suite's
//!   per-RTT one with the RTT scaled).
//! - `cwnd` (RL-TCP/Orca style): the action scales the window by `2^(delta * a)` once per RTT;
//!   unpaced.
//!
//! The observation is the last `history` intervals, oldest first, 7 values each
//! ([`FEATURES`]): ARC's send interval as its inverse (the send rate over the largest delivery
//! rate seen), the delivery rate likewise, the loss fraction, the RTT over the minimum RTT, the
//! RTT's change over the interval in minimum RTTs, the sent over the acked bytes (Aurora's
//! sending ratio) and the last action.

use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use ccp_algorithms::programs::PER_RTT;
use ccp_algorithms::{
    Algorithm, AlgorithmConfig, Control, FlowStart, Handoff, Measurement, Pacing, ProgramSpec,
};
use ccp_selector::tcprl::MIN_TPUT_MBPS;

use super::episode::{Obs, Port};

/// The per-interval values of the observation, in order.
pub(crate) const FEATURES: [&str; 7] = [
    "send_rate_norm",
    "delivery_rate_norm",
    "loss_frac",
    "rtt_ratio",
    "rtt_gradient",
    "sent_over_acked",
    "last_action",
];

/// Caps of the ratio features, so a stale minimum cannot blow the input up.
const RATIO_CAP: f64 = 10.0;
/// Lowest pacing rate, bytes/s (0.1 Mbit/s).
const MIN_RATE_BYTES_PER_SEC: f64 = 12_500.0;

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
        Box::new(Controlled {
            knob: self.knob,
            port: self.port,
            history: VecDeque::from(vec![[0.0; FEATURES.len()]; self.history.max(1)]),
            delta: self.delta,
            programs: self.programs,
            mss: f64::from(start.mss_bytes.max(1)),
            handoff: Handoff::flow_start(start),
            cwnd: 0.0,
            rate: 0.0,
            max_delivery: 0.0,
            prev_now_us: None,
            prev_rtt_us: 0.0,
            last_action: 0.0,
        })
    }
}

/// The programs reporting every `interval_rtts` RTTs: the suite's per-RTT program with the
/// RTT scaled (made once per distinct interval and kept for the process).
pub(crate) fn programs_every(
    interval_rtts: f64,
) -> Result<&'static [&'static ProgramSpec], String> {
    static MADE: Mutex<BTreeMap<u32, &'static [&'static ProgramSpec]>> =
        Mutex::new(BTreeMap::new());
    static PER_RTT_ONLY: [&ProgramSpec; 1] = [&PER_RTT];
    let per_mille = (interval_rtts * 1000.0).round();
    if !(1.0..=100_000.0).contains(&per_mille) {
        return Err(format!(
            "interval_rtts must be in [0.001, 100], got {interval_rtts}"
        ));
    }
    let k = per_mille as u32;
    if k == 1000 {
        return Ok(&PER_RTT_ONLY);
    }
    let mut made = MADE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(p) = made.get(&k) {
        return Ok(p);
    }
    let every = "(when (> Micros Report.rtt)";
    if !PER_RTT.source.contains(every) {
        return Err("the suite's per-RTT program changed its report rule".into());
    }
    let source = PER_RTT.source.replace(
        every,
        &format!("(when (> (* Micros 1000) (* Report.rtt {k}))"),
    );
    let spec: &'static ProgramSpec = Box::leak(Box::new(ProgramSpec {
        name: Box::leak(format!("gym_every_{k}_permille_rtt").into_boxed_str()),
        source: Box::leak(source.into_boxed_str()),
    }));
    let list: &'static [&'static ProgramSpec] = Box::leak(vec![spec].into_boxed_slice());
    made.insert(k, list);
    Ok(list)
}

struct Controlled {
    knob: Knob,
    port: Port,
    history: VecDeque<[f32; FEATURES.len()]>,
    delta: f64,
    programs: &'static [&'static ProgramSpec],
    mss: f64,
    /// RTT, rate and loss state handed to whoever takes the flow.
    handoff: Handoff,
    cwnd: f64,
    /// Pacing rate, bytes/s (0: not set yet).
    rate: f64,
    max_delivery: f64,
    prev_now_us: Option<u64>,
    prev_rtt_us: f64,
    last_action: f64,
}

impl Controlled {
    fn control(&self) -> Control {
        Control {
            cwnd_bytes: Some(self.cwnd.clamp(2.0 * self.mss, f64::from(u32::MAX)) as u32),
            pacing: Some(if self.rate > 0.0 {
                Pacing::BytesPerSec(self.rate.min(f64::from(u32::MAX - 1)) as u32)
            } else {
                Pacing::Unpaced
            }),
            program: None,
        }
    }

    /// Updates the RTT state and returns this interval's features and statistics.
    fn observe(&mut self, m: &Measurement) -> ([f32; FEATURES.len()], Obs) {
        let h = &mut self.handoff;
        h.now_us = m.now_us;
        h.min_rtt_us = ccp_algorithms::rtt::lower_min(h.min_rtt_us, [m.min_rtt_us, m.rtt_us]);
        if m.rtt_us > 0 {
            h.srtt_us = if h.srtt_us == 0 {
                m.rtt_us
            } else {
                (7 * h.srtt_us + m.rtt_us) / 8
            };
        }
        if m.congestion() {
            h.last_loss_us = Some(m.now_us);
            h.in_first_slow_start = false;
        }
        let interval_us = self
            .prev_now_us
            .map_or(m.rtt_us, |p| m.now_us.saturating_sub(p));
        self.prev_now_us = Some(m.now_us);
        let delivery = if m.rate_incoming_bytes_per_sec > 0 {
            m.rate_incoming_bytes_per_sec as f64
        } else if interval_us > 0 {
            m.acked_bytes as f64 * 1e6 / interval_us as f64
        } else {
            0.0
        };
        h.delivery_rate_bytes_per_sec = delivery as u64;
        self.max_delivery = self.max_delivery.max(delivery);
        let norm = |x: f64| {
            if self.max_delivery > 0.0 {
                (x / self.max_delivery).min(RATIO_CAP)
            } else {
                0.0
            }
        };
        let send = m.rate_outgoing_bytes_per_sec as f64;
        let lost = m.lost_pkts as f64 * self.mss;
        let loss = if m.acked_bytes as f64 + lost > 0.0 {
            lost / (m.acked_bytes as f64 + lost)
        } else {
            0.0
        };
        let min_rtt = h.min_rtt_us as f64;
        let rtt = m.rtt_us as f64;
        let (ratio, gradient) = if min_rtt > 0.0 && rtt > 0.0 {
            let g = if self.prev_rtt_us > 0.0 {
                (rtt - self.prev_rtt_us) / min_rtt
            } else {
                0.0
            };
            (
                (rtt / min_rtt).min(RATIO_CAP),
                g.clamp(-RATIO_CAP, RATIO_CAP),
            )
        } else {
            (0.0, 0.0)
        };
        if rtt > 0.0 {
            self.prev_rtt_us = rtt;
        }
        let sent = send * interval_us as f64 / 1e6;
        let sent_over_acked = if m.acked_bytes > 0 {
            (sent / m.acked_bytes as f64).min(RATIO_CAP)
        } else if sent > 0.0 {
            RATIO_CAP
        } else {
            0.0
        };
        let row = [
            norm(send) as f32,
            norm(delivery) as f32,
            loss as f32,
            ratio as f32,
            gradient as f32,
            sent_over_acked as f32,
            self.last_action as f32,
        ];
        let tput_mbps = if interval_us > 0 {
            m.acked_bytes as f64 * 8.0 / interval_us as f64
        } else {
            0.0
        };
        let rtt_ms = if rtt > 0.0 {
            rtt / 1e3
        } else {
            h.srtt_us as f64 / 1e3
        };
        let obs = Obs {
            features: Vec::new(),
            reward: (tput_mbps.max(MIN_TPUT_MBPS) / rtt_ms.max(1e-3)).ln(),
            throughput_mbps: tput_mbps,
            rtt_ms,
            loss,
            now_us: m.now_us,
            current: 0,
            cwnd_bytes: self.cwnd as u64,
            rate_bytes_per_sec: self.rate as u64,
        };
        (row, obs)
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
        self.handoff = *handoff;
        self.cwnd = f64::from(handoff.cwnd_bytes);
        Control {
            cwnd_bytes: Some(handoff.cwnd_bytes),
            pacing: Some(Pacing::Unpaced),
            program: None,
        }
    }

    fn on_report(&mut self, m: &Measurement) -> Control {
        let (row, mut obs) = self.observe(m);
        self.history.pop_front();
        self.history.push_back(row);
        obs.features = self.history.iter().flatten().copied().collect();
        let a = self.port.suspend(obs);
        let a = if a.is_finite() {
            a.clamp(-1.0, 1.0)
        } else {
            0.0
        };
        self.last_action = a;
        let srtt_s = self.handoff.srtt_us.max(1) as f64 / 1e6;
        match self.knob {
            Knob::Rate => {
                if self.rate <= 0.0 {
                    // The first decision starts from the window's rate over one RTT.
                    self.rate = self.cwnd / srtt_s;
                }
                let d = self.delta * a;
                self.rate = if d >= 0.0 {
                    self.rate * (1.0 + d)
                } else {
                    self.rate / (1.0 - d)
                }
                .max(MIN_RATE_BYTES_PER_SEC);
                self.cwnd = (2.0 * self.rate * srtt_s).max(4.0 * self.mss);
            }
            Knob::Cwnd => {
                self.cwnd = (self.cwnd * (self.delta * a).exp2()).max(2.0 * self.mss);
            }
        }
        let c = self.control();
        self.handoff.cwnd_bytes = c.cwnd_bytes.unwrap_or(self.handoff.cwnd_bytes);
        self.handoff.pacing = c.pacing.unwrap_or(Pacing::Unpaced);
        c
    }

    fn handoff(&self) -> Handoff {
        self.handoff
    }
}
