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
//! cwnd`. Left out: `HyStart`, the `cnt`-based per-ACK smoothing and ssthresh caching.

use crate::runtime::Primitives;

/// RFC 9438 §4.6 multiplicative decrease.
const BETA: f64 = 0.7;
/// RFC 9438 §5 scaling constant, segments / s³.
const C: f64 = 0.4;

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
        }
    }

    fn bytes(&self) -> u32 {
        (self.cwnd.max(2.0) * self.mss).min(f64::from(u32::MAX)) as u32
    }

    /// One ACK; returns the new window, bytes.
    pub fn on_ack(&mut self, p: &Primitives, now_ns: u64) -> u32 {
        if p.rtt_sample_us > 0 {
            let rtt = p.rtt_sample_us * 1_000;
            self.srtt_ns = if self.srtt_ns == 0 {
                rtt
            } else {
                (7 * self.srtt_ns + rtt) / 8
            };
        }
        if p.was_timeout {
            self.ssthresh = (self.cwnd * BETA).max(2.0);
            self.cwnd = 1.0;
            self.epoch_start_ns = None;
            self.recovery_until_ns = now_ns + self.srtt_ns;
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
            self.cwnd += acked;
            return self.bytes();
        }
        let start = *self.epoch_start_ns.get_or_insert_with(|| {
            // A new epoch after slow start: the curve starts at the current window.
            if self.w_max < self.cwnd {
                self.w_max = self.cwnd;
                self.k_s = 0.0;
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
        self.bytes()
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
}
