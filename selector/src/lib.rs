//! The meta-selector: one CCP algorithm whose per-flow state owns several candidate algorithms
//! and hot-swaps the active one mid-flow, carrying cwnd, pacing rate and RTT state across the
//! swap (`DESIGN.md` §3.2). Start reading at [`selector`], then [`policy`].
//!
//! What lives where:
//! - [`policy`]: the [`SelectionPolicy`] trait (typed per-report [`Features`] in, a
//!   [`Decision`] out) and the policies: [`StaticPolicy`] (never switches, the baseline),
//!   [`EveryN`] (round-robin every N reports, for tests) and [`ReinPolicy`] (Rein's rules:
//!   Cubic by default, BBR on a shallow buffer, Westwood on random-like loss).
//! - [`antelope`]: Antelope's policy (per-candidate gradient-boosted reward regressors over
//!   data units of N ACKs, Eq. 1-3 reward in three preference modes, IP-level start
//!   prediction, online refits) and, on the same machinery, our `outcome` models, which
//!   predict each candidate's whole-flow TCP-RL reward on the path seen so far.
//! - [`probe`] (ours): a flow probes its path on its mode's start candidate for its first
//!   seconds, then switches once to the candidate whose regressor predicts the largest gain
//!   over staying (labels from counterfactual runs that differ only after the probe).
//! - [`onnx`]: [`OnnxPolicy`] (policy 4): a neural network in an ONNX file, run with ONNX
//!   Runtime (loaded at run time from `ORT_DYLIB_PATH` or the workspace `.venv`), maps the
//!   last K reports' features to one score per candidate; the argmax wins. The model
//!   ([`OnnxModel`]) is loaded and validated once and shared by every flow.
//! - [`softmax`]: multiclass gradient boosting with a softmax objective (the probe's
//!   competitors'-kind classifier).
//! - [`hysteresis`]: the switch filter — M consecutive agreeing decisions (default 2, as in
//!   Antelope) and a minimum dwell time (default 2 RTTs, time taken from the reports).
//! - [`path_change`] (ours): a detector of a longer path (the RTT floor steps up, holds flat,
//!   and the flow slows down); when it fires the selector re-seats the active candidate with
//!   the new floor, so RTT-minimum algorithms (Copa, Vegas, C2TCP) do not go on reading the
//!   longer path as queue. Off unless a selector is built [`Selector::with_path_change`].
//! - [`selector`]: [`Selector`], a portus `CongAlg` over every IPC. Its per-flow object owns the
//!   flow's single `Datapath` and one instance of each candidate (dormant ones keep their
//!   state). A swap is outgoing `handoff()` → incoming `activate(&h)` → one CHANGE_PROG carrying
//!   `Cwnd` and `Rate` (`u32::MAX` when unpaced). Reports whose program uid is stale are dropped
//!   and counted. Every decision and swap is an [`Event`] in a shared [`SelectorLog`].
//!
//! Measured in `tests/sim_swaps.rs` (10 Mbit/s, 50 ms, 1-BDP buffer): 1,000+ forced swaps
//! round-robin over Reno/Cubic/Vegas/BBR keep utilization at ~0.99 with no timeouts, and the
//! window never exceeds the handed-over one by more than ~2 % in the RTT after a swap. That
//! needs the loss hold in [`HysteresisConfig::loss_hold_rtts`]: the candidates' `activate`
//! resets their recovery state, so without the hold a swap in mid-episode cuts the window once
//! per candidate for the same losses (utilization fell to ~0.74 in the same run).
//!
//! Learned policies explain each decision (features and per-candidate scores) in the decision
//! events. The deployable agent is the `ccp-agent` crate; training and evaluation are in
//! `ccp-eval` (`gen-data`, `train`, `docs/selector.md`).

pub mod antelope;
mod boosters;
pub mod hysteresis;
pub mod onnx;
pub mod path_change;
pub mod policy;
pub mod probe;
pub mod selector;
pub mod softmax;
pub mod tcprl;

pub use hysteresis::{Hysteresis, HysteresisConfig};
pub use onnx::{OnnxError, OnnxModel, OnnxPolicy};
pub use path_change::{PathChange, PathChangeConfig};
pub use policy::{
    Decision, EveryN, Explanation, Features, FlowContext, ReinPolicy, SelectionPolicy, StaticPolicy,
};
pub use selector::{
    Event, EventKind, PolicyFactory, PolicyHandle, Selector, SelectorFlow, SelectorLog,
};
