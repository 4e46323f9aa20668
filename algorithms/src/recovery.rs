//! Loss recovery as seen from per-RTT reports: `NewReno`'s "one reduction per window of data"
//! (RFC 6582 §3.2) without sequence numbers.
//!
//! `NewReno` leaves recovery when an ACK covers the recovery point (the highest sequence sent
//! when the loss was detected). The agent sees no sequence numbers, but the datapath reports
//! in-order (cumulatively) acknowledged bytes. The data outstanding at the reduction is the
//! window plus what was already SACKed or lost beyond it, which can approach another window,
//! so recovery ends once twice the window at the reduction has been acknowledged in order and
//! at least one smoothed RTT has passed, or at the latest after two smoothed RTTs (in-order
//! progress stalls while new holes keep appearing, and losses of data sent after the
//! reduction are a new congestion event). Losses detected before then belong to the same
//! congestion event, and the window does not grow ([`Recovery::holding`]).

/// The current recovery episode, if any.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Earliest end, µs.
    until_us: u64,
    /// Latest end, µs.
    deadline_us: u64,
    /// In-order bytes still to be acknowledged before it ends.
    bytes_left: u64,
    active: bool,
}

impl Recovery {
    /// Enters recovery at `now_us` with `window_bytes` outstanding.
    pub fn enter(&mut self, now_us: u64, srtt_us: u64, window_bytes: u64) {
        *self = Self {
            until_us: now_us.saturating_add(srtt_us),
            deadline_us: now_us.saturating_add(srtt_us.saturating_mul(2)),
            bytes_left: window_bytes.saturating_mul(2),
            active: true,
        };
    }

    /// Counts in-order acknowledged bytes.
    pub fn on_acked(&mut self, acked_bytes: u64) {
        self.bytes_left = self.bytes_left.saturating_sub(acked_bytes);
    }

    /// Whether the flow is still recovering from the last reduction at `now_us`.
    pub fn active(&mut self, now_us: u64) -> bool {
        if self.active
            && now_us >= self.until_us
            && (self.bytes_left == 0 || now_us >= self.deadline_us)
        {
            self.active = false;
        }
        self.active
    }

    /// Whether growth is held at `now_us`: throughout recovery, as in `NewReno`.
    pub fn holding(&mut self, now_us: u64) -> bool {
        self.active(now_us)
    }

    /// Leaves recovery (e.g. on a timeout, which starts over).
    pub fn clear(&mut self) {
        self.active = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_ends_once_the_window_is_acked_in_order_and_an_rtt_passed() {
        let mut r = Recovery::default();
        assert!(!r.active(0));
        r.enter(1_000, 100, 10_000);
        assert!(r.holding(1_099));
        r.on_acked(19_999);
        assert!(
            r.active(1_150),
            "one byte of the old data is unacknowledged"
        );
        r.on_acked(1);
        assert!(r.active(1_050), "less than one RTT");
        assert!(!r.active(1_100));
        r.enter(2_000, 100, 10_000);
        assert!(r.active(2_199), "in-order progress stalled");
        assert!(!r.active(2_200), "two RTTs at most");
    }
}
