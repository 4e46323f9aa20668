//! Selection policies: given one report's typed features, stay on the current candidate or ask
//! for another. A policy is per-flow state; the selector builds one per flow from a factory.

use ccp_algorithms::Measurement;

use crate::hysteresis::HysteresisConfig;

/// What a policy sees on every report.
#[derive(Debug, Clone, Copy)]
pub struct Features<'a> {
    /// The report, decoded.
    pub measurement: &'a Measurement,
    /// Index of the active candidate.
    pub current: usize,
    /// Names of the candidates, by index.
    pub candidates: &'a [&'static str],
    /// Datapath time of the report, µs.
    pub now_us: u64,
    /// The active candidate's smoothed RTT, µs (0: none yet).
    pub srtt_us: u64,
    /// Reports seen by this flow so far, this one included.
    pub reports: u64,
}

/// A policy's answer for one report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// No new decision on this report (e.g. a data unit is still being built): the
    /// hysteresis keeps counting the previous decisions as they were.
    Hold,
    /// Keep the active candidate.
    Stay,
    /// Switch to this candidate (subject to the selector's hysteresis).
    SwitchTo(usize),
    /// Keep the active candidate but re-seat it with its window cut to at most `cwnd_bytes`
    /// (a drain, as BBR's Drain after its start-up: the queue a start-up overshoot left is
    /// emptied at once instead of over seconds). Not a swap: no hysteresis, no swap counted.
    Drain {
        /// The most window the candidate is re-seated with, bytes.
        cwnd_bytes: u32,
    },
}

/// What a policy knows about its flow when it is built.
#[derive(Debug, Clone, Copy)]
pub struct FlowContext<'a> {
    /// Names of the candidates, by index.
    pub candidates: &'a [&'static str],
    /// The datapath's socket id.
    pub sock_id: u32,
    /// Destination IPv4 address, host order (`u32::from(Ipv4Addr)`: the first octet is the
    /// high byte); the selector decodes the datapath's encoding
    /// ([`crate::Selector::with_network_order_ips`]).
    pub dst_ip: u32,
    /// Destination port.
    pub dst_port: u32,
    /// Source port.
    pub src_port: u32,
    /// Maximum segment size, bytes.
    pub mss_bytes: u32,
}

impl<'a> FlowContext<'a> {
    /// A context with only the candidates known (tests, benchmarks).
    pub fn for_candidates(candidates: &'a [&'static str]) -> Self {
        Self {
            candidates,
            sock_id: 0,
            dst_ip: 0,
            dst_port: 0,
            src_port: 0,
            mss_bytes: 1448,
        }
    }
}

/// The first `bits` bits of the host-order IPv4 address `ip` (0-32; more count as 32): the
/// destination group of the policies that group flows by prefix.
pub(crate) fn ip_prefix(ip: u32, bits: u8) -> u32 {
    match bits.min(32) {
        0 => 0,
        b => ip & (u32::MAX << (32 - u32::from(b))),
    }
}

/// Why a policy decided as it did: which part of it decided, the features it looked at and its
/// score per candidate (recorded in decision events so a trace can show them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Explanation {
    /// The part of the policy that made the decision: the probe policy's parts
    /// ([`crate::probe::Part`]: its models, the competitors' kind, a watch, ...); a policy of
    /// one part names itself.
    pub by: &'static str,
    /// The feature vector the decision was made on.
    pub features: Vec<f64>,
    /// One score per candidate, by index (higher is better).
    pub scores: Vec<f64>,
}

/// Maps per-report features to a decision.
pub trait SelectionPolicy: Send {
    /// Name used in configs and traces.
    fn name(&self) -> &'static str;
    /// The candidate a new flow starts on.
    fn initial(&self) -> usize {
        0
    }
    /// One decision per report.
    fn decide(&mut self, features: &Features<'_>) -> Decision;
    /// The features and scores behind the last decision, if the policy has any.
    fn explain(&self) -> Option<Explanation> {
        None
    }
    /// The part of the policy behind its last decision ([`Explanation::by`]), if it explains
    /// itself: what the selector logs with each swap. A policy may answer without building the
    /// whole explanation.
    fn decided_by(&self) -> Option<&'static str> {
        self.explain().map(|e| e.by)
    }
    /// Whether a swap to `to` hands over as if the flow were still in its first slow start,
    /// so the incoming candidate probes for bandwidth afresh instead of continuing from the
    /// outgoing one's rate (window, pacing and RTT state are still carried over).
    fn afresh(&self, _to: usize) -> bool {
        false
    }
    /// Whether a swap to `to` made afresh ([`Self::afresh`]) also hands the incoming candidate
    /// the flow's smoothed RTT as its RTT floor, as a flow started now over the standing queue
    /// would measure it; otherwise the floor is the flow's minimum RTT, the path's, which
    /// caps a window of bandwidth x floor (BBR's) under a competitor's standing queue.
    fn afresh_floor(&self, _to: usize) -> bool {
        false
    }
    /// The hysteresis this report's decision passes instead of the selector's (`None`: the
    /// selector's). A policy that hands its flow to another one asks for that one's: TCP-RL's
    /// policy was trained with every decision taking effect, so behind the selector's loss hold
    /// it is not the policy it was.
    fn hysteresis(&self) -> Option<HysteresisConfig> {
        None
    }
    /// The selector detected a longer path and re-seated the active candidate on the new RTT
    /// floor `floor_us` ([`crate::path_change`]). A policy that keeps its own RTT floor resets
    /// it here (the default keeps nothing).
    fn path_changed(&mut self, _floor_us: u64) {}
}

/// The index of the highest of `scores`, `current` on ties with it (and when `scores` is empty
/// or `current` is out of range, the highest after `current`'s missing score, which counts as
/// negative infinity).
pub(crate) fn argmax_from(scores: &[f64], current: usize) -> usize {
    let at = |i: usize| scores.get(i).copied().unwrap_or(f64::NEG_INFINITY);
    let mut best = current;
    for (i, s) in scores.iter().enumerate() {
        if *s > at(best) {
            best = i;
        }
    }
    best
}

/// `static:<cca>`: starts on one candidate and never switches (the baseline).
#[derive(Debug, Clone, Copy, Default)]
pub struct StaticPolicy {
    /// The candidate used for the whole flow.
    pub candidate: usize,
}

impl SelectionPolicy for StaticPolicy {
    fn name(&self) -> &'static str {
        "static"
    }
    fn initial(&self) -> usize {
        self.candidate
    }
    fn decide(&mut self, _features: &Features<'_>) -> Decision {
        Decision::Stay
    }
}

/// For tests: asks for the next candidate (round-robin) every `n` reports.
#[derive(Debug, Clone, Copy)]
pub struct EveryN {
    /// Reports between switch requests (at least 1).
    pub n: u64,
}

impl SelectionPolicy for EveryN {
    fn name(&self) -> &'static str {
        "every-n"
    }
    fn decide(&mut self, f: &Features<'_>) -> Decision {
        if f.candidates.len() > 1 && f.reports.is_multiple_of(self.n.max(1)) {
            Decision::SwitchTo((f.current + 1) % f.candidates.len())
        } else {
            Decision::Stay
        }
    }
}

/// Rein's rules: Cubic by default, BBR when the buffer looks shallow, Westwood on loss that
/// looks random (wireless-like).
///
/// Each loss report is classified by the RTT inflation at the time, `rtt / min_rtt` (min RTT
/// over the flow so far):
/// - inflation `< RANDOM_LOSS_INFLATION` (1.05): the queue was empty, so the loss was not
///   caused by congestion — random loss → Westwood;
/// - inflation `< SHALLOW_BUFFER_INFLATION` (1.5): the buffer overflowed before it could add
///   half an RTT of delay — a shallow buffer → BBR;
/// - otherwise a deep buffer filled by the flow → Cubic.
///
/// The verdict holds until the next loss; `QUIET_RTTS` (20) smoothed RTTs without loss return
/// the flow to Cubic.
#[derive(Debug, Clone)]
pub struct ReinPolicy {
    cubic: usize,
    bbr: usize,
    westwood: usize,
    min_rtt_us: u64,
    last_loss_us: Option<u64>,
    verdict: usize,
}

impl ReinPolicy {
    /// Below this inflation a loss is classed as random.
    pub const RANDOM_LOSS_INFLATION: f64 = 1.05;
    /// Below this inflation (and above the random one) the buffer is classed as shallow.
    pub const SHALLOW_BUFFER_INFLATION: f64 = 1.5;
    /// Loss-free smoothed RTTs after which the flow returns to Cubic.
    pub const QUIET_RTTS: u64 = 20;

    /// The policy over these candidates; `None` unless cubic, bbr and westwood are among them.
    pub fn for_candidates(names: &[&str]) -> Option<Self> {
        let find = |n: &str| names.iter().position(|c| *c == n);
        let cubic = find("cubic")?;
        Some(Self {
            cubic,
            bbr: find("bbr")?,
            westwood: find("westwood")?,
            min_rtt_us: 0,
            last_loss_us: None,
            verdict: cubic,
        })
    }
}

impl SelectionPolicy for ReinPolicy {
    fn name(&self) -> &'static str {
        "rein"
    }
    fn initial(&self) -> usize {
        self.cubic
    }
    fn decide(&mut self, f: &Features<'_>) -> Decision {
        let m = f.measurement;
        self.min_rtt_us = ccp_algorithms::rtt::lower_min(self.min_rtt_us, [m.min_rtt_us, m.rtt_us]);
        if m.congestion() && self.min_rtt_us > 0 && m.rtt_us > 0 {
            let inflation = m.rtt_us as f64 / self.min_rtt_us as f64;
            self.verdict = if inflation < Self::RANDOM_LOSS_INFLATION {
                self.westwood
            } else if inflation < Self::SHALLOW_BUFFER_INFLATION {
                self.bbr
            } else {
                self.cubic
            };
            self.last_loss_us = Some(f.now_us);
        } else if let Some(t) = self.last_loss_us
            && f.srtt_us > 0
            && f.now_us.saturating_sub(t) > Self::QUIET_RTTS * f.srtt_us
        {
            self.verdict = self.cubic;
        }
        if self.verdict == f.current {
            Decision::Stay
        } else {
            Decision::SwitchTo(self.verdict)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: [&str; 3] = ["cubic", "bbr", "westwood"];

    fn feed(p: &mut ReinPolicy, now_us: u64, rtt_us: u64, lost: u64, current: usize) -> Decision {
        let m = Measurement {
            now_us,
            rtt_us,
            min_rtt_us: rtt_us,
            lost_pkts: lost,
            ..Measurement::default()
        };
        p.decide(&Features {
            measurement: &m,
            current,
            candidates: &NAMES,
            now_us,
            srtt_us: rtt_us,
            reports: 1,
        })
    }

    #[test]
    fn rein_classifies_loss_by_rtt_inflation() {
        let mut p = ReinPolicy::for_candidates(&NAMES).unwrap();
        assert_eq!(p.initial(), 0);
        assert_eq!(feed(&mut p, 1_000, 50_000, 0, 0), Decision::Stay);
        assert_eq!(feed(&mut p, 2_000, 51_000, 3, 0), Decision::SwitchTo(2));
        assert_eq!(feed(&mut p, 3_000, 60_000, 3, 2), Decision::SwitchTo(1));
        assert_eq!(feed(&mut p, 4_000, 100_000, 3, 1), Decision::SwitchTo(0));
        // Quiet for more than 20 RTTs after a BBR verdict: back to Cubic.
        assert_eq!(feed(&mut p, 5_000, 60_000, 3, 0), Decision::SwitchTo(1));
        assert_eq!(
            feed(&mut p, 5_000 + 21 * 60_000, 60_000, 0, 1),
            Decision::SwitchTo(0)
        );
    }

    #[test]
    fn rein_needs_its_three_candidates() {
        assert!(ReinPolicy::for_candidates(&["cubic", "bbr"]).is_none());
    }

    #[test]
    fn every_n_goes_round_robin() {
        let mut p = EveryN { n: 2 };
        let m = Measurement::default();
        let f = |reports, current| Features {
            measurement: &m,
            current,
            candidates: &NAMES,
            now_us: 0,
            srtt_us: 0,
            reports,
        };
        assert_eq!(p.decide(&f(1, 0)), Decision::Stay);
        assert_eq!(p.decide(&f(2, 0)), Decision::SwitchTo(1));
        assert_eq!(p.decide(&f(4, 2)), Decision::SwitchTo(0));
        assert_eq!(
            StaticPolicy { candidate: 1 }.decide(&f(2, 1)),
            Decision::Stay
        );
    }
}
