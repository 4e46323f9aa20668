//! Reno with `NewReno`'s one-reduction-per-window recovery (RFC 5681, RFC 6582), per report.
//!
//! Model (all in bytes, SMSS = the flow's MSS):
//! - Slow start while `cwnd < ssthresh` (RFC 5681 §3.1, with RFC 3465 byte counting):
//!   `cwnd += acked`, up to `ssthresh`; the rest of the acked bytes count towards avoidance.
//! - Congestion avoidance (RFC 5681 §3.1, eq. 3 in byte-counting form): one SMSS per window of
//!   acknowledged bytes, i.e. `cwnd += SMSS` each time `cwnd` bytes have been acked.
//! - Loss (RFC 5681 §3.2 eq. 4, RFC 6582 §3.2 step 3): `ssthresh = max(cwnd / 2, 2 SMSS)`,
//!   `cwnd = ssthresh`; further losses are ignored until recovery ends.
//! - Timeout (RFC 5681 §3.1, eq. 4 and the loss window): `ssthresh = max(cwnd / 2, 2 SMSS)`,
//!   `cwnd = LW`, then slow start again.
//!
//! Defaults: initial window from the datapath (RFC 6928's 10 segments in the simulator),
//! `ssthresh` unbounded at start. No pacing (the rate is explicitly cleared on activation).
//!
//! Simplified: the agent sees one report per RTT (or at once on loss), not each ACK, so
//! - `NewReno`'s recovery point (the highest sequence sent when loss was detected) is unknown;
//!   recovery ends once twice the window at the reduction has been acknowledged in order and
//!   one smoothed RTT has passed, or after two smoothed RTTs at most ([`crate::recovery`]);
//! - the window is not inflated by duplicate ACKs in fast recovery (the datapath's SACK
//!   scoreboard retransmits; `cwnd` stays at `ssthresh` during recovery);
//! - `ssthresh` halves `cwnd`, not `FlightSize` (as Linux's `tcp_reno_ssthresh`), since the
//!   in-flight count at the report can already exclude the lost packets;
//! - the loss window is 2 SMSS, not 1: the suite keeps every window at or above 2 SMSS.

use crate::api::{Algorithm, AlgorithmConfig, Control, FlowStart, Handoff, Measurement, Pacing};
use crate::programs::{PER_RTT_URGENT, ProgramSpec};
use crate::recovery::Recovery;
use crate::rtt::RttEstimator;

/// Programs Reno installs.
static PROGRAMS: [&ProgramSpec; 1] = [&PER_RTT_URGENT];

/// Smallest window, in segments (the suite's floor; RFC 5681's loss window is 1).
pub const MIN_CWND_SEGMENTS: u32 = 2;

/// Reno's configuration and factory.
#[derive(Debug, Clone, Copy, Default)]
pub struct RenoConfig {
    /// Initial window override, bytes (`None`: the datapath's, recommended).
    pub init_cwnd_bytes: Option<u32>,
}

impl RenoConfig {
    /// Sets the initial window (bytes); the datapath's value is the recommended default.
    #[must_use]
    pub fn init_cwnd_bytes(mut self, bytes: u32) -> Self {
        self.init_cwnd_bytes = Some(bytes);
        self
    }
}

impl AlgorithmConfig for RenoConfig {
    const NAME: &'static str = "reno";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &PROGRAMS
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        let mut start = *start;
        if let Some(iw) = self.init_cwnd_bytes {
            start.init_cwnd_bytes = iw;
        }
        Box::new(Reno::new(&start))
    }
}

/// Reno's per-flow state.
#[derive(Debug, Clone)]
pub struct Reno {
    mss_bytes: u32,
    cwnd_bytes: u32,
    ssthresh_bytes: u32,
    /// Bytes acked in congestion avoidance since the last one-SMSS increase.
    ca_acked_bytes: u64,
    recovery: Recovery,
    last_loss_us: Option<u64>,
    in_first_slow_start: bool,
    rtt: RttEstimator,
    delivery_rate_bytes_per_sec: u64,
    now_us: u64,
}

impl Reno {
    /// A new flow with the initial window of `start`.
    pub fn new(start: &FlowStart) -> Self {
        let h = Handoff::flow_start(start);
        let mut r = Self {
            mss_bytes: start.mss_bytes.max(1),
            cwnd_bytes: 0,
            ssthresh_bytes: u32::MAX,
            ca_acked_bytes: 0,
            recovery: Recovery::default(),
            last_loss_us: None,
            in_first_slow_start: true,
            rtt: RttEstimator::default(),
            delivery_rate_bytes_per_sec: 0,
            now_us: 0,
        };
        r.adopt(&h);
        r
    }

    fn min_cwnd(&self) -> u32 {
        self.mss_bytes.saturating_mul(MIN_CWND_SEGMENTS)
    }

    fn adopt(&mut self, h: &Handoff) {
        self.now_us = h.now_us;
        self.cwnd_bytes = h.cwnd_bytes.max(self.min_cwnd());
        self.in_first_slow_start = h.in_first_slow_start;
        self.ssthresh_bytes = if h.in_first_slow_start {
            h.ssthresh_bytes
        } else {
            // Out of slow start: continue in congestion avoidance at the handed-over window.
            h.ssthresh_bytes.min(self.cwnd_bytes)
        };
        self.ca_acked_bytes = 0;
        self.recovery = Recovery::default();
        self.last_loss_us = h.last_loss_us;
        self.rtt = RttEstimator::from_handoff(h.srtt_us, h.min_rtt_us);
        self.delivery_rate_bytes_per_sec = h.delivery_rate_bytes_per_sec;
    }

    /// Slow start and congestion avoidance for `acked` bytes (RFC 5681 §3.1, RFC 3465).
    pub fn on_acked(&mut self, acked_bytes: u64) {
        let mut acked = acked_bytes;
        if self.cwnd_bytes < self.ssthresh_bytes {
            let room = u64::from(self.ssthresh_bytes - self.cwnd_bytes);
            let grow = acked.min(room);
            self.cwnd_bytes = clamp_u32(u64::from(self.cwnd_bytes) + grow);
            acked -= grow;
        }
        if acked == 0 {
            return;
        }
        self.ca_acked_bytes = self.ca_acked_bytes.saturating_add(acked);
        let (n, used) = ca_increments(self.cwnd_bytes, self.mss_bytes, self.ca_acked_bytes);
        self.ca_acked_bytes -= used;
        self.cwnd_bytes = clamp_u32(
            u64::from(self.cwnd_bytes).saturating_add(n.saturating_mul(u64::from(self.mss_bytes))),
        );
        if self.cwnd_bytes == u32::MAX {
            self.ca_acked_bytes = 0;
        }
    }

    /// A loss detected at `now_us` (RFC 5681 §3.2 eq. 4; RFC 6582 once per window).
    pub fn on_loss(&mut self, now_us: u64) {
        self.last_loss_us = Some(now_us);
        if self.recovery.active(now_us) {
            return;
        }
        self.in_first_slow_start = false;
        let window = u64::from(self.cwnd_bytes);
        self.ssthresh_bytes = (self.cwnd_bytes / 2).max(self.min_cwnd());
        self.cwnd_bytes = self.ssthresh_bytes;
        self.ca_acked_bytes = 0;
        self.recovery.enter(now_us, self.rtt.srtt_us(), window);
    }

    /// A retransmission timeout at `now_us` (RFC 5681 §3.1: back to the loss window).
    pub fn on_timeout(&mut self, now_us: u64) {
        self.last_loss_us = Some(now_us);
        self.in_first_slow_start = false;
        self.ssthresh_bytes = (self.cwnd_bytes / 2).max(self.min_cwnd());
        self.cwnd_bytes = self.min_cwnd();
        self.ca_acked_bytes = 0;
        self.recovery.clear();
    }

    /// Slow-start threshold, bytes.
    pub fn ssthresh_bytes(&self) -> u32 {
        self.ssthresh_bytes
    }
}

impl Algorithm for Reno {
    fn name(&self) -> &'static str {
        RenoConfig::NAME
    }

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &PROGRAMS
    }

    fn activate(&mut self, handoff: &Handoff) -> Control {
        self.adopt(handoff);
        Control::cwnd(self.cwnd_bytes)
            .with_pacing(Pacing::Unpaced)
            .with_program(&PER_RTT_URGENT)
    }

    fn on_report(&mut self, m: &Measurement) -> Control {
        self.now_us = self.now_us.max(m.now_us);
        self.rtt.on_sample(m.rtt_us, m.min_rtt_us);
        if m.rate_incoming_bytes_per_sec > 0 {
            self.delivery_rate_bytes_per_sec = m.rate_incoming_bytes_per_sec;
        }
        let in_recovery = self.recovery.holding(self.now_us);
        self.recovery.on_acked(m.acked_bytes);
        if !in_recovery {
            self.on_acked(m.acked_bytes);
        }
        if m.timeout {
            self.on_timeout(self.now_us);
        } else if m.lost_pkts > 0 {
            self.on_loss(self.now_us);
        }
        Control::cwnd(self.cwnd_bytes)
    }

    fn handoff(&self) -> Handoff {
        Handoff {
            now_us: self.now_us,
            cwnd_bytes: self.cwnd_bytes,
            ssthresh_bytes: self.ssthresh_bytes,
            pacing: Pacing::Unpaced,
            srtt_us: self.rtt.srtt_us(),
            min_rtt_us: self.rtt.min_rtt_us(),
            delivery_rate_bytes_per_sec: self.delivery_rate_bytes_per_sec,
            last_loss_us: self.last_loss_us,
            in_first_slow_start: self.in_first_slow_start,
        }
    }

    fn cwnd_bytes(&self) -> u32 {
        self.cwnd_bytes
    }
}

/// How many one-SMSS increases `acked` bytes buy in congestion avoidance starting from
/// `cwnd` (the k-th costs `cwnd + k * mss` bytes), and the bytes they use. Closed form of the
/// per-window loop, so a huge byte count costs no time.
fn ca_increments(cwnd: u32, mss: u32, acked: u64) -> (u64, u64) {
    let (w, m) = (u64::from(cwnd.max(1)), u64::from(mss));
    let cost = |n: u64| {
        n.saturating_mul(w)
            .saturating_add(m.saturating_mul(n.saturating_mul(n.saturating_sub(1)) / 2))
    };
    // Solve n w + m n (n - 1) / 2 = acked for n, then correct the float estimate.
    let (wf, mf) = (w as f64, m as f64);
    let b = wf - mf / 2.0;
    let est = if m == 0 {
        acked as f64 / wf
    } else {
        ((b * b + 2.0 * mf * acked as f64).sqrt() - b) / mf
    };
    // Never more increases than reach u32::MAX.
    let cap = (u64::from(u32::MAX) - w.min(u64::from(u32::MAX))) / m.max(1) + 1;
    let mut n = (est.max(0.0) as u64).min(cap);
    while n > 0 && cost(n) > acked {
        n -= 1;
    }
    while n < cap && cost(n + 1) <= acked {
        n += 1;
    }
    (n, cost(n))
}

fn clamp_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    fn reno(iw_segments: u32) -> Reno {
        Reno::new(&FlowStart {
            sock_id: 1,
            mss_bytes: MSS,
            init_cwnd_bytes: iw_segments * MSS,
            seed: 0,
        })
    }

    fn report(now_us: u64, acked_bytes: u64) -> Measurement {
        Measurement {
            now_us,
            acked_bytes,
            rtt_us: 50_000,
            min_rtt_us: 50_000,
            ..Measurement::default()
        }
    }

    #[test]
    fn slow_start_grows_by_the_bytes_acked() {
        // RFC 5681 §3.1 with RFC 3465 byte counting.
        let mut r = reno(10);
        r.on_report(&report(50_000, 10_000));
        assert_eq!(r.cwnd_bytes(), 20_000);
    }

    #[test]
    fn slow_start_stops_at_ssthresh_and_the_rest_counts_towards_avoidance() {
        let mut r = reno(10);
        r.ssthresh_bytes = 15_000;
        r.on_acked(10_000);
        assert_eq!(r.cwnd_bytes, 15_000);
        assert_eq!(r.ca_acked_bytes, 5_000);
    }

    #[test]
    fn avoidance_adds_one_mss_per_window_acked() {
        // RFC 5681 §3.1 eq. 3: about one SMSS per RTT.
        let mut r = reno(10);
        r.ssthresh_bytes = 10_000;
        r.on_acked(9_999);
        assert_eq!(r.cwnd_bytes, 10_000);
        r.on_acked(1);
        assert_eq!(r.cwnd_bytes, 11_000);
    }

    #[test]
    fn the_closed_form_matches_the_per_window_loop() {
        for (cwnd, mss, acked) in [
            (10_000u32, 1000u32, 55_000u64),
            (2, 1, 1_000_000),
            (5000, 1448, 4999),
        ] {
            let (mut w, mut left, mut n) = (u64::from(cwnd), acked, 0);
            while left >= w {
                left -= w;
                w += u64::from(mss);
                n += 1;
            }
            assert_eq!(ca_increments(cwnd, mss, acked), (n, acked - left));
        }
        let (n, _) = ca_increments(2, 1, u64::MAX);
        assert!(u32::try_from(n).is_ok());
    }

    #[test]
    fn loss_halves_once_per_recovery() {
        // RFC 5681 §3.2 eq. 4 and RFC 6582: one reduction per window of data.
        let mut r = reno(40);
        r.on_report(&report(50_000, 0));
        r.on_report(&Measurement {
            lost_pkts: 3,
            ..report(60_000, 0)
        });
        assert_eq!(r.cwnd_bytes(), 20_000);
        assert_eq!(r.ssthresh_bytes(), 20_000);
        r.on_report(&Measurement {
            lost_pkts: 1,
            ..report(70_000, 0)
        });
        assert_eq!(r.cwnd_bytes(), 20_000, "a second loss in the same window");
        r.on_report(&Measurement {
            lost_pkts: 1,
            ..report(140_000, 79_000)
        });
        assert_eq!(r.cwnd_bytes(), 20_000, "no growth and no second reduction");
        r.on_report(&Measurement {
            lost_pkts: 1,
            ..report(150_000, 1_000)
        });
        assert_eq!(r.cwnd_bytes(), 10_000, "a loss after recovery");
    }

    #[test]
    fn timeout_returns_to_the_loss_window_and_slow_start() {
        let mut r = reno(40);
        r.on_report(&Measurement {
            timeout: true,
            ..report(50_000, 0)
        });
        assert_eq!(r.cwnd_bytes(), 2 * MSS);
        assert_eq!(r.ssthresh_bytes(), 20_000);
        r.on_report(&report(500_000, 2_000));
        assert_eq!(r.cwnd_bytes(), 4_000, "slow start again after the timeout");
    }

    #[test]
    fn adopting_a_handoff_outside_slow_start_continues_in_avoidance() {
        let mut r = reno(10);
        let h = Handoff {
            cwnd_bytes: 50_000,
            in_first_slow_start: false,
            ssthresh_bytes: u32::MAX,
            ..Handoff::flow_start(&FlowStart {
                sock_id: 1,
                mss_bytes: MSS,
                init_cwnd_bytes: 10 * MSS,
                seed: 0,
            })
        };
        let c = r.activate(&h);
        assert_eq!(c.cwnd_bytes, Some(50_000));
        assert_eq!(c.pacing, Some(Pacing::Unpaced));
        r.on_report(&report(50_000, 50_000));
        assert_eq!(r.cwnd_bytes(), 51_000);
    }
}
