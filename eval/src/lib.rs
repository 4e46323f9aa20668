//! `ccp-eval`: the experiment harness.
//!
//! A [`scenario`] (TOML) names network conditions, traffic and schemes; the [`runner`] runs
//! every condition with every scheme and seed on the virtual-time simulator of
//! `ccp-datapath`, in parallel; each flow of each run becomes a row of [`results`]; the
//! report turns rows into tables and plots. [`schemes`] is the registry of what can run,
//! [`traces`] generates cellular link traces, and [`demo`] is the real-time end-to-end demo
//! (a portus agent and the datapath runtime over unix sockets).
//!
//! Start reading at [`runner::plan`]; the command line is [`cli`] (`src/main.rs` calls
//! [`cli::main_with`] with the built-in algorithms).

pub mod agree;
pub mod builtin;
pub mod cli;
pub mod demo;
pub mod iw_web;
pub mod lptcp;
pub mod outdir;
pub mod probe;
pub mod probe_kind;
pub mod ray;
pub mod report;
pub mod results;
pub mod runner;
pub mod scenario;
pub mod schemes;
pub mod selectors;
pub mod traces;
pub mod training;
