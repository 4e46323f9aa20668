//! The schemes `ccp-eval` can run, by name.
//!
//! Built-in schemes run inside the simulated datapath with no agent (Linux-like Reno and
//! Cubic, for baselines and cross traffic). CCP schemes run as portus algorithms in a
//! lock-step agent (or, in real time, an external agent over unix sockets): every algorithm of
//! the process's registry ([`ccp_algorithms::registry::global`]; a researcher's own via
//! `ccp_eval::cli::main_with`) is a scheme with no further wiring, and so is every selector.

use ccp_algorithms::registry::{self, AskedFor, ByName, NameTap};
use ccp_algorithms::{Ccp, RenoConfig};
use ccp_datapath::runtime::transport::AgentChannels;
use ccp_datapath::sim::{LockstepAgent, Scheme};

use crate::selectors::{self, RunSelectors};

/// Built-in Reno in the datapath (no agent).
pub const NATIVE_RENO: &str = "native-reno";
/// Built-in Cubic in the datapath (no agent).
pub const NATIVE_CUBIC: &str = "native-cubic";
/// The kernel's own BBR (`tcp_bbr`): the kernel datapath only (the simulator has no model of
/// it; compare it with our CCP `bbr` there, `ccp-eval agree --pair native-bbr=bbr`).
pub const NATIVE_BBR: &str = "native-bbr";

/// Built-in schemes: (name, description).
const NATIVE: &[(&str, &str)] = &[
    (NATIVE_RENO, "Reno (RFC 5681) inside the datapath, no agent"),
    (
        NATIVE_CUBIC,
        "Cubic (RFC 9438) inside the datapath, no agent",
    ),
    (
        NATIVE_BBR,
        "the kernel's own BBR v1 (tcp_bbr), no agent; --datapath kernel only",
    ),
];

/// Every scheme with its description: built-ins, the registry's algorithms (prefixed `CCP:`),
/// the selectors.
fn all() -> Vec<(&'static str, String)> {
    let mut v: Vec<(&'static str, String)> =
        NATIVE.iter().map(|(n, d)| (*n, (*d).to_string())).collect();
    for e in registry::global().entries() {
        v.push((e.name, format!("CCP: {}", e.description)));
    }
    for e in registry::global().variants() {
        v.push((e.name, format!("CCP variant: {}", e.description)));
    }
    for (n, d) in selectors::SCHEMES {
        v.push((*n, (*d).to_string()));
    }
    v
}

/// Every scheme name, sorted.
pub fn available() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = all().into_iter().map(|(n, _)| n).collect();
    v.sort_unstable();
    v
}

/// The schemes a scenario without a `schemes` list runs: every available one except the
/// training-data generator `selector-explore`, the kernel-only `native-bbr` and the registry's
/// variants (`cubic-ackclock`), and the learned selectors and algorithms (LP-TCP) only when their
/// models load.
pub fn defaults() -> Vec<&'static str> {
    let variants = registry::global().variants();
    available()
        .into_iter()
        .filter(|s| !selectors::TRAINING_ONLY.contains(s) && *s != NATIVE_BBR)
        .filter(|s| !variants.iter().any(|v| v.name == *s))
        .filter(|s| selectors::unavailable(s).is_none())
        .collect()
}

/// How a scheme runs in the simulator, or `None` if the name is unknown.
pub fn resolve(name: &str) -> Option<Scheme> {
    match name {
        NATIVE_RENO => Some(Scheme::Reno),
        NATIVE_CUBIC => Some(Scheme::Cubic),
        NATIVE_BBR => Some(Scheme::Kernel { cca: "bbr".into() }),
        _ if registry::global().get(name).is_some() || selectors::is_scheme(name) => {
            Some(Scheme::Ccp {
                alg: name.to_string(),
            })
        }
        _ => None,
    }
}

/// One-line description for `ccp-eval list`.
pub fn describe(name: &str) -> String {
    all()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, d)| d)
        .unwrap_or_default()
}

/// Every CCP algorithm as portus's default: the process registry's by the name a CREATE asks
/// for (noted by a [`NameTap`] holding `asked`), Reno for any other name (one list for every
/// kind of agent).
fn every_algorithm(asked: AskedFor) -> ByName<Ccp<RenoConfig>> {
    ByName::new(
        registry::global().clone(),
        asked,
        Ccp::new(RenoConfig::default()),
    )
}

/// A portus `RunBuilder` over `sock` (behind a [`NameTap`]) with [`every_algorithm`] as its
/// default.
macro_rules! with_every_algorithm {
    ($sock:expr) => {{
        let asked = AskedFor::default();
        portus::RunBuilder::new(portus::ipc::BackendBuilder {
            sock: NameTap::new($sock, asked.clone()),
        })
        .default_alg(every_algorithm(asked))
    }};
}

/// A lock-step portus agent with every CCP algorithm and the selector schemes registered,
/// and the run's selector state (swap events, explore samples).
pub fn agent() -> (LockstepAgent, RunSelectors) {
    agent_for(None)
}

/// [`agent`] whose learned selectors see `port` as their flows' destination port
/// ([`selectors::build_for`]).
pub fn agent_for(port: Option<u16>) -> (LockstepAgent, RunSelectors) {
    let (s, state) = selectors::build_for(port);
    let asked = AskedFor::default();
    let tap = asked.clone();
    let agent = LockstepAgent::with_wrapped_ipc(
        move |ipc| NameTap::new(ipc, tap),
        move |b| {
            b.default_alg(every_algorithm(asked))
                .additional_alg(s.rein)
                .additional_alg::<selectors::Named<selectors::AntelopeName>, _>(s.antelope)
                .additional_alg::<selectors::Named<selectors::OutcomeName>, _>(s.outcome)
                .additional_alg::<selectors::Named<selectors::ProbeName>, _>(s.probe)
                .additional_alg::<selectors::Named<selectors::OnnxName>, _>(s.onnx)
                .additional_alg::<selectors::Named<selectors::TcprlName>, _>(s.tcprl)
                .additional_alg(s.explore)
                .additional_alg(s.probe_explore)
                .run()
        },
    );
    (agent, state)
}

/// A portus agent with every CCP algorithm and the selector schemes registered, in its own
/// thread, over portus's channel IPC: for a datapath in this process that runs in real time
/// (the kernel datapath of `run --datapath kernel`), whose learned selectors see `port` as
/// their flows' destination port as in [`agent_for`] (the testbed's sinks listen on ephemeral
/// ports). Returns its handle and the run's selector state.
pub fn spawn_channel_agent(
    channels: AgentChannels,
    port: Option<u16>,
) -> portus::Result<(portus::CCPHandle, RunSelectors)> {
    let (s, state) = selectors::build_for(port);
    let sock = portus::ipc::chan::Socket::<portus::ipc::Blocking>::new(
        channels.to_datapath,
        channels.from_datapath,
    );
    let handle = with_every_algorithm!(sock)
        .additional_alg(s.rein)
        .additional_alg::<selectors::Named<selectors::AntelopeName>, _>(s.antelope)
        .additional_alg::<selectors::Named<selectors::OutcomeName>, _>(s.outcome)
        .additional_alg::<selectors::Named<selectors::ProbeName>, _>(s.probe)
        .additional_alg::<selectors::Named<selectors::OnnxName>, _>(s.onnx)
        .additional_alg::<selectors::Named<selectors::TcprlName>, _>(s.tcprl)
        .additional_alg(s.explore)
        .additional_alg(s.probe_explore)
        .spawn_thread()
        .run()?;
    Ok((handle, state))
}

/// Runs a portus agent with every CCP algorithm over unix sockets, bound to
/// `/tmp/ccp/<name>`, in this thread until the process ends (for real-time runs and demos).
pub fn run_unix_agent(name: &str) -> portus::Result<()> {
    let sock = portus::ipc::unix::Socket::<portus::ipc::Blocking>::new(name)?;
    with_every_algorithm!(sock).run()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccp_datapath::sim::{FlowSpec, LinkRate, LinkSpec, SimConfig, Simulation};

    fn run_alone(scheme: Scheme) -> ccp_datapath::sim::FlowResult {
        let cfg = SimConfig {
            seed: 1,
            duration_ns: 2_000_000_000,
            link: LinkSpec {
                rate: LinkRate::Constant { bps: 10_000_000 },
                buffer_bytes: 100_000,
                loss: 0.0,
            },
            flows: vec![FlowSpec::bulk(scheme, 20_000_000)],
            changes: Vec::new(),
            agent_latency_ns: 0,
            ack_aggregation_ns: 0,
            sample_interval_ns: 0,
            datapath: ccp_datapath::runtime::DatapathConfig::default(),
        };
        let mut r = Simulation::new(cfg, Some(agent().0))
            .unwrap()
            .run()
            .unwrap();
        r.flows.remove(0)
    }

    #[test]
    fn every_ccp_scheme_is_registered_with_the_agent() {
        // A name the registry does not know runs Reno, and runs are deterministic: a scheme
        // whose run is identical to that is not registered (Reno itself excepted).
        let unknown = run_alone(Scheme::Ccp {
            alg: "no-such-algorithm".into(),
        });
        assert!(unknown.delivered_bytes > 100_000);
        let r = registry::global();
        for e in r.entries().iter().chain(r.variants()) {
            let name = e.name;
            // A learned algorithm without its model (LP-TCP with no forest) runs as the rule
            // it builds on, NewReno: that is Reno's run, and tools refuse to start it.
            if e.config.ready().is_err() {
                continue;
            }
            let r = run_alone(resolve(name).unwrap());
            assert!(r.delivered_bytes > 100_000, "{name} moved no data");
            assert_eq!(r.vm_faults, 0, "{name}");
            assert_eq!(
                r.rtt_samples_us == unknown.rtt_samples_us,
                name == "reno",
                "{name}: ran like the default algorithm (not registered?), or reno did not"
            );
        }
        assert_eq!(
            available().len(),
            NATIVE.len() + r.entries().len() + r.variants().len() + selectors::SCHEMES.len()
        );
        for v in r.variants() {
            assert!(!defaults().contains(&v.name), "{} is a variant", v.name);
        }
    }

    #[test]
    fn the_kernels_bbr_is_a_scheme_of_the_kernel_datapath_only() {
        assert_eq!(
            resolve(NATIVE_BBR),
            Some(Scheme::Kernel { cca: "bbr".into() })
        );
        assert!(available().contains(&NATIVE_BBR));
        assert!(!defaults().contains(&NATIVE_BBR));
    }
}
