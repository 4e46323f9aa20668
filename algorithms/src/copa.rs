//! Copa (Arun & Balakrishnan, "Copa: Practical Delay-Based Congestion Control for the
//! Internet", NSDI 2018), per report.
//!
//! Model (windows in packets, times in seconds):
//! - `RTTmin` = min RTT over the last 10 s (§2.1); `RTTstanding` = the smallest RTT of the
//!   latest interval (§2.1: the min over the last `srtt / 2`);
//! - queueing delay `d_q = RTTstanding - RTTmin`; target rate `lambda_t = 1 / (delta d_q)`
//!   packets/s (§2, eq. 1); current rate `lambda = cwnd / RTTstanding`;
//! - if `lambda <= lambda_t`, `cwnd += v / (delta cwnd)` per ACK, else
//!   `cwnd -= v / (delta cwnd)` (§2.1 step 3);
//! - velocity `v` (§2.1): once per RTT the window is compared with the window one RTT before;
//!   after 3 RTTs moving in the same direction `v` doubles every RTT, and it restarts at 1
//!   when the direction flips. As in Copa's reference implementation (mvfst
//!   `Copa::changeDirection`), a report whose decision goes against `v`'s direction while
//!   `v > 1` resets `v` to 1 at once;
//! - slow start (§2.1): the window doubles every RTT until `lambda > lambda_t`;
//! - pacing at `2 cwnd / RTTstanding` (§2.1);
//! - mode switching (§2.2): the queue counts as nearly empty in an RTT whose `RTTstanding`
//!   is below `RTTmin + 0.1 (RTTmax - RTTmin)`, `RTTmax` over the last 4 RTTs (here: or
//!   within two packets' transmission time, `2 RTTstanding / cwnd`, of `RTTmin`; see below).
//!   If it was nearly empty at least once in the last 5 RTTs, Copa runs in default mode with
//!   `delta = 0.5`;
//!   otherwise (a buffer-filling competitor keeps the queue up) in competitive mode, where
//!   `1/delta` follows AIMD: +1 per RTT, halved on a loss, never below `1/0.5 = 2`.
//!
//! Defaults ([`CopaConfig`]): `delta = 0.5`, competitive mode on, `RTTmin` window 10 s,
//! reports every half RTT ([`PER_HALF_RTT`]).
//!
//! Simplified: the agent sees a report every half RTT, not each ACK (a loss waits for the next
//! report), so
//! - the per-ACK rule is applied once per report with the report's acknowledged packets `n`,
//!   selectively acknowledged ones included (an ACK that fills a hole counts its bytes again):
//!   `cwnd += +-(n v / (delta cwnd))`, bounded to half the window per report so one report
//!   cannot collapse the window;
//! - `RTTstanding` is the smallest RTT over the report interval, half an RTT: the paper's
//!   `srtt / 2` window (with once-per-RTT reports, [`CopaConfig::half_rtt_reports`] off, it is
//!   the minimum over a whole RTT and the decision lags by an RTT: Copa then filled a 1-BDP
//!   buffer and lost 9 % of its packets at 10 Mbit/s x 40 ms); `RTTmax` is the largest
//!   latest-RTT sample of the reports of the last 4 RTTs; since a per-report minimum rarely sees
//!   the queue's last packet leave, a queue of up to two packets also counts as nearly empty
//!   (without this a lone Copa flow drifts into competitive mode and its queue grows);
//! - the velocity update runs on the first report at least one RTT after the previous one, so
//!   reports in between never reset or double it; `v` is bounded
//!   so that one RTT moves the window by at most [`MAX_MOVE_PER_RTT`] of it (not in the
//!   paper: the delay signal comes back a report interval and an RTT late, and a velocity that
//!   doubled for many RTTs overshoots by `v / delta` per RTT of lag);
//! - losses do not reduce the window in default mode (the paper's Copa is delay-based); a
//!   timeout drops it to 2 packets and restarts slow start with `v = 1`.
//!
//! A handoff from a flow still in its first slow start continues in slow start; any other
//! continues with the velocity rule from the handed-over window. During the first RTT after a
//! handoff the window stays within a factor of two of the handed-over one.

use std::collections::VecDeque;

use crate::api::{Algorithm, AlgorithmConfig, Control, FlowStart, Handoff, Measurement, Pacing};
use crate::programs::{PER_HALF_RTT, PER_RTT_URGENT, ProgramSpec};
use crate::rtt::{MinWindow, RttEstimator};

/// §2.1: the default `delta`.
pub const DELTA: f64 = 0.5;
/// §2.1: `RTTmin` window, µs.
pub const MIN_RTT_WINDOW_US: u64 = 10_000_000;
/// §2.1: RTTs in the same direction before the velocity starts doubling.
pub const VELOCITY_RTTS: u32 = 3;
/// §2.2: RTTs over which the queue must have nearly emptied once for default mode.
pub const EMPTY_QUEUE_RTTS: usize = 5;
/// §2.2: "nearly empty" is below this share of the recent maximum queueing delay.
pub const NEARLY_EMPTY: f64 = 0.1;
/// Largest share of the window the velocity rule may move it by in one RTT (`v / delta <=
/// cwnd / 8`). The delay signal reaches the agent about one RTT after the window changed, so a
/// velocity that doubled for many RTTs overshoots by `v / delta` per RTT of lag; above this
/// bound Copa oscillates by hundreds of packets at 100 Mbit/s x 100 ms (utilization 0.70
/// instead of 0.92 with `cwnd / 2`). Not in the paper.
pub const MAX_MOVE_PER_RTT: f64 = 1.0 / 8.0;
/// The suite's smallest window, packets.
pub const MIN_CWND_PKTS: f64 = 2.0;

/// Programs Copa installs: reports every half RTT make the report's minimum RTT the paper's
/// `RTTstanding`. Losses wait for the next report (at most half an RTT): only competitive mode
/// reacts to them, and an urgent report per lossy ACK cost up to 1,400 reports/s behind a full
/// 100 Mbit/s buffer.
static PROGRAMS: [&ProgramSpec; 1] = [&PER_HALF_RTT];
/// Programs of the once-per-RTT variant ([`CopaConfig::half_rtt_reports`] off).
static PROGRAMS_PER_RTT: [&ProgramSpec; 1] = [&PER_RTT_URGENT];

/// Copa's configuration and factory.
#[derive(Debug, Clone, Copy)]
pub struct CopaConfig {
    /// `delta` in default mode (0.5 recommended; in (0, 1]).
    pub delta: f64,
    /// Whether to switch to competitive mode (§2.2; recommended on).
    pub competitive: bool,
    /// `RTTmin` window, µs (10 s recommended).
    pub min_rtt_window_us: u64,
    /// Report every half RTT (recommended: the report's minimum RTT is then the paper's
    /// `RTTstanding`, the minimum over `srtt / 2`); off: once per RTT, half the reports.
    pub half_rtt_reports: bool,
}

impl Default for CopaConfig {
    fn default() -> Self {
        Self {
            delta: DELTA,
            competitive: true,
            min_rtt_window_us: MIN_RTT_WINDOW_US,
            half_rtt_reports: true,
        }
    }
}

impl CopaConfig {
    /// Sets `delta` (0.5 recommended; smaller means more throughput and more delay).
    #[must_use]
    pub fn delta(mut self, delta: f64) -> Self {
        self.delta = delta;
        self
    }

    /// Turns competitive mode on or off (on recommended).
    #[must_use]
    pub fn competitive(mut self, on: bool) -> Self {
        self.competitive = on;
        self
    }

    /// Reports every half RTT (on, recommended) or once per RTT.
    #[must_use]
    pub fn half_rtt_reports(mut self, on: bool) -> Self {
        self.half_rtt_reports = on;
        self
    }

    fn program(&self) -> &'static ProgramSpec {
        if self.half_rtt_reports {
            &PER_HALF_RTT
        } else {
            &PER_RTT_URGENT
        }
    }

    fn sanitized(self) -> Self {
        Self {
            delta: if self.delta.is_finite() && self.delta > 0.0 && self.delta <= 1.0 {
                self.delta
            } else {
                DELTA
            },
            min_rtt_window_us: self.min_rtt_window_us.max(1),
            ..self
        }
    }
}

impl AlgorithmConfig for CopaConfig {
    const NAME: &'static str = "copa";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        if self.half_rtt_reports {
            &PROGRAMS
        } else {
            &PROGRAMS_PER_RTT
        }
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        Box::new(Copa::new(*self, start))
    }
}

/// Copa's velocity state (§2.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Velocity {
    /// `v`.
    pub v: f64,
    /// Direction of the window's last change: +1 up, -1 down, 0 none yet.
    pub direction: i8,
    /// RTTs in that direction so far.
    pub same: u32,
}

impl Default for Velocity {
    fn default() -> Self {
        Self {
            v: 1.0,
            direction: 0,
            same: 0,
        }
    }
}

impl Velocity {
    /// One RTT in which the window moved in `direction`: once [`VELOCITY_RTTS`] RTTs have
    /// followed a change in the same direction, `v` doubles each RTT; a change of direction
    /// resets it to 1. `v` stays at most `max_v`.
    pub fn on_rtt(&mut self, direction: i8, max_v: f64) {
        if direction != 0 && direction == self.direction {
            self.same += 1;
            if self.same >= VELOCITY_RTTS {
                self.v *= 2.0;
            }
        } else {
            *self = Self {
                v: 1.0,
                direction,
                same: 0,
            };
        }
        self.v = self.v.min(max_v.max(1.0));
    }
}

/// The target rate `lambda_t = 1 / (delta d_q)` (§2 eq. 1), packets/s; infinite with no
/// queueing delay.
pub fn target_rate_pkts_per_sec(delta: f64, d_q_s: f64) -> f64 {
    if d_q_s <= 0.0 {
        f64::INFINITY
    } else {
        1.0 / (delta * d_q_s)
    }
}

/// The per-ACK window change `+-v / (delta cwnd)` summed over `acked_pkts` ACKs (§2.1 step 3),
/// packets, bounded to half the window.
pub fn window_step(cwnd_pkts: f64, acked_pkts: f64, v: f64, delta: f64, up: bool) -> f64 {
    let step = (acked_pkts * v / (delta * cwnd_pkts)).min(cwnd_pkts / 2.0);
    if up { step } else { -step }
}

/// Copa's mode (§2.2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// `delta` from the config.
    Default,
    /// `1/delta` by AIMD against buffer-filling flows.
    Competitive {
        /// `1/delta`.
        inv_delta: f64,
    },
}

/// Copa's per-flow state.
#[derive(Debug, Clone)]
pub struct Copa {
    cfg: CopaConfig,
    mss_bytes: u32,
    /// Window, packets.
    cwnd: f64,
    slow_start: bool,
    in_first_slow_start: bool,
    velocity: Velocity,
    mode: Mode,
    rtt_min: MinWindow,
    /// Per report: (time, `RTTstanding`, latest RTT), µs, newest last, the last 5 RTTs.
    history: VecDeque<(u64, u64, u64)>,
    /// The last velocity update: (time µs, window then), once per RTT (§2.1).
    velocity_stamp: Option<(u64, f64)>,
    /// `RTTstanding` of the latest report, µs.
    standing_us: u64,
    /// Window bounds until this time after a handoff: (until µs, low, high packets).
    handoff_clamp: Option<(u64, f64, f64)>,
    reports_since_handoff: u32,
    rtt: RttEstimator,
    last_loss_us: Option<u64>,
    now_us: u64,
}

impl Copa {
    /// A new flow with the initial window of `start`.
    pub fn new(cfg: CopaConfig, start: &FlowStart) -> Self {
        let mut c = Self {
            cfg: cfg.sanitized(),
            mss_bytes: start.mss_bytes.max(1),
            cwnd: MIN_CWND_PKTS,
            slow_start: true,
            in_first_slow_start: true,
            velocity: Velocity::default(),
            mode: Mode::Default,
            rtt_min: MinWindow::default(),
            history: VecDeque::new(),
            velocity_stamp: None,
            standing_us: 0,
            handoff_clamp: None,
            reports_since_handoff: 0,
            rtt: RttEstimator::default(),
            last_loss_us: None,
            now_us: 0,
        };
        c.adopt(&Handoff::flow_start(start));
        c.handoff_clamp = None;
        c
    }

    /// The current `delta`.
    pub fn delta(&self) -> f64 {
        match self.mode {
            Mode::Default => self.cfg.delta,
            Mode::Competitive { inv_delta } => 1.0 / inv_delta,
        }
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Window, packets.
    pub fn cwnd_pkts(&self) -> f64 {
        self.cwnd
    }

    fn max_cwnd(&self) -> f64 {
        (f64::from(u32::MAX) / f64::from(self.mss_bytes)).max(MIN_CWND_PKTS)
    }

    fn clamp(&self, w: f64) -> f64 {
        if w.is_nan() {
            MIN_CWND_PKTS
        } else {
            w.clamp(MIN_CWND_PKTS, self.max_cwnd())
        }
    }

    /// The window in bytes: at least 2 MSS, at most `u32::MAX` (which wins when an MSS of
    /// 2^31 or more makes 2 MSS larger).
    fn cwnd_bytes_u32(&self) -> u32 {
        let b = self.cwnd * f64::from(self.mss_bytes);
        let min = self.mss_bytes.saturating_mul(2);
        // `as` saturates a float (NaN to 0): the result is within [min, u32::MAX].
        (b as u32).max(min)
    }

    fn adopt(&mut self, h: &Handoff) {
        self.now_us = h.now_us;
        self.cwnd = self.clamp(f64::from(h.cwnd_bytes) / f64::from(self.mss_bytes));
        self.slow_start = h.in_first_slow_start;
        self.in_first_slow_start = h.in_first_slow_start;
        self.velocity = Velocity::default();
        self.mode = Mode::Default;
        self.rtt_min = MinWindow::default();
        self.rtt_min
            .update(h.now_us, h.min_rtt_us, self.cfg.min_rtt_window_us);
        self.history.clear();
        self.velocity_stamp = None;
        self.standing_us = h.srtt_us;
        self.rtt = RttEstimator::from_handoff(h.srtt_us, h.min_rtt_us);
        self.last_loss_us = h.last_loss_us;
        let rtt = if h.srtt_us > 0 {
            h.srtt_us
        } else {
            h.min_rtt_us
        };
        self.handoff_clamp = Some((
            h.now_us.saturating_add(rtt),
            self.clamp(self.cwnd / 2.0),
            self.clamp(self.cwnd * 2.0),
        ));
        self.reports_since_handoff = 0;
    }

    /// Pacing at `2 cwnd / RTTstanding` (§2.1); unpaced (explicitly) before any RTT.
    pub fn pacing(&self) -> Pacing {
        let rtt = if self.standing_us > 0 {
            self.standing_us
        } else {
            self.rtt.srtt_us()
        };
        if rtt == 0 {
            return Pacing::Unpaced;
        }
        let rate = 2.0 * self.cwnd * f64::from(self.mss_bytes) * 1e6 / rtt as f64;
        if rate.is_finite() {
            Pacing::BytesPerSec(rate.clamp(1.0, f64::from(u32::MAX - 1)) as u32)
        } else {
            Pacing::Unpaced
        }
    }

    /// Mode switching for one report (§2.2).
    fn update_mode(&mut self, standing_us: u64, latest_us: u64, rtt_min_us: u64, loss: bool) {
        let now = self.now_us;
        let rtt = self.rtt.srtt_us().max(standing_us).max(1);
        self.history
            .push_back((now, standing_us, latest_us.max(standing_us)));
        let span = rtt.saturating_mul(EMPTY_QUEUE_RTTS as u64);
        while self
            .history
            .front()
            .is_some_and(|&(t, _, _)| t.saturating_add(span) <= now)
        {
            self.history.pop_front();
        }
        if !self.cfg.competitive {
            return;
        }
        let recent = now.saturating_sub(rtt.saturating_mul(4));
        let rtt_max = self
            .history
            .iter()
            .filter(|&&(t, _, _)| t >= recent)
            .map(|&(_, _, l)| l)
            .max()
            .unwrap_or(0);
        // Two packets' worth of queue (at the current rate, `RTTstanding / cwnd` each) also
        // counts as nearly empty: a per-report minimum rarely sees the last packet leave.
        let two_packets_us = 2.0 * standing_us as f64 / self.cwnd.max(MIN_CWND_PKTS);
        let threshold = rtt_min_us as f64
            + (NEARLY_EMPTY * rtt_max.saturating_sub(rtt_min_us) as f64).max(two_packets_us);
        let emptied = self.history.iter().any(|&(_, s, _)| s as f64 <= threshold);
        // The history covers (nearly) 5 RTTs: its oldest report is at least 4 RTTs old.
        let full_history = self
            .history
            .front()
            .is_some_and(|&(t, _, _)| t.saturating_add(rtt.saturating_mul(4)) <= now);
        self.mode = match self.mode {
            _ if emptied || !full_history => Mode::Default,
            Mode::Default => Mode::Competitive {
                inv_delta: 1.0 / self.cfg.delta,
            },
            Mode::Competitive { inv_delta } => {
                // AIMD on 1/delta: +1 per RTT, halved on a loss, at least 1/delta_default.
                let next = if loss {
                    inv_delta / 2.0
                } else {
                    inv_delta + 1.0
                };
                Mode::Competitive {
                    inv_delta: next.clamp(1.0 / self.cfg.delta, 1e6),
                }
            }
        };
    }

    fn on_timeout(&mut self) {
        self.last_loss_us = Some(self.now_us);
        self.in_first_slow_start = false;
        self.cwnd = MIN_CWND_PKTS;
        self.slow_start = true;
        self.velocity = Velocity::default();
        self.velocity_stamp = None;
        self.handoff_clamp = None;
    }

    /// The velocity rule (§2.1), once per RTT: the direction is the sign of the window's change
    /// since the last update. Reports in between (half-RTT and loss reports) leave it alone.
    fn update_velocity(&mut self) {
        let rtt = self.rtt.srtt_us().max(self.standing_us);
        match self.velocity_stamp {
            None => self.velocity_stamp = Some((self.now_us, self.cwnd)),
            Some((t, w)) if self.now_us >= t.saturating_add(rtt) => {
                let direction = if self.cwnd > w { 1 } else { -1 };
                // Bound v so one RTT moves the window by at most `MAX_MOVE_PER_RTT` of it.
                self.velocity
                    .on_rtt(direction, self.delta() * self.cwnd * MAX_MOVE_PER_RTT);
                self.velocity_stamp = Some((self.now_us, self.cwnd));
            }
            Some(_) => {}
        }
    }
}

impl Algorithm for Copa {
    fn name(&self) -> &'static str {
        CopaConfig::NAME
    }

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        self.cfg.programs()
    }

    fn activate(&mut self, handoff: &Handoff) -> Control {
        self.adopt(handoff);
        Control::cwnd(self.cwnd_bytes_u32())
            .with_pacing(self.pacing())
            .with_program(self.cfg.program())
    }

    fn on_report(&mut self, m: &Measurement) -> Control {
        self.now_us = self.now_us.max(m.now_us);
        self.rtt.on_sample(m.rtt_us, m.min_rtt_us);
        if m.lost_pkts > 0 {
            self.last_loss_us = Some(self.now_us);
        }
        if m.timeout {
            self.on_timeout();
            return Control::cwnd(self.cwnd_bytes_u32()).with_pacing(self.pacing());
        }
        let standing = if m.min_rtt_us > 0 {
            m.min_rtt_us
        } else {
            m.rtt_us
        };
        if standing > 0 {
            self.rtt_min
                .update(self.now_us, standing, self.cfg.min_rtt_window_us);
            self.standing_us = standing;
            let rtt_min = self.rtt_min.get();
            self.update_mode(standing, m.rtt_us, rtt_min, m.lost_pkts > 0);
            let d_q_s = standing.saturating_sub(rtt_min) as f64 / 1e6;
            let target = target_rate_pkts_per_sec(self.delta(), d_q_s);
            let rate = self.cwnd / (standing as f64 / 1e6);
            // Every ACK counts, selective ones included: during a recovery the cumulative ACK
            // stalls for an RTT or more, and counting it alone froze the window at the size that
            // overflowed the buffer (20 % loss at 100 Mbit/s x 100 ms, 1 BDP). An ACK that
            // fills a hole counts its bytes again (at most once more per packet).
            let acked_pkts = m.acked_bytes.saturating_add(m.sacked_bytes) as f64
                / f64::from(self.mss_bytes);
            if self.slow_start {
                if rate <= target {
                    // §2.1: double per RTT while below the target rate.
                    self.cwnd = self.clamp(self.cwnd + acked_pkts.min(self.cwnd));
                } else {
                    self.slow_start = false;
                    self.in_first_slow_start = false;
                }
            }
            if !self.slow_start {
                let up = rate <= target;
                // A sudden change of direction while v is still large (built up in the other
                // direction) resets v to 1 at once (Copa's reference implementation, mvfst
                // `Copa::changeDirection`), rather than at the next per-RTT update.
                let direction = if up { 1 } else { -1 };
                if self.velocity.direction != direction && self.velocity.v > 1.0 {
                    self.velocity = Velocity {
                        v: 1.0,
                        direction,
                        same: 0,
                    };
                    self.velocity_stamp = Some((self.now_us, self.cwnd));
                }
                let step = window_step(
                    self.cwnd,
                    acked_pkts,
                    self.velocity.v,
                    self.delta(),
                    up,
                );
                self.cwnd = self.clamp(self.cwnd + step);
                self.update_velocity();
            }
        }
        self.reports_since_handoff = self.reports_since_handoff.saturating_add(1);
        if let Some((until_us, lo, hi)) = self.handoff_clamp {
            if self.now_us <= until_us || self.reports_since_handoff <= 1 {
                self.cwnd = self.cwnd.clamp(lo, hi);
            } else {
                self.handoff_clamp = None;
            }
        }
        Control::cwnd(self.cwnd_bytes_u32()).with_pacing(self.pacing())
    }

    fn handoff(&self) -> Handoff {
        Handoff {
            now_us: self.now_us,
            cwnd_bytes: self.cwnd_bytes_u32(),
            ssthresh_bytes: if self.slow_start {
                u32::MAX
            } else {
                self.cwnd_bytes_u32()
            },
            pacing: self.pacing(),
            srtt_us: self.rtt.srtt_us(),
            min_rtt_us: self.rtt_min.get(),
            delivery_rate_bytes_per_sec: (self.cwnd * f64::from(self.mss_bytes) * 1e6
                / self.standing_us.max(1) as f64) as u64,
            last_loss_us: self.last_loss_us,
            in_first_slow_start: self.in_first_slow_start,
        }
    }

    fn cwnd_bytes(&self) -> u32 {
        self.cwnd_bytes_u32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    fn copa() -> Copa {
        Copa::new(
            CopaConfig::default(),
            &FlowStart {
                sock_id: 1,
                mss_bytes: MSS,
                init_cwnd_bytes: 10 * MSS,
                seed: 0,
            },
        )
    }

    fn report(now_us: u64, acked_pkts: u64, standing_us: u64) -> Measurement {
        Measurement {
            now_us,
            acked_bytes: acked_pkts * u64::from(MSS),
            rtt_us: standing_us,
            min_rtt_us: standing_us,
            ..Measurement::default()
        }
    }

    /// Before this fix, `cwnd_bytes_u32` clamped to `[2 MSS, u32::MAX]`, which panics (min >
    /// max) once 2 MSS exceeds `u32::MAX`: one CREATE with an MSS of 2^31 took the agent down.
    #[test]
    fn any_mss_gives_a_window_within_two_mss_and_u32_max() {
        for mss in [0, 1, 1 << 31, u32::MAX] {
            let start = FlowStart {
                sock_id: 1,
                mss_bytes: mss,
                init_cwnd_bytes: u32::MAX,
                seed: 0,
            };
            let mut c = Copa::new(CopaConfig::default(), &start);
            let floor = mss.max(1).saturating_mul(2);
            assert!(c.cwnd_bytes() >= floor, "MSS {mss}");
            let m = Measurement {
                now_us: 10_000,
                acked_bytes: u64::MAX,
                rtt_us: 1,
                min_rtt_us: 1,
                ..Measurement::default()
            };
            let control = c.on_report(&m);
            assert_eq!(control.cwnd_bytes, Some(c.cwnd_bytes()));
            assert!(c.cwnd_bytes() >= floor, "MSS {mss}");
            assert!(c.cwnd_pkts().is_finite());
        }
    }

    #[test]
    fn the_target_rate_is_one_over_delta_times_the_queueing_delay() {
        // §2 eq. 1: 1 / (0.5 x 10 ms) = 200 packets/s.
        assert!((target_rate_pkts_per_sec(0.5, 0.010) - 200.0).abs() < 1e-9);
        assert!(target_rate_pkts_per_sec(0.5, 0.0).is_infinite());
    }

    #[test]
    fn one_report_applies_the_per_ack_step_for_every_acked_packet() {
        // §2.1 step 3: v / (delta cwnd) per ACK; a window of ACKs moves cwnd by v / delta.
        assert!((window_step(20.0, 20.0, 1.0, 0.5, true) - 2.0).abs() < 1e-12);
        assert!((window_step(20.0, 20.0, 2.0, 0.5, false) + 4.0).abs() < 1e-12);
        assert!(
            (window_step(4.0, 100.0, 8.0, 0.5, false) + 2.0).abs() < 1e-12,
            "bounded"
        );
    }

    #[test]
    fn velocity_doubles_after_three_rtts_in_one_direction_and_resets_on_a_flip() {
        // §2.1.
        // The RTT of a change counts 0; the third RTT in the same direction after it doubles v
        // (as Copa's reference implementation, mvfst, counts).
        let mut v = Velocity::default();
        for expected in [1.0, 1.0, 1.0, 2.0, 4.0, 8.0] {
            v.on_rtt(1, 1e9);
            assert!((v.v - expected).abs() < 1e-12, "{v:?}");
        }
        v.on_rtt(-1, 1e9);
        assert!((v.v - 1.0).abs() < 1e-12);
        v.on_rtt(-1, 1e9);
        v.on_rtt(-1, 1e9);
        v.on_rtt(-1, 1.5);
        assert!((v.v - 1.5).abs() < 1e-12, "capped");
    }

    #[test]
    fn rtt_min_is_the_minimum_of_the_last_ten_seconds() {
        let mut w = MinWindow::default();
        w.update(0, 50_000, MIN_RTT_WINDOW_US);
        w.update(1_000_000, 70_000, MIN_RTT_WINDOW_US);
        assert_eq!(w.get(), 50_000);
        w.update(10_500_000, 80_000, MIN_RTT_WINDOW_US);
        assert_eq!(w.get(), 70_000);
        w.update(10_600_000, 0, MIN_RTT_WINDOW_US);
        assert_eq!(w.get(), 70_000, "no sample, no change");
    }

    #[test]
    fn slow_start_doubles_until_the_rate_exceeds_the_target() {
        let mut c = copa();
        c.on_report(&report(50_000, 10, 50_000));
        assert!((c.cwnd_pkts() - 20.0).abs() < 1e-9, "no queue: double");
        // 10 ms of queue: target 200 pkts/s; 20 pkts / 60 ms = 333 pkts/s is above it.
        c.on_report(&report(110_000, 20, 60_000));
        assert!(!c.slow_start);
        assert!(c.cwnd_pkts() < 20.0, "above the target: the window shrinks");
    }

    #[test]
    fn the_window_moves_towards_the_target_by_v_over_delta_per_rtt() {
        let mut c = copa();
        c.slow_start = false;
        c.cwnd = 20.0;
        c.on_report(&report(50_000, 20, 50_000));
        assert!(
            (c.cwnd_pkts() - 22.0).abs() < 1e-9,
            "below target: + v / delta"
        );
        c.on_report(&report(100_000, 22, 80_000));
        assert!(
            (c.cwnd_pkts() - 20.0).abs() < 1e-9,
            "above target: - v / delta"
        );
    }

    #[test]
    fn a_queue_that_never_empties_for_five_rtts_switches_to_competitive_mode() {
        // §2.2.
        let mut c = copa();
        c.on_report(&report(50_000, 10, 50_000));
        let mut t = 50_000;
        for _ in 0..5 {
            t += 100_000;
            c.on_report(&report(t, 10, 100_000));
        }
        assert!(
            matches!(c.mode(), Mode::Competitive { .. }),
            "{:?}",
            c.mode()
        );
        let d = c.delta();
        t += 100_000;
        c.on_report(&report(t, 10, 100_000));
        assert!(c.delta() < d, "1/delta grows by one per RTT");
        let d = c.delta();
        t += 100_000;
        c.on_report(&Measurement {
            lost_pkts: 1,
            ..report(t, 10, 100_000)
        });
        assert!(c.delta() > d, "and halves on a loss");
        t += 100_000;
        c.on_report(&report(t, 10, 51_000));
        assert_eq!(c.mode(), Mode::Default, "the queue emptied");
        assert!((c.delta() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn a_handoff_past_slow_start_keeps_the_window_and_sets_pacing() {
        let mut c = copa();
        let h = Handoff {
            now_us: 1_000_000,
            cwnd_bytes: 50_000,
            srtt_us: 60_000,
            min_rtt_us: 50_000,
            in_first_slow_start: false,
            ..Handoff::flow_start(&FlowStart {
                sock_id: 1,
                mss_bytes: MSS,
                init_cwnd_bytes: 10 * MSS,
                seed: 0,
            })
        };
        let ctl = c.activate(&h);
        assert_eq!(ctl.cwnd_bytes, Some(50_000));
        assert!(matches!(ctl.pacing, Some(Pacing::BytesPerSec(r)) if r > 0));
        assert!(!c.slow_start);
        c.on_report(&report(1_060_000, 50, 50_000));
        assert!(c.cwnd_pkts() <= 100.0 && c.cwnd_pkts() >= 25.0);
    }

    #[test]
    fn reports_within_one_rtt_leave_the_velocity_alone() {
        // Before this fix, every report updated v: a loss report with nothing acknowledged
        // (no window change) reset v to 1, so behind a full buffer v never grew and a window
        // twice the path's took seconds to come down.
        let mut c = copa();
        c.slow_start = false;
        c.cwnd = 100.0;
        // RTTmin 50 ms; then a standing queue of 30 ms: the window must come down.
        c.on_report(&report(1, 1, 50_000));
        let mut t = 0;
        for _ in 0..12 {
            t += 50_000;
            c.on_report(&report(t, 50, 80_000));
            c.on_report(&Measurement {
                lost_pkts: 1,
                ..report(t + 1, 0, 80_000)
            });
        }
        assert!(c.velocity.v >= 2.0, "{:?}", c.velocity);
        assert_eq!(c.velocity.direction, -1);
    }

    #[test]
    fn a_decision_against_a_large_velocity_resets_it_at_once() {
        // mvfst Copa::changeDirection: v built up going down does not carry into going up.
        let mut c = copa();
        c.slow_start = false;
        c.cwnd = 100.0;
        c.velocity = Velocity {
            v: 8.0,
            direction: -1,
            same: 5,
        };
        c.on_report(&report(50_000, 50, 50_000));
        assert!((c.velocity.v - 1.0).abs() < 1e-12);
        assert_eq!(c.velocity.direction, 1);
        assert!((c.cwnd_pkts() - 101.0).abs() < 1e-9, "+ n v / (delta cwnd) with v = 1");
    }

    #[test]
    fn the_velocity_moves_the_window_by_at_most_an_eighth_per_rtt() {
        let mut v = Velocity::default();
        for _ in 0..20 {
            v.on_rtt(1, 0.5 * 100.0 * MAX_MOVE_PER_RTT);
        }
        assert!((v.v / 0.5 - 100.0 / 8.0).abs() < 1e-9, "{v:?}");
    }

    #[test]
    fn a_timeout_returns_to_two_packets() {
        let mut c = copa();
        c.on_report(&Measurement {
            timeout: true,
            ..report(50_000, 0, 50_000)
        });
        assert_eq!(c.cwnd_bytes(), 2 * MSS);
    }
}
