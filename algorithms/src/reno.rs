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

use crate::api::{Algorithm, AlgorithmConfig, FlowStart, Handoff};
use crate::programs::ProgramSpec;
use crate::window::{self, Bytes, WindowCore, WindowRule, WindowState};

/// Smallest window, in segments (the suite's floor; RFC 5681's loss window is 1).
pub const MIN_CWND_SEGMENTS: u32 = 2;

/// Reno's configuration and factory.
#[derive(Debug, Clone, Copy, Default)]
pub struct RenoConfig {
    /// Initial window override, bytes (`None`: the datapath's, recommended).
    pub init_cwnd_bytes: Option<u32>,
    /// Lets the window follow the ACK clock in the datapath between reports: slow start and
    /// the first answer to a loss there (off by default; [`WindowCore::with_ack_clock`]).
    pub ack_clock: bool,
}

impl RenoConfig {
    /// Sets the initial window (bytes); the datapath's value is the recommended default.
    #[must_use]
    pub fn init_cwnd_bytes(mut self, bytes: u32) -> Self {
        self.init_cwnd_bytes = Some(bytes);
        self
    }

    /// Lets the window follow the ACK clock in the datapath between reports
    /// ([`WindowCore::with_ack_clock`]; off by default).
    #[must_use]
    pub fn ack_clock(mut self, on: bool) -> Self {
        self.ack_clock = on;
        self
    }

    fn flow(&self, start: &FlowStart) -> Reno {
        let mut start = *start;
        if let Some(iw) = self.init_cwnd_bytes {
            start.init_cwnd_bytes = iw;
        }
        Reno::new(&start).with_ack_clock(self.ack_clock)
    }
}

impl AlgorithmConfig for RenoConfig {
    const NAME: &'static str = "reno";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &window::PROGRAMS
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        Box::new(self.flow(start))
    }
}

/// Reno with its window following the ACK clock in the datapath ([`RenoConfig::ack_clock`]):
/// the registry's variant `reno-ackclock` (`docs/algorithms.md`, "The ACK clock in the
/// datapath").
#[derive(Debug, Clone, Copy, Default)]
pub struct RenoAckClockConfig(pub RenoConfig);

impl AlgorithmConfig for RenoAckClockConfig {
    const NAME: &'static str = "reno-ackclock";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &window::PROGRAMS
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        Box::new(
            self.0
                .ack_clock(true)
                .flow(start)
                .registered_as(Self::NAME),
        )
    }
}

/// Reno's per-flow state: the window core (in bytes) with [`RenoRule`].
pub type Reno = WindowCore<RenoRule>;

/// What Reno adds to the window core: byte counting in congestion avoidance.
#[derive(Debug, Clone)]
pub struct RenoRule {
    /// Bytes acked in congestion avoidance since the last one-SMSS increase.
    ca_acked_bytes: u64,
}

impl Reno {
    /// A new flow with the initial window of `start`.
    pub fn new(start: &FlowStart) -> Self {
        WindowCore::with_rule(RenoRule { ca_acked_bytes: 0 }, start)
    }

    /// Slow start and congestion avoidance for `acked` bytes (RFC 5681 §3.1, RFC 3465).
    pub fn on_acked(&mut self, acked_bytes: u64) {
        let now_us = self.state.now_us;
        self.rule.on_ack(&mut self.state, acked_bytes, now_us);
    }

    /// Slow-start threshold, bytes.
    pub fn ssthresh_bytes(&self) -> u32 {
        self.state.ssthresh
    }
}

impl WindowRule for RenoRule {
    type Unit = Bytes;

    const NAME: &'static str = RenoConfig::NAME;
    const SLOW_START_UNTIL_LOSS: bool = true;

    fn adopt(&mut self, _w: &WindowState<Bytes>, _h: &Handoff) {
        self.ca_acked_bytes = 0;
    }

    /// One SMSS each time `cwnd` bytes have been acked (RFC 5681 §3.1 eq. 3, byte counting).
    fn on_ack_in_avoidance(&mut self, w: &mut WindowState<Bytes>, acked: u64, _now_us: u64) {
        self.ca_acked_bytes = self.ca_acked_bytes.saturating_add(acked);
        let (n, used) = ca_increments(w.cwnd, w.mss_bytes, self.ca_acked_bytes);
        self.ca_acked_bytes -= used;
        w.cwnd = window::clamp_u32(
            u64::from(w.cwnd).saturating_add(n.saturating_mul(u64::from(w.mss_bytes))),
        );
        if w.cwnd == u32::MAX {
            self.ca_acked_bytes = 0;
        }
    }

    /// `ssthresh = max(cwnd / 2, 2 SMSS)` (RFC 5681 §3.2 eq. 4), on a loss and a timeout.
    fn ssthresh_on_congestion(&mut self, w: &WindowState<Bytes>) -> u32 {
        (w.cwnd / 2).max(w.mss_bytes.saturating_mul(MIN_CWND_SEGMENTS))
    }

    /// `cwnd = ssthresh` (RFC 6582 §3.2 step 3).
    fn on_recovery_start(&mut self, w: &mut WindowState<Bytes>, _now_us: u64) {
        w.cwnd = w.ssthresh;
        self.ca_acked_bytes = 0;
    }

    fn on_timeout(&mut self, _w: &mut WindowState<Bytes>) {
        self.ca_acked_bytes = 0;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Control, Measurement, Pacing};
    use crate::test_support;

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
        r.state.ssthresh = 15_000;
        r.on_acked(10_000);
        assert_eq!(r.state.cwnd, 15_000);
        assert_eq!(r.rule.ca_acked_bytes, 5_000);
    }

    #[test]
    fn avoidance_adds_one_mss_per_window_acked() {
        // RFC 5681 §3.1 eq. 3: about one SMSS per RTT.
        let mut r = reno(10);
        r.state.ssthresh = 10_000;
        r.on_acked(9_999);
        assert_eq!(r.state.cwnd, 10_000);
        r.on_acked(1);
        assert_eq!(r.state.cwnd, 11_000);
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
            last_loss_us: Some(0),
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

    #[test]
    fn a_handoff_that_saw_no_loss_leaves_slow_start_running() {
        // A predecessor that left slow start on a delay signal (Copa's handoff: the threshold
        // at its window) and never saw a loss: only a loss sets Reno's threshold.
        let mut r = reno(10);
        let h = Handoff {
            cwnd_bytes: 50_000,
            in_first_slow_start: false,
            ssthresh_bytes: 50_000,
            last_loss_us: None,
            ..Handoff::flow_start(&FlowStart {
                sock_id: 1,
                mss_bytes: MSS,
                init_cwnd_bytes: 10 * MSS,
                seed: 0,
            })
        };
        assert_eq!(r.activate(&h).cwnd_bytes, Some(50_000));
        assert_eq!(r.ssthresh_bytes(), u32::MAX);
        assert!(r.handoff().in_first_slow_start);
        r.on_report(&report(50_000, 50_000));
        assert_eq!(r.cwnd_bytes(), 100_000, "doubles in a round trip");
        r.on_report(&Measurement {
            lost_pkts: 1,
            ..report(100_000, 0)
        });
        assert!(!r.handoff().in_first_slow_start, "the first loss ends it");
        assert_eq!(r.ssthresh_bytes(), 50_000);
    }

    /// The program switch of `c`: its name and its `ssthresh` field.
    fn switch(c: &Control) -> (&'static str, Option<u32>) {
        let p = c.program.as_ref().expect("a program switch");
        let ssthresh = p.fields.iter().find(|(f, _)| *f == "ssthresh").map(|f| f.1);
        (p.program.name, ssthresh)
    }

    #[test]
    fn ack_clock_takes_the_reported_window_below_the_threshold() {
        use crate::programs::PER_RTT_URGENT_CLOCKED;
        let ss = PER_RTT_URGENT_CLOCKED.name;
        let mut r = reno(10).with_ack_clock(true);
        let c = r.activate(&Handoff::flow_start(&test_support::start(MSS, 10)));
        assert_eq!(switch(&c), (ss, Some(u32::MAX)), "unbounded first slow start");
        assert!(r.slow_start_in_datapath());
        // The datapath grew the window ACK by ACK; the agent takes it and writes none.
        let c = r.on_report(&Measurement {
            cwnd_bytes: 37_000,
            ..report(50_000, 27_000)
        });
        assert!(c.is_none(), "{c:?}");
        assert_eq!(r.cwnd_bytes(), 37_000);
        // The loss's report carries the window the datapath stopped at; Reno halves it.
        let c = r.on_report(&Measurement {
            cwnd_bytes: 60_000,
            lost_pkts: 2,
            ..report(80_000, 23_000)
        });
        assert_eq!(c.cwnd_bytes, Some(30_000));
        assert!(c.program.is_none());
        assert!(!r.slow_start_in_datapath());
        assert!(!r.handoff().in_first_slow_start);
        // Avoidance is the agent's (recovery first holds the window).
        let c = r.on_report(&Measurement {
            cwnd_bytes: 99_000,
            ..report(300_000, 30_000)
        });
        assert_eq!(c.cwnd_bytes, Some(31_000), "one segment per window acked");
        // A timeout installs the program again, with the new threshold and the loss window.
        let c = r.on_report(&Measurement {
            cwnd_bytes: 31_000,
            timeout: true,
            ..report(900_000, 0)
        });
        assert_eq!(switch(&c), (ss, Some(15_500)));
        assert_eq!(c.cwnd_bytes, Some(2 * MSS));
        assert!(r.slow_start_in_datapath());
        // Reaching the threshold hands growth back to the agent.
        let c = r.on_report(&Measurement {
            cwnd_bytes: 15_500,
            ..report(1_000_000, 13_500)
        });
        assert!(!r.slow_start_in_datapath());
        assert_eq!(c.cwnd_bytes, Some(15_500));
        // A flow taken over outside slow start gets the program with no growth in it.
        let mut r = reno(10).with_ack_clock(true);
        let c = r.activate(&Handoff {
            cwnd_bytes: 40_000,
            ssthresh_bytes: 40_000,
            in_first_slow_start: false,
            last_loss_us: Some(1),
            ..Handoff::flow_start(&test_support::start(MSS, 10))
        });
        assert_eq!(switch(&c), (ss, Some(0)));
        assert!(!r.slow_start_in_datapath());
    }

    #[test]
    fn a_timeout_in_the_datapaths_slow_start_halves_the_window_before_it() {
        use crate::programs::PER_RTT_URGENT_CLOCKED;
        let mut r = reno(10).with_ack_clock(true);
        r.activate(&Handoff::flow_start(&test_support::start(MSS, 10)));
        r.on_report(&Measurement {
            cwnd_bytes: 40_000,
            ..report(50_000, 30_000)
        });
        // The timeout left the datapath's window at one segment; the report carries that.
        let c = r.on_report(&Measurement {
            cwnd_bytes: 1_000,
            timeout: true,
            ..report(400_000, 0)
        });
        assert_eq!(
            switch(&c),
            (PER_RTT_URGENT_CLOCKED.name, Some(20_000)),
            "half the window before the timeout"
        );
        assert_eq!(r.ssthresh_bytes(), 20_000);
        assert_eq!(c.cwnd_bytes, Some(2 * MSS));
    }

    #[test]
    fn without_ack_clock_nothing_changes() {
        let mut r = reno(10);
        let c = r.activate(&Handoff::flow_start(&test_support::start(MSS, 10)));
        assert_eq!(
            c.program.map(|p| p.program.name),
            Some(crate::programs::PER_RTT_URGENT.name)
        );
        r.on_report(&Measurement {
            cwnd_bytes: 37_000,
            ..report(50_000, 10_000)
        });
        assert_eq!(r.cwnd_bytes(), 20_000, "the agent's own slow start");
    }
}
