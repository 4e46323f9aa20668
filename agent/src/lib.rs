//! `ccp-agent`: the deployable CCP agent. Every algorithm of the process's registry
//! ([`ccp_algorithms::registry`]), the meta-selector and the IW table are served; a datapath
//! asks for any by name and gets `--alg` when it names none (or an unknown one). A researcher's
//! own binary runs the same agent with its algorithm added: [`cli::main_with`].
//!
//! ```text
//! ccp-agent --alg <cca|selector> [--ipc unix|shm|netlink|char] [--config agent.toml] [--name portus]
//!           [--spin-us N]
//! ```
//!
//! - `--ipc unix` (the default): a unix datagram socket bound at `/tmp/ccp/<name>` (this
//!   project's `ccp-datapath` runtime, its eBPF kernel datapath, any libccp userspace
//!   datapath); `shm`: shared-memory rings attached through a unix stream socket at
//!   `/tmp/ccp/<name>` (this project's runtime with `ShmTransport`; see [`shm`]); `netlink`
//!   and `char` (`/dev/ccpkp`) talk to ccp-kernel.
//! - `--spin-us N`: busy-poll the IPC for `N` µs after each message before sleeping (unix:
//!   default 0, [`spin_unix`]; shm: default 50). It takes the agent's wake-up out of the
//!   control loop at the price of a busy core while messages keep coming.
//! - `--alg`: an algorithm of the registry (reno, cubic, bbr, copa, vegas, westwood, illinois,
//!   c2tcp, vivace, and any a researcher's build adds) or selector.
//! - `--config`: without it every setting is at its default (all algorithms as the selector's
//!   candidates under the `static:cubic` policy, the standard initial window).
//! - SIGHUP re-reads the config (and the models it names). New flows get the new policy,
//!   hysteresis, path-change detection, preferences and IW table; running flows keep theirs. With `iw.learn`, unchanged
//!   `[iw.learning]` settings keep the running learner and its table; changed ones restart it. A config or model that
//!   does not load is logged (`tracing`, stderr) and the previous one stays.
//! - A bad config at start is one line on stderr naming the field, and exit status 2; so is an
//!   `iw.kernel_cgroup` that cannot be attached (not root, no BPF sockops or cgroup v2, a build
//!   without the `kernel` feature), and with `--ipc unix` a `--name` that is not one file name
//!   of `A-Z a-z 0-9 . _ -` (at most 64 bytes, not `.`/`..`) or whose socket a running process
//!   is bound to (a stale socket is replaced; anything else there is refused); see [`socket`].
//! - Every datagram passes the [`guard`] before portus decodes it: anything but exactly one
//!   well-formed READY, CREATE or MEASURE is dropped, counted and logged (rate-limited), and a
//!   CREATE whose MSS is 0 or above 65535 leaves that flow on the datapath's fallback rule.
//! - SIGTERM and SIGINT stop the agent with status 0 after logging the guard's totals (and
//!   removing `iw.kernel_cgroup`).
//!
//! # `agent.toml`
//!
//! Every key is optional; `agent/agent.example.toml` shows them all.
//!
//! ```toml
//! [selector]
//! policy = "rein"              # "static:<cca>" (never switches) | "rein"; see policies::KNOWN
//! candidates = ["cubic", "bbr", "westwood"]   # default: all nine, in the order above
//! models = "models"            # folder of model files for learned policies
//!
//! [selector.hysteresis]
//! agreeing_decisions = 2       # consecutive agreeing decisions before a swap (>= 1)
//! dwell_rtts = 2.0             # minimum time on a candidate, smoothed RTTs (>= 0)
//! loss_hold_rtts = 1.0         # no swap this many RTTs after a loss (>= 0)
//!
//! [selector.path_change]       # re-seat the active candidate when the path's RTT floor
//! enabled = true               # steps up (ccp_selector::path_change); default true
//! rise = 0.5                   # floor rise that counts, relative (>= 0) ...
//! min_rise_ms = 5              # ... and absolute (0..=60000 ms)
//! step_rtts = 3                # within this many floors of the last sample near the floor
//! settle_rtts = 4              # settled within this many floors of the first sample above
//! window_rtts = 8              # then held this many floors ...
//! min_window_ms = 500          # ... and at least this long (0..=60000 ms)
//! flat = 0.1                   # with samples within 10 % of the window's lowest
//! slowdown = 0.3               # and delivery at least 30 % below the rate before (0..=1)
//!
//! [selector.online]            # Antelope's online learning; policy = "antelope" only
//! enabled = true               # default false: the section is then ignored
//! period_secs = 60             # refit every this often (0.001 s .. one year)
//! window = 20000               # most recent online samples a refit uses (1..=10^7)
//! base_samples = "samples.csv" # `ccp-eval gen-data` samples every refit starts from
//! save_models = "online"       # write each refit's models here (replaced whole)
//!
//! [preferences]                # per destination port: "default" | "delay" | "throughput"
//! 443 = "throughput"
//! 5004 = "delay"
//!
//! [iw]                         # without this section the datapath's own IW is left alone
//! table = "iw.csv"             # lines "start,end,iw": inclusive IPv4 range, IW in packets
//! default_iw = 10              # addresses in no range (1..=max_iw)
//! max_iw = 200                 # largest IW (1..=65535); larger table entries are an error
//! ip_byte_order = "host"       # how CREATE encodes addresses: "host" (default for unix,
//!                              # ccp-datapath) or "network" (default for netlink/char,
//!                              # ccp-kernel's inet_daddr)
//! kernel_cgroup = "ccp-iw"     # cgroup v2 (absolute, or relative to its mount) created at
//!                              # start: TCP connections of processes in it get this table's IW
//!                              # (sockops, TCP_BPF_IW); feature `kernel`, root; see [`kernel`]
//! kernel_cca = "cubic"         # and this congestion control (needs kernel_cgroup)
//! learn = true                 # learn the table from the flows seen (TCP-RL); see [`learn`]
//!
//! [iw.learning]                # read only with learn = true; defaults: TCP-RL's online ones
//! geo = "geo.csv"              # start,end,subnet,isp,province (without it: one group All)
//! levels = ["province", "isp", "subnet"]  # group tree below All; [] = no grouping
//! iteration_secs = 600         # bandit step (fractions allowed)
//! alpha = 0.8                  # reward: alpha tput/tput_max + (1 - alpha) rtt_min/rtt
//! xi = 0.1                     # exploration constant
//! gamma = 0.95                 # discount
//! initial_arms = [5, 10, 15, 20]  # packets, distinct, each in 1..=max_iw
//! step = 5                     # sliding step Delta, packets (0: no sliding)
//! grouping_period_secs = 86400 # how often the groups are recomputed
//! bin_secs = 600               # time bin of the qualification test
//! min_samples = 100            # S_min per bin
//! max_jitter = 0.1             # T
//! stale_iterations = 3         # flow-less iterations before a group gets default_iw
//! records = "flows.csv"        # append every flow record here (created at start)
//! save_table = "iw.csv"        # write the learned table here after every iteration
//! max_records_per_iteration = 100000  # more are dropped and counted
//! long_flow_secs = 10          # a flow still open then is recorded then
//! # our additions (docs/iw.md, TCP-RL+); the defaults keep TCP-RL as specified
//! first_grouping_secs = 1200   # first grouping sooner (default: one grouping period)
//! standard_iw_until_grouped = false
//! scale_from_means = false     # reward extremes of iteration means, not single flows
//! max_step_multiplier = 1      # accelerated sliding
//! warm_start = false           # new groups copy the covering old group's bandit
//! ```
//!
//! Relative paths are taken from the config file's folder. `selector.candidates` is read at
//! start only (their datapath programs are registered then). `[preferences]` is stored and
//! exposed ([`AgentState::preference`]) for learned policies to weigh their reward with.
//!
//! # Where things are
//! - [`config`]: parsing and validation, one error per field.
//! - [`policies`]: `selector.policy` -> a policy factory, one match arm per policy.
//! - [`iw`]: [`WithIw`], the IW at flow creation through `DatapathInfo::init_cwnd`.
//! - [`learn`]: `iw.learn`, the learning loop: flow records from reports and closes, the
//!   `IwController`, the learned table published every iteration ([`spawn_learning`]).
//! - [`kernel`]: `iw.kernel_cgroup`, the same table for real kernel TCP connections through a
//!   sockops program on a cgroup v2 (`TCP_BPF_IW`; cargo feature `kernel`, Linux, root).
//! - [`agent`]: the reloadable [`AgentState`], the algorithms served, the SIGHUP reloader and
//!   the portus run loop for each IPC.
//! - [`cli`]: the command line, [`cli::main_with`].
//! - [`guard`]: the filter every datagram passes before portus decodes it (malformed and
//!   unexpected messages, absurd MSS in CREATE), with counters logged at shutdown.
//! - [`socket`]: `--name` checks, and refusing to take over a running agent's socket.
//! - [`shm`]: `--ipc shm`, the agent's end of the shared-memory rings.
//! - [`spin_unix`]: `--ipc unix --spin-us`, the unix socket read by spin-then-park.

pub mod agent;
pub mod arc_store;
pub mod cli;
pub mod config;
pub mod guard;
pub mod iw;
pub mod kernel;
pub mod learn;
pub mod netlink;
pub mod policies;
pub mod shm;
pub mod socket;
pub mod spin_unix;

pub use agent::{
    AgentError, AgentState, DefaultAlg, IpcKind, Registry, SELECTOR, run, run_on, spawn_reloader,
};
pub use config::{Config, ConfigError, IpByteOrder, Preference, Preferences};
pub use guard::{GuardCounters, Guarded};
pub use iw::{IwFlow, IwSource, WithIw};
pub use learn::{Clock, Learner, ManualClock, SystemClock, spawn_learning};

/// Logs to stderr (`RUST_LOG`, default `info`; colours on a terminal), for the crate's binaries.
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
