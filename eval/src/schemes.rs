//! The schemes `ccp-eval` can run, by name.
//!
//! Built-in schemes run inside the simulated datapath with no agent (Linux-like Reno and
//! Cubic, for baselines and cross traffic). CCP schemes run as portus algorithms in a
//! lock-step agent (or, in real time, an external agent over unix sockets); every algorithm
//! registered in `with_every_algorithm!` appears here with no further wiring.

use ccp_algorithms::{AlgorithmConfig, Ccp, CubicConfig, RenoConfig};
use ccp_datapath::agent::{AIMD_NAME, Aimd};
use ccp_datapath::sim::{LockstepAgent, Scheme};

/// Built-in Reno in the datapath (no agent).
pub const NATIVE_RENO: &str = "native-reno";
/// Built-in Cubic in the datapath (no agent).
pub const NATIVE_CUBIC: &str = "native-cubic";

/// Every scheme name, sorted.
pub fn available() -> Vec<&'static str> {
    let mut v = vec![
        NATIVE_CUBIC,
        NATIVE_RENO,
        AIMD_NAME,
        RenoConfig::NAME,
        CubicConfig::NAME,
    ];
    v.sort_unstable();
    v
}

/// How a scheme runs in the simulator, or `None` if the name is unknown.
pub fn resolve(name: &str) -> Option<Scheme> {
    match name {
        NATIVE_RENO => Some(Scheme::Reno),
        NATIVE_CUBIC => Some(Scheme::Cubic),
        AIMD_NAME | RenoConfig::NAME | CubicConfig::NAME => Some(Scheme::Ccp {
            alg: name.to_string(),
        }),
        _ => None,
    }
}

/// One-line description for `ccp-eval list`.
pub fn describe(name: &str) -> &'static str {
    match name {
        NATIVE_RENO => "Reno (RFC 5681) inside the datapath, no agent",
        NATIVE_CUBIC => "Cubic (RFC 9438) inside the datapath, no agent",
        AIMD_NAME => "CCP: AIMD test algorithm (one MSS per RTT, halve on loss) via portus",
        RenoConfig::NAME => "CCP: Reno/NewReno (RFC 5681/6582) from ccp-algorithms via portus",
        CubicConfig::NAME => "CCP: Cubic (RFC 9438) from ccp-algorithms via portus",
        _ => "",
    }
}

/// Registers every CCP algorithm on a portus `RunBuilder` (one list for every kind of agent).
macro_rules! with_every_algorithm {
    ($builder:expr) => {
        $builder
            .default_alg(Aimd::default())
            .additional_alg(Ccp::new(RenoConfig::default()))
            .additional_alg(Ccp::new(CubicConfig::default()))
    };
}

/// A lock-step portus agent with every CCP algorithm registered.
pub fn agent() -> LockstepAgent {
    LockstepAgent::with_algorithms(|b| with_every_algorithm!(b).run())
}

/// Runs a portus agent with every CCP algorithm over unix sockets, bound to
/// `/tmp/ccp/<name>`, in this thread until the process ends (for real-time runs and demos).
pub fn run_unix_agent(name: &str) -> portus::Result<()> {
    let sock = portus::ipc::unix::Socket::<portus::ipc::Blocking>::new(name)?;
    with_every_algorithm!(portus::RunBuilder::new(portus::ipc::BackendBuilder {
        sock
    }))
    .run()
}
