//! The `ccp-eval` command line: `list`, `run`, `report`, `demo`, `agent`, `gen-data`, `train`,
//! `score-probe`,
//! as a library function so a researcher's own binary runs it with its algorithms registered
//! ([`main_with`]).
//!
//! Exit codes: 0 success, 1 a run or the demo failed, 2 bad input (scenario file, scheme name,
//! arguments).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use crate::ray::RayOptions;
use crate::report::{self, ReportInput};
use crate::results::{self, DecisionRow, FlowRow, SeriesRow, SwapRow};
use crate::runner::{self, DatapathKind, RunOptions};
use crate::scenario::Scenario;
use crate::{builtin, lptcp, schemes, training};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ccp-eval",
    about = "Congestion-control experiments on the CCP simulator"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the built-in scenarios and the available schemes.
    List,
    /// Run a scenario (a built-in name or a TOML file) and write results and a report.
    Run {
        /// Built-in scenario name or path to a scenario file.
        scenario: String,
        /// Output directory. The files ccp-eval writes (results.csv, series.csv, summary.json,
        /// report.md, swaps.csv, decisions.csv, selector.md, plots/*.svg, and iw-web's tables
        /// and plots) are removed from it first, so nothing of an earlier run stays; other
        /// files are left alone.
        #[arg(long)]
        out: PathBuf,
        /// Worker threads (default: one per core).
        #[arg(long, default_value_t = 0)]
        jobs: usize,
        /// Run only shard I of N (I/N, 0-based), e.g. 0/4.
        #[arg(long)]
        shard: Option<String>,
        /// Run only this seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Comma-separated schemes instead of the scenario's.
        #[arg(long, value_delimiter = ',')]
        schemes: Option<Vec<String>>,
        /// Real time: pace runs to the wall clock and use an external agent (see `agent`)
        /// instead of the lock-step one. Results then depend on scheduling.
        #[arg(long)]
        realtime: bool,
        /// With --realtime: the agent's socket name under /tmp/ccp.
        #[arg(long, default_value = "portus")]
        agent: String,
        /// Where flows run: `sim` (the simulator) or `kernel` (real kernel TCP through the
        /// network-namespace testbed, in real time, one run at a time; needs root and a build
        /// with `--features kernel`).
        #[arg(long, value_enum, default_value = "sim")]
        datapath: DatapathArg,
        /// Run the shards as tasks on a Ray cluster (at ADDRESS, e.g. `ray://head:10001` or
        /// `auto`; a local cluster of --jobs CPUs when no address is given) and merge them into
        /// the output a local run writes. Needs a Python with `ray` (`$CCP_PYTHON`, else the
        /// checkout's `.venv`, which `make venv` builds); docs/scale.md.
        #[arg(long, num_args = 0..=1, default_missing_value = "", value_name = "ADDRESS")]
        ray: Option<String>,
        /// With --ray: the number of shards (Ray tasks).
        #[arg(long, default_value_t = 8)]
        ray_shards: usize,
        /// ARC's trajectory store: every decision of the run's `arc` flows goes to this `SQLite`
        /// database (created if missing), as `ccp-agent --arc-trajectories` writes it, for the
        /// online learner (`python -m ccp_suite.arc learn`, or `online`, which drives this).
        #[arg(long, value_name = "DB")]
        arc_trajectories: Option<PathBuf>,
        /// With --arc-trajectories: the deviation of the Gaussian noise `arc` flows add to
        /// their actions (exploration on the environment side; 0: none).
        #[arg(long, default_value_t = 0.0, value_name = "SIGMA")]
        arc_explore: f64,
    },
    /// Run a portus agent with every CCP algorithm over unix sockets (/tmp/ccp/<name>) until
    /// stopped: the external agent for `run --realtime`.
    Agent {
        /// Socket name under /tmp/ccp.
        #[arg(long, default_value = "portus")]
        name: String,
    },
    /// Merge result directories (e.g. shards) and write the report into the first (or --out).
    Report {
        /// Directories holding results.csv.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Where to write the merged results and report. The files ccp-eval writes are
        /// removed from it first (when it is one of the input directories, the run's
        /// swaps.csv, decisions.csv, selector.md and plots/cca_*.svg stay); other files are
        /// left alone. A results.csv that is cut off or does not parse is an error (exit 2).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// The agreement table of a simulator run against a kernel run of the same scenario
    /// (`docs/calibration.md`): per (condition, scheme), utilization within 5 % and p95
    /// smoothed RTT within 10 %, and the counts of cells within the bounds.
    Agree {
        /// Result directories of the simulator run.
        #[arg(long, num_args = 1.., required = true)]
        sim: Vec<PathBuf>,
        /// Result directories of the kernel run (e.g. one per seed).
        #[arg(long, num_args = 1.., required = true)]
        kernel: Vec<PathBuf>,
        /// `KERNEL=SIM`: compare the kernel's scheme KERNEL with the simulator's SIM (e.g.
        /// `native-bbr=bbr`: the kernel's own BBR against our CCP BBR); repeatable.
        #[arg(long = "pair")]
        pairs: Vec<String>,
        /// Also write the table to this file.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Real-time demo: a portus agent and the datapath runtime over unix sockets.
    Demo,
    /// Training data for the learned selectors: by default Antelope's (flows switching among the
    /// candidates at random: (features, candidate, next reward) in DIR/samples.csv); `--kind`
    /// picks the probe policy's counterfactual runs or LP-TCP's loss-labelled reports instead.
    GenData {
        /// Built-in scenario name or path to a scenario file.
        scenario: String,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
        /// Worker threads (default: one per core).
        #[arg(long, default_value_t = 0)]
        jobs: usize,
        /// What the data is for: `selector` (the selection policies' samples), `probe` (the
        /// probe policy's counterfactual runs, probe.csv) or `lptcp` (LP-TCP's loss-labelled
        /// `NewReno` reports, lptcp.csv).
        #[arg(long, default_value = "selector")]
        kind: String,
        /// `probe`: take the start candidates from an earlier `gen-data --kind probe` (its
        /// directory or probe.json) instead of this scenario's best mean candidates.
        #[arg(long)]
        starts: Option<PathBuf>,
        /// `probe`: the probe window's shortest time, ms (default 1500; with `--starts`, that
        /// data's window).
        #[arg(long)]
        probe_ms: Option<u64>,
        /// `probe`: the probe window's shortest span in minimum RTTs (default 10).
        #[arg(long)]
        probe_rtts: Option<u32>,
    },
    /// Train models: `train antelope|outcome|probe|probe-kind DIR... --out
    /// eval/models/<policy>` (selection policies; several directories: their samples together;
    /// `probe-kind`: the probe policy's competitors' kind, from `gen-data --kind probe`
    /// directories with their `competitors.csv`) or `train lptcp DIR --out eval/models/lptcp`
    /// (LP-TCP's random forest).
    Train {
        /// What to train (`antelope`, `outcome`, `probe`, `probe-kind` or `lptcp`).
        policy: String,
        /// Directories (or files) with the samples from `gen-data` (`lptcp`: one).
        #[arg(required = true, num_args = 1..)]
        data: Vec<PathBuf>,
        /// Where to write the model set.
        #[arg(long)]
        out: PathBuf,
        /// `outcome`: also fit delay- and throughput-sensitive models (one per candidate and
        /// mode, on those objectives' labels), used by flows to the preference ports.
        #[arg(long)]
        per_mode: bool,
        /// `lptcp`: the scenario the threshold is tuned on (default: the one `gen-data` ran,
        /// named in DIR/lptcp-scenario.txt).
        #[arg(long)]
        scenario: Option<String>,
        /// `lptcp`: trees of the forest.
        #[arg(long, default_value_t = 31)]
        trees: usize,
        /// `lptcp`: the deepest split of a tree.
        #[arg(long, default_value_t = 14)]
        max_depth: usize,
        /// Worker threads of `lptcp`'s threshold runs (default: one per core).
        #[arg(long, default_value_t = 0)]
        jobs: usize,
        /// `probe`: boosters per (mode, candidate), each on a bootstrap resample of the paths,
        /// their mean the prediction (1: one booster on every sample, as shipped).
        #[arg(long, default_value_t = ccp_selector::probe::DEFAULT_BAGS)]
        bags: usize,
        /// `probe`: first cross-validate the models with this many folds by path (each
        /// condition's flows held out together) and print what their moves earned per mode
        /// (0: no cross-validation).
        #[arg(long, default_value_t = 0)]
        folds: usize,
        /// `probe`: after fitting, score the models on this directory's counterfactual rows
        /// (another scenario's `gen-data --kind probe`, same window and starts) and print what
        /// their moves earned per mode; repeatable.
        #[arg(long)]
        holdout: Vec<PathBuf>,
        /// `probe`: write every scored flow's predicted and realised gain per target to
        /// `cv.csv` (with --folds) and `holdout.csv` (with --holdout) in this directory.
        #[arg(long)]
        predictions: Option<PathBuf>,
        /// `probe-kind`: the probe's `rtt_ratio_max` from which a flow's queue counts as deep,
        /// each kind's move chosen once over shallow and once over deep queues (`off`: one move
        /// per kind; default: `ccp_selector::probe::kind::DEFAULT_DEEP_FROM`, 2).
        #[arg(long)]
        deep_from: Option<String>,
        /// `probe-kind`: the classifier, `one-vs-rest` (one booster per kind, as shipped) or
        /// `softmax` (one multiclass booster; measured, not deployed).
        #[arg(long, default_value = "one-vs-rest")]
        classifier: String,
    },
    /// Score a probe model set (e.g. the shipped `selector/models/probe`) on counterfactual
    /// runs it was not fitted on (`gen-data --kind probe` of another scenario, same window
    /// and starts): per mode, what its moves earn over staying against what a perfect choice
    /// would, at the deployed margin.
    ScoreProbe {
        /// The model set's directory.
        models: PathBuf,
        /// Directories from `gen-data --kind probe`.
        #[arg(required = true, num_args = 1..)]
        data: Vec<PathBuf>,
        /// Write every flow's predicted and realised gain per target to `holdout.csv` here.
        #[arg(long)]
        predictions: Option<PathBuf>,
    },
}

/// `run --datapath`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum DatapathArg {
    /// The simulator.
    Sim,
    /// Real kernel TCP through the network-namespace testbed.
    Kernel,
}

/// Runs `ccp-eval` with `registry` as the process's algorithms (parsing the command line): the
/// binary passes the built-in suite; a researcher's crate passes the suite and its own
/// algorithm, which then runs as a scheme and a selector candidate (`examples/custom-cca`).
pub fn main_with(registry: ccp_algorithms::Registry) -> ExitCode {
    if let Err(e) = ccp_algorithms::registry::install(registry) {
        return fail(2, &e.to_string());
    }
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,portus=error")),
        )
        .try_init();
    let cli = Cli::parse();
    match cli.command {
        Command::List => list(),
        Command::Run {
            scenario,
            out,
            jobs,
            ..
        } if scenario == "iw-web" => iw_web(&out, jobs),
        Command::Run {
            scenario,
            out,
            jobs,
            shard,
            seed,
            schemes,
            realtime,
            agent,
            datapath,
            ray,
            ray_shards,
            arc_trajectories,
            arc_explore,
        } => {
            let opts = RunOptions {
                jobs,
                shard: None,
                seed,
                schemes,
                progress: true,
                realtime_agent: realtime.then_some(agent),
                datapath: match datapath {
                    DatapathArg::Sim => DatapathKind::Sim,
                    DatapathArg::Kernel => DatapathKind::Kernel,
                },
            };
            let ray = ray.map(|address| RayOptions::from_cli(address, ray_shards, jobs));
            recording_arc(
                arc_trajectories.as_deref(),
                arc_explore,
                ray.is_some(),
                || run(&scenario, &out, shard.as_deref(), ray.as_ref(), opts),
            )
        }
        Command::Agent { name } => {
            eprintln!("portus agent with every CCP algorithm on /tmp/ccp/{name}; Ctrl-C stops it");
            match schemes::run_unix_agent(&name) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(1, &format!("agent: {e:?}")),
            }
        }
        Command::Report { dirs, out } => report_cmd(&dirs, out),
        Command::Agree {
            sim,
            kernel,
            pairs,
            out,
        } => agree(&sim, &kernel, &pairs, out.as_deref()),
        Command::Demo => demo(),
        Command::GenData {
            scenario,
            out,
            jobs,
            kind,
            starts,
            probe_ms,
            probe_rtts,
        } => {
            let probe = ProbeArgs {
                starts,
                min_ms: probe_ms,
                rtts: probe_rtts,
            };
            gen_data(&scenario, &out, jobs, &kind, &probe)
        }
        cmd @ Command::Train { .. } => train_cmd(cmd),
        Command::ScoreProbe {
            models,
            data,
            predictions,
        } => match crate::probe::score(&models, &data, predictions.as_deref()) {
            Ok(summary) => {
                println!("{summary}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(2, &e),
        },
    }
}

/// `train`: LP-TCP's forest, the probe policy's models, or Antelope's and outcome's.
fn train_cmd(cmd: Command) -> ExitCode {
    let Command::Train {
        policy,
        data,
        out,
        per_mode,
        scenario,
        trees,
        max_depth,
        jobs,
        bags,
        folds,
        holdout,
        predictions,
        deep_from,
        classifier,
    } = cmd
    else {
        return fail(2, "not a train command");
    };
    let done = |r: Result<String, String>| match r {
        Ok(summary) => {
            println!("{summary}; written to {}", out.display());
            ExitCode::SUCCESS
        }
        Err(e) => fail(2, &e),
    };
    match policy.as_str() {
        "lptcp" => {
            let [data] = data.as_slice() else {
                return fail(2, "train lptcp: one data directory");
            };
            let opts = lptcp::TrainOptions {
                trees: trees.max(1),
                max_depth: max_depth.max(1),
                jobs,
                ..lptcp::TrainOptions::default()
            };
            train_lptcp(data, &out, scenario, opts)
        }
        "probe" if bags == 0 => fail(2, "train probe: --bags must be at least 1"),
        "probe" if folds == 1 => fail(2, "train probe: --folds must be 0 or at least 2"),
        "probe-kind" => {
            // The ratio's range is the model's to check (`KindModel::train`).
            let deep_from = match deep_from.as_deref().map(str::trim) {
                None => Ok(Some(ccp_selector::probe::kind::DEFAULT_DEEP_FROM)),
                Some("off") => Ok(None),
                Some(v) => v.parse::<f64>().map(Some).map_err(|e| {
                    format!("train probe-kind: --deep-from {v:?}: {e} (`off` or a ratio)")
                }),
            };
            let classifier =
                ccp_selector::probe::kind::Classifier::parse(&classifier).ok_or_else(|| {
                    format!(
                        "train probe-kind: --classifier {classifier:?}: `softmax` or `one-vs-rest`"
                    )
                });
            done(deep_from.and_then(|d| crate::probe_kind::train(&data, &out, d, classifier?)))
        }
        "probe" => done(crate::probe::train(
            &data,
            &out,
            bags,
            folds,
            &holdout,
            predictions.as_deref(),
        )),
        _ => done(training::train(&policy, &data, &out, per_mode)),
    }
}

/// `report DIR...`: merges result directories and writes the report.
fn report_cmd(dirs: &[PathBuf], out: Option<PathBuf>) -> ExitCode {
    let out = out.unwrap_or_else(|| dirs[0].clone());
    match report::report_dirs(dirs, &out) {
        Ok(_) => {
            println!("report: {}", out.join("report.md").display());
            ExitCode::SUCCESS
        }
        Err(e) => fail(2, &e.to_string()),
    }
}

/// `gen-data`: the selectors' samples, the probe policy's with `--kind probe`, or LP-TCP's
/// with `--kind lptcp`.
fn gen_data(name: &str, out: &Path, jobs: usize, kind: &str, probe: &ProbeArgs) -> ExitCode {
    let scenario = match load_scenario(name) {
        Ok(s) => s,
        Err(e) => return fail(2, &e),
    };
    // The selectors' data switches among every candidate.
    if matches!(kind, "selector" | "probe")
        && let Some(e) = crate::selectors::unready_candidate()
    {
        return fail(2, &e);
    }
    match kind {
        "selector" => {}
        "probe" => return gen_data_probe(&scenario, out, jobs, probe),
        "lptcp" => return gen_data_lptcp(&scenario, name, out, jobs),
        other => {
            return fail(
                2,
                &format!("unknown --kind `{other}` (selector, probe, lptcp)"),
            );
        }
    }
    match training::gen_data(&scenario, out, jobs) {
        Ok(g) => {
            println!(
                "{} samples, {} outcome samples, {} onnx windows in {}",
                g.samples,
                g.outcome,
                g.windows,
                out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(1, &e),
    }
}

/// `gen-data --kind probe`'s own arguments.
struct ProbeArgs {
    starts: Option<PathBuf>,
    min_ms: Option<u64>,
    rtts: Option<u32>,
}

/// `gen-data --kind probe`.
fn gen_data_probe(scenario: &Scenario, out: &Path, jobs: usize, args: &ProbeArgs) -> ExitCode {
    let (mut window, starts) = match args
        .starts
        .as_deref()
        .map(crate::probe::read_meta)
        .transpose()
    {
        Ok(Some(m)) => match m.starts_by_mode() {
            Ok(starts) => (m.window, Some(starts)),
            Err(e) => return fail(2, &e),
        },
        Ok(None) => (ccp_selector::probe::ProbeWindow::default(), None),
        Err(e) => return fail(2, &e),
    };
    if let Some(ms) = args.min_ms {
        window.min_ms = ms;
    }
    if let Some(r) = args.rtts {
        window.rtts = r;
    }
    match crate::probe::gen_data(scenario, out, jobs, window, starts) {
        Ok(rows) => {
            println!(
                "{rows} probe rows in {}",
                out.join(crate::probe::DATA_FILE).display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(1, &e),
    }
}

/// `gen-data --kind lptcp`.
fn gen_data_lptcp(scenario: &Scenario, name: &str, out: &Path, jobs: usize) -> ExitCode {
    match lptcp::gen_data(scenario, name, out, jobs) {
        Ok((rows, lost)) => {
            println!(
                "{rows} LP-TCP samples ({lost} lost) in {}",
                out.join(lptcp::SAMPLES_FILE).display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(1, &e),
    }
}

/// `train lptcp`: the scenario is `--scenario`, else the one `gen-data` names in `data`.
fn train_lptcp(
    data: &Path,
    out: &Path,
    scenario: Option<String>,
    opts: lptcp::TrainOptions,
) -> ExitCode {
    let name = if let Some(s) = scenario {
        s
    } else {
        let meta = data.join(lptcp::SCENARIO_FILE);
        match std::fs::read_to_string(&meta) {
            Ok(s) => s.trim().to_string(),
            Err(e) => {
                return fail(
                    2,
                    &format!(
                        "{}: {e} (or name the scenario with --scenario)",
                        meta.display()
                    ),
                );
            }
        }
    };
    let scenario = match load_scenario(&name) {
        Ok(s) => s,
        Err(e) => return fail(2, &e),
    };
    match lptcp::train(data, out, &scenario, &name, opts) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(2, &e),
    }
}

fn fail(code: u8, msg: &str) -> ExitCode {
    eprintln!("ccp-eval: {msg}");
    ExitCode::from(code)
}

fn list() -> ExitCode {
    println!("scenarios:");
    for (name, text) in builtin::SCENARIOS {
        println!("  {name:<18} {}", builtin::description(text));
    }
    println!(
        "  {:<18} TCP-RL initial windows on short web flows (issue 6; its own runner)",
        "iw-web"
    );
    println!("\nschemes:");
    for s in schemes::available() {
        println!("  {s:<18} {}", schemes::describe(s));
    }
    ExitCode::SUCCESS
}

fn load_scenario(name: &str) -> Result<Scenario, String> {
    if let Some(s) = builtin::scenario(name) {
        return s.map_err(|e| e.to_string());
    }
    let path = Path::new(name);
    if path.exists()
        || path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("toml"))
    {
        return Scenario::load(path).map_err(|e| e.to_string());
    }
    Err(format!(
        "no built-in scenario or file named `{name}` (see `ccp-eval list`)"
    ))
}

fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("--shard {s}: expected I/N, e.g. 0/4");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    Ok((
        i.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    ))
}

/// Runs `f` with every `arc` flow of this process recording its decisions into the trajectory
/// store at `path` (when given), exploring with noise of deviation `explore`; every queued
/// decision is in the database before this returns.
fn recording_arc(
    path: Option<&Path>,
    explore: f64,
    ray: bool,
    f: impl FnOnce() -> ExitCode,
) -> ExitCode {
    let Some(path) = path else {
        return f();
    };
    if ray {
        return fail(
            2,
            "--arc-trajectories records this process's flows: not with --ray",
        );
    }
    if !(explore >= 0.0 && explore.is_finite()) {
        return fail(2, &format!("--arc-explore must be >= 0, got {explore}"));
    }
    let store = match ccp_agent::arc_store::TrajectoryStore::open(path) {
        Ok(s) => s,
        Err(e) => return fail(2, &e.to_string()),
    };
    ccp_algorithms::arc::set_default_recording(store.clone(), explore);
    let code = f();
    store.close();
    if store.dropped() > 0 {
        eprintln!(
            "ccp-eval: the ARC trajectory store dropped {} decisions (its writer fell behind)",
            store.dropped()
        );
    }
    code
}

fn run(
    name: &str,
    out: &Path,
    shard: Option<&str>,
    ray: Option<&RayOptions>,
    mut opts: RunOptions,
) -> ExitCode {
    if ray.is_some()
        && (shard.is_some() || opts.realtime_agent.is_some() || opts.datapath != DatapathKind::Sim)
    {
        return fail(
            2,
            "--ray runs simulated shards of its own: not with --shard, --realtime or --datapath \
             kernel",
        );
    }
    let scenario = match load_scenario(name) {
        Ok(s) => s,
        Err(e) => return fail(2, &e),
    };
    let shard = match shard.map(parse_shard).transpose() {
        Ok(s) => s,
        Err(e) => return fail(2, &e),
    };
    opts.shard = shard;
    let plan = match runner::plan(&scenario, &opts) {
        Ok(p) => p,
        Err(e) => return fail(2, &e.to_string()),
    };
    if let Err(e) = prepare_out(out) {
        return fail(1, &e);
    }
    eprintln!(
        "{}: {} conditions, {} runs{}",
        scenario.name,
        scenario.conditions.len(),
        plan.len(),
        shard
            .map(|(i, n)| format!(" (shard {i}/{n})"))
            .unwrap_or_default()
    );
    let started = Instant::now();
    let output = match ray {
        Some(r) => {
            let mut args = Vec::new();
            if let Some(seed) = opts.seed {
                args.extend(["--seed".to_string(), seed.to_string()]);
            }
            if let Some(s) = &opts.schemes {
                args.extend(["--schemes".to_string(), s.join(",")]);
            }
            match crate::ray::run(name, &scenario, &plan, &args, r, &out.join(".ray-shards")) {
                Ok(o) => o,
                Err(e) => return fail(1, &e),
            }
        }
        None => runner::run(&scenario, &plan, &opts),
    };
    let secs = started.elapsed().as_secs_f64();
    let speed = if ray.is_some() {
        " on Ray".to_string()
    } else if opts.datapath == DatapathKind::Sim {
        format!(
            "; {:.2} M simulated packets/s",
            output.packets as f64 / secs.max(1e-9) / 1e6
        )
    } else {
        " (real time, kernel TCP)".to_string()
    };
    eprintln!(
        "{} runs ({} failed) in {secs:.1} s wall time{speed}",
        output.runs, output.failed,
    );
    if let Err(e) = write_outputs(out, &scenario.name, &output.rows, &output.series) {
        return fail(1, &e);
    }
    if !output.swaps.is_empty()
        && let Err(e) = write_choices(
            out,
            &scenario,
            &output.rows,
            &output.swaps,
            &output.decisions,
        )
    {
        return fail(1, &e);
    }
    if !output.decisions.is_empty()
        && let Err(e) = results::write_csv(&out.join("decisions.csv"), &output.decisions)
    {
        return fail(1, &e.to_string());
    }
    println!("report: {}", out.join("report.md").display());
    if output.failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Writes `swaps.csv` and `selector.md` (time share per candidate, moves per flow, what the
/// moves earned, in all and per part of the policy that asked for them, and the candidate in
/// use over time per condition in `plots/cca_<condition>.svg`).
fn write_choices(
    out: &Path,
    scenario: &Scenario,
    rows: &[FlowRow],
    swaps: &[SwapRow],
    decisions: &[DecisionRow],
) -> Result<(), String> {
    use crate::report::choices;
    results::write_csv(&out.join("swaps.csv"), swaps).map_err(|e| e.to_string())?;
    let mut md = format!(
        "# {}: what the selector chose\n\n{}\n",
        scenario.name,
        choices::time_share_table(swaps, rows, scenario.duration_s)
    );
    if let Some(per_flow) = choices::moves_per_flow_table(swaps, rows) {
        let _ = write!(
            md,
            "## Moves per flow\n\nFlows the selector moved to another candidate, by how often \
             (re-seats, a flow's own candidate installed again, are not moves):\n\n{per_flow}\n"
        );
    }
    if let Some(moves) = choices::moves_table(swaps, rows) {
        let _ = write!(
            md,
            "## What the moves earned\n\nRuns in which the selector moved a flow, against the \
             same condition and seed run alone with the candidate it moved from (the swaps' \
             cost included):\n\n{moves}\n"
        );
    }
    if let Some(parts) = choices::moves_by_part_paragraph(swaps, decisions, rows) {
        let _ = write!(md, "## What each part's moves earned\n\n{parts}");
    }
    let plots = out.join("plots");
    std::fs::create_dir_all(&plots).map_err(|e| format!("{}: {e}", plots.display()))?;
    for c in &scenario.conditions {
        if let Some(svg) = choices::cca_over_time_svg(swaps, &c.id, scenario.duration_s) {
            let name = format!(
                "cca_{}.svg",
                c.id.replace(
                    |ch: char| !ch.is_ascii_alphanumeric() && ch != '.' && ch != '-',
                    "_"
                )
            );
            std::fs::write(plots.join(&name), svg).map_err(|e| format!("{name}: {e}"))?;
            let _ = write!(md, "![{}](plots/{name})\n\n", c.id);
        }
    }
    let path = out.join("selector.md");
    std::fs::write(&path, md).map_err(|e| format!("{}: {e}", path.display()))
}

/// Creates the output directory and removes every file the harness owns there
/// (`crate::outdir`), so no file of an earlier run survives beside the new report and a run
/// that fails midway leaves nothing that looks complete. Other files stay.
fn prepare_out(out: &Path) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    crate::outdir::clear(out, crate::outdir::Clear::All)
        .map(|_| ())
        .map_err(|(path, e)| format!("{}: {e}", path.display()))
}

/// Writes results.csv and series.csv (each through a temporary file and a rename; series.csv
/// only if there are time series), then the report.
fn write_outputs(
    out: &Path,
    title: &str,
    rows: &[FlowRow],
    series: &[SeriesRow],
) -> Result<(), String> {
    let atomic = |name: &str, write: &dyn Fn(&Path) -> Result<(), results::ResultsError>| {
        let tmp = out.join(format!(".{name}.tmp"));
        write(&tmp).map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, out.join(name))
            .map_err(|e| format!("{}: {e}", out.join(name).display()))
    };
    // Without time series there is no series.csv: an empty one has no header, and `report`
    // refuses it (a run directory must stay reportable).
    if !series.is_empty() {
        atomic("series.csv", &|p| results::write_csv(p, series))?;
    }
    atomic("results.csv", &|p| results::write_csv(p, rows))?;
    report::write_report(
        out,
        &ReportInput {
            title,
            rows,
            series,
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(())
}

/// `run iw-web`: the initial-window evaluation (`crate::iw_web`).
fn iw_web(out: &Path, jobs: usize) -> ExitCode {
    let mut cfg = crate::iw_web::IwWebConfig::full();
    cfg.threads = jobs;
    if let Err(e) = prepare_out(out) {
        return fail(1, &e);
    }
    let started = Instant::now();
    let res = match crate::iw_web::run(&cfg) {
        Ok(r) => r,
        Err(e) => return fail(1, &e.to_string()),
    };
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "iw-web: {} flows x {} policies in {secs:.1} s wall time",
        res.arrivals.len(),
        crate::iw_web::Policy::ALL.len()
    );
    if let Err(e) = crate::iw_web::report::write(&res, out, secs) {
        return fail(1, &format!("{}: {e}", out.display()));
    }
    println!("report: {}", out.join("report.md").display());
    ExitCode::SUCCESS
}

fn demo() -> ExitCode {
    println!(
        "CCP end to end: portus agent (AIMD) <-> Rust datapath runtime over /tmp/ccp unix sockets\n"
    );
    match crate::demo::run() {
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
        Err(e) => fail(1, &format!("demo: {e}")),
    }
}

/// `agree`: the agreement table on stdout (and in `out`).
fn agree(sim: &[PathBuf], kernel: &[PathBuf], pairs: &[String], out: Option<&Path>) -> ExitCode {
    let (mut s, k) = match (
        crate::agree::read_dirs(sim),
        crate::agree::read_dirs(kernel),
    ) {
        (Ok(s), Ok(k)) => (s, k),
        (Err(e), _) | (_, Err(e)) => return fail(2, &e.to_string()),
    };
    for p in pairs {
        match crate::agree::parse_pair(p) {
            Ok((kernel_scheme, sim_scheme)) => {
                crate::agree::pair(&mut s, &kernel_scheme, &sim_scheme);
            }
            Err(e) => return fail(2, &e),
        }
    }
    let cells = crate::agree::cells(&s, &k);
    if cells.is_empty() {
        return fail(
            2,
            "no (condition, scheme) has ok main flows in both runs: not the same scenario?",
        );
    }
    let md = crate::agree::markdown(&cells);
    print!("{md}");
    if let Some(path) = out
        && let Err(e) = std::fs::write(path, &md)
    {
        return fail(1, &format!("{}: {e}", path.display()));
    }
    ExitCode::SUCCESS
}
