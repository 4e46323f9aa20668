//! What a large initial window buys against a Linux receiver: one short built-in Cubic flow
//! (as `ccp-eval run iw-web` simulates them) on four clean paths, for several flow sizes and
//! initial windows, with and without the receiver's window (`TcpModel::with_receive_window`:
//! the 64 KiB a default Linux receiver offers first, then its buffer autotuning). Prints the
//! flow completion time in ms, `without / with` for each IW (`docs/iw.md`, "Against a Linux
//! receiver").
//!
//! ```text
//! cargo run --release -p ccp-datapath --example iw_receive_window
//! ```

use std::process::ExitCode;

use ccp_datapath::runtime::DatapathConfig;
use ccp_datapath::sim::{FlowSpec, LinkRate, LinkSpec, Scheme, SimConfig, Simulation, TcpModel};

const MSS: u32 = 1448;
const IWS: [u32; 6] = [10, 30, 45, 60, 100, 200];

/// Completion time of one flow of `pkts` segments, ms (`None`: it did not finish in 60 s).
fn fct_ms(
    (mbps, rtt_ms, buffer_pkts): (u64, u64, u64),
    pkts: u32,
    iw: u32,
    model: TcpModel,
) -> Result<Option<f64>, String> {
    let cfg = SimConfig {
        seed: 1,
        duration_ns: 60_000_000_000,
        link: LinkSpec {
            rate: LinkRate::Constant {
                bps: mbps * 1_000_000,
            },
            buffer_bytes: buffer_pkts * u64::from(MSS),
            loss: 0.0,
        },
        flows: vec![FlowSpec {
            scheme: Scheme::Cubic,
            start_ns: 0,
            size_bytes: Some(u64::from(pkts) * u64::from(MSS)),
            one_way_delay_ns: rtt_ms * 500_000,
            mss_bytes: MSS,
            init_cwnd_bytes: iw * MSS,
            on_off_ns: None,
        }],
        changes: Vec::new(),
        agent_latency_ns: 0,
        ack_aggregation_ns: 0,
        sample_interval_ns: 0,
        datapath: DatapathConfig {
            max_connections: 1,
            ..DatapathConfig::default()
        },
    };
    let r = Simulation::new(cfg, None)
        .map_err(|e| e.to_string())?
        .with_model(model)
        .run()
        .map_err(|e| e.to_string())?;
    Ok(r.flows
        .first()
        .and_then(|f| f.completion_ns)
        .map(|ns| ns as f64 / 1e6))
}

fn main() -> ExitCode {
    let paths = [(10, 40, 100), (20, 100, 200), (50, 60, 300), (100, 30, 300)];
    print!("| path | packets |");
    for iw in IWS {
        print!(" IW {iw} |");
    }
    println!();
    println!("|---|---:|{}", "---:|".repeat(IWS.len()));
    for path in paths {
        for pkts in [30, 60, 120, 250] {
            print!(
                "| {} Mbit/s, {} ms, {} pkts | {pkts} |",
                path.0, path.1, path.2
            );
            for iw in IWS {
                let mut cell = Vec::new();
                for model in [TcpModel::default(), TcpModel::with_receive_window()] {
                    match fct_ms(path, pkts, iw, model) {
                        Ok(Some(ms)) => cell.push(format!("{ms:.0}")),
                        Ok(None) => cell.push("-".to_string()),
                        Err(e) => {
                            eprintln!("iw_receive_window: {e}");
                            return ExitCode::FAILURE;
                        }
                    }
                }
                print!(" {} |", cell.join(" / "));
            }
            println!();
        }
    }
    ExitCode::SUCCESS
}
