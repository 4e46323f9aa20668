//! The `ccp-eval` command line.

use std::process::ExitCode;

const USAGE: &str = "usage: ccp-eval <command>

commands:
  demo    run a portus agent and the CCP datapath runtime over unix sockets, kill the
          agent mid-flow and restart it, and print what happened";

fn main() -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,portus=error")),
        )
        .try_init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("demo") => demo(),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("ccp-eval: unknown command `{other}`\n\n{USAGE}");
            ExitCode::from(2)
        }
        None => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn demo() -> ExitCode {
    println!(
        "CCP end to end: portus agent (AIMD) <-> Rust datapath runtime over /tmp/ccp unix sockets\n"
    );
    match ccp_eval::demo::run() {
        Ok(phases) => {
            println!(
                "\n{:<30} {:>8} {:>12} {:>9} {:>11} {:>14}",
                "phase", "time", "cwnd (pkts)", "reports", "agent ACKs", "fallback ACKs"
            );
            for p in &phases {
                println!(
                    "{:<30} {:>6}ms {:>12} {:>9} {:>11} {:>14}",
                    p.name,
                    p.elapsed.as_millis(),
                    p.cwnd_bytes / 1448,
                    p.reports,
                    p.agent_acks,
                    p.fallback_acks
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ccp-eval demo: {e}");
            ExitCode::FAILURE
        }
    }
}
