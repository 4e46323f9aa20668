//! `ProbeRTT` (draft-cardwell-iccrg-bbr-congestion-control-00 §4.3.4): when `RTprop` has not
//! been refreshed for 10 s, hold the window at 4 packets for `max(200 ms, 1 round)` so the
//! queue drains and a fresh minimum RTT is seen.

/// draft §4.3.4: `RTpropFilterLen`, µs.
pub const MIN_RTT_WINDOW_US: u64 = 10_000_000;
/// draft §4.3.4: `ProbeRTTDuration`, µs.
pub const PROBE_RTT_DURATION_US: u64 = 200_000;
/// draft §4.3.4: `BBRMinPipeCwnd`, packets.
pub const MIN_PIPE_CWND_PKTS: u32 = 4;

/// Progress through one `ProbeRTT` episode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeRtt {
    /// When the episode may end, µs, once the flight has drained to the minimum window, and
    /// the round it drained in.
    done: Option<(u64, u64)>,
}

impl ProbeRtt {
    /// One report in `ProbeRTT` (draft §4.3.4 `BBRHandleProbeRTT`); returns whether the
    /// episode is over: `200 ms` and at least one round after the flight fell to
    /// `min_cwnd_bytes`.
    pub fn on_report(
        &mut self,
        now_us: u64,
        round: u64,
        inflight_bytes: u64,
        min_cwnd_bytes: u64,
        duration_us: u64,
    ) -> bool {
        match self.done {
            None if inflight_bytes <= min_cwnd_bytes => {
                self.done = Some((now_us.saturating_add(duration_us), round));
                false
            }
            None => false,
            Some((until_us, drained_round)) => now_us >= until_us && round > drained_round,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_rtt_lasts_200_ms_and_a_round_after_the_flight_drains() {
        // draft §4.3.4.
        let mut p = ProbeRtt::default();
        assert!(!p.on_report(0, 10, 50_000, 4_000, PROBE_RTT_DURATION_US));
        assert!(!p.on_report(50_000, 11, 4_000, 4_000, PROBE_RTT_DURATION_US));
        assert!(!p.on_report(249_999, 12, 4_000, 4_000, PROBE_RTT_DURATION_US));
        assert!(p.on_report(250_000, 13, 4_000, 4_000, PROBE_RTT_DURATION_US));
        // A long RTT: 200 ms pass within the same round.
        let mut p = ProbeRtt::default();
        assert!(!p.on_report(0, 1, 0, 4_000, PROBE_RTT_DURATION_US));
        assert!(!p.on_report(300_000, 1, 0, 4_000, PROBE_RTT_DURATION_US));
        assert!(p.on_report(300_000, 2, 0, 4_000, PROBE_RTT_DURATION_US));
    }
}
