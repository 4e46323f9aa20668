//! The meta-selector: one CCP algorithm whose per-flow state owns several candidate algorithms
//! and hot-swaps the active one mid-flow, carrying cwnd, pacing rate and RTT state across the
//! swap.
//!
//! This crate will hold the selector itself (one CHANGE_PROG per swap, stale reports dropped,
//! hysteresis), the `SelectionPolicy` trait and the policies from the literature: static,
//! Rein's rules, Antelope's per-candidate gradient-boosted reward models and ONNX neural
//! policies. See `DESIGN.md` §3.2. Nothing is implemented here yet.
