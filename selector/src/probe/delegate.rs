//! Delegation: at the probe's end, a default-mode flow whose path passes a gate hands every
//! later decision to another policy, which has followed the flow since its first report.
//! Measured and not deployed (off unless configured; `docs/selector/measured-not-deployed.md`,
//! "A delegate for long paths"): the drain ([`super::drain`]) does the useful part in one
//! re-seat.
//!
//! Why: on long wired paths (90-300 ms) TCP-RL's policy ([`crate::tcprl`]) captured 82 and
//! 72 % of the headroom on the two validation sets of `selection-bench` where the probe's
//! one switch lost (-110 and -20 %): the switch the probe's models can offer is a move for
//! good, and on these paths a move away from Copa after its slow start costs more than it
//! gains, while TCP-RL's policy empties Copa's start-up queue with a Westwood+ interlude of
//! about a second and comes back (`docs/selector.md`). So a flow whose probe saw a long, fast
//! path of its own (a minimum RTT of at least [`DelegateGate::min_rtt_ms`], a highest delivery
//! rate of at least [`DelegateGate::min_rate_mbps`], and a queue that drained to within
//! [`DelegateGate::max_drained`] of the floor: no competitor's standing queue) lets that policy
//! decide; every other flow keeps the probe's choice.
//!
//! The delegate sees every report from the flow's first on (its decisions are ignored until the
//! hand-over), so its recurrent state is what it would be had it run the flow alone, as long as
//! it starts on the same candidate as the probe (TCP-RL's shipped model starts on Copa, as the
//! default mode's probe does). It makes at most [`Delegate::max_swaps`] swaps (the selector's
//! promise of a few swaps per flow on a path that does not change; TCP-RL's policy alone makes
//! up to eight on these paths). Left out: handing back; delay- and throughput-sensitive flows
//! (the delegate was trained on the default objective only).

use std::fmt;

use crate::hysteresis::HysteresisConfig;
use crate::policy::{Decision, Features, FlowContext, SelectionPolicy};
use crate::selector::PolicyFactory;

use super::features::{DRAINED, MIN_RTT, N_FEATURES, RATE_MAX};

/// Which flows hand over at the probe's end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DelegateGate {
    /// The least minimum RTT of the probe, ms.
    pub min_rtt_ms: f64,
    /// The largest `rtt_ratio_drained` (the RTT over its floor where the queue drained most).
    pub max_drained: f64,
    /// The least `rate_max_mbps` (the highest delivery rate of the probe), Mbit/s.
    pub min_rate_mbps: f64,
}

impl DelegateGate {
    /// Parses `<min RTT ms>:<max drained ratio>:<min rate Mbit/s>`, e.g. `90:1.2:20`.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let err = || {
            format!(
                "{spec:?}: not <min RTT ms>:<max drained ratio>:<min rate Mbit/s>, e.g. 90:1.2:20"
            )
        };
        let [min_rtt_ms, max_drained, min_rate_mbps] = super::spec_numbers(spec).ok_or_else(err)?;
        if max_drained < 1.0 {
            return Err(err());
        }
        Ok(Self {
            min_rtt_ms,
            max_drained,
            min_rate_mbps,
        })
    }

    /// Whether a probe with features `x` ([`super::FEATURE_NAMES`] order) passes.
    pub fn passes(&self, x: &[f64; N_FEATURES]) -> bool {
        x[MIN_RTT] >= self.min_rtt_ms
            && x[DRAINED] <= self.max_drained
            && x[RATE_MAX] >= self.min_rate_mbps
    }
}

/// A policy default-mode flows hand over to, and the gate they pass first.
#[derive(Clone)]
pub struct Delegate {
    /// The delegate's name (for traces and errors).
    pub name: String,
    /// Builds the delegate for each flow.
    pub factory: PolicyFactory,
    /// Which flows hand over.
    pub gate: DelegateGate,
    /// The hysteresis its decisions pass ([`SelectionPolicy::hysteresis`]): the one it was
    /// trained or tuned with (TCP-RL's: none).
    pub hysteresis: HysteresisConfig,
    /// The most swaps it makes in a flow; after them the flow stays where it is.
    pub max_swaps: u32,
}

impl fmt::Debug for Delegate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delegate")
            .field("name", &self.name)
            .field("gate", &self.gate)
            .field("hysteresis", &self.hysteresis)
            .field("max_swaps", &self.max_swaps)
            .finish_non_exhaustive()
    }
}

/// One flow's delegate: following the flow, or deciding for it.
pub(crate) struct Following {
    policy: Box<dyn SelectionPolicy>,
    gate: DelegateGate,
    hysteresis: HysteresisConfig,
    deciding: bool,
    /// Swaps made since it decides, at most `max_swaps`, and the candidate of its last report.
    swaps: u32,
    max_swaps: u32,
    last: Option<usize>,
}

impl fmt::Debug for Following {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Following")
            .field("policy", &self.policy.name())
            .field("gate", &self.gate)
            .field("hysteresis", &self.hysteresis)
            .field("deciding", &self.deciding)
            .field("swaps", &self.swaps)
            .field("max_swaps", &self.max_swaps)
            .field("last", &self.last)
            .finish()
    }
}

impl Following {
    /// The delegate of the flow `ctx`.
    pub(crate) fn new(delegate: &Delegate, ctx: &FlowContext<'_>) -> Self {
        Self {
            policy: (delegate.factory)(ctx),
            gate: delegate.gate,
            hysteresis: delegate.hysteresis,
            deciding: false,
            swaps: 0,
            max_swaps: delegate.max_swaps,
            last: None,
        }
    }

    /// Whether it decides for the flow.
    pub(crate) fn deciding(&self) -> bool {
        self.deciding
    }

    /// Shows it a report while the probe decides (its answer is dropped).
    pub(crate) fn follow(&mut self, f: &Features<'_>) {
        let _ = self.policy.decide(f);
    }

    /// Hands it the flow if `x` passes the gate; true when it did.
    pub(crate) fn take_over(&mut self, x: &[f64; N_FEATURES]) -> bool {
        self.deciding = self.gate.passes(x);
        self.deciding
    }

    /// Its decision on a report, once deciding; `Stay` for good once it made its swaps.
    pub(crate) fn decide(&mut self, f: &Features<'_>) -> Decision {
        if self.last.is_some_and(|c| c != f.current) {
            self.swaps += 1;
        }
        self.last = Some(f.current);
        if self.swaps >= self.max_swaps {
            return Decision::Stay;
        }
        self.policy.decide(f)
    }

    /// The hysteresis its decisions pass.
    pub(crate) fn hysteresis(&self) -> HysteresisConfig {
        self.hysteresis
    }

    /// Its own cold-start choice for a target ([`SelectionPolicy::afresh`]).
    pub(crate) fn afresh(&self, to: usize) -> bool {
        self.policy.afresh(to)
    }

    /// Its own choice of the target's floor ([`SelectionPolicy::afresh_floor`]).
    pub(crate) fn afresh_floor(&self, to: usize) -> bool {
        self.policy.afresh_floor(to)
    }
}
