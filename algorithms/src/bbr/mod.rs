//! BBR v1 (Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM Queue 2016;
//! draft-cardwell-iccrg-bbr-congestion-control-00), per report.
//!
//! Model: BBR estimates the path's bottleneck bandwidth `BtlBw` and round-trip propagation
//! time `RTprop`, paces at `pacing_gain x BtlBw` and caps the flight at
//! `cwnd_gain x BDP` (`BDP = BtlBw x RTprop`):
//! - `BtlBw` = max delivery rate over the last 10 rounds ([`filter::MaxFilter`], draft §4.1.1);
//! - `RTprop` = min RTT, replaced once 10 s old ([`filter::MinRtt`], §4.1.2);
//! - `pacing_rate = pacing_gain x BtlBw` (§4.2.1); before any bandwidth sample,
//!   `high_gain x cwnd / SRTT` (1 ms without an RTT);
//! - `cwnd = cwnd_gain x BDP + 3 MSS` of quanta (§4.2.3.2, Linux's `3 x tso_segs_goal`),
//!   reached by growing `cwnd += acked` (§4.2.3.4), never below 4 packets.
//!
//! ```text
//!   Startup --(full pipe: 3 rounds < 25 % growth)--> Drain --(inflight <= BDP)--> ProbeBW
//!      ^                                                                           |  ^
//!      +--(pipe never filled)-- ProbeRTT <--(RTprop 10 s old)----------------------+  |
//!                                   +--(200 ms and one round at 4 packets)------------+
//! ```
//! - `Startup` ([`startup`]): pacing gain `2/ln 2 = 2.885`, cwnd gain 2.
//! - `Drain`: pacing gain `1/2.885`, cwnd gain 2, until the flight is down to one BDP.
//! - `ProbeBW` ([`probe_bw`]): pacing gains `[1.25, 0.75, 1, 1, 1, 1, 1, 1]`, each phase one
//!   `RTprop`, starting at a random phase (never 0.75) drawn from [`FlowStart::seed`]; cwnd
//!   gain 2.
//! - `ProbeRTT` ([`probe_rtt`]): cwnd 4 packets, pacing gain 1, for `max(200 ms, 1 round)`.
//!
//! Defaults ([`BbrConfig`]): the gains above, `BtlBw` window 10 rounds, `RTprop` window 10 s,
//! `ProbeRTT` 200 ms, 4-packet minimum window.
//!
//! Simplified: the agent sees one report per RTT ([`PER_RTT`]), not each ACK, so
//! - a round trip is one report (with acknowledged data), and the delivery-rate sample of a round is
//!   the largest per-ACK sample of the interval (the datapath's `Flow.rate_incoming`, Linux's
//!   rate sample); samples are not marked application-limited (the suite's flows are bulk);
//! - the per-ACK phase checks run once per report, so a `ProbeBW` phase lasts at least one
//!   report interval (about one RTT, which is `RTprop` plus the standing queue);
//! - loss recovery is coarse: on a loss report the window falls to what is in flight plus
//!   what was just acknowledged (packet conservation, §4.2.3.4 / Linux `bbr_set_cwnd_to_recover`)
//!   and the window before is restored one round after the last loss; a timeout drops the
//!   window to 2 MSS (the suite's loss window) and regrowth follows the `cwnd += acked` rule;
//! - idle restart (§4.3.4.4) and the long-term (policer) bandwidth mode of Linux are absent.
//!
//! A handoff from a flow still in its first slow start continues in `Startup`; any other
//! handoff goes to `ProbeBW` with the pipe counted as full, `BtlBw` seeded from the handed-over
//! delivery rate (or `cwnd / SRTT`) and `RTprop` from its min RTT. During the first RTT after
//! a handoff the window stays within a factor of two of the handed-over one.

pub mod filter;
pub mod probe_bw;
pub mod probe_rtt;
pub mod startup;

use crate::api::{
    Algorithm, AlgorithmConfig, Control, FlowStart, Handoff, Measurement, Pacing, SplitMix64,
};
use crate::programs::{PER_RTT, ProgramSpec};
use crate::rtt::RttEstimator;

use filter::{MaxFilter, MinRtt};
use probe_bw::GainCycle;
use probe_rtt::{MIN_PIPE_CWND_PKTS, MIN_RTT_WINDOW_US, PROBE_RTT_DURATION_US, ProbeRtt};
use startup::{FullPipe, HIGH_GAIN};

/// draft §4.1.1: `BtlBwFilterLen`, round trips.
pub const BTL_BW_WINDOW_ROUNDS: u64 = 10;
/// draft §4.2.3.2 / Linux `bbr_cwnd_gain`: cwnd gain outside `ProbeRTT`.
pub const CWND_GAIN: f64 = 2.0;
/// Linux `bbr_quantization_budget`: segments added to the target window for send quanta.
pub const QUANTA_SEGMENTS: u64 = 3;
/// The window after a retransmission timeout, segments (the suite's loss window).
pub const LOSS_WINDOW_SEGMENTS: u32 = 2;

/// Programs BBR installs: it needs no urgent loss report.
static PROGRAMS: [&ProgramSpec; 1] = [&PER_RTT];

/// BBR's configuration and factory.
#[derive(Debug, Clone, Copy)]
pub struct BbrConfig {
    /// `Startup` pacing gain (2/ln 2 = 2.885 recommended); `Drain` uses its inverse.
    pub high_gain: f64,
    /// `Startup` cwnd gain (2 recommended).
    pub startup_cwnd_gain: f64,
    /// cwnd gain in `Drain` and `ProbeBW` (2 recommended).
    pub cwnd_gain: f64,
    /// `BtlBw` filter window, rounds (10 recommended).
    pub bw_window_rounds: u64,
    /// `RTprop` filter window, µs (10 s recommended).
    pub min_rtt_window_us: u64,
    /// `ProbeRTT` duration, µs (200 ms recommended).
    pub probe_rtt_duration_us: u64,
}

impl Default for BbrConfig {
    fn default() -> Self {
        Self {
            high_gain: HIGH_GAIN,
            startup_cwnd_gain: CWND_GAIN,
            cwnd_gain: CWND_GAIN,
            bw_window_rounds: BTL_BW_WINDOW_ROUNDS,
            min_rtt_window_us: MIN_RTT_WINDOW_US,
            probe_rtt_duration_us: PROBE_RTT_DURATION_US,
        }
    }
}

impl BbrConfig {
    /// Sets the `Startup` pacing gain (2.885 recommended; above 1).
    #[must_use]
    pub fn high_gain(mut self, gain: f64) -> Self {
        self.high_gain = gain;
        self
    }

    /// Sets the cwnd gain of `Drain` and `ProbeBW` (2 recommended; at least 1).
    #[must_use]
    pub fn cwnd_gain(mut self, gain: f64) -> Self {
        self.cwnd_gain = gain;
        self
    }

    /// Sets the `RTprop` window, µs (10 s recommended).
    #[must_use]
    pub fn min_rtt_window_us(mut self, us: u64) -> Self {
        self.min_rtt_window_us = us;
        self
    }

    /// The parameters with out-of-range values replaced by the defaults.
    fn sanitized(self) -> Self {
        let d = Self::default();
        let gain = |g: f64, min: f64, def: f64| if g.is_finite() && g >= min { g } else { def };
        Self {
            high_gain: gain(self.high_gain, 1.0, d.high_gain),
            startup_cwnd_gain: gain(self.startup_cwnd_gain, 1.0, d.startup_cwnd_gain),
            cwnd_gain: gain(self.cwnd_gain, 1.0, d.cwnd_gain),
            bw_window_rounds: self.bw_window_rounds.max(1),
            min_rtt_window_us: self.min_rtt_window_us.max(1),
            probe_rtt_duration_us: self.probe_rtt_duration_us,
        }
    }
}

impl AlgorithmConfig for BbrConfig {
    const NAME: &'static str = "bbr";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &PROGRAMS
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        Box::new(Bbr::new(*self, start))
    }
}

/// BBR's state (draft §4.3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// Exponential search for the bottleneck bandwidth.
    Startup,
    /// Draining the queue `Startup` built.
    Drain,
    /// Cruising with the gain cycle.
    ProbeBw(GainCycle),
    /// Draining the flight to refresh `RTprop`.
    ProbeRtt(ProbeRtt),
}

/// BBR's per-flow state.
#[derive(Debug, Clone)]
pub struct Bbr {
    cfg: BbrConfig,
    mss_bytes: u32,
    mode: Mode,
    cwnd_bytes: u32,
    pacing_bytes_per_sec: u64,
    /// Whether the pacing rate came from a bandwidth estimate (not the initial guess).
    paced_from_bw: bool,
    btl_bw: MaxFilter,
    min_rtt: MinRtt,
    full_pipe: FullPipe,
    round: u64,
    /// Window before `ProbeRTT` or a loss, restored afterwards, bytes.
    prior_cwnd_bytes: u32,
    /// The round of the last loss, while recovering.
    recovery_round: Option<u64>,
    /// Bounds on the window until this time after a handoff: (until µs, low, high bytes).
    handoff_clamp: Option<(u64, u32, u32)>,
    rng: SplitMix64,
    rtt: RttEstimator,
    last_loss_us: Option<u64>,
    now_us: u64,
}

impl Bbr {
    /// A new flow with the initial window of `start`.
    pub fn new(cfg: BbrConfig, start: &FlowStart) -> Self {
        let cfg = cfg.sanitized();
        let mut b = Self {
            cfg,
            mss_bytes: start.mss_bytes.max(1),
            mode: Mode::Startup,
            cwnd_bytes: 0,
            pacing_bytes_per_sec: 0,
            paced_from_bw: false,
            btl_bw: MaxFilter::new(cfg.bw_window_rounds),
            min_rtt: MinRtt::default(),
            full_pipe: FullPipe::default(),
            round: 0,
            prior_cwnd_bytes: 0,
            recovery_round: None,
            handoff_clamp: None,
            rng: SplitMix64::new(start.seed),
            rtt: RttEstimator::default(),
            last_loss_us: None,
            now_us: 0,
        };
        b.adopt(&Handoff::flow_start(start));
        b.handoff_clamp = None;
        b
    }

    /// The current state.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// `BtlBw`, bytes/s (0: no estimate).
    pub fn btl_bw_bytes_per_sec(&self) -> u64 {
        self.btl_bw.get()
    }

    /// `RTprop`, µs (0: no estimate).
    pub fn min_rtt_us(&self) -> u64 {
        self.min_rtt.rtt_us
    }

    /// `BDP = BtlBw x RTprop`, bytes (0: no estimate).
    pub fn bdp_bytes(&self) -> u64 {
        (u128::from(self.btl_bw.get()) * u128::from(self.min_rtt.rtt_us) / 1_000_000)
            .min(u128::from(u64::MAX)) as u64
    }

    /// The current pacing gain (draft §4.3).
    pub fn pacing_gain(&self) -> f64 {
        match self.mode {
            Mode::Startup => self.cfg.high_gain,
            Mode::Drain => 1.0 / self.cfg.high_gain,
            Mode::ProbeBw(c) => c.gain(),
            Mode::ProbeRtt(_) => 1.0,
        }
    }

    /// The current cwnd gain (draft §4.3).
    pub fn cwnd_gain(&self) -> f64 {
        match self.mode {
            Mode::Startup => self.cfg.startup_cwnd_gain,
            Mode::Drain | Mode::ProbeBw(_) => self.cfg.cwnd_gain,
            Mode::ProbeRtt(_) => 1.0,
        }
    }

    fn min_cwnd(&self) -> u64 {
        u64::from(self.mss_bytes) * u64::from(MIN_PIPE_CWND_PKTS)
    }

    fn loss_window(&self) -> u64 {
        u64::from(self.mss_bytes) * u64::from(LOSS_WINDOW_SEGMENTS)
    }

    /// `cwnd_gain x BDP + quanta` (draft §4.2.3.2), bytes; `None` without a model yet.
    pub fn target_cwnd_bytes(&self, gain: f64) -> Option<u64> {
        let bdp = self.bdp_bytes();
        (bdp > 0).then(|| {
            let quanta = QUANTA_SEGMENTS * u64::from(self.mss_bytes);
            ((gain * bdp as f64) as u64).saturating_add(quanta)
        })
    }

    fn set_cwnd(&mut self, bytes: u64) {
        let floor = self.loss_window();
        self.cwnd_bytes = u32::try_from(bytes.max(floor)).unwrap_or(u32::MAX);
    }

    fn adopt(&mut self, h: &Handoff) {
        self.now_us = h.now_us;
        self.rtt = RttEstimator::from_handoff(h.srtt_us, h.min_rtt_us);
        self.min_rtt = MinRtt {
            rtt_us: h.min_rtt_us,
            stamp_us: h.now_us,
        };
        self.last_loss_us = h.last_loss_us;
        self.recovery_round = None;
        self.set_cwnd(u64::from(h.cwnd_bytes).max(self.min_cwnd()));
        self.prior_cwnd_bytes = self.cwnd_bytes;
        let srtt = if h.srtt_us > 0 {
            h.srtt_us
        } else {
            h.min_rtt_us
        };
        let bw = if h.delivery_rate_bytes_per_sec > 0 {
            h.delivery_rate_bytes_per_sec
        } else {
            u64::from(h.cwnd_bytes)
                .saturating_mul(1_000_000)
                .checked_div(srtt)
                .unwrap_or(0)
        };
        self.btl_bw.reset(self.round, bw);
        self.full_pipe = FullPipe::default();
        if h.in_first_slow_start {
            self.mode = Mode::Startup;
        } else {
            self.full_pipe.set_filled();
            self.mode = Mode::ProbeBw(GainCycle::enter(h.now_us, &mut self.rng));
        }
        let lo = (self.cwnd_bytes / 2).max(self.loss_window() as u32);
        let hi = self.cwnd_bytes.saturating_mul(2);
        self.handoff_clamp = Some((h.now_us.saturating_add(srtt), lo, hi));
        self.set_pacing();
    }

    /// `pacing_rate = pacing_gain x BtlBw` (draft §4.2.1); before a bandwidth sample,
    /// `high_gain x cwnd / SRTT` (1 ms without an RTT). In `Startup` the rate never falls.
    fn set_pacing(&mut self) {
        let gain = self.pacing_gain();
        let bw = self.btl_bw.get();
        let rate = if bw > 0 {
            gain * bw as f64
        } else {
            let srtt = if self.rtt.srtt_us() > 0 {
                self.rtt.srtt_us()
            } else {
                1_000
            };
            self.cfg.high_gain * f64::from(self.cwnd_bytes) * 1e6 / srtt as f64
        };
        let rate = if rate.is_finite() { rate as u64 } else { 0 };
        self.pacing_bytes_per_sec =
            if matches!(self.mode, Mode::Startup) && bw > 0 && self.paced_from_bw {
                rate.max(self.pacing_bytes_per_sec)
            } else {
                rate
            }
            .clamp(1, u64::from(Pacing::UNPACED_RATE - 1));
        self.paced_from_bw = bw > 0;
    }

    /// The pacing rate sent to the datapath.
    pub fn pacing(&self) -> Pacing {
        Pacing::BytesPerSec(self.pacing_bytes_per_sec.clamp(1, u64::from(u32::MAX - 1)) as u32)
    }

    /// Updates the path model and the state machine (draft §4.3) for one report.
    fn update_model_and_state(&mut self, m: &Measurement) {
        let acked = m.acked_bytes > 0;
        if acked {
            self.round = self.round.saturating_add(1);
            if m.rate_incoming_bytes_per_sec > 0 {
                self.btl_bw
                    .update(self.round, m.rate_incoming_bytes_per_sec);
            } else {
                self.btl_bw.expire(self.round);
            }
        }
        let sample = if m.min_rtt_us > 0 {
            m.min_rtt_us
        } else {
            m.rtt_us
        };
        let rtt_expired = self
            .min_rtt
            .update(self.now_us, sample, self.cfg.min_rtt_window_us);
        let bdp = self.bdp_bytes();
        match self.mode {
            Mode::Startup => {
                if acked && self.full_pipe.on_round(self.btl_bw.get()) {
                    self.mode = Mode::Drain;
                }
            }
            Mode::Drain => {}
            Mode::ProbeBw(mut c) => {
                if c.is_next_phase(
                    self.now_us,
                    self.min_rtt.rtt_us,
                    m.inflight_bytes,
                    bdp,
                    m.congestion(),
                ) {
                    c.advance(self.now_us);
                }
                self.mode = Mode::ProbeBw(c);
            }
            Mode::ProbeRtt(mut p) => {
                let done = p.on_report(
                    self.now_us,
                    self.round,
                    m.inflight_bytes,
                    self.min_cwnd(),
                    self.cfg.probe_rtt_duration_us,
                );
                self.mode = Mode::ProbeRtt(p);
                if done {
                    // draft §4.3.4.3 BBRExitProbeRTT: RTprop is fresh again.
                    self.min_rtt.stamp_us = self.now_us;
                    self.set_cwnd(u64::from(self.cwnd_bytes.max(self.prior_cwnd_bytes)));
                    self.mode = if self.full_pipe.filled {
                        Mode::ProbeBw(GainCycle::enter(self.now_us, &mut self.rng))
                    } else {
                        Mode::Startup
                    };
                }
            }
        }
        if self.mode == Mode::Drain && startup::drained(m.inflight_bytes, self.bdp_bytes()) {
            self.mode = Mode::ProbeBw(GainCycle::enter(self.now_us, &mut self.rng));
        }
        if rtt_expired && !matches!(self.mode, Mode::ProbeRtt(_)) {
            // draft §4.3.4.2: enter ProbeRTT.
            self.prior_cwnd_bytes = self.cwnd_bytes;
            self.mode = Mode::ProbeRtt(ProbeRtt::default());
        }
    }

    /// The window for one report (draft §4.2.3): grow by the acknowledged bytes towards
    /// `cwnd_gain x BDP`, packet conservation after a loss, 4 packets in `ProbeRTT`.
    fn update_cwnd(&mut self, m: &Measurement) {
        let cwnd = u64::from(self.cwnd_bytes);
        let mut next = cwnd;
        let mut conserve = false;
        if m.lost_pkts > 0 {
            self.last_loss_us = Some(self.now_us);
            if self.recovery_round.is_none() {
                self.prior_cwnd_bytes = self.cwnd_bytes;
                // Packet conservation: what is in flight plus what was just delivered.
                next = m.inflight_bytes.saturating_add(m.acked_bytes).min(cwnd);
                conserve = true;
            }
            self.recovery_round = Some(self.round);
        } else if let Some(r) = self.recovery_round
            && self.round > r.saturating_add(1)
        {
            self.recovery_round = None;
            next = next.max(u64::from(self.prior_cwnd_bytes));
        }
        let target = self.target_cwnd_bytes(self.cwnd_gain());
        next = match target {
            _ if conserve => next,
            Some(t) if self.full_pipe.filled => next.saturating_add(m.acked_bytes).min(t),
            Some(t) if next < t => next.saturating_add(m.acked_bytes),
            Some(_) => next,
            None => next.saturating_add(m.acked_bytes),
        };
        next = next.max(self.min_cwnd());
        if matches!(self.mode, Mode::ProbeRtt(_)) {
            next = next.min(self.min_cwnd());
        }
        if let Some((until_us, lo, hi)) = self.handoff_clamp {
            if self.now_us <= until_us || self.round <= 1 {
                next = next.clamp(u64::from(lo), u64::from(hi));
            } else {
                self.handoff_clamp = None;
            }
        }
        self.set_cwnd(next);
    }

    /// A retransmission timeout: back to the loss window; the window before is restored once
    /// the flow delivers again (Linux `bbr_undo_cwnd` / `prior_cwnd`).
    fn on_timeout(&mut self) {
        self.last_loss_us = Some(self.now_us);
        if self.recovery_round.is_none() {
            self.prior_cwnd_bytes = self.cwnd_bytes;
        }
        self.recovery_round = Some(self.round);
        self.handoff_clamp = None;
        self.set_cwnd(self.loss_window());
    }
}

impl Algorithm for Bbr {
    fn name(&self) -> &'static str {
        BbrConfig::NAME
    }

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &PROGRAMS
    }

    fn activate(&mut self, handoff: &Handoff) -> Control {
        self.adopt(handoff);
        Control::cwnd(self.cwnd_bytes)
            .with_pacing(self.pacing())
            .with_program(&PER_RTT)
    }

    fn on_report(&mut self, m: &Measurement) -> Control {
        self.now_us = self.now_us.max(m.now_us);
        self.rtt.on_sample(m.rtt_us, m.min_rtt_us);
        self.update_model_and_state(m);
        if m.timeout {
            self.on_timeout();
        } else {
            self.update_cwnd(m);
        }
        self.set_pacing();
        Control::cwnd(self.cwnd_bytes).with_pacing(self.pacing())
    }

    fn handoff(&self) -> Handoff {
        Handoff {
            now_us: self.now_us,
            cwnd_bytes: self.cwnd_bytes,
            ssthresh_bytes: if self.full_pipe.filled {
                self.cwnd_bytes
            } else {
                u32::MAX
            },
            pacing: self.pacing(),
            srtt_us: self.rtt.srtt_us(),
            min_rtt_us: self.min_rtt.rtt_us,
            delivery_rate_bytes_per_sec: self.btl_bw.get(),
            last_loss_us: self.last_loss_us,
            in_first_slow_start: !self.full_pipe.filled,
        }
    }

    fn cwnd_bytes(&self) -> u32 {
        self.cwnd_bytes
    }
}

#[cfg(test)]
mod tests;
