//! TCP-RL's time step: reports are grouped into steps of a fixed length (one smoothed RTT by
//! default; TCP-RL used ~5 s), each with TCP-RL's state and reward.
//!
//! The same [`Stepper`] decides when the `tcprl` policy acts and when the Gymnasium `select`
//! environment (`ccp_suite.gym`) hands control to the learner, so what a policy is trained on
//! is what it sees when deployed.

use crate::onnx::{FeatureWindow, MSS_BYTES};
use crate::policy::Features;

/// Throughput floor of the reward, Mbit/s (the harness's `MIN_TPUT_MBPS`), so a starved step
/// has a finite, very low reward.
pub const MIN_TPUT_MBPS: f64 = 1e-3;

/// How long one step is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepLength {
    /// This many smoothed RTTs of the active candidate (the latest RTT sample before the
    /// first smoothed one).
    Rtts(f64),
    /// This many seconds of datapath time.
    Seconds(f64),
}

impl StepLength {
    /// The step length in µs at a smoothed RTT of `srtt_us`.
    fn micros(self, srtt_us: u64) -> u64 {
        match self {
            Self::Rtts(k) => (k.max(0.0) * srtt_us as f64) as u64,
            Self::Seconds(s) => (s.max(0.0) * 1e6) as u64,
        }
    }
}

/// What one step measured: TCP-RL's state (throughput, RTT, loss) and its reward.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepStats {
    /// Datapath time at the step's last report, µs.
    pub end_us: u64,
    /// Datapath time the step covers, µs.
    pub duration_us: u64,
    /// In-order bytes acknowledged in the step.
    pub acked_bytes: u64,
    /// Packets detected lost in the step.
    pub lost_pkts: u64,
    /// Whether the step had a retransmission timeout.
    pub timeout: bool,
    /// Reports in the step.
    pub reports: u32,
    /// Mean of the reports' latest RTT samples, µs (the previous step's when none).
    pub mean_rtt_us: f64,
}

impl StepStats {
    /// Goodput over the step, Mbit/s.
    pub fn throughput_mbps(&self) -> f64 {
        if self.duration_us == 0 {
            0.0
        } else {
            self.acked_bytes as f64 * 8.0 / self.duration_us as f64
        }
    }

    /// Mean RTT, ms.
    pub fn rtt_ms(&self) -> f64 {
        self.mean_rtt_us / 1e3
    }

    /// Lost bytes over acked plus lost bytes (lost packets counted as [`MSS_BYTES`]).
    pub fn loss_frac(&self) -> f64 {
        let lost = self.lost_pkts.saturating_mul(MSS_BYTES) as f64;
        let total = self.acked_bytes as f64 + lost;
        if total > 0.0 { lost / total } else { 0.0 }
    }

    /// TCP-RL's reward, `ln(throughput Mbit/s / RTT ms)`, with the throughput floored at
    /// [`MIN_TPUT_MBPS`] and the RTT at 1 µs.
    pub fn reward(&self) -> f64 {
        (self.throughput_mbps().max(MIN_TPUT_MBPS) / self.rtt_ms().max(1e-3)).ln()
    }
}

/// TCP-RL's state of a step, appended to the feature window in an observation: ln(1 +
/// throughput Mbit/s), ln(1 + RTT ms) and the loss fraction (the window's features are
/// relative to the flow's own maxima and minima; these carry the path's absolute scale).
pub const STATE: [&str; 3] = ["ln1p_throughput_mbps", "ln1p_rtt_ms", "step_loss_frac"];

/// Upper bound of every observation value.
pub const OBS_CAP: f32 = 10.0;

/// An observation: the window's values (oldest report first), then [`STATE`] of `st`.
pub fn observation(window: &FeatureWindow, st: &StepStats) -> Vec<f32> {
    let mut v = Vec::with_capacity(window.values().len() + STATE.len());
    v.extend_from_slice(window.values());
    v.push(st.throughput_mbps().ln_1p() as f32);
    v.push(st.rtt_ms().ln_1p() as f32);
    v.push(st.loss_frac() as f32);
    for x in &mut v {
        *x = x.clamp(0.0, OBS_CAP);
    }
    v
}

/// Values per observation for a window of `window` reports over `candidates` candidates.
pub fn observation_len(window: usize, candidates: usize) -> usize {
    window * (crate::onnx::FEATURES.len() + candidates) + STATE.len()
}

/// Groups a flow's reports into steps and keeps the selector's feature window
/// ([`FeatureWindow`]) over them.
#[derive(Debug, Clone)]
pub struct Stepper {
    length: StepLength,
    window: FeatureWindow,
    /// Start of the current step (`None` before the first report).
    start_us: Option<u64>,
    acc: StepStats,
    rtt_sum_us: f64,
    rtt_n: u32,
    last_rtt_us: f64,
}

impl Stepper {
    /// Steps of `length`, over a window of the last `window` reports of `candidates`
    /// candidates.
    pub fn new(length: StepLength, window: usize, candidates: usize) -> Self {
        Self {
            length,
            window: FeatureWindow::new(window, candidates),
            start_us: None,
            acc: StepStats::default(),
            rtt_sum_us: 0.0,
            rtt_n: 0,
            last_rtt_us: 0.0,
        }
    }

    /// The feature window (the last reports, oldest first).
    pub fn window(&self) -> &FeatureWindow {
        &self.window
    }

    /// Takes one report (with the candidate active at it, in `f.current`); returns the step's
    /// statistics when this report ends a step. The first report only starts the first step.
    pub fn push(&mut self, f: &Features<'_>) -> Option<StepStats> {
        self.window.push(f);
        let m = f.measurement;
        let Some(start) = self.start_us else {
            self.start_us = Some(m.now_us);
            if m.rtt_us > 0 {
                self.last_rtt_us = m.rtt_us as f64;
            }
            return None;
        };
        self.acc.acked_bytes += m.acked_bytes;
        self.acc.lost_pkts += m.lost_pkts;
        self.acc.timeout |= m.timeout;
        self.acc.reports += 1;
        if m.rtt_us > 0 {
            self.rtt_sum_us += m.rtt_us as f64;
            self.rtt_n += 1;
        }
        let srtt = if f.srtt_us > 0 { f.srtt_us } else { m.rtt_us };
        let elapsed = m.now_us.saturating_sub(start);
        if elapsed == 0 || elapsed < self.length.micros(srtt) {
            return None;
        }
        if self.rtt_n > 0 {
            self.last_rtt_us = self.rtt_sum_us / f64::from(self.rtt_n);
        }
        let stats = StepStats {
            end_us: m.now_us,
            duration_us: elapsed,
            mean_rtt_us: self.last_rtt_us,
            ..self.acc
        };
        self.start_us = Some(m.now_us);
        self.acc = StepStats::default();
        self.rtt_sum_us = 0.0;
        self.rtt_n = 0;
        Some(stats)
    }
}

#[cfg(test)]
mod tests {
    use ccp_algorithms::Measurement;

    use super::*;

    const NAMES: [&str; 2] = ["cubic", "bbr"];

    fn report(s: &mut Stepper, now_us: u64, acked: u64, rtt_us: u64) -> Option<StepStats> {
        let m = Measurement {
            now_us,
            acked_bytes: acked,
            rtt_us,
            min_rtt_us: rtt_us,
            ..Measurement::default()
        };
        s.push(&Features {
            measurement: &m,
            current: 1,
            candidates: &NAMES,
            now_us,
            srtt_us: rtt_us,
            reports: 1,
        })
    }

    #[test]
    fn one_rtt_steps_end_on_every_report_after_the_first() {
        let mut s = Stepper::new(StepLength::Rtts(1.0), 4, 2);
        assert_eq!(report(&mut s, 50_000, 10_000, 50_000), None);
        let st = report(&mut s, 100_000, 62_500, 50_000).unwrap();
        // 62,500 bytes in 50 ms = 10 Mbit/s; ln(10 / 50).
        assert!((st.throughput_mbps() - 10.0).abs() < 1e-9);
        assert!((st.reward() - (10.0f64 / 50.0).ln()).abs() < 1e-9);
        assert_eq!(st.reports, 1);
        assert!(report(&mut s, 150_000, 1, 50_000).is_some());
        // The window holds the reports, the active candidate's one-hot included.
        let w = s.window().values();
        assert_eq!(w.len(), 4 * (4 + 2));
        assert!((w[w.len() - 1] - 1.0).abs() < f32::EPSILON);
        let st = StepStats {
            duration_us: 1_000_000,
            acked_bytes: 1_250_000,
            mean_rtt_us: 20_000.0,
            ..StepStats::default()
        };
        let o = observation(s.window(), &st);
        assert_eq!(o.len(), observation_len(4, 2));
        assert!((o[o.len() - 3] - 11f32.ln()).abs() < 1e-6);
        assert!((o[o.len() - 2] - 21f32.ln()).abs() < 1e-6);
    }

    #[test]
    fn longer_steps_group_reports_and_average_their_rtts() {
        let mut s = Stepper::new(StepLength::Seconds(0.2), 2, 2);
        assert_eq!(report(&mut s, 0, 0, 40_000), None);
        assert_eq!(report(&mut s, 100_000, 1_000, 40_000), None);
        let st = report(&mut s, 200_000, 1_000, 60_000).unwrap();
        assert_eq!(
            (st.reports, st.acked_bytes, st.duration_us),
            (2, 2_000, 200_000)
        );
        assert!((st.mean_rtt_us - 50_000.0).abs() < 1e-9);
        // A starved step is finite.
        let mut s = Stepper::new(StepLength::Rtts(1.0), 2, 2);
        report(&mut s, 0, 0, 0);
        let st = report(&mut s, 100, 0, 0).unwrap();
        assert!(st.reward().is_finite());
    }
}
