//! `ccp-agent`: see the crate doc of `ccp_agent` for the options and `agent.toml`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use ccp_agent::{AgentError, AgentState, DefaultAlg, IpcKind, Registry};
use clap::Parser;
use tracing::info;

/// A CCP agent with every algorithm, the selector and the IW table registered.
#[derive(Debug, Parser)]
#[command(name = "ccp-agent", version)]
struct Cli {
    /// IPC to the datapath.
    #[arg(long, value_enum)]
    ipc: IpcKind,
    /// Algorithm for flows that ask for none: reno, cubic, bbr, copa, vegas, westwood,
    /// illinois, c2tcp, vivace or selector.
    #[arg(long)]
    alg: String,
    /// The agent config (`agent.toml`); reloaded on SIGHUP.
    #[arg(long)]
    config: PathBuf,
    /// Unix socket name: the agent binds `/tmp/ccp/<name>` (one file name of A-Z a-z 0-9 . _ -,
    /// at most 64 bytes; refused while another process is bound there).
    #[arg(long, default_value = "portus")]
    name: String,
}

fn main() -> ExitCode {
    ccp_agent::init_logging();
    let cli = Cli::parse();
    if cli.ipc == IpcKind::Unix
        && let Err(e) = ccp_agent::socket::claim(&cli.name)
    {
        eprintln!("ccp-agent: {e}");
        return ExitCode::from(2);
    }
    let state = match AgentState::load(&cli.config, cli.ipc) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ccp-agent: {}: {e}", cli.config.display());
            return ExitCode::from(2);
        }
    };
    let default = match DefaultAlg::new(Registry::new(&state), &cli.alg) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("ccp-agent: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = ccp_agent::spawn_reloader(state.clone()) {
        eprintln!("ccp-agent: cannot install the signal handlers: {e}");
        state.shutdown();
        return ExitCode::from(1);
    }
    if let Err(e) = ccp_agent::spawn_learning(state.iw().clone()) {
        eprintln!("ccp-agent: cannot start the IW learning thread: {e}");
        state.shutdown();
        return ExitCode::from(1);
    }
    info!(ipc = ?cli.ipc, alg = %cli.alg, name = %cli.name, "ccp-agent starting");
    let result = ccp_agent::run(
        cli.ipc,
        &cli.name,
        default,
        Arc::new(AtomicBool::new(true)),
        state.guard().clone(),
    );
    state.shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ AgentError::Socket(_)) => {
            eprintln!("ccp-agent: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("ccp-agent: {e}");
            ExitCode::from(1)
        }
    }
}
