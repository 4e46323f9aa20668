//! The `ccp-agent` command line, as a library function so a researcher's own binary can run it
//! with more algorithms registered ([`main_with`]).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::Parser;
use tracing::info;

use crate::{AgentError, AgentState, DefaultAlg, IpcKind, Registry};

/// A CCP agent with every algorithm, the selector and the IW table registered.
#[derive(Debug, Parser)]
#[command(name = "ccp-agent", version)]
struct Cli {
    /// IPC to the datapath.
    #[arg(long, value_enum, default_value = "unix")]
    ipc: IpcKind,
    /// Algorithm for flows that ask for none (or for one this agent does not have): an
    /// algorithm of the registry (reno, cubic, bbr, copa, vegas, westwood, illinois, c2tcp,
    /// vivace, lptcp, rltcp, arc, and any a researcher's build adds) or selector.
    #[arg(long)]
    alg: String,
    /// The agent config (`agent.toml`); reloaded on SIGHUP. Without it every setting is at its
    /// default.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Unix socket name: the agent binds `/tmp/ccp/<name>` (one file name of A-Z a-z 0-9 . _ -,
    /// at most 64 bytes; refused while another process is bound there).
    #[arg(long, default_value = "portus")]
    name: String,
    /// ARC's trajectory store: every decision of the `arc` flows goes to this `SQLite` database
    /// (created if missing; WAL mode) for an online learner (`python -m ccp_suite.arc learn`).
    #[arg(long)]
    arc_trajectories: Option<PathBuf>,
    /// With `--arc-trajectories`: the deviation of the Gaussian noise `arc` flows add to their
    /// actions (exploration on the environment side; 0: none).
    #[arg(long, default_value_t = 0.0)]
    arc_explore: f64,
    /// Busy-poll: keep reading the IPC this many microseconds after the last message before
    /// sleeping (unix: default 0, block at once; shm: default 50). Costs a core while
    /// messages keep coming; a huge value polls for good.
    #[arg(long, value_name = "US")]
    spin_us: Option<u64>,
}

/// Why `--alg alg` cannot run as meant, if it cannot: its learned model is missing, or (for
/// the selector) a candidate's is, which would run as its fallback rule.
fn unready(alg: &str, candidates: &[&'static str]) -> Option<String> {
    let registry = ccp_algorithms::registry::global();
    if alg == crate::agent::SELECTOR {
        return registry.unready(candidates.iter().copied());
    }
    registry.not_ready(alg)
}

/// Runs `ccp-agent` with `registry` as the process's algorithms (parsing the command line):
/// the binary passes the built-in suite; a researcher's crate passes the suite and its own
/// algorithm (`examples/custom-cca`).
pub fn main_with(registry: ccp_algorithms::Registry) -> ExitCode {
    crate::init_logging();
    if let Err(e) = ccp_algorithms::registry::install(registry) {
        eprintln!("ccp-agent: {e}");
        return ExitCode::from(2);
    }
    // Real time: ARC's actor runs on its inference thread, off the report path.
    ccp_algorithms::arc::set_default_inference(ccp_algorithms::arc::Inference::Worker);
    let cli = Cli::parse();
    if matches!(cli.ipc, IpcKind::Unix | IpcKind::Shm)
        && let Err(e) = crate::socket::claim(&cli.name)
    {
        eprintln!("ccp-agent: {e}");
        return ExitCode::from(2);
    }
    let mut arc_store = None;
    if let Some(path) = &cli.arc_trajectories {
        if !(cli.arc_explore >= 0.0 && cli.arc_explore.is_finite()) {
            eprintln!(
                "ccp-agent: --arc-explore must be >= 0, got {}",
                cli.arc_explore
            );
            return ExitCode::from(2);
        }
        match crate::arc_store::TrajectoryStore::open(path) {
            Ok(store) => {
                ccp_algorithms::arc::set_default_recording(store.clone(), cli.arc_explore);
                arc_store = Some(store);
            }
            Err(e) => {
                eprintln!("ccp-agent: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let loaded = match &cli.config {
        Some(path) => {
            AgentState::load(path, cli.ipc).map_err(|e| format!("{}: {e}", path.display()))
        }
        None => AgentState::with_defaults(cli.ipc).map_err(|e| e.to_string()),
    };
    let state = match loaded {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ccp-agent: {e}");
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
    // An algorithm that cannot run as meant (a learned model missing) says so before serving.
    if let Some(e) = unready(&cli.alg, state.candidates()) {
        eprintln!("ccp-agent: --alg {}: {e}", cli.alg);
        return ExitCode::from(2);
    }
    if let Err(e) = crate::spawn_reloader(state.clone()) {
        eprintln!("ccp-agent: cannot install the signal handlers: {e}");
        state.shutdown();
        return ExitCode::from(1);
    }
    if let Err(e) = crate::spawn_learning(state.iw().clone()) {
        eprintln!("ccp-agent: cannot start the IW learning thread: {e}");
        state.shutdown();
        return ExitCode::from(1);
    }
    info!(ipc = ?cli.ipc, alg = %cli.alg, name = %cli.name, "ccp-agent starting");
    let result = crate::agent::run_spinning(
        cli.ipc,
        &cli.name,
        default,
        Arc::new(AtomicBool::new(true)),
        state.guard().clone(),
        cli.spin_us.map(std::time::Duration::from_micros),
        state.shm().cloned(),
    );
    state.shutdown();
    if let Some(store) = arc_store {
        store.close();
    }
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
