//! ARC's state and action, shared by the algorithm and the rate environment that trains it
//! (`ccp/Rate-v0`, `python/src/gym/control.rs`), so the actor sees in deployment exactly the
//! numbers it was trained on.
//!
//! State (feature schema [`SCHEMA_VERSION`]): the last `history` decision intervals, oldest
//! first, [`FEATURES`] each:
//! - `send_rate_norm`: the sending rate (ARC's average send interval, inverted) over the largest
//!   delivery rate the flow has seen, capped at [`RATIO_CAP`];
//! - `delivery_rate_norm`: the delivery rate likewise (ARC's acked bytes per interval);
//! - `loss_frac`: lost bytes over acked + lost bytes (lost packets counted as one MSS);
//! - `rtt_ratio`: the interval's RTT over the flow's minimum (ARC's average delay), capped;
//! - `rtt_gradient`: the RTT's change over the interval, in minimum RTTs, in `[-10, 10]`;
//! - `sent_over_acked`: the bytes sent over the bytes acked in the interval (ARC's sent bytes,
//!   relative), capped;
//! - `last_action`: the action in force over the interval.
//!
//! Action ([`RateControl::apply`]): `a` in `[-1, 1]` scales the pacing rate by `1 + delta a`
//! (`a >= 0`) or `1 / (1 - delta a)` (`a < 0`), Aurora's rule; the window is kept at twice
//! the rate times the smoothed RTT (at least 4 MSS) so it never binds while the rate does.

use std::collections::VecDeque;

use crate::api::{Control, FlowStart, Handoff, Measurement, Pacing};

/// Version of the feature schema; bumped whenever a feature, its order or the action rule
/// changes. A model's sidecar must name it.
pub const SCHEMA_VERSION: u32 = 1;

/// The per-interval values of the state, in order.
pub const FEATURES: [&str; 7] = [
    "send_rate_norm",
    "delivery_rate_norm",
    "loss_frac",
    "rtt_ratio",
    "rtt_gradient",
    "sent_over_acked",
    "last_action",
];

/// Cap of the ratio features, so a stale minimum cannot blow the input up.
pub const RATIO_CAP: f64 = 10.0;

/// Lowest pacing rate, bytes/s (0.1 Mbit/s).
pub const MIN_RATE_BYTES_PER_SEC: f64 = 12_500.0;

/// Highest pacing rate, bytes/s (the datapath's largest finite rate).
pub const MAX_RATE_BYTES_PER_SEC: f64 = (u32::MAX - 1) as f64;

/// One decision interval as measured, besides its row of features.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Interval {
    /// The interval's features ([`FEATURES`]).
    pub row: [f32; FEATURES.len()],
    /// Goodput over the interval, Mbit/s.
    pub throughput_mbps: f64,
    /// The interval's RTT (else the smoothed one), ms.
    pub rtt_ms: f64,
    /// Loss fraction ([`FEATURES`]'s `loss_frac`).
    pub loss: f64,
    /// Length of the interval, µs.
    pub interval_us: u64,
}

/// Turns reports into ARC's state: the RTT and rate bookkeeping of a flow and the window of the
/// last `history` intervals.
#[derive(Debug, Clone)]
pub struct Observer {
    mss: f64,
    /// RTT, rate and loss state handed to whoever takes the flow.
    pub handoff: Handoff,
    max_delivery: f64,
    prev_now_us: Option<u64>,
    prev_rtt_us: f64,
    history: VecDeque<[f32; FEATURES.len()]>,
}

impl Observer {
    /// A new flow's observer keeping `history` intervals (at least 1).
    pub fn new(start: &FlowStart, history: usize) -> Self {
        Self {
            mss: f64::from(start.mss_bytes.max(1)),
            handoff: Handoff::flow_start(start),
            max_delivery: 0.0,
            prev_now_us: None,
            prev_rtt_us: 0.0,
            history: VecDeque::from(vec![[0.0; FEATURES.len()]; history.max(1)]),
        }
    }

    /// Values of the state (`history * FEATURES.len()`).
    pub fn state_len(&self) -> usize {
        self.history.len() * FEATURES.len()
    }

    /// The largest delivery rate the flow has seen, bytes/s (0: none yet).
    pub fn max_delivery(&self) -> f64 {
        self.max_delivery
    }

    /// The state: the last `history` rows, oldest first, flattened into `out` (cleared first).
    pub fn state_into(&self, out: &mut Vec<f32>) {
        out.clear();
        out.extend(self.history.iter().flatten());
    }

    /// Updates the RTT state with report `m`, appends the interval's row (with `last_action`,
    /// the action in force over it) to the state and returns the interval.
    pub fn observe(&mut self, m: &Measurement, last_action: f64) -> Interval {
        self.track(m);
        let h = &mut self.handoff;
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
        let acked = m.acked_bytes as f64;
        let loss = if acked + lost > 0.0 {
            lost / (acked + lost)
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
            (sent / acked).min(RATIO_CAP)
        } else if sent > 0.0 {
            RATIO_CAP
        } else {
            0.0
        };
        let last_action = if last_action.is_finite() {
            last_action.clamp(-1.0, 1.0)
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
            last_action as f32,
        ];
        self.history.pop_front();
        self.history.push_back(row);
        let throughput_mbps = if interval_us > 0 {
            acked * 8.0 / interval_us as f64
        } else {
            0.0
        };
        let rtt_ms = if rtt > 0.0 {
            rtt / 1e3
        } else {
            h.srtt_us as f64 / 1e3
        };
        Interval {
            row,
            throughput_mbps,
            rtt_ms,
            loss,
            interval_us,
        }
    }

    /// The handoff's clock, minimum and smoothed RTT and last loss.
    fn track(&mut self, m: &Measurement) {
        let h = &mut self.handoff;
        h.now_us = h.now_us.max(m.now_us);
        h.min_rtt_us = crate::rtt::lower_min(h.min_rtt_us, [m.min_rtt_us, m.rtt_us]);
        if m.rtt_us > 0 {
            h.srtt_us = if h.srtt_us == 0 {
                m.rtt_us
            } else {
                h.srtt_us - h.srtt_us / 8 + m.rtt_us / 8
            };
        }
        if m.congestion() {
            h.last_loss_us = Some(m.now_us);
            h.in_first_slow_start = false;
        }
    }

    /// The smoothed RTT in seconds (1 µs before any sample).
    pub fn srtt_s(&self) -> f64 {
        self.handoff.srtt_us.max(1) as f64 / 1e6
    }
}

/// The rate a learner sets and the window that follows it (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateControl {
    /// Scale of the action (0.5: at most x1.5 or /1.5 per decision).
    pub delta: f64,
    /// Pacing rate, bytes/s (0: not set yet: unpaced).
    pub rate: f64,
    /// Window, bytes.
    pub cwnd: f64,
    mss: f64,
}

impl RateControl {
    /// Unpaced with the window `cwnd_bytes` until the first action.
    pub fn new(mss_bytes: u32, cwnd_bytes: u32, delta: f64) -> Self {
        Self {
            delta,
            rate: 0.0,
            cwnd: f64::from(cwnd_bytes),
            mss: f64::from(mss_bytes.max(1)),
        }
    }

    /// Applies action `a` (clamped to `[-1, 1]`; not finite: 0) with smoothed RTT `srtt_s`.
    /// The first action starts from the window's rate over one RTT.
    pub fn apply(&mut self, a: f64, srtt_s: f64) {
        let a = if a.is_finite() {
            a.clamp(-1.0, 1.0)
        } else {
            0.0
        };
        if self.rate <= 0.0 {
            self.rate = self.cwnd / srtt_s;
        }
        let d = self.delta * a;
        let next = if d >= 0.0 {
            self.rate * (1.0 + d)
        } else {
            self.rate / (1.0 - d)
        };
        self.rate = if next.is_finite() {
            next.clamp(MIN_RATE_BYTES_PER_SEC, MAX_RATE_BYTES_PER_SEC)
        } else {
            MIN_RATE_BYTES_PER_SEC
        };
        self.fit_window(srtt_s);
    }

    /// The window the rate needs over `srtt_s`: two rate-RTTs, at least 4 MSS.
    fn fit_window(&mut self, srtt_s: f64) {
        self.cwnd = (2.0 * self.rate * srtt_s).max(4.0 * self.mss);
    }

    /// What the `arc` algorithm and the `rate` training environment do with action `a`:
    /// [`RateControl::apply`] over the observer's smoothed RTT, then [`RateControl::limit`] at
    /// [`RATIO_CAP`] times the largest delivery rate the flow has seen: past that the state's
    /// send ratio saturates, so the actor could not see the rate grow.
    pub fn steer(&mut self, a: f64, observer: &Observer) {
        let srtt_s = observer.srtt_s();
        self.apply(a, srtt_s);
        self.limit(RATIO_CAP * observer.max_delivery(), srtt_s);
    }

    /// Holds the rate at or under `ceiling` bytes/s (not positive or not finite: no ceiling)
    /// and the window at what that rate needs over `srtt_s`, as [`RateControl::apply`] sets
    /// it.
    pub fn limit(&mut self, ceiling: f64, srtt_s: f64) {
        if ceiling.is_finite() && ceiling > 0.0 && self.rate > ceiling {
            self.rate = ceiling.max(MIN_RATE_BYTES_PER_SEC);
            self.fit_window(srtt_s);
        }
    }

    /// A retransmission timeout: rate and window halve (the window to at most half of what it
    /// was, at least 2 MSS).
    pub fn timeout(&mut self) {
        self.rate = if self.rate > 0.0 {
            (self.rate / 2.0).max(MIN_RATE_BYTES_PER_SEC)
        } else {
            0.0
        };
        self.cwnd = (self.cwnd.min(f64::from(u32::MAX)) / 2.0).max(2.0 * self.mss);
    }

    /// The window the datapath gets, bytes (at least 2 MSS).
    pub fn cwnd_bytes(&self) -> u32 {
        self.cwnd.max(2.0 * self.mss).min(f64::from(u32::MAX)) as u32
    }

    /// The pacing the datapath gets.
    pub fn pacing(&self) -> Pacing {
        if self.rate > 0.0 {
            Pacing::BytesPerSec(self.rate.clamp(1.0, MAX_RATE_BYTES_PER_SEC) as u32)
        } else {
            Pacing::Unpaced
        }
    }

    /// Window and pacing as a control.
    pub fn control(&self) -> Control {
        Control::cwnd(self.cwnd_bytes()).with_pacing(self.pacing())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> FlowStart {
        FlowStart {
            sock_id: 1,
            mss_bytes: 1000,
            init_cwnd_bytes: 10_000,
            seed: 0,
        }
    }

    #[test]
    fn the_state_is_the_last_intervals_oldest_first() {
        let mut o = Observer::new(&start(), 2);
        let m = |now_us, rtt_us| Measurement {
            now_us,
            acked_bytes: 50_000,
            rtt_us,
            min_rtt_us: rtt_us,
            rate_outgoing_bytes_per_sec: 1_000_000,
            ..Measurement::default()
        };
        o.observe(&m(100_000, 100_000), 0.0);
        let i = o.observe(&m(150_000, 120_000), 0.5);
        let mut s = Vec::new();
        o.state_into(&mut s);
        assert_eq!(s.len(), 14);
        assert_eq!(&s[7..], &i.row);
        // RTT 120 ms over a minimum of 100: ratio 1.2, gradient 0.2 minimum RTTs.
        assert!((i.row[3] - 1.2).abs() < 1e-6 && (i.row[4] - 0.2).abs() < 1e-6);
        assert!((i.row[6] - 0.5).abs() < 1e-9);
        // 50 kB over 50 ms: 8 Mbit/s.
        assert!((i.throughput_mbps - 8.0).abs() < 1e-9);
    }

    #[test]
    fn actions_scale_the_rate_within_bounds() {
        let mut r = RateControl::new(1000, 10_000, 0.5);
        assert_eq!(r.pacing(), Pacing::Unpaced);
        r.apply(0.0, 0.1);
        assert!((r.rate - 100_000.0).abs() < 1e-6);
        r.apply(1.0, 0.1);
        assert!((r.rate - 150_000.0).abs() < 1e-6);
        r.apply(-1.0, 0.1);
        assert!((r.rate - 100_000.0).abs() < 1e-6);
        assert!((r.cwnd - 20_000.0).abs() < 1e-6);
        r.apply(f64::NAN, 0.1);
        assert!((r.rate - 100_000.0).abs() < 1e-6);
        for _ in 0..200 {
            r.apply(1.0, 1e3);
        }
        assert!((r.rate - MAX_RATE_BYTES_PER_SEC).abs() < 1.0);
        assert_eq!(r.cwnd_bytes(), u32::MAX);
        let before = r.cwnd_bytes();
        r.timeout();
        assert!(r.cwnd_bytes() < before);
    }

    #[test]
    fn the_rate_stays_within_what_the_state_can_see() {
        let mut r = RateControl::new(1000, 10_000, 0.5);
        r.apply(0.0, 0.1);
        // No ceiling, or one above the rate: nothing changes.
        for c in [0.0, -1.0, f64::NAN, f64::INFINITY, 200_000.0] {
            let before = r;
            r.limit(c, 0.1);
            assert_eq!(r, before, "{c}");
        }
        // A ceiling under the floor: the floor.
        let mut low = r;
        low.limit(1.0, 0.1);
        assert!((low.rate - MIN_RATE_BYTES_PER_SEC).abs() < 1e-6);
        assert_eq!(low.cwnd_bytes(), 4000);
        // Through an observer that saw 100 kB/s delivered: raised up to ten times that, held
        // there with the window the rate needs, and cut from there.
        let mut o = Observer::new(&start(), 2);
        o.observe(
            &Measurement {
                now_us: 100_000,
                acked_bytes: 10_000,
                rtt_us: 100_000,
                min_rtt_us: 100_000,
                rate_incoming_bytes_per_sec: 100_000,
                rate_outgoing_bytes_per_sec: 100_000,
                ..Measurement::default()
            },
            0.0,
        );
        assert!((o.max_delivery() - 100_000.0).abs() < 1e-9);
        let srtt_s = o.srtt_s();
        for _ in 0..50 {
            r.steer(1.0, &o);
        }
        assert!((r.rate - 1_000_000.0).abs() < 1e-6);
        assert!((r.cwnd - 2.0 * 1_000_000.0 * srtt_s).abs() < 1e-6);
        r.steer(-1.0, &o);
        assert!((r.rate - 1_000_000.0 / 1.5).abs() < 1e-6);
    }
}
