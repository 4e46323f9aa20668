//! `ccp-eval`: the experiment harness.
//!
//! This crate will hold scenarios (network conditions, traffic and schemes in TOML), a
//! parallel runner on the virtual-time simulator, metrics and reports (see `DESIGN.md` §2 and
//! §3.5). Today it holds the [`demo`]: a real portus agent and the CCP datapath runtime in one
//! process, talking over unix sockets, with the agent killed and restarted mid-flow.
//!
//! Start reading at [`demo::run`]; the binary is `src/main.rs`.

pub mod demo;
pub mod report;
