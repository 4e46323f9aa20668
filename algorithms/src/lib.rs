//! Congestion control algorithms as sans-IO CCP algorithms.
//!
//! This crate will hold the `Algorithm` trait (typed measurements in, controls out, a `Handoff`
//! exported and adopted across a swap), the generic adapter that turns any algorithm into a
//! portus `CongAlg`, the small shared library of datapath programs, and one module per candidate
//! algorithm: Reno/NewReno, Cubic, BBR v1, Copa, Vegas, Westwood+, Illinois, C2TCP and PCC
//! Vivace. See `DESIGN.md` §3.1 and §3.3 for the contracts these follow.
//!
//! Nothing is implemented here yet; the datapath they run on is `ccp-datapath`.
