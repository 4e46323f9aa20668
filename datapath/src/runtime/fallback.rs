//! The built-in window rule a flow runs while no agent controls it.
//!
//! A deliberately plain Reno (RFC 5681): slow start until the first loss, then additive
//! increase of one MSS per window; on a loss signal the window halves at most once per round
//! trip; on a timeout it drops to the loss window (2 MSS here, so the flow keeps a window
//! moving instead of idling at 1). It reads only the per-ACK primitives, so it works the same
//! in virtual and real time. What it leaves out: fast-recovery window inflation and
//! ssthresh caching across flows — the datapath's loss recovery is the datapath's own.

use super::Primitives;

/// Smallest window the rule sets, in segments.
const MIN_CWND_SEGMENTS: u32 = 2;

/// Per-flow state of the fallback rule.
#[derive(Debug, Clone)]
pub struct RenoFallback {
    mss_bytes: u32,
    ssthresh_bytes: u32,
    /// No further window cut before this time (one smoothed RTT after the last cut).
    recovery_until_ns: u64,
    srtt_us: u64,
    /// Bytes acked in congestion avoidance since the last one-MSS increase.
    ca_credit: u64,
}

impl RenoFallback {
    /// A fresh rule for a flow with segment size `mss_bytes`.
    pub fn new(mss_bytes: u32) -> Self {
        Self {
            mss_bytes: mss_bytes.max(1),
            ssthresh_bytes: u32::MAX,
            recovery_until_ns: 0,
            srtt_us: 0,
            ca_credit: 0,
        }
    }

    /// Slow-start threshold, bytes.
    pub fn ssthresh_bytes(&self) -> u32 {
        self.ssthresh_bytes
    }

    /// Leaves slow start: used when a flow that was under agent control falls back, so the
    /// rule continues from the agent's window instead of doubling it.
    pub fn leave_slow_start(&mut self, cwnd_bytes: u32) {
        self.ssthresh_bytes = cwnd_bytes.max(self.min_cwnd());
    }

    fn min_cwnd(&self) -> u32 {
        self.mss_bytes.saturating_mul(MIN_CWND_SEGMENTS)
    }

    /// One ACK: returns the new window, bytes.
    pub fn on_ack(&mut self, prims: &Primitives, now_ns: u64) -> u32 {
        let cwnd = prims.snd_cwnd.max(self.min_cwnd());
        if prims.rtt_sample_us > 0 {
            self.srtt_us = if self.srtt_us == 0 {
                prims.rtt_sample_us
            } else {
                // In u128: any u64 sample (a datapath's garbage included) must not overflow.
                let ewma = (7 * u128::from(self.srtt_us) + u128::from(prims.rtt_sample_us)) / 8;
                u64::try_from(ewma).unwrap_or(u64::MAX)
            };
        }
        if prims.was_timeout {
            self.ssthresh_bytes = (cwnd / 2).max(self.min_cwnd());
            self.recovery_until_ns = now_ns.saturating_add(self.srtt_us.saturating_mul(1_000));
            self.ca_credit = 0;
            return self.min_cwnd();
        }
        if prims.lost_pkts_sample > 0 {
            if now_ns >= self.recovery_until_ns {
                self.ssthresh_bytes = (cwnd / 2).max(self.min_cwnd());
                self.recovery_until_ns = now_ns.saturating_add(self.srtt_us.saturating_mul(1_000));
                self.ca_credit = 0;
                return self.ssthresh_bytes;
            }
            return cwnd;
        }
        let acked = prims.bytes_acked;
        if cwnd < self.ssthresh_bytes {
            return cwnd
                .saturating_add(acked)
                .min(self.ssthresh_bytes.max(cwnd));
        }
        // Congestion avoidance by byte counting (RFC 5681 §3.1): one MSS per window acked.
        self.ca_credit = self.ca_credit.saturating_add(u64::from(acked));
        if self.ca_credit >= u64::from(cwnd) {
            self.ca_credit -= u64::from(cwnd);
            return cwnd.saturating_add(self.mss_bytes);
        }
        cwnd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(cwnd: u32, acked: u32) -> Primitives {
        Primitives {
            snd_cwnd: cwnd,
            bytes_acked: acked,
            rtt_sample_us: 10_000,
            ..Default::default()
        }
    }

    /// Before this fix, two RTT samples near `u64::MAX` overflowed the smoothed RTT (found by
    /// the widened robustness property in `runtime/tests.rs`).
    #[test]
    fn any_rtt_sample_is_smoothed_without_overflow() {
        let mut r = RenoFallback::new(1000);
        let huge = Primitives {
            rtt_sample_us: u64::MAX,
            ..ack(10_000, 1000)
        };
        r.on_ack(&huge, 0);
        r.on_ack(&huge, 1);
        assert_eq!(r.srtt_us, u64::MAX);
        r.on_ack(&ack(10_000, 1000), 2);
        assert!(r.srtt_us < u64::MAX);
    }

    #[test]
    fn slow_start_then_halving_then_linear_growth() {
        let mut r = RenoFallback::new(1000);
        assert_eq!(r.on_ack(&ack(10_000, 1000), 0), 11_000);
        let lost = Primitives {
            lost_pkts_sample: 1,
            ..ack(20_000, 0)
        };
        assert_eq!(r.on_ack(&lost, 1), 10_000);
        // A second loss within the same round trip does not cut again.
        let lost = Primitives {
            lost_pkts_sample: 1,
            ..ack(10_000, 0)
        };
        assert_eq!(r.on_ack(&lost, 2), 10_000);
        // One window of ACKs grows the window by one MSS.
        let mut cwnd = 10_000;
        for _ in 0..10 {
            cwnd = r.on_ack(&ack(cwnd, 1000), 3);
        }
        assert_eq!(cwnd, 11_000);
    }

    #[test]
    fn timeout_drops_to_the_loss_window() {
        let mut r = RenoFallback::new(1500);
        let to = Primitives {
            was_timeout: true,
            ..ack(30_000, 0)
        };
        assert_eq!(r.on_ack(&to, 0), 3000);
        assert_eq!(r.ssthresh_bytes(), 15_000);
    }
}
