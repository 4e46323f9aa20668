//! Congestion control algorithms as sans-IO CCP algorithms.
//!
//! Start reading at [`api`]: the [`Algorithm`] trait (typed [`Measurement`]s in, [`Control`]s
//! out, a [`Handoff`] exported and adopted across a swap) and its factory, [`AlgorithmConfig`].
//! [`adapter::Ccp`] turns any config into a portus `CongAlg`; [`programs`] is the small shared
//! library of datapath programs every algorithm installs from. Then one module per algorithm:
//! [`reno`] (RFC 5681/6582) and [`cubic`] (RFC 9438). See `DESIGN.md` §3.1 and §3.3 for the
//! contracts these follow; BBR v1, Copa, Vegas, Westwood+, Illinois, C2TCP and PCC Vivace are
//! still to come (issue 4).
//!
//! Algorithms read no clock and own no IPC handle; time comes from the reports. The datapath
//! they run on is `ccp-datapath` (a dev-dependency only: the behaviour tests in `tests/` run
//! each algorithm in its simulator).

pub mod adapter;
pub mod api;
pub mod bbr;
pub mod c2tcp;
pub mod copa;
pub mod cubic;
pub mod illinois;
pub mod programs;
pub mod recovery;
pub mod reno;
pub mod rtt;
pub mod vegas;
pub mod vivace;
pub mod westwood;
pub mod window;

pub use adapter::{Ccp, MeasuredFlow, ProgramLink, flow_start};
pub use api::{
    Algorithm, AlgorithmConfig, Control, DynAlgorithmConfig, FlowStart, Handoff, Measurement,
    Pacing,
};
pub use bbr::{Bbr, BbrConfig};
pub use c2tcp::{C2tcp, C2tcpConfig};
pub use copa::{Copa, CopaConfig};
pub use cubic::{Cubic, CubicConfig};
pub use illinois::{Illinois, IllinoisConfig};
pub use programs::ProgramSpec;
pub use reno::{Reno, RenoConfig};
pub use vegas::{Vegas, VegasConfig};
pub use vivace::{Vivace, VivaceConfig};
pub use westwood::{Westwood, WestwoodConfig};

/// The default config of every algorithm in the suite, for registries (agents, eval).
pub fn suite() -> Vec<Box<dyn DynAlgorithmConfig>> {
    vec![
        Box::new(RenoConfig::default()),
        Box::new(CubicConfig::default()),
        Box::new(BbrConfig::default()),
        Box::new(CopaConfig::default()),
        Box::new(VegasConfig::default()),
        Box::new(WestwoodConfig::default()),
        Box::new(IllinoisConfig::default()),
        Box::new(C2tcpConfig::default()),
        Box::new(VivaceConfig::default()),
    ]
}

/// The union of programs the suite registers with portus, deduplicated by name.
pub fn registered_programs() -> Vec<&'static ProgramSpec> {
    let mut out: Vec<&'static ProgramSpec> = Vec::new();
    for cfg in suite() {
        for p in cfg.programs() {
            if !out.iter().any(|q| q.name == p.name) {
                out.push(p);
            }
        }
    }
    out
}
