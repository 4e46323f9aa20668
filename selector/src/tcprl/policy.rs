//! The `tcprl` policy: TCP-RL's learned selection, one decision per step.
//!
//! Per flow: the [`Stepper`] groups reports into the model's steps; at the end of each, the
//! observation (the feature window and TCP-RL's state of the step, `step::observation`) goes
//! through the DNC first, if the model has one: when it says the path changed (P above the
//! sidecar's threshold) the LSTM state is cleared and the flow moves to a random candidate,
//! as TCP-RL does to flush what it had learned about the old path. Otherwise the policy
//! network runs one LSTM step and the most probable candidate is the decision (greedy: the
//! exploration of training is off), unless it is less than the sidecar's `switch_margin` more
//! probable than the active candidate: then the flow stays (not in TCP-RL, whose greedy policy
//! moves on any argmax; a margin of 0, the default, is TCP-RL's rule). The margin keeps flows
//! from alternating each step between two candidates the policy rates alike, each swap costing
//! the incoming candidate's start-up. A flow starts on the sidecar's `start` candidate, or,
//! when that is `"random"` or absent, on a candidate drawn from the flow's identity (socket,
//! ports, destination: TCP-RL's random initial scheme, reproducible per flow).
//!
//! Left out: TCP-RL's online learning (the model is trained offline in `ccp_suite.tcprl`
//! and frozen here).

use std::sync::Arc;

use ccp_algorithms::api::SplitMix64;

use super::model::TcpRlModel;
use super::step::{Stepper, observation};
use crate::onnx::argmax;
use crate::policy::{Decision, Explanation, Features, FlowContext, SelectionPolicy};
use crate::selector::PolicyFactory;

/// The `tcprl` policy of one flow.
#[derive(Debug)]
pub struct TcpRlPolicy {
    model: Arc<TcpRlModel>,
    stepper: Stepper,
    h: Vec<f32>,
    c: Vec<f32>,
    /// Probabilities of the last step, model order.
    model_probs: Vec<f32>,
    /// The same, selector order.
    probs: Vec<f32>,
    /// The last observation and the model index of the action taken on it.
    last: Option<(Vec<f32>, usize)>,
    /// The DNC's input, reused.
    dnc_input: Vec<f32>,
    obs: Vec<f32>,
    initial: usize,
    rng: SplitMix64,
    errors: u64,
    changes: u64,
}

impl TcpRlPolicy {
    /// A policy for one flow over `model`'s candidates; the flow starts on a candidate drawn
    /// with `seed`.
    pub fn new(model: Arc<TcpRlModel>, seed: u64) -> Self {
        let n = model.sidecar().candidates.len();
        let hidden = model.sidecar().hidden;
        let mut rng = SplitMix64::new(seed);
        // Drawn either way, so the DNC's draws do not depend on the start.
        let drawn = (rng.next_u64() % n.max(1) as u64) as usize;
        let initial = model.start().unwrap_or(drawn);
        Self {
            stepper: Stepper::new(model.step(), model.sidecar().window, n),
            h: vec![0.0; hidden],
            c: vec![0.0; hidden],
            model_probs: vec![0.0; n],
            probs: vec![0.0; model.selector_len()],
            last: None,
            dnc_input: Vec::new(),
            obs: Vec::new(),
            initial,
            rng,
            errors: 0,
            changes: 0,
            model,
        }
    }

    /// A factory: one policy per flow sharing `model`, seeded from the flow's identity.
    pub fn factory(model: Arc<TcpRlModel>) -> PolicyFactory {
        Arc::new(move |ctx: &FlowContext<'_>| {
            let seed = u64::from(ctx.sock_id) << 32
                ^ u64::from(ctx.dst_ip).rotate_left(16)
                ^ u64::from(ctx.dst_port)
                ^ u64::from(ctx.src_port) << 16;
            Box::new(TcpRlPolicy::new(model.clone(), seed)) as _
        })
    }

    /// Inferences that failed (each answered `Stay`).
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// Times the DNC fired.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Candidate probabilities of the last step, by the selector's index.
    pub fn probabilities(&self) -> &[f32] {
        &self.probs
    }

    /// The DNC's verdict on this step (false without a DNC or on an error).
    fn path_changed(&mut self) -> bool {
        let Some((last, action)) = &self.last else {
            return false;
        };
        let n = self.model_probs.len();
        self.dnc_input.clear();
        self.dnc_input.extend_from_slice(last);
        self.dnc_input
            .extend((0..n).map(|k| if k == *action { 1.0 } else { 0.0 }));
        self.dnc_input.extend_from_slice(&self.obs);
        match self.model.change_probability(&self.dnc_input) {
            Ok(Some(p)) => f64::from(p) > self.model.sidecar().dnc_threshold,
            Ok(None) => false,
            Err(e) => {
                self.errors += 1;
                tracing::warn!(error = %e, "tcprl: DNC inference failed");
                false
            }
        }
    }

    /// The step's action: the most probable candidate `best`, unless the sidecar's
    /// `switch_margin` keeps the flow on `current` (model indices; a `current` outside the
    /// model never holds).
    fn held(&self, best: usize, current: usize) -> usize {
        let margin = self.model.sidecar().switch_margin;
        match self.model_probs.get(current) {
            Some(&p) if best != current && f64::from(self.model_probs[best] - p) < margin => {
                current
            }
            _ => best,
        }
    }
}

impl SelectionPolicy for TcpRlPolicy {
    fn name(&self) -> &'static str {
        "tcprl"
    }

    fn initial(&self) -> usize {
        // The draw is over the model's order; the selector's index of that candidate.
        (0..self.probs.len())
            .find(|&k| self.model.model_index(k) == Some(self.initial))
            .unwrap_or(0)
    }

    fn decide(&mut self, f: &Features<'_>) -> Decision {
        let current = self.model.model_index(f.current).unwrap_or(usize::MAX);
        let Some(st) = self.stepper.push(&Features { current, ..*f }) else {
            return Decision::Stay;
        };
        self.obs = observation(self.stepper.window(), &st);
        let choice = if self.path_changed() {
            self.changes += 1;
            self.h.fill(0.0);
            self.c.fill(0.0);
            (self.rng.next_u64() % self.model_probs.len().max(1) as u64) as usize
        } else {
            match self
                .model
                .policy_step(&self.obs, &mut self.h, &mut self.c, &mut self.model_probs)
            {
                Ok(()) => match argmax(&self.model_probs) {
                    Some(k) => self.held(k, current),
                    None => return Decision::Stay,
                },
                Err(e) => {
                    self.errors += 1;
                    tracing::warn!(error = %e, "tcprl: policy inference failed");
                    return Decision::Stay;
                }
            }
        };
        for k in 0..self.probs.len() {
            self.probs[k] = self
                .model
                .model_index(k)
                .map_or(f32::NAN, |m| self.model_probs[m]);
        }
        self.last = Some((std::mem::take(&mut self.obs), choice));
        match (0..self.probs.len()).find(|&k| self.model.model_index(k) == Some(choice)) {
            Some(k) if k != f.current => Decision::SwitchTo(k),
            _ => Decision::Stay,
        }
    }

    fn explain(&self) -> Option<Explanation> {
        self.last.as_ref().map(|(obs, _)| Explanation {
            by: self.name(),
            features: obs.iter().map(|v| f64::from(*v)).collect(),
            scores: self.probs.iter().map(|v| f64::from(*v)).collect(),
        })
    }
}
