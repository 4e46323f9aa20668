//! A Linux-like Cubic that runs inside the simulated datapath with no agent, for cross traffic
//! and friendliness tests.
//!
//! Follows RFC 9438: slow start to the first loss; on loss `W_max` is the window before the
//! cut (reduced further by fast convergence, §4.7, when it is below the previous `W_max`) and
//! the window becomes `beta * cwnd` with `beta = 0.7`; in congestion avoidance the target is
//! `W_cubic(t) = C (t - K)^3 + W_max` with `C = 0.4` segments/s³ and
//! `K = cbrt(W_max (1 - beta) / C)` (§4.2), taken from the window one RTT ahead
//! (`t + RTT`, as Linux does), and never below the Reno-friendly estimate
//! `W_est` of §4.3. A timeout restarts slow start from one segment with `ssthresh = beta *
//! cwnd`.
//!
//! Slow start ends early on Linux's `HyStart` (`tcp_cubic.c`, both detectors on, as by
//! default), from a window of 16 segments on: per round trip, an *ACK train* (ACKs no more
//! than 2 ms apart) lasting longer than half the minimum RTT, or a *delay increase* (the
//! smallest of the round's first 8 RTT samples above the minimum RTT by
//! `clamp(min RTT / 8, 4 ms, 16 ms)`) sets `ssthresh` to the window. A round ends when the
//! bytes in flight at its start are acknowledged (Linux: `snd_una` passing the round's
//! `snd_nxt`). Without it, slow start overshoots deep buffers until they overflow, which the
//! kernel does not (`docs/calibration.md`).
//!
//! Two ways to drive it: with [`crate::sim::RecoveryModel::Linux`] (the default) as Linux's
//! `tcp_congestion_ops` ([`BuiltinCubic::ssthresh_on_loss`] once per recovery,
//! [`BuiltinCubic::cong_avoid`] outside it, [`BuiltinCubic::on_timeout`]; the recovery around
//! it is [`super::recovery`]'s: a new epoch starts at the first ACK after recovery, with
//! `K = cbrt((W_max - cwnd) / C)` as `bictcp_update`); congestion avoidance is then Linux's
//! integer arithmetic (`bictcp_update` with `tcp_friendliness`, `tcp_cong_avoid_ai`: whole
//! segments, `cnt = cwnd / (target - cwnd)`, the Reno estimate `tcp_cwnd` gaining a segment per
//! `cwnd x 15 / 8` acknowledged and bounding `cnt` by `cwnd / (tcp_cwnd - cwnd)`, `cnt`
//! recomputed at most every `HZ / 32` while the window is unchanged, `t` counted from the
//! epoch plus the minimum RTT), and `bictcp_recalc_ssthresh`'s `W_max` and `ssthresh` in
//! 1/1024 of `beta`. With [`crate::sim::RecoveryModel::TimeBased`], [`BuiltinCubic::on_ack`]
//! cuts on any loss signal at most once per smoothed RTT and grows continuously (the
//! simulator's earlier rule). Left out: jiffy granularity of the epoch clock.

use crate::runtime::Primitives;

/// RFC 9438 §4.6 multiplicative decrease.
const BETA: f64 = 0.7;
/// RFC 9438 §5 scaling constant, segments / s³.
const C: f64 = 0.4;
/// `HyStart` runs from this window on (Linux `hystart_low_window`), segments.
const HYSTART_LOW_WINDOW: f64 = 16.0;
/// ACKs closer than this continue an ACK train (Linux `hystart_ack_delta_us`), ns.
const HYSTART_ACK_DELTA_NS: u64 = 2_000_000;
/// RTT samples per round before the delay test (Linux `HYSTART_MIN_SAMPLES`).
const HYSTART_MIN_SAMPLES: u32 = 8;
/// Bounds of the delay-increase threshold (Linux `HYSTART_DELAY_MIN`/`MAX`), ns.
const HYSTART_DELAY_MIN_NS: u64 = 4_000_000;
const HYSTART_DELAY_MAX_NS: u64 = 16_000_000;

/// `HyStart`'s per-round state.
#[derive(Debug, Clone, Default)]
struct HyStart {
    /// Slow start was ended by `HyStart` (until a timeout restarts it).
    found: bool,
    /// Bytes acknowledged since the flow started.
    acked_total: u64,
    /// The round ends when `acked_total` passes this.
    round_end: u64,
    round_start_ns: u64,
    last_ack_ns: u64,
    /// Smallest RTT sample of this round, ns.
    curr_rtt_ns: u64,
    samples: u32,
    /// Smallest RTT sample of the flow, ns.
    delay_min_ns: u64,
}

impl HyStart {
    fn reset_round(&mut self, now_ns: u64, in_flight: u64) {
        self.round_start_ns = now_ns;
        self.last_ack_ns = now_ns;
        self.round_end = self.acked_total + in_flight;
        self.curr_rtt_ns = u64::MAX;
        self.samples = 0;
    }

    /// One ACK in slow start; true when slow start should end now.
    fn on_ack(&mut self, now_ns: u64, rtt_ns: u64, in_flight: u64) -> bool {
        if self.acked_total > self.round_end {
            self.reset_round(now_ns, in_flight);
        }
        let mut found = false;
        if now_ns.saturating_sub(self.last_ack_ns) <= HYSTART_ACK_DELTA_NS {
            self.last_ack_ns = now_ns;
            // No pacing: the train counts from half the minimum RTT.
            if now_ns.saturating_sub(self.round_start_ns) > self.delay_min_ns / 2 {
                found = true;
            }
        }
        if rtt_ns > 0 {
            self.curr_rtt_ns = self.curr_rtt_ns.min(rtt_ns);
            if self.samples < HYSTART_MIN_SAMPLES {
                self.samples += 1;
            } else {
                let thresh =
                    (self.delay_min_ns / 8).clamp(HYSTART_DELAY_MIN_NS, HYSTART_DELAY_MAX_NS);
                if self.curr_rtt_ns > self.delay_min_ns + thresh {
                    found = true;
                }
            }
        }
        self.found |= found;
        found
    }
}

/// Linux `beta` in 1/1024 (`BICTCP_BETA_SCALE`): 717 (0.7).
const BETA_1024: u32 = 717;
/// Linux `beta_scale = 8 (1024 + beta) / 3 / (1024 - beta)`: the Reno estimate gains a segment
/// per `cwnd x beta_scale / 8` acknowledged.
const BETA_SCALE: u32 = 8 * (1024 + BETA_1024) / 3 / (1024 - BETA_1024);
/// With the window unchanged, `cnt` is recomputed at most every `HZ / 32` (7 jiffies at the
/// testbed's HZ = 250), ns.
const CNT_REFRESH_NS: u64 = 7 * super::rack::JIFFY_NS;

/// Linux's `bictcp` state for congestion avoidance in whole segments (`bictcp_update`,
/// `tcp_cong_avoid_ai`), used with [`crate::sim::RecoveryModel::Linux`].
#[derive(Debug, Clone, Default)]
struct LinuxCa {
    /// Segments to acknowledge per one-segment increase.
    cnt: u32,
    /// `last_max_cwnd` (`W_max`), segments.
    last_max_cwnd: u32,
    last_cwnd: u32,
    last_time_ns: u64,
    origin_point: u32,
    k_s: f64,
    epoch_start_ns: Option<u64>,
    ack_cnt: u32,
    /// Linux's estimate of Reno's window (`tcp_cwnd`), segments.
    tcp_cwnd: u32,
    /// `snd_cwnd_cnt`.
    cwnd_cnt: u32,
}

impl LinuxCa {
    /// `bictcp_update`: `cnt` for window `cwnd` after `acked` segments at `now_ns`.
    fn update(&mut self, cwnd: u32, acked: u32, now_ns: u64, delay_min_ns: u64) {
        self.ack_cnt = self.ack_cnt.saturating_add(acked);
        if self.last_cwnd == cwnd && now_ns.saturating_sub(self.last_time_ns) <= CNT_REFRESH_NS {
            return;
        }
        self.last_cwnd = cwnd;
        self.last_time_ns = now_ns;
        if self.epoch_start_ns.is_none() {
            self.epoch_start_ns = Some(now_ns);
            self.ack_cnt = acked;
            self.tcp_cwnd = cwnd;
            if self.last_max_cwnd <= cwnd {
                self.k_s = 0.0;
                self.origin_point = cwnd;
            } else {
                self.k_s = (f64::from(self.last_max_cwnd - cwnd) / C).cbrt();
                self.origin_point = self.last_max_cwnd;
            }
        }
        let start = self.epoch_start_ns.unwrap_or(now_ns);
        let t_s = now_ns.saturating_sub(start).saturating_add(delay_min_ns) as f64 / 1e9;
        let delta = (C * (t_s - self.k_s).abs().powi(3))
            .floor()
            .min(f64::from(u32::MAX)) as u32;
        let target = if t_s < self.k_s {
            self.origin_point.saturating_sub(delta)
        } else {
            self.origin_point.saturating_add(delta)
        };
        self.cnt = if target > cwnd {
            cwnd / (target - cwnd)
        } else {
            cwnd.saturating_mul(100)
        };
        if self.last_max_cwnd == 0 && self.cnt > 20 {
            self.cnt = 20;
        }
        // tcp_friendliness.
        let per_segment = (u64::from(cwnd) * u64::from(BETA_SCALE) / 8).max(1) as u32;
        if self.ack_cnt > per_segment {
            let gained = (self.ack_cnt - 1) / per_segment;
            self.ack_cnt -= gained * per_segment;
            self.tcp_cwnd = self.tcp_cwnd.saturating_add(gained);
        }
        if self.tcp_cwnd > cwnd {
            self.cnt = self.cnt.min(cwnd / (self.tcp_cwnd - cwnd));
        }
        self.cnt = self.cnt.max(2);
    }

    /// `tcp_cong_avoid_ai(cnt, acked)`: the window after `acked` segments.
    fn cong_avoid_ai(&mut self, mut cwnd: u32, acked: u32) -> u32 {
        let w = self.cnt.max(1);
        if self.cwnd_cnt >= w {
            self.cwnd_cnt = 0;
            cwnd = cwnd.saturating_add(1);
        }
        self.cwnd_cnt = self.cwnd_cnt.saturating_add(acked);
        if self.cwnd_cnt >= w {
            let delta = self.cwnd_cnt / w;
            self.cwnd_cnt -= delta * w;
            cwnd = cwnd.saturating_add(delta);
        }
        cwnd
    }
}

/// Built-in Cubic state, per flow.
#[derive(Debug, Clone)]
pub struct BuiltinCubic {
    mss: f64,
    cwnd: f64,
    ssthresh: f64,
    w_max: f64,
    k_s: f64,
    epoch_start_ns: Option<u64>,
    w_est: f64,
    srtt_ns: u64,
    recovery_until_ns: u64,
    hystart: HyStart,
    linux: LinuxCa,
}

impl BuiltinCubic {
    /// A fresh flow with segment size `mss_bytes` and window `init_cwnd_bytes`.
    pub fn new(mss_bytes: u32, init_cwnd_bytes: u32) -> Self {
        let mss = f64::from(mss_bytes.max(1));
        Self {
            mss,
            cwnd: f64::from(init_cwnd_bytes) / mss,
            ssthresh: f64::INFINITY,
            w_max: 0.0,
            k_s: 0.0,
            epoch_start_ns: None,
            w_est: 0.0,
            srtt_ns: 0,
            recovery_until_ns: 0,
            hystart: HyStart::default(),
            linux: LinuxCa::default(),
        }
    }

    fn bytes(&self) -> u32 {
        (self.cwnd.max(2.0) * self.mss).min(f64::from(u32::MAX)) as u32
    }

    /// One ACK with the earlier, time-based loss response
    /// ([`crate::sim::RecoveryModel::TimeBased`]): a loss signal cuts the window at once, at
    /// most once per smoothed RTT. Returns the new window, bytes.
    pub fn on_ack(&mut self, p: &Primitives, now_ns: u64) -> u32 {
        let rtt_ns = p.rtt_sample_us * 1_000;
        self.track_rtt(rtt_ns);
        self.hystart.acked_total += u64::from(p.bytes_acked);
        if p.was_timeout {
            self.ssthresh = (self.cwnd * BETA).max(2.0);
            self.cwnd = 1.0;
            self.epoch_start_ns = None;
            self.recovery_until_ns = now_ns + self.srtt_ns;
            // Linux resets HyStart on entering loss recovery from a timeout.
            self.hystart.found = false;
            self.hystart
                .reset_round(now_ns, u64::from(p.bytes_in_flight));
            return self.bytes();
        }
        if p.lost_pkts_sample > 0 {
            if now_ns >= self.recovery_until_ns {
                self.on_congestion(now_ns);
            }
            return self.bytes();
        }
        let acked = f64::from(p.bytes_acked) / self.mss;
        if acked <= 0.0 {
            return self.bytes();
        }
        if self.cwnd < self.ssthresh {
            if !self.hystart.found
                && self.cwnd >= HYSTART_LOW_WINDOW
                && self
                    .hystart
                    .on_ack(now_ns, rtt_ns, u64::from(p.bytes_in_flight))
            {
                self.ssthresh = self.cwnd;
                return self.bytes();
            }
            self.cwnd += acked;
            return self.bytes();
        }
        self.cubic_update(acked, now_ns);
        self.bytes()
    }

    /// Congestion avoidance on `acked` segments (Linux `bictcp_update` and
    /// `tcp_cong_avoid_ai`).
    fn cubic_update(&mut self, acked: f64, now_ns: u64) {
        let start = *self.epoch_start_ns.get_or_insert_with(|| {
            // A new epoch (`bictcp_update` with `epoch_start == 0`): below the last maximum the
            // curve climbs back to it in K = cbrt((W_max - cwnd) / C); at or above it the
            // curve starts at the current window.
            if self.w_max <= self.cwnd {
                self.w_max = self.cwnd;
                self.k_s = 0.0;
            } else {
                self.k_s = ((self.w_max - self.cwnd) / C).cbrt();
            }
            self.w_est = self.cwnd;
            now_ns
        });
        let t = (now_ns - start + self.srtt_ns) as f64 / 1e9;
        let target = C * (t - self.k_s).powi(3) + self.w_max;
        // §4.3: Reno-friendly estimate, alpha = 3 (1 - beta) / (1 + beta).
        self.w_est += 3.0 * (1.0 - BETA) / (1.0 + BETA) * acked / self.cwnd;
        let goal = target.max(self.w_est);
        if goal > self.cwnd {
            // Close the gap over one window of ACKs.
            self.cwnd += (goal - self.cwnd) / self.cwnd * acked;
        } else {
            self.cwnd += 0.01 * acked / self.cwnd;
        }
    }

    /// Window, segments.
    pub fn cwnd_segments(&self) -> f64 {
        self.cwnd
    }

    /// Sets the window (loss recovery sets it around the congestion control), segments.
    pub fn set_cwnd_segments(&mut self, cwnd: f64) {
        self.cwnd = cwnd.max(1.0);
    }

    /// Slow-start threshold, segments (infinite before the first reduction).
    pub fn ssthresh_segments(&self) -> f64 {
        self.ssthresh
    }

    /// Linux `bictcp_recalc_ssthresh`, called once when loss recovery starts: the epoch ends,
    /// `W_max` is the window (less by fast convergence when below the previous `W_max`), and
    /// the new threshold `max(beta * cwnd, 2)` segments is returned (and kept).
    pub fn ssthresh_on_loss(&mut self) -> f64 {
        let cwnd = (self.cwnd.floor().min(f64::from(u32::MAX)) as u32).max(1);
        let l = &mut self.linux;
        l.epoch_start_ns = None;
        // tcp_init_cwnd_reduction: the increase credit goes.
        l.cwnd_cnt = 0;
        l.last_max_cwnd = if cwnd < l.last_max_cwnd {
            (u64::from(cwnd) * u64::from(1024 + BETA_1024) / 2048) as u32
        } else {
            cwnd
        };
        self.w_max = f64::from(l.last_max_cwnd);
        self.ssthresh = f64::from(((u64::from(cwnd) * u64::from(BETA_1024) / 1024) as u32).max(2));
        self.ssthresh
    }

    /// A retransmission timeout (Linux `tcp_enter_loss` then `bictcp_state(TCP_CA_Loss)`):
    /// `ssthresh` from [`BuiltinCubic::ssthresh_on_loss`] when `cut`, then Cubic's state and
    /// `HyStart` are reset (`bictcp_reset`: `W_max` forgotten) and the window is one segment.
    pub fn on_timeout(&mut self, cut: bool, now_ns: u64, in_flight: u64) {
        if cut {
            self.ssthresh_on_loss();
        }
        self.w_max = 0.0;
        self.k_s = 0.0;
        self.epoch_start_ns = None;
        self.linux = LinuxCa::default();
        self.cwnd = 1.0;
        self.hystart.found = false;
        self.hystart.reset_round(now_ns, in_flight);
    }

    /// Linux `cubictcp_cong_avoid` (with `bictcp_acked`'s `HyStart`): `acked` segments newly
    /// delivered outside loss recovery; slow start (to `ssthresh`, the rest of `acked` going
    /// to congestion avoidance, as `tcp_slow_start`) or the Cubic curve. Returns the window,
    /// segments.
    pub fn cong_avoid(&mut self, p: &Primitives, acked: f64, now_ns: u64) -> f64 {
        let rtt_ns = p.rtt_sample_us * 1_000;
        self.track_rtt(rtt_ns);
        self.hystart.acked_total += u64::from(p.bytes_acked);
        let mut acked = acked;
        if acked <= 0.0 {
            return self.cwnd;
        }
        if self.cwnd < self.ssthresh {
            if !self.hystart.found
                && self.cwnd >= HYSTART_LOW_WINDOW
                && self
                    .hystart
                    .on_ack(now_ns, rtt_ns, u64::from(p.bytes_in_flight))
            {
                self.ssthresh = self.cwnd;
                return self.cwnd;
            }
            let room = self.ssthresh - self.cwnd;
            let grow = acked.min(room);
            self.cwnd += grow;
            acked -= grow;
            if acked <= 0.0 {
                return self.cwnd;
            }
        }
        let cwnd = (self.cwnd.floor().min(f64::from(u32::MAX)) as u32).max(1);
        let acked = acked.round().min(f64::from(u32::MAX)) as u32;
        self.linux
            .update(cwnd, acked, now_ns, self.hystart.delay_min_ns);
        self.cwnd = f64::from(self.linux.cong_avoid_ai(cwnd, acked));
        self.cwnd
    }

    /// Smoothed RTT and `HyStart`'s minimum from one sample, ns.
    fn track_rtt(&mut self, rtt_ns: u64) {
        if rtt_ns > 0 {
            self.srtt_ns = if self.srtt_ns == 0 {
                rtt_ns
            } else {
                (7 * self.srtt_ns + rtt_ns) / 8
            };
            let h = &mut self.hystart;
            if h.delay_min_ns == 0 || rtt_ns < h.delay_min_ns {
                h.delay_min_ns = rtt_ns;
            }
        }
    }

    fn on_congestion(&mut self, now_ns: u64) {
        // §4.7 fast convergence.
        self.w_max = if self.cwnd < self.w_max {
            self.cwnd * (1.0 + BETA) / 2.0
        } else {
            self.cwnd
        };
        self.cwnd = (self.cwnd * BETA).max(2.0);
        self.ssthresh = self.cwnd;
        self.k_s = (self.w_max * (1.0 - BETA) / C).cbrt();
        self.epoch_start_ns = Some(now_ns);
        self.w_est = self.cwnd;
        self.recovery_until_ns = now_ns + self.srtt_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(bytes: u32) -> Primitives {
        Primitives {
            bytes_acked: bytes,
            rtt_sample_us: 100_000,
            ..Primitives::default()
        }
    }

    #[test]
    fn hystart_ends_slow_start_on_a_delay_increase() {
        let mut c = BuiltinCubic::new(1000, 20_000);
        let rtt_ack = |rtt_us: u64, in_flight: u32| Primitives {
            bytes_acked: 1000,
            rtt_sample_us: rtt_us,
            bytes_in_flight: in_flight,
            ..Primitives::default()
        };
        // 100 ms base RTT, ACKs 5 ms apart (no ACK train): the window doubles per round.
        let mut now = 0;
        for _ in 0..40 {
            now += 5_000_000;
            c.on_ack(&rtt_ack(100_000, 20_000), now);
        }
        assert!(
            c.cwnd.is_finite() && c.ssthresh.is_infinite(),
            "still in slow start"
        );
        // The queue builds: +20 ms on every sample of a new round (threshold 12.5 ms).
        for _ in 0..200 {
            now += 5_000_000;
            c.on_ack(&rtt_ack(120_000, 20_000), now);
            if c.ssthresh.is_finite() {
                break;
            }
        }
        assert!(c.ssthresh.is_finite(), "HyStart never fired");
        assert!(
            (c.ssthresh - c.cwnd).abs() < 1e-9,
            "ssthresh = cwnd at exit"
        );
    }

    #[test]
    fn after_a_loss_the_window_follows_the_cubic_curve() {
        let mut c = BuiltinCubic::new(1000, 100_000);
        c.on_ack(&ack(0), 0);
        c.ssthresh = 0.0;
        c.on_congestion(0);
        assert!((c.cwnd - 70.0).abs() < 1e-9);
        let k = (100.0 * 0.3 / 0.4f64).cbrt();
        assert!((c.k_s - k).abs() < 1e-9, "K = cbrt(W_max (1 - beta) / C)");
        // Feed a window of ACKs per 100 ms for 10 s; at t = K the window is back near W_max.
        let mut now = 0;
        while (now as f64) < k * 1e9 - 1e8 {
            now += 100_000_000;
            let w = c.cwnd;
            for _ in 0..(w as u32) {
                c.on_ack(&ack(1000), now);
            }
        }
        assert!((c.cwnd - 100.0).abs() < 5.0, "plateau at W_max: {}", c.cwnd);
    }

    /// Linux's `tcp_friendliness` in whole segments (the Reno-friendly region, where random
    /// loss keeps small windows): after a reduction from 14 to `ssthresh` = 14 x 717 / 1024 =
    /// 9 segments, `tcp_cwnd` gains a segment per `cwnd x 15 / 8` acknowledged and the window
    /// follows it, so it grows about 0.53 segment per round trip (RFC 9438 §4.3's
    /// `3 (1 - beta) / (1 + beta)`), one whole segment at a time; the cubic curve, 2.3 s from
    /// its plateau, is slower here.
    #[test]
    fn linux_reno_friendliness_grows_half_a_segment_per_round_in_whole_segments() {
        let mut c = BuiltinCubic::new(1000, 14_000);
        c.ssthresh = 14.0;
        let ssthresh = c.ssthresh_on_loss();
        assert!((ssthresh - 9.0).abs() < 1e-9, "{ssthresh}");
        assert!((c.w_max - 14.0).abs() < 1e-9);
        c.set_cwnd_segments(ssthresh);
        let rtt_ack = Primitives {
            bytes_acked: 1000,
            rtt_sample_us: 20_000,
            ..Primitives::default()
        };
        // One round trip (20 ms) per window of one-segment ACKs, for 40 rounds.
        let mut now = 1_000_000_000;
        for _ in 0..40 {
            let w = c.cwnd_segments() as u32;
            for i in 0..w {
                let t = now + u64::from(i) * 20_000_000 / u64::from(w);
                let cwnd = c.cong_avoid(&rtt_ack, 1.0, t);
                assert!((cwnd - cwnd.round()).abs() < 1e-9, "whole segments: {cwnd}");
            }
            now += 20_000_000;
        }
        // 9 + 40 x 0.53 = 30.
        let cwnd = c.cwnd_segments();
        assert!((28.0..=32.0).contains(&cwnd), "after 40 rounds: {cwnd}");
    }
}
