//! What the algorithms' unit tests share: a flow start and a report built from the few fields
//! most tests set.

use crate::api::{FlowStart, Measurement};

/// Flow 1's start with `iw_segments` segments of `mss_bytes` (seed 0).
pub(crate) fn start(mss_bytes: u32, iw_segments: u32) -> FlowStart {
    FlowStart {
        sock_id: 1,
        mss_bytes,
        init_cwnd_bytes: iw_segments * mss_bytes,
        seed: 0,
    }
}

/// A report at `now_us` acknowledging `acked_bytes`, whose RTT and minimum RTT are `rtt_us`.
pub(crate) fn report(now_us: u64, acked_bytes: u64, rtt_us: u64) -> Measurement {
    Measurement {
        now_us,
        acked_bytes,
        rtt_us,
        min_rtt_us: rtt_us,
        ..Measurement::default()
    }
}
