//! RL-TCP (Kong, Zang & Ma, "Improving TCP Congestion Control with Machine Intelligence",
//! `NetAI`'18, §3.2): `NewReno` whose congestion avoidance is a SARSA agent choosing a window
//! change once per RTT, learning online per flow.
//!
//! Model (the paper's parameters; `docs/algorithms.md` has the equations):
//! - Slow start, fast retransmit / recovery and timeouts are `NewReno`'s ([`crate::reno`]).
//! - Time step: one RTT (a step ends at the first report one smoothed RTT after it began).
//! - State ([`qtable::discretize`]): EWMA of the ACK inter-arrival time, EWMA of the send
//!   interval, RTT / `RTT_min`, ssthresh and cwnd, each in 20 levels.
//! - Actions: `cwnd += x` with x in {-1, 0, +1, +3} segments, spread over the RTT as
//!   `cwnd += x / cwnd` per acknowledged segment (summed over each report's ACKs).
//! - Utility of a step: `U = log(tp / B) - δ1 log(d) + δ2 log(1 - p)` with δ1 = 0.01,
//!   δ2 = 0.1; reward of `Δ = U_n - U_{n-1}`: +10 (Δ ≥ 1), +2 (0 ≤ Δ < 1), -2 (-1 ≤ Δ < 0),
//!   -10 (Δ < -1).
//! - Delayed credit: the action of step n shows one RTT later, so it earns r_{n+2}:
//!   `Q(s_{n-1}, a_{n-1}) <- (1 - α_t) Q + α_t (r_{n+1} + γ Q(s_n, a_n))`, γ = 0.5,
//!   `α_t = 0.3 · 0.995^floor(t / 10)` over the flow's updates t.
//! - ε-greedy with ε = 0.1 (ties broken at random), drawn from the flow's seed
//!   ([`crate::api::SplitMix64`]), so a flow is deterministic under its seed.
//!
//! ```text
//!  slow start (NewReno) ──loss──► avoidance: every RTT  observe ─► reward r_n ─► SARSA update
//!        ▲                              │                 of (s_{n-2}, a_{n-2}) ─► choose a_n
//!        └──────── timeout ─────────────┘  loss: NewReno's halving and recovery (action "keep")
//! ```
//!
//! Deviations: the bottleneck bandwidth B of the utility (known in the paper's NS2 runs) is the
//! largest throughput the flow has measured; d = RTT - `RTT_min` is floored at 1 ms and p at
//! 0.99 so the logarithms stay finite; during `NewReno`'s recovery the step's action is
//! "keep" (recovery holds the window), and steps pause during slow start. The paper's exact
//! level boundaries are not given; ours are in [`qtable::discretize`]. Flows start from an
//! empty table, or from a saved one ([`RlTcpConfig::warm_start`]); with
//! [`RlTcpConfig::sharing`] flows start from a shared table and write what they learned back
//! into it when they end (training across episodes).

pub mod qtable;

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use crate::api::{Algorithm, AlgorithmConfig, Control, FlowStart, Handoff, Measurement, SplitMix64};
use crate::programs::ProgramSpec;
use crate::reno::Reno;
use crate::window;

pub use qtable::{ACTIONS, Observation, QTable, QTableError, State};

/// SARSA's parameters (the paper's by default).
#[derive(Debug, Clone)]
pub struct RlTcpConfig {
    /// Exploration probability (0.1).
    pub epsilon: f64,
    /// Discount (0.5).
    pub gamma: f64,
    /// Initial learning rate (0.3).
    pub alpha0: f64,
    /// Learning-rate decay per [`Self::alpha_every`] updates (0.995).
    pub alpha_decay: f64,
    /// Updates per decay step (10).
    pub alpha_every: u64,
    /// Weight of the delay term of the utility (0.01).
    pub delta1: f64,
    /// Weight of the loss term of the utility (0.1).
    pub delta2: f64,
    start_table: Option<Arc<QTable>>,
    shared: Option<Arc<Mutex<QTable>>>,
}

impl Default for RlTcpConfig {
    fn default() -> Self {
        Self {
            epsilon: 0.1,
            gamma: 0.5,
            alpha0: 0.3,
            alpha_decay: 0.995,
            alpha_every: 10,
            delta1: 0.01,
            delta2: 0.1,
            start_table: None,
            shared: None,
        }
    }
}

impl RlTcpConfig {
    /// Flows start from the table saved in `path` ([`QTable::save`]).
    pub fn warm_start(mut self, path: &Path) -> Result<Self, QTableError> {
        self.start_table = Some(Arc::new(QTable::load(path)?));
        Ok(self)
    }

    /// Flows start from `table` as it is when they start and write the states they visited
    /// back into it when they end.
    #[must_use]
    pub fn sharing(mut self, table: Arc<Mutex<QTable>>) -> Self {
        self.shared = Some(table);
        self
    }

    /// Sets the exploration probability (0.1 recommended; 0 for a purely greedy flow).
    #[must_use]
    pub fn epsilon(mut self, epsilon: f64) -> Self {
        self.epsilon = epsilon;
        self
    }
}

impl AlgorithmConfig for RlTcpConfig {
    const NAME: &'static str = "rltcp";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &window::PROGRAMS
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        Box::new(RlTcp::new(self, start))
    }
}

/// What one step (one RTT) saw.
#[derive(Debug, Clone, Copy, Default)]
struct Step {
    start_us: Option<u64>,
    acked_bytes: u64,
    lost_pkts: u64,
    rtt_sum_us: f64,
    rtt_n: u64,
}

/// One RL-TCP flow.
#[derive(Debug)]
pub struct RlTcp {
    cfg: RlTcpConfig,
    reno: Reno,
    rng: SplitMix64,
    q: QTable,
    ack_ewma_us: f64,
    send_ewma_us: f64,
    last_now_us: Option<u64>,
    step: Step,
    /// B of the utility: the largest step throughput seen, bit/s.
    max_tp_bps: f64,
    last_utility: Option<f64>,
    /// (state, action) of the two previous steps, newest first.
    history: [Option<(State, usize)>; 2],
    updates: u64,
    steps: u64,
    /// The action in force (index into [`ACTIONS`]).
    action: usize,
    /// Window change not yet applied (less than a byte), bytes.
    carry_bytes: f64,
}

/// Reward bins of Δ U (the paper's).
fn reward(delta: f64) -> f64 {
    if delta >= 1.0 {
        10.0
    } else if delta >= 0.0 {
        2.0
    } else if delta >= -1.0 {
        -2.0
    } else {
        -10.0
    }
}

impl RlTcp {
    /// A new flow of `cfg` (its table empty, the saved one, or the shared one as it is now).
    pub fn new(cfg: &RlTcpConfig, start: &FlowStart) -> Self {
        let q = match (&cfg.shared, &cfg.start_table) {
            (Some(shared), _) => shared
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            (None, Some(t)) => (**t).clone(),
            (None, None) => QTable::default(),
        };
        Self {
            cfg: cfg.clone(),
            reno: Reno::new(start),
            rng: SplitMix64::new(start.seed ^ 0x524C_5443_5000_0000),
            q,
            ack_ewma_us: 0.0,
            send_ewma_us: 0.0,
            last_now_us: None,
            step: Step::default(),
            max_tp_bps: 0.0,
            last_utility: None,
            history: [None, None],
            updates: 0,
            steps: 0,
            action: qtable::KEEP,
            carry_bytes: 0.0,
        }
    }

    /// The flow's Q-table.
    pub fn q_table(&self) -> &QTable {
        &self.q
    }

    /// SARSA updates so far.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// The learning rate of update `t`.
    fn alpha(&self, t: u64) -> f64 {
        let k = t / self.cfg.alpha_every.max(1);
        self.cfg.alpha0 * self.cfg.alpha_decay.powf(k as f64)
    }

    fn mss(&self) -> f64 {
        f64::from(self.reno.state.mss_bytes)
    }

    fn observation(&self) -> Observation {
        let w = &self.reno.state;
        let mss = self.mss();
        let min_rtt = w.rtt.min_rtt_us() as f64;
        Observation {
            ack_interval_us: self.ack_ewma_us,
            send_interval_us: self.send_ewma_us,
            rtt_ratio: if min_rtt > 0.0 {
                w.rtt.srtt_us() as f64 / min_rtt
            } else {
                1.0
            },
            ssthresh_pkts: if w.ssthresh == u32::MAX {
                f64::INFINITY
            } else {
                f64::from(w.ssthresh) / mss
            },
            cwnd_pkts: f64::from(w.cwnd) / mss,
        }
    }

    /// ε-greedy over the actions of `s`, ties at random.
    fn choose(&mut self, s: State) -> usize {
        let n = ACTIONS.len() as u64;
        if self.rng.next_f64() < self.cfg.epsilon {
            return (self.rng.next_u64() % n) as usize;
        }
        let q = self.q.get(&s);
        let best = q.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let ties: Vec<usize> = (0..ACTIONS.len()).filter(|&a| q[a] >= best).collect();
        if ties.is_empty() {
            return qtable::KEEP;
        }
        ties[(self.rng.next_u64() % ties.len() as u64) as usize]
    }

    /// The utility of the step that just ended.
    fn utility(&mut self, duration_us: u64) -> f64 {
        let s = self.step;
        let tp = s.acked_bytes as f64 * 8.0 / (duration_us.max(1) as f64 / 1e6);
        self.max_tp_bps = self.max_tp_bps.max(tp);
        let b = self.max_tp_bps.max(1.0);
        let min_rtt = self.reno.state.rtt.min_rtt_us() as f64;
        let mean_rtt = if s.rtt_n > 0 {
            s.rtt_sum_us / s.rtt_n as f64
        } else {
            min_rtt
        };
        let d_s = ((mean_rtt - min_rtt) / 1e6).max(1e-3);
        let pkts = s.acked_bytes as f64 / self.mss();
        let p = (s.lost_pkts as f64 / (pkts + s.lost_pkts as f64).max(1.0)).min(0.99);
        (tp / b).max(1e-6).ln() - self.cfg.delta1 * d_s.ln() + self.cfg.delta2 * (1.0 - p).ln()
    }

    /// Ends a step at `now_us`: reward, SARSA update of the step two back, next action.
    fn end_step(&mut self, now_us: u64, start_us: u64, in_recovery: bool) {
        let utility = self.utility(now_us - start_us);
        let reward = self.last_utility.map(|prev| reward(utility - prev));
        self.last_utility = Some(utility);
        let state = qtable::discretize(&self.observation());
        let action = if in_recovery {
            qtable::KEEP
        } else {
            self.choose(state)
        };
        if let (Some(r), Some((s1, a1)), Some((s2, a2))) =
            (reward, self.history[0], self.history[1])
        {
            let alpha = self.alpha(self.updates);
            let next = self.q.get(&s1)[a1];
            let q = &mut self.q.entry(s2)[a2];
            *q = (1.0 - alpha) * *q + alpha * (r + self.cfg.gamma * next);
            self.updates += 1;
        }
        self.history = [Some((state, action)), self.history[0]];
        self.action = action;
        self.steps += 1;
        self.step = Step {
            start_us: Some(now_us),
            ..Step::default()
        };
    }

    /// Forgets the step chain (slow start again: a different regime).
    fn reset_chain(&mut self) {
        self.history = [None, None];
        self.last_utility = None;
        self.step = Step::default();
        self.action = qtable::KEEP;
        self.carry_bytes = 0.0;
    }

    /// The action in force over `acked_bytes`: `x / cwnd` segments per acknowledged segment.
    fn apply_action(&mut self, acked_bytes: u64) {
        let w = &mut self.reno.state;
        let mss = f64::from(w.mss_bytes);
        let x = f64::from(ACTIONS[self.action]);
        let cwnd = f64::from(w.cwnd).max(mss);
        self.carry_bytes += x * mss * (acked_bytes as f64 / cwnd);
        let whole = self.carry_bytes.trunc();
        self.carry_bytes -= whole;
        let floor = f64::from(<window::Bytes as window::WindowUnit>::loss_window(w.mss_bytes));
        let next = (f64::from(w.cwnd) + whole).clamp(floor, f64::from(u32::MAX));
        w.cwnd = next as u32;
        // A decrease stays in avoidance: NewReno would take a window below ssthresh for slow
        // start.
        w.ssthresh = w.ssthresh.min(w.cwnd);
    }
}

impl Drop for RlTcp {
    fn drop(&mut self) {
        if let Some(shared) = &self.cfg.shared {
            shared
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .merge_from(&self.q);
        }
    }
}

impl Algorithm for RlTcp {
    fn name(&self) -> &'static str {
        RlTcpConfig::NAME
    }

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &window::PROGRAMS
    }

    fn activate(&mut self, handoff: &Handoff) -> Control {
        self.reset_chain();
        self.reno.activate(handoff)
    }

    fn on_report(&mut self, m: &Measurement) -> Control {
        let now = self.reno.state.now_us.max(m.now_us);
        let mss = self.mss();
        // Signals: ACK inter-arrival and send interval, EWMA with gain 1/8.
        if let Some(last) = self.last_now_us
            && now > last
        {
            let segments = m.acked_bytes.saturating_add(m.sacked_bytes) as f64 / mss;
            let dt = (now - last) as f64;
            let ia = if segments >= 1.0 { dt / segments } else { dt };
            self.ack_ewma_us = if self.ack_ewma_us == 0.0 {
                ia
            } else {
                self.ack_ewma_us + (ia - self.ack_ewma_us) / 8.0
            };
        }
        self.last_now_us = Some(now);
        if m.rate_outgoing_bytes_per_sec > 0 {
            let si = mss / m.rate_outgoing_bytes_per_sec as f64 * 1e6;
            self.send_ewma_us = if self.send_ewma_us == 0.0 {
                si
            } else {
                self.send_ewma_us + (si - self.send_ewma_us) / 8.0
            };
        }
        self.step.acked_bytes = self.step.acked_bytes.saturating_add(m.acked_bytes);
        self.step.lost_pkts = self.step.lost_pkts.saturating_add(m.lost_pkts);
        if m.rtt_us > 0 {
            self.step.rtt_sum_us += m.rtt_us as f64;
            self.step.rtt_n += 1;
        }

        let w = &mut self.reno.state;
        let in_recovery = w.recovery.active(now);
        let avoidance = !w.in_first_slow_start && w.cwnd >= w.ssthresh;
        if avoidance && !in_recovery && !m.congestion() {
            // NewReno's bookkeeping without its growth; the action grows the window.
            self.reno.on_report(&Measurement {
                acked_bytes: 0,
                ..*m
            });
            self.apply_action(m.acked_bytes);
        } else {
            self.reno.on_report(m);
        }

        let w = &mut self.reno.state;
        if m.timeout || w.cwnd < w.ssthresh || w.in_first_slow_start {
            self.reset_chain();
        } else {
            let in_recovery = w.recovery.active(now);
            let srtt = w.rtt.srtt_us().max(1);
            match self.step.start_us {
                None => self.step.start_us = Some(now),
                Some(start) if now.saturating_sub(start) >= srtt => {
                    self.end_step(now, start, in_recovery);
                }
                Some(_) => {}
            }
        }
        Control::cwnd(self.reno.state.cwnd)
    }

    fn handoff(&self) -> Handoff {
        self.reno.handoff()
    }
}

#[cfg(test)]
mod tests;
