//! Congestion control algorithms as sans-IO CCP algorithms.
//!
//! Start reading at [`api`]: the [`Algorithm`] trait (typed [`Measurement`]s in, [`Control`]s
//! out, a [`Handoff`] exported and adopted across a swap) and its factory, [`AlgorithmConfig`].
//! [`registry`] is the one list of algorithms every tool reads, and its portus glue;
//! [`adapter::Ccp`] turns one config into a portus `CongAlg`; [`programs`] is the small shared
//! library of datapath programs every algorithm installs from. Then one module per algorithm,
//! each naming the paper or RFC it follows and what it leaves out: [`reno`] (RFC 5681/6582),
//! [`cubic`] (RFC 9438), [`bbr`] (BBR v1), [`copa`], [`vegas`], [`westwood`] (Westwood+),
//! [`illinois`], [`c2tcp`], [`vivace`] (PCC Vivace), and the learned [`lptcp`] (a random-forest
//! loss predictor on `NewReno`) and [`rltcp`] (SARSA on `NewReno`), both Kong et al., `NetAI`'18,
//! and [`arc`] (ARC, an actor-critic rate controller run with ONNX Runtime; [`onnx`] is the
//! suite's one loader of the runtime). See `DESIGN.md` §3.1 and §3.3 for the contracts these
//! follow, and `docs/writing-a-cca.md` to add one.
//!
//! Algorithms read no clock and own no IPC handle; time comes from the reports. The datapath
//! they run on is `ccp-datapath` (a dev-dependency only: the behaviour tests in `tests/` run
//! each algorithm in its simulator).

pub mod adapter;
pub mod api;
pub mod onnx;
pub mod programs;
pub mod recovery;
pub mod registry;
pub mod rtt;
#[cfg(test)]
pub(crate) mod test_support;
pub mod window;

pub use adapter::{Ccp, MeasuredFlow, ProgramLink, flow_start};
pub use api::{
    Algorithm, AlgorithmConfig, Control, DynAlgorithmConfig, FlowStart, Handoff, Measurement,
    Pacing,
};
pub use programs::ProgramSpec;
pub use registry::Registry;

/// The built-in algorithms, one line each: `module: Algorithm, Config, "description"`. Adding
/// one is a new file `src/<module>.rs` (or folder) and one line here; the order is the
/// registry's (and the selector's default candidates').
macro_rules! builtin_algorithms {
    ($($module:ident: $alg:ident, $config:ident, $description:literal;)*) => {
        $(pub mod $module;
        pub use $module::{$alg, $config};)*

        /// Every built-in config with its description, in registry order.
        fn builtin_configs() -> Vec<(std::sync::Arc<dyn DynAlgorithmConfig>, &'static str)> {
            vec![$((std::sync::Arc::new($config::default()), $description),)*]
        }
    };
}

builtin_algorithms! {
    reno: Reno, RenoConfig, "Reno/NewReno (RFC 5681/6582)";
    cubic: Cubic, CubicConfig, "Cubic (RFC 9438) with fast convergence and the Reno-friendly region";
    bbr: Bbr, BbrConfig, "BBR v1 (Cardwell et al. 2016)";
    copa: Copa, CopaConfig, "Copa (Arun & Balakrishnan, NSDI'18), delta 0.5, competitive mode";
    vegas: Vegas, VegasConfig, "Vegas (Brakmo & Peterson 1995), alpha 2, beta 4";
    westwood: Westwood, WestwoodConfig, "Westwood+ (Grieco & Mascolo 2004)";
    illinois: Illinois, IllinoisConfig, "TCP-Illinois (Liu, Basar & Srikant 2006)";
    c2tcp: C2tcp, C2tcpConfig, "C2TCP (Abbasloo et al. 2018), target-delay layer over Cubic";
    vivace: Vivace, VivaceConfig, "PCC Vivace (Dong et al., NSDI'18)";
    lptcp: LpTcp, LpTcpConfig, "LP-TCP (Kong et al., NetAI'18): NewReno holding the window when a random forest predicts loss";
    rltcp: RlTcp, RlTcpConfig, "RL-TCP (Kong et al., NetAI'18): NewReno with SARSA choosing the window change per RTT";
    arc: ArcCc, ArcConfig, "ARC (Zhang et al.): an actor-critic pacing-rate controller, its actor run with ONNX Runtime off the report path every RTT/2";
}

pub use cubic::CubicAckClockConfig;
pub use reno::RenoAckClockConfig;

/// The built-in variants ([`registry::Registry::variants`]): another configuration of a
/// built-in algorithm under a name of its own, never in a default list.
fn builtin_variants() -> Vec<(std::sync::Arc<dyn DynAlgorithmConfig>, &'static str)> {
    vec![
        (
            std::sync::Arc::new(RenoAckClockConfig::default()),
            "reno with its window following the ACK clock in the datapath: slow start and the first answer to a loss there",
        ),
        (
            std::sync::Arc::new(CubicAckClockConfig::default()),
            "cubic with its window following the ACK clock in the datapath: slow start and the first answer to a loss there",
        ),
    ]
}

/// The default config of every algorithm of the process's registry ([`registry::global`]).
pub fn suite() -> Vec<Box<dyn DynAlgorithmConfig>> {
    let r = registry::global();
    r.configs(&r.names()).unwrap_or_default()
}

/// The union of programs the process's registry registers with portus, deduplicated by name.
pub fn registered_programs() -> Vec<&'static ProgramSpec> {
    registry::global().programs()
}
