//! What Copa's half-RTT reports cost: reports per second and simulated packets per wall-clock
//! second, Copa with reports every half RTT (the default) beside once per RTT, alternating, on
//! three of the `quick` scenario's paths (20 s each).
//!
//! `cargo run --release -p ccp-algorithms --example copa_report_cost` (`docs/benchmarks.md`).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use ccp_algorithms::{
    Algorithm, AlgorithmConfig, Ccp, Control, CopaConfig, FlowStart, Handoff, Measurement,
    ProgramSpec,
};
use ccp_datapath::runtime::DatapathConfig;
use ccp_datapath::sim::{
    FlowSpec, LinkRate, LinkSpec, LockstepAgent, Scheme, SimConfig, Simulation,
};

/// Copa with a report counter.
#[derive(Clone)]
struct Counted {
    cfg: CopaConfig,
    reports: Arc<AtomicU64>,
}

impl AlgorithmConfig for Counted {
    const NAME: &'static str = "copa";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        self.cfg.programs()
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        Box::new(CountedFlow {
            inner: self.cfg.build(start),
            reports: Arc::clone(&self.reports),
        })
    }
}

struct CountedFlow {
    inner: Box<dyn Algorithm>,
    reports: Arc<AtomicU64>,
}

impl Algorithm for CountedFlow {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn programs(&self) -> &'static [&'static ProgramSpec] {
        self.inner.programs()
    }
    fn activate(&mut self, h: &Handoff) -> Control {
        self.inner.activate(h)
    }
    fn on_report(&mut self, m: &Measurement) -> Control {
        self.reports.fetch_add(1, Ordering::Relaxed);
        self.inner.on_report(m)
    }
    fn handoff(&self) -> Handoff {
        self.inner.handoff()
    }
}

fn run(half_rtt: bool, mbps: u64, rtt_ms: u64, buffer_bdp: f64) -> (f64, f64, f64) {
    let reports = Arc::new(AtomicU64::new(0));
    let config = Counted {
        cfg: CopaConfig::default().half_rtt_reports(half_rtt),
        reports: Arc::clone(&reports),
    };
    let bps = mbps * 1_000_000;
    let secs = 20;
    let cfg = SimConfig {
        seed: 1,
        duration_ns: secs * 1_000_000_000,
        link: LinkSpec {
            rate: LinkRate::Constant { bps },
            buffer_bytes: (bps as f64 / 8.0 * rtt_ms as f64 / 1e3 * buffer_bdp) as u64,
            loss: 0.0,
        },
        flows: vec![FlowSpec::bulk(
            Scheme::Ccp {
                alg: "copa".to_string(),
            },
            rtt_ms * 1_000_000 / 2,
        )],
        changes: Vec::new(),
        agent_latency_ns: 0,
        ack_aggregation_ns: 0,
        sample_interval_ns: 0,
        datapath: DatapathConfig::default(),
    };
    let start = Instant::now();
    let r = Simulation::new(cfg, Some(LockstepAgent::new(Ccp::new(config))))
        .unwrap()
        .run()
        .unwrap();
    let wall = start.elapsed().as_secs_f64();
    let f = &r.flows[0];
    (
        reports.load(Ordering::Relaxed) as f64 / secs as f64,
        f.packets_sent as f64 / wall,
        f.packets_dropped as f64 / f.packets_sent.max(1) as f64,
    )
}

fn main() {
    println!("| path | reports | reports/s | simulated packets/s (M) | loss |");
    println!("|---|---|---|---|---|");
    for (mbps, rtt_ms, buffer_bdp) in [(10, 40, 1.0), (20, 80, 0.2), (100, 100, 5.0)] {
        for round in 0..3 {
            for half in [true, false] {
                let (rps, pps, loss) = run(half, mbps, rtt_ms, buffer_bdp);
                println!(
                    "| {mbps} Mbit/s, {rtt_ms} ms, {buffer_bdp} BDP (run {}) | {} | {rps:.1} | {:.2} | {:.2} % |",
                    round + 1,
                    if half { "every RTT/2" } else { "every RTT" },
                    pps / 1e6,
                    loss * 100.0
                );
            }
        }
    }
}
