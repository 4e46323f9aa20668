//! The drain at the probe's end: a default-mode flow that keeps its start candidate while its
//! RTT is still far above the path's floor, over a queue of its own, has its window cut to the
//! path's BDP, as BBR's Drain follows its start-up (Cardwell et al., ACM Queue 2016).
//!
//! Why: Copa, the default mode's start, overshoots in its slow start and drains what it queued
//! only over seconds on long paths (its velocity starts at one packet per RTT; in the simulator
//! on a 60 Mbit/s, 158-ms path with a 1.9-BDP buffer its window holds the BDP and the whole
//! buffer from 1.8 to 5.6 s). TCP-RL's policy found a way out on these paths, a Westwood+
//! interlude of about a second whose first loss cuts the window to its bandwidth estimate, and
//! earned 72-82 % of the long-path headroom of the validation sets with it
//! (`docs/selector.md`); the drain makes the cut itself, once, without leaving Copa.
//!
//! The estimate: the probe's highest delivery rate times its minimum RTT (`rate_max_mbps` x
//! `min_rtt_ms`, [`super::features`]), times [`Drain::bdps`]. A window already within it is
//! left alone (the selector's [`crate::Decision::Drain`]). Whose queue it is, is told only by
//! whether it drained during the probe ([`Drain::max_drained`]). Left out: a later drain (a
//! second and third, judged the same way on later windows, gained nothing on the training
//! set). Measured against the simulator's Copa: under random loss on long paths the kernel's
//! Copa builds a smaller start-up queue (its receiver's window holds it back; the simulator
//! models none), so the drain fires there less (`docs/calibration.md`, "Our CCP Copa, first
//! look").

use super::features::{DRAINED, MIN_RTT, N_FEATURES, RATE_MAX, RTT_RATIO_LAST};

/// When a flow drains at the probe's end, and to how much.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drain {
    /// The least `rtt_ratio_last` (the last RTT over the floor) that drains.
    pub min_ratio: f64,
    /// The largest `rtt_ratio_drained` (the RTT over its floor where the queue drained most):
    /// a queue that never drained is a competitor's, and draining against it gives its share
    /// away (the competition watch answers it instead).
    pub max_drained: f64,
    /// The least path BDP estimate, packets: on slower paths the estimate of a varying link
    /// (a cellular uplink's) is too small to drain to.
    pub min_bdp_pkts: f64,
    /// The window drained to, in path BDPs (rate x minimum RTT).
    pub bdps: f64,
}

impl Drain {
    /// Parses `<min RTT ratio>:<max drained ratio>:<min BDP packets>:<BDPs>`, e.g.
    /// `1.5:1.3:40:1`.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let err = || {
            format!(
                "{spec:?}: not <min RTT ratio>:<max drained ratio>:<min BDP packets>:<BDPs>, \
                 e.g. 1.5:1.3:40:1"
            )
        };
        let [min_ratio, max_drained, min_bdp_pkts, bdps] =
            super::spec_numbers(spec).ok_or_else(err)?;
        if min_ratio < 1.0 || max_drained < 1.0 || bdps < 1.0 {
            return Err(err());
        }
        Ok(Self {
            min_ratio,
            max_drained,
            min_bdp_pkts,
            bdps,
        })
    }

    /// The window to drain to, bytes, for a probe with features `x` ([`super::FEATURE_NAMES`]
    /// order) on a flow of `mss_bytes` packets; `None` when the flow does not drain.
    pub fn window_bytes(&self, x: &[f64; N_FEATURES], mss_bytes: u64) -> Option<u32> {
        let bdp = x[RATE_MAX] * 1e6 / 8.0 * x[MIN_RTT] / 1e3;
        let drains = x[RTT_RATIO_LAST] >= self.min_ratio
            && x[DRAINED] <= self.max_drained
            && bdp >= self.min_bdp_pkts * mss_bytes.max(1) as f64;
        let bytes = (bdp * self.bdps).round();
        (drains && bytes.is_finite() && bytes >= 1.0).then(|| bytes.min(f64::from(u32::MAX)) as u32)
    }
}
/// The drain deployed flows make (this module): a default-mode flow that keeps its start drains
/// at the probe's end when its last RTT is at least 1.5 times the floor, its queue drained to
/// within 1.3 times the floor during the probe (its own queue, not a competitor's) and the path
/// holds at least 40 packets; its window is cut to one BDP. Chosen on `selection-train`, where
/// the drain without the last two conditions gained 0.049 per flow on long paths and lost 0.048
/// in competition and 0.009 on cellular uplinks (all of it on uplinks under 40 packets); with
/// them +0.0074 per flow overall (29 flows better, 7 worse). On the three validation sets
/// (`selection-bench`, `selection-val2`, `selection-bench-test2`) +0.0118 per condition (95 %
/// interval +0.0066 to +0.0175; long paths +0.051, changing paths +0.013), without a swap.
pub fn default_drain() -> Option<Drain> {
    Some(Drain {
        min_ratio: 1.5,
        max_drained: 1.3,
        min_bdp_pkts: 40.0,
        bdps: 1.0,
    })
}
