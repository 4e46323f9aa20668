//! The running agent: its reloadable state, the algorithm registry, the SIGHUP watcher and the
//! portus run loop over each IPC.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use ccp_algorithms::registry::{AskedFor, ByName, NameTap};
use ccp_selector::{PolicyHandle, Selector, SelectorLog};
use portus::ipc::{BackendBuilder, Blocking, Ipc};
use tracing::{info, warn};

use crate::config::{Config, ConfigError, IpByteOrder, Preferences};
use crate::guard::{GuardCounters, Guarded};
use crate::iw::{IwSource, WithIw};
use crate::kernel::{KernelIw, KernelIwError};
use crate::learn::{Clock, Learner, Publish, SystemClock};
use crate::policies::{self, PolicyContext, PolicyError};
use crate::socket::SocketError;

/// Name of the selector algorithm, as `--alg` and datapaths ask for it.
pub const SELECTOR: &str = "selector";

/// How the agent talks to the datapath.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IpcKind {
    /// Unix datagram socket bound at `/tmp/ccp/<name>` (userspace datapaths, this project's
    /// runtime and eBPF datapath).
    Unix,
    /// Netlink (ccp-kernel built with netlink IPC).
    Netlink,
    /// Character device `/dev/ccpkp` (ccp-kernel built with the char device IPC).
    Char,
    /// Shared-memory rings, attached through a unix stream socket at `/tmp/ccp/<name>`
    /// (this project's runtime with `ShmTransport`); see [`crate::shm`].
    Shm,
}

impl IpcKind {
    /// How this IPC's datapaths usually encode addresses in CREATE.
    pub fn default_ip_byte_order(self) -> IpByteOrder {
        match self {
            Self::Unix | Self::Shm => IpByteOrder::Host,
            Self::Netlink | Self::Char => IpByteOrder::Network,
        }
    }
}

/// Why the agent cannot start or reload.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The config file is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The policy cannot be built from it.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// `--alg` names no algorithm.
    #[error("--alg: unknown algorithm {name:?} (known: {known}, selector)")]
    UnknownAlg {
        /// What was asked for.
        name: String,
        /// The registry's algorithms.
        known: String,
    },
    /// portus failed (socket, IPC).
    #[error("portus: {0}")]
    Portus(String),
    /// `iw.kernel_cgroup`: the sockops program cannot be attached or the table published.
    #[error(transparent)]
    Kernel(#[from] KernelIwError),
    /// `--name`: not a safe name, or its socket belongs to a running process.
    #[error(transparent)]
    Socket(#[from] SocketError),
}

impl From<portus::Error> for AgentError {
    fn from(e: portus::Error) -> Self {
        Self::Portus(e.0)
    }
}

/// The state new flows read, shared by the run loop and the reload thread. Flows already
/// running keep what they were built with.
#[derive(Debug, Clone)]
pub struct AgentState {
    /// The config file (`None`: every default, `ccp-agent` without `--config`).
    config_path: Option<PathBuf>,
    default_order: IpByteOrder,
    candidates: Vec<&'static str>,
    policy: PolicyHandle,
    iw: IwSource,
    preferences: Arc<RwLock<Preferences>>,
    /// `iw.kernel_cgroup` as configured at start, and the program attached there.
    kernel_cgroup: Option<PathBuf>,
    kernel: Option<Arc<KernelIw>>,
    /// The learning loop's clock (`iw.learn`).
    clock: Arc<dyn Clock>,
    /// What the IPC guard let through and dropped; logged at shutdown.
    guard: Arc<GuardCounters>,
    /// `--ipc shm`: peers and dropped answers; logged at shutdown (`None` for other IPCs).
    shm: Option<Arc<crate::shm::ShmCounters>>,
}

/// A config with its policy built: what a (re)load produces before anything is replaced.
struct Loaded {
    config: Config,
    factory: ccp_selector::PolicyFactory,
}

/// What a (re)load does with the IW learning loop.
enum LearnPlan {
    /// Learning is off: the configured table is served.
    Off,
    /// The running learner has the same settings: it keeps learning, its table stays.
    Keep,
    /// A new learner (fresh controller) starts from the configured table.
    New(Arc<Learner>),
}

impl AgentState {
    /// Loads `config_path`; `ipc` decides how addresses are read unless the config says. The
    /// IW learning loop (`iw.learn`) reads the wall clock.
    pub fn load(config_path: &Path, ipc: IpcKind) -> Result<Self, AgentError> {
        Self::load_with_clock(config_path, ipc, Arc::new(SystemClock))
    }

    /// [`AgentState::load`] with the learning loop reading `clock` (tests).
    pub fn load_with_clock(
        config_path: &Path,
        ipc: IpcKind,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, AgentError> {
        Self::start(
            Some(config_path.to_path_buf()),
            Config::load(config_path)?,
            ipc,
            clock,
        )
    }

    /// Every setting at its default (no config file): every algorithm of the registry, the
    /// selector with its default policy over all of them, the standard initial window.
    pub fn with_defaults(ipc: IpcKind) -> Result<Self, AgentError> {
        Self::start(None, Config::default(), ipc, Arc::new(SystemClock))
    }

    fn start(
        config_path: Option<PathBuf>,
        config: Config,
        ipc: IpcKind,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, AgentError> {
        let candidates = config.candidates.clone();
        let loaded = Self::build(config, &candidates)?;
        let kernel_cgroup = loaded
            .config
            .iw
            .as_ref()
            .and_then(|iw| iw.kernel_cgroup.clone());
        let kernel = match (&loaded.config.iw, &kernel_cgroup) {
            (Some(iw), Some(cgroup)) => Some(Arc::new(KernelIw::attach(
                cgroup,
                &iw.table,
                iw.kernel_cca.as_deref(),
            )?)),
            _ => None,
        };
        let state = Self {
            config_path,
            default_order: ipc.default_ip_byte_order(),
            candidates,
            policy: PolicyHandle::new(loaded.factory.clone(), loaded.config.hysteresis),
            iw: IwSource::default(),
            preferences: Arc::default(),
            kernel_cgroup,
            kernel,
            clock,
            guard: GuardCounters::new(),
            shm: (ipc == IpcKind::Shm).then(crate::shm::ShmCounters::new),
        };
        let plan = state.plan_learning(&loaded.config)?;
        state.install(loaded, plan);
        Ok(state)
    }

    fn plan_learning(&self, config: &Config) -> Result<LearnPlan, AgentError> {
        let Some((iw, settings)) = config
            .iw
            .as_ref()
            .and_then(|iw| iw.learning.as_ref().map(|l| (iw, l)))
        else {
            return Ok(LearnPlan::Off);
        };
        let order = iw.ip_byte_order.unwrap_or(self.default_order);
        if let Some(running) = self.iw.learner()
            && running.settings() == settings
            && running.publishes_like(order, iw.kernel_cca.as_deref())
        {
            return Ok(LearnPlan::Keep);
        }
        let learner = Learner::new(
            settings.clone(),
            self.clock.clone(),
            Publish {
                iw: self.iw.clone(),
                order,
                kernel: self.kernel.clone(),
                kernel_cca: iw.kernel_cca.clone(),
            },
        )?;
        Ok(LearnPlan::New(Arc::new(learner)))
    }

    fn build(config: Config, candidates: &[&'static str]) -> Result<Loaded, AgentError> {
        let factory = policies::build(
            &config.policy,
            &PolicyContext {
                candidates,
                models: config.models.as_deref(),
                preferences: &config.preferences,
                online: config.online.as_ref(),
            },
        )?;
        Ok(Loaded { config, factory })
    }

    fn install(&self, loaded: Loaded, plan: LearnPlan) {
        let Loaded { config, factory } = loaded;
        self.policy
            .replace(factory, config.hysteresis, config.path_change);
        let table = config
            .iw
            .map(|iw| (iw.table, iw.ip_byte_order.unwrap_or(self.default_order)));
        let previous = match plan {
            LearnPlan::Keep => None,
            LearnPlan::Off => {
                self.iw.replace(table);
                self.iw.set_learner(None)
            }
            LearnPlan::New(learner) => {
                self.iw.replace(table);
                info!(
                    iteration_secs = learner.settings().controller.iteration_us as f64 / 1e6,
                    geo = ?learner.settings().geo_path,
                    "IW learning started"
                );
                self.iw.set_learner(Some(learner))
            }
        };
        if let Some(old) = previous {
            old.flush();
        }
        *self
            .preferences
            .write()
            .unwrap_or_else(PoisonError::into_inner) = config.preferences;
    }

    /// Re-reads the config file and its models; on any error nothing changes. The selector's
    /// candidates are fixed at start (their programs are registered with the datapath then):
    /// a reload that changes them applies everything else and says so; so is
    /// `iw.kernel_cgroup`. With a kernel cgroup attached, the new table (and `iw.kernel_cca`) is
    /// published there first; if the kernel refuses it, the reload fails and the old table
    /// stays everywhere. With `iw.learn`, a reload whose `[iw.learning]` settings (and feature
    /// file contents, address encoding, kernel CCA) are unchanged keeps the running learner
    /// and its learned table; any change starts a fresh learner from `iw.table`, and turning
    /// learning off serves `iw.table` again.
    pub fn reload(&self) -> Result<(), AgentError> {
        let config = match &self.config_path {
            Some(p) => Config::load(p)?,
            None => Config::default(),
        };
        if config.candidates != self.candidates {
            warn!(
                running = ?self.candidates,
                configured = ?config.candidates,
                "selector.candidates changed: takes effect at the next start"
            );
        }
        let loaded = Self::build(config, &self.candidates)?;
        let plan = self.plan_learning(&loaded.config)?;
        let iw = loaded.config.iw.as_ref();
        let configured = iw.and_then(|iw| iw.kernel_cgroup.as_ref());
        if configured != self.kernel_cgroup.as_ref() {
            warn!(
                running = ?self.kernel_cgroup,
                configured = ?configured,
                "iw.kernel_cgroup changed: takes effect at the next start"
            );
        }
        if let Some(k) = &self.kernel {
            // A learner that keeps running keeps its learned table in the kernel too.
            let learned = match plan {
                LearnPlan::Keep => self.iw.current().map(|(t, _)| t),
                LearnPlan::Off | LearnPlan::New(_) => None,
            };
            k.publish(
                learned.as_deref().or(iw.map(|iw| &iw.table)),
                iw.and_then(|iw| iw.kernel_cca.as_deref()),
            )?;
        }
        self.install(loaded, plan);
        Ok(())
    }

    /// The preference mode for flows to `dst_port`, as configured now.
    pub fn preference(&self, dst_port: u16) -> crate::config::Preference {
        self.preferences
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .for_port(dst_port)
    }

    /// Where new flows get their IW.
    pub fn iw(&self) -> &IwSource {
        &self.iw
    }

    /// How CREATE encodes destination addresses: `[iw] ip_byte_order` when the table has
    /// one, else the IPC's usual encoding.
    pub fn ip_byte_order(&self) -> IpByteOrder {
        self.iw
            .current()
            .map_or(self.default_order, |(_, order)| order)
    }

    /// The selector's policy slot.
    pub fn policy(&self) -> &PolicyHandle {
        &self.policy
    }

    /// The selector's candidates.
    pub fn candidates(&self) -> &[&'static str] {
        &self.candidates
    }

    /// The sockops program on `iw.kernel_cgroup`, when configured.
    pub fn kernel(&self) -> Option<&KernelIw> {
        self.kernel.as_deref()
    }

    /// The shared-memory transport's counters (`--ipc shm` only), to hand to
    /// [`run_spinning`].
    pub fn shm(&self) -> Option<&Arc<crate::shm::ShmCounters>> {
        self.shm.as_ref()
    }

    /// The IPC guard's counters ([`crate::guard`]), to hand to [`run`].
    pub fn guard(&self) -> &Arc<GuardCounters> {
        &self.guard
    }

    /// Logs the IPC guard's totals, flushes the IW learner, detaches the kernel IW table and
    /// removes its cgroup (nothing without one). Called when the agent stops.
    pub fn shutdown(&self) {
        self.guard.log_totals();
        if let Some(shm) = &self.shm {
            shm.log_totals();
        }
        if let Some(l) = self.iw.learner() {
            l.flush();
        }
        if let Some(k) = &self.kernel {
            k.detach();
        }
    }
}

/// Every algorithm the agent serves: the process registry's
/// ([`ccp_algorithms::registry::global`]) and the selector over the configured candidates,
/// each starting flows from the IW table.
#[derive(Clone)]
pub struct Registry {
    algorithms: ccp_algorithms::Registry,
    candidates: Vec<&'static str>,
    policy: PolicyHandle,
    iw: IwSource,
    log: Arc<SelectorLog>,
    /// CREATE's addresses are network-order bytes ([`AgentState::ip_byte_order`]).
    network_ips: bool,
}

impl Registry {
    /// The registry over `state`'s IW table and policy slot.
    pub fn new(state: &AgentState) -> Self {
        Self {
            algorithms: ccp_algorithms::registry::global().clone(),
            candidates: state.candidates().to_vec(),
            policy: state.policy().clone(),
            iw: state.iw().clone(),
            // Decisions are one per report: the deployed agent keeps counters, not an event
            // trace.
            log: Arc::new(SelectorLog::new(false)),
            network_ips: state.ip_byte_order() == IpByteOrder::Network,
        }
    }

    /// The selector's counters.
    pub fn selector_log(&self) -> Arc<SelectorLog> {
        self.log.clone()
    }

    /// A selector over the configured candidates (policies index them by position, so the
    /// configured order is kept), sharing the policy slot and the counters.
    fn selector(&self) -> Selector {
        // The config's candidates were checked against this registry when it was loaded.
        let candidates = self
            .algorithms
            .configs(&self.candidates)
            .unwrap_or_default();
        Selector::new(candidates, self.policy.get().0)
            .with_policy_handle(self.policy.clone())
            .with_log(self.log.clone())
            .with_network_order_ips(self.network_ips)
    }
}

/// What portus runs for a flow that asks for no algorithm (or an unknown one): `--alg`, an
/// algorithm of the registry or `selector`.
#[derive(Clone)]
pub struct DefaultAlg {
    registry: Registry,
    name: &'static str,
}

impl DefaultAlg {
    /// `name` (an algorithm of the registry or `selector`) from `registry`.
    pub fn new(registry: Registry, name: &str) -> Result<Self, AgentError> {
        let name = if name == SELECTOR {
            SELECTOR
        } else {
            registry
                .algorithms
                .resolve(name)
                .map_err(|_| AgentError::UnknownAlg {
                    name: name.to_string(),
                    known: registry.algorithms.names().join(", "),
                })?
        };
        Ok(Self { registry, name })
    }
}

/// Runs portus over `sock` in this thread: `default` for unnamed flows, every algorithm by
/// name. Every datagram passes the [`crate::guard`] first, counted in `guard`; a
/// [`NameTap`] then notes the algorithm each CREATE asks for, which [`ByName`] builds. Returns
/// when the IPC closes or `stop` is cleared.
pub fn run_on<I: Ipc>(
    sock: I,
    default: DefaultAlg,
    stop: Arc<AtomicBool>,
    guard: Arc<GuardCounters>,
) -> portus::Result<()> {
    let r = default.registry;
    let asked = AskedFor::default();
    let sock = NameTap::new(Guarded::new(sock, guard), asked.clone());
    let by_name = ByName::new(r.algorithms.clone(), asked, r.selector());
    let by_name = if default.name == SELECTOR {
        by_name
    } else {
        by_name
            .with_default(default.name)
            .map_err(|e| portus::Error(e.to_string()))?
    };
    portus::RunBuilder::new(BackendBuilder { sock })
        .default_alg(WithIw::new(by_name, r.iw.clone()))
        .additional_alg(WithIw::new(r.selector(), r.iw.clone()))
        .with_stop_handle(stop)
        .run()
}

/// Opens the IPC and runs the agent until it closes or `stop` is cleared, counting the
/// guard's drops in `guard`. `name` is the unix socket name (`/tmp/ccp/<name>`, checked by
/// [`crate::socket::claim`] first; also the shared-memory transport's listening socket);
/// netlink and the char device take none. Unix sockets are read by blocking (see
/// [`run_spinning`] for busy-polling); shared memory spins [`crate::shm::DEFAULT_SPIN`].
pub fn run(
    ipc: IpcKind,
    name: &str,
    default: DefaultAlg,
    stop: Arc<AtomicBool>,
    guard: Arc<GuardCounters>,
) -> Result<(), AgentError> {
    run_spinning(ipc, name, default, stop, guard, None, None)
}

/// [`run`], spinning `spin` on the IPC after each message before sleeping (`None`: the
/// IPC's default, no spin for unix sockets; netlink and the char device ignore it), and
/// counting the shared-memory transport's events in `shm` (fresh counters when `None`).
pub fn run_spinning(
    ipc: IpcKind,
    name: &str,
    default: DefaultAlg,
    stop: Arc<AtomicBool>,
    guard: Arc<GuardCounters>,
    spin: Option<std::time::Duration>,
    shm: Option<Arc<crate::shm::ShmCounters>>,
) -> Result<(), AgentError> {
    match ipc {
        IpcKind::Unix => {
            crate::socket::claim(name)?;
            match spin {
                Some(spin) if !spin.is_zero() => run_on(
                    crate::spin_unix::SpinUnix::bind(name, spin).map_err(portus::Error::from)?,
                    default,
                    stop,
                    guard,
                )?,
                _ => run_on(
                    portus::ipc::unix::Socket::<Blocking>::new(name)?,
                    default,
                    stop,
                    guard,
                )?,
            }
        }
        IpcKind::Shm => {
            crate::socket::claim(name)?;
            let spin = spin.unwrap_or(crate::shm::DEFAULT_SPIN);
            let counters = shm.unwrap_or_default();
            let sock =
                crate::shm::ShmIpc::bind(name, spin, counters).map_err(portus::Error::from)?;
            run_on(sock, default, stop, guard)?;
        }
        IpcKind::Netlink => run_on(crate::netlink::Socket::new()?, default, stop, guard)?,
        IpcKind::Char => run_on(
            portus::ipc::kp::Socket::<Blocking>::new()?,
            default,
            stop,
            guard,
        )?,
    }
    Ok(())
}

static SIGHUP_SEEN: AtomicBool = AtomicBool::new(false);
static STOP_SEEN: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sighup(_: libc::c_int) {
    // Async-signal-safe: one atomic store.
    SIGHUP_SEEN.store(true, Ordering::SeqCst);
}

extern "C" fn on_stop(_: libc::c_int) {
    // Async-signal-safe: one atomic store.
    STOP_SEEN.store(true, Ordering::SeqCst);
}

fn install(signal: libc::c_int, handler: extern "C" fn(libc::c_int)) -> std::io::Result<()> {
    // SAFETY: the handlers only store to an atomic, which is async-signal-safe; `signal` with a
    // valid function pointer has no other preconditions.
    let previous = unsafe { libc::signal(signal, handler as libc::sighandler_t) };
    if previous == libc::SIG_ERR {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Installs the SIGHUP, SIGTERM and SIGINT handlers and starts a thread that reloads `state`
/// after each SIGHUP (checked every 50 ms). A failed reload keeps the previous state and logs
/// why. On SIGTERM or SIGINT the thread runs [`AgentState::shutdown`] (the guard's totals are
/// logged; with `iw.kernel_cgroup` the program is detached and the cgroup removed) and exits
/// the process with status 0.
pub fn spawn_reloader(state: AgentState) -> std::io::Result<std::thread::JoinHandle<()>> {
    install(libc::SIGHUP, on_sighup)?;
    install(libc::SIGTERM, on_stop)?;
    install(libc::SIGINT, on_stop)?;
    std::thread::Builder::new()
        .name("ccp-agent-reload".to_string())
        .spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(50));
                if STOP_SEEN.load(Ordering::SeqCst) {
                    info!("stopping on SIGTERM/SIGINT");
                    state.shutdown();
                    std::process::exit(0);
                }
                if SIGHUP_SEEN.swap(false, Ordering::SeqCst) {
                    match state.reload() {
                        Ok(()) => info!(config = ?state.config_path, "reloaded"),
                        Err(e) => warn!(
                            config = ?state.config_path,
                            error = %e,
                            "reload failed; keeping the previous config"
                        ),
                    }
                }
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reload_replaces_the_policy_and_a_bad_config_keeps_it() {
        let dir = std::env::temp_dir().join(format!("ccp-agent-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("agent.toml");
        let write = |text: &str| std::fs::write(&path, text).unwrap();
        let policy_now = |s: &AgentState| {
            let (factory, hysteresis) = s.policy().get();
            let p = factory(&ccp_selector::FlowContext::for_candidates(s.candidates()));
            (
                p.name(),
                s.candidates()[p.initial()],
                hysteresis.agreeing_decisions,
            )
        };
        write("[selector]\npolicy = \"rein\"\n[preferences]\n443 = \"delay\"\n");
        let state = AgentState::load(&path, IpcKind::Unix).unwrap();
        assert_eq!(policy_now(&state), ("rein", "cubic", 2));
        assert_eq!(
            state.policy().path_change(),
            Some(ccp_selector::PathChangeConfig::default())
        );
        assert_eq!(state.preference(443), crate::Preference::Delay);
        assert!(state.iw().current().is_none());
        assert_eq!(state.ip_byte_order(), IpByteOrder::Host, "the unix IPC's");
        let netlink = AgentState::load(&path, IpcKind::Netlink).unwrap();
        assert_eq!(netlink.ip_byte_order(), IpByteOrder::Network);

        write(
            "[selector]\npolicy = \"static:vegas\"\n[selector.hysteresis]\nagreeing_decisions = 5\n\
             [selector.path_change]\nenabled = false\n[iw]\ndefault_iw = 30\n",
        );
        state.reload().unwrap();
        assert_eq!(policy_now(&state), ("static", "vegas", 5));
        assert_eq!(state.policy().path_change(), None);
        assert_eq!(state.preference(443), crate::Preference::Default);
        let (table, order) = state.iw().current().unwrap();
        assert_eq!((table.default_iw(), order), (30, IpByteOrder::Host));

        write("[selector]\npolicy = \"antelope-typo\"\n");
        assert!(matches!(state.reload(), Err(AgentError::Policy(_))));
        write("[selector\n");
        assert!(matches!(state.reload(), Err(AgentError::Config(_))));
        assert_eq!(policy_now(&state), ("static", "vegas", 5));
        assert_eq!(state.policy().path_change(), None);
        assert!(state.iw().current().is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Without the `kernel` feature a configured `iw.kernel_cgroup` fails the start, naming it.
    #[cfg(not(all(feature = "kernel", target_os = "linux")))]
    #[test]
    fn kernel_cgroup_needs_the_kernel_feature() {
        let dir = std::env::temp_dir().join(format!("ccp-agent-nokernel-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("agent.toml");
        std::fs::write(&path, "[iw]\nkernel_cgroup = \"ccp-iw\"\n").unwrap();
        let e = AgentState::load(&path, IpcKind::Unix).err().unwrap();
        assert!(matches!(e, AgentError::Kernel(_)), "{e}");
        assert!(e.to_string().contains("iw.kernel_cgroup ccp-iw"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn default_alg_names_are_checked() {
        let dir = std::env::temp_dir().join(format!("ccp-agent-alg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("agent.toml");
        std::fs::write(&path, "").unwrap();
        let state = AgentState::load(&path, IpcKind::Char).unwrap();
        let registry = Registry::new(&state);
        let variants = ccp_algorithms::registry::global().variants();
        assert!(!variants.is_empty());
        for name in crate::config::algorithms()
            .iter()
            .chain(variants.iter().map(|v| &v.name))
            .chain([&SELECTOR])
        {
            assert!(DefaultAlg::new(registry.clone(), name).is_ok(), "{name}");
        }
        let e = DefaultAlg::new(registry, "tahoe")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--alg") && e.contains("vivace"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
