//! The one list of algorithms every tool reads: `ccp-agent` (`--alg`, `selector.candidates`),
//! `ccp-eval` (schemes, `list`), the selector's candidates and the tests.
//!
//! An [`Entry`] is a name, a one-line description and a config (the factory of the algorithm's
//! per-flow state). [`Registry::builtin`] holds the suite, in a fixed order; a researcher's
//! own crate adds its algorithm with [`Registry::register`] and installs the result for the
//! whole process with [`install`] before anything reads [`global`] (the `main_with` entry
//! points of `ccp-eval` and `ccp-agent` do both). A *variant* ([`Registry::register_variant`])
//! is another configuration of a registered algorithm under a name of its own: found by name
//! like any entry, never in a default list (so adding one changes no number measured before).
//!
//! # The portus glue, once
//! portus picks a flow's algorithm by the name in the datapath's CREATE, among algorithms
//! registered by *type* (`CongAlg::name()` takes no `self`), and does not pass that name on.
//! So a registry is served by one `CongAlg`, [`ByName`], registered as portus's default, over
//! an IPC wrapped in [`NameTap`], which notes the name each CREATE asks for; [`ByName`] builds
//! that algorithm through the same adapter as [`crate::Ccp`] or, for a name the registry does
//! not have (or none), its default. Algorithms registered with portus by type (the selectors)
//! are still picked by portus first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use portus::ipc::Ipc;
use portus::{CongAlg, Datapath, DatapathInfo, Flow, Report};
use thiserror::Error;

use crate::adapter::{AdapterCounters, CcpFlow, MeasuredFlow};
use crate::api::Measurement;
use crate::api::{Algorithm, DynAlgorithmConfig, FlowStart};
use crate::programs::ProgramSpec;

/// The longest algorithm name a libccp CREATE can carry (63 bytes and a NUL).
pub const MAX_NAME_BYTES: usize = 63;

/// libccp's limit on programs installed in one datapath, less one for the selector's share.
pub const MAX_PROGRAMS: usize = 9;

/// Why an algorithm could not be registered.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RegistryError {
    /// Two algorithms with one name.
    #[error("an algorithm named `{0}` is registered already")]
    Duplicate(String),
    /// A name a datapath cannot ask for.
    #[error(
        "algorithm name `{0}`: 1 to {MAX_NAME_BYTES} bytes of a-z, 0-9, `-`, `_`, `.`, starting with a letter"
    )]
    BadName(String),
    /// The registry's programs do not fit a libccp datapath.
    #[error(
        "`{name}` brings the registry's programs to {count}; a libccp datapath holds {MAX_PROGRAMS} (share the suite's programs, `ccp_algorithms::programs`)"
    )]
    TooManyPrograms {
        /// The algorithm that tipped it.
        name: String,
        /// Programs with it.
        count: usize,
    },
    /// A name no registered algorithm has.
    #[error("unknown algorithm `{name}` (known: {known})")]
    Unknown {
        /// What was asked for.
        name: String,
        /// What there is.
        known: String,
    },
    /// [`install`] after the registry was read or installed.
    #[error("the process's algorithm registry is already in use; install it first thing in main")]
    AlreadyInUse,
}

/// One registered algorithm.
#[derive(Clone)]
pub struct Entry {
    /// Name a datapath, a scenario or `--alg` asks for.
    pub name: &'static str,
    /// One line for `ccp-eval list` and `--help`: the paper or RFC and the defaults.
    pub description: &'static str,
    /// Its config: the factory of its per-flow state.
    pub config: Arc<dyn DynAlgorithmConfig>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.name)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

/// Every algorithm a process can run, in registration order.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    entries: Vec<Entry>,
    /// Another configuration of a registered algorithm under a name of its own (`cubic-ackclock`):
    /// found by name like any entry, left out of every default list (the selector's
    /// candidates, a scenario's schemes, the training sets).
    variants: Vec<Entry>,
}

impl Registry {
    /// No algorithms.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The suite of this crate, in its fixed order (the selector's default candidates).
    pub fn builtin() -> Self {
        let mut r = Self::empty();
        for (config, description) in crate::builtin_configs() {
            let name = config.name();
            // The suite's names are valid, distinct and its programs fit (tests say so).
            if let Err(e) = r.register_dyn(config, description) {
                tracing::error!(name, error = %e, "built-in algorithm not registered");
            }
        }
        for (config, description) in crate::builtin_variants() {
            let name = config.name();
            if let Err(e) = r.register_variant(config, description) {
                tracing::error!(name, error = %e, "built-in variant not registered");
            }
        }
        r
    }

    /// Adds `config` as a variant ([`Registry::variants`]) under its name with `description`.
    pub fn register_variant(
        &mut self,
        config: Arc<dyn DynAlgorithmConfig>,
        description: &'static str,
    ) -> Result<(), RegistryError> {
        let entry = self.checked(config, description)?;
        self.variants.push(entry);
        Ok(())
    }

    /// Adds `config` under its name with `description`.
    pub fn register(
        &mut self,
        config: impl DynAlgorithmConfig + 'static,
        description: &'static str,
    ) -> Result<(), RegistryError> {
        self.register_dyn(Arc::new(config), description)
    }

    /// [`Registry::register`] for a shared config.
    pub fn register_dyn(
        &mut self,
        config: Arc<dyn DynAlgorithmConfig>,
        description: &'static str,
    ) -> Result<(), RegistryError> {
        let entry = self.checked(config, description)?;
        self.entries.push(entry);
        Ok(())
    }

    /// `config` as an entry, if its name is valid and new and its programs fit.
    fn checked(
        &self,
        config: Arc<dyn DynAlgorithmConfig>,
        description: &'static str,
    ) -> Result<Entry, RegistryError> {
        let name = config.name();
        if !valid_name(name) {
            return Err(RegistryError::BadName(name.to_string()));
        }
        if self.get(name).is_some() {
            return Err(RegistryError::Duplicate(name.to_string()));
        }
        let mut programs: Vec<&str> = self.programs().iter().map(|p| p.name).collect();
        for p in config.programs() {
            if !programs.contains(&p.name) {
                programs.push(p.name);
            }
        }
        if programs.len() > MAX_PROGRAMS {
            return Err(RegistryError::TooManyPrograms {
                name: name.to_string(),
                count: programs.len(),
            });
        }
        Ok(Entry {
            name,
            description,
            config,
        })
    }

    /// Builder form of [`Registry::register`].
    pub fn with(
        mut self,
        config: impl DynAlgorithmConfig + 'static,
        description: &'static str,
    ) -> Result<Self, RegistryError> {
        self.register(config, description)?;
        Ok(self)
    }

    /// The entry or variant named `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries
            .iter()
            .chain(&self.variants)
            .find(|e| e.name == name)
    }

    /// Every entry, in registration order (variants are not entries).
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Every variant, in registration order.
    pub fn variants(&self) -> &[Entry] {
        &self.variants
    }

    /// Every name, in registration order.
    pub fn names(&self) -> Vec<&'static str> {
        self.entries.iter().map(|e| e.name).collect()
    }

    /// The name as registered (`&'static`), or an error listing the known ones.
    pub fn resolve(&self, name: &str) -> Result<&'static str, RegistryError> {
        self.get(name)
            .map(|e| e.name)
            .ok_or_else(|| self.unknown(name))
    }

    /// The first of `names` that cannot run as meant, with why (`candidate arc: ...`): a
    /// selector whose candidate's learned model is missing would otherwise run that candidate
    /// as its fallback rule and report numbers that are not the candidate's. Tools refuse to
    /// start selectors then (`ccp-eval run`, `ccp-agent --alg selector`). Unknown names are
    /// not this check's business ([`Registry::resolve`] refuses them).
    pub fn unready<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Option<String> {
        names
            .into_iter()
            .find_map(|n| self.not_ready(n).map(|why| format!("candidate {n}: {why}")))
    }

    /// Why the algorithm `name` cannot run as meant ([`AlgorithmConfig::ready`]: a learned
    /// model missing), if it cannot; `None` for one that can and for an unknown name.
    ///
    /// [`AlgorithmConfig::ready`]: crate::api::AlgorithmConfig::ready
    pub fn not_ready(&self, name: &str) -> Option<String> {
        self.get(name).and_then(|e| e.config.ready().err())
    }

    /// Configs for `names`, in that order (the selector's candidates).
    pub fn configs(
        &self,
        names: &[&str],
    ) -> Result<Vec<Box<dyn DynAlgorithmConfig>>, RegistryError> {
        names
            .iter()
            .map(|n| {
                self.get(n)
                    .map(|e| Box::new(Shared(e.config.clone())) as Box<dyn DynAlgorithmConfig>)
                    .ok_or_else(|| self.unknown(n))
            })
            .collect()
    }

    /// The union of every entry's and variant's programs, deduplicated by name.
    pub fn programs(&self) -> Vec<&'static ProgramSpec> {
        let mut out: Vec<&'static ProgramSpec> = Vec::new();
        for e in self.entries.iter().chain(&self.variants) {
            for p in e.config.programs() {
                if !out.iter().any(|q| q.name == p.name) {
                    out.push(p);
                }
            }
        }
        out
    }

    fn unknown(&self, name: &str) -> RegistryError {
        RegistryError::Unknown {
            name: name.to_string(),
            known: self.names().join(", "),
        }
    }
}

fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_NAME_BYTES
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"-_.".contains(c))
}

/// A registry entry's config behind a `Box` (the selector owns its candidates' configs).
struct Shared(Arc<dyn DynAlgorithmConfig>);

impl DynAlgorithmConfig for Shared {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn programs(&self) -> &'static [&'static ProgramSpec] {
        self.0.programs()
    }
    fn ready(&self) -> Result<(), String> {
        self.0.ready()
    }
    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        self.0.build(start)
    }
}

static GLOBAL: OnceLock<Registry> = OnceLock::new();

/// Makes `registry` the process's registry. Call it before anything reads [`global`] (the
/// first read installs [`Registry::builtin`]).
pub fn install(registry: Registry) -> Result<(), RegistryError> {
    GLOBAL
        .set(registry)
        .map_err(|_| RegistryError::AlreadyInUse)
}

/// The process's registry: the one [`install`]ed, else the built-in suite.
pub fn global() -> &'static Registry {
    GLOBAL.get_or_init(Registry::builtin)
}

/// The algorithm name of the latest CREATE a [`NameTap`] passed on, for [`ByName`].
#[derive(Debug, Clone, Default)]
pub struct AskedFor(Arc<Mutex<Option<(u32, String)>>>);

impl AskedFor {
    /// The name CREATE `sock_id` asked for, once (`None`: it named none, or another flow's
    /// CREATE came last).
    pub fn take(&self, sock_id: u32) -> Option<String> {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.take() {
            Some((sid, name)) if sid == sock_id => Some(name),
            other => {
                *slot = other;
                None
            }
        }
    }

    fn note(&self, msg: &[u8]) {
        // A CREATE: u16 type 0, u16 length, u32 socket id, six u32s, the NUL-terminated name.
        const NAME_AT: usize = 8 + 6 * 4;
        if msg.len() <= NAME_AT || msg[0] != 0 || msg[1] != 0 {
            return;
        }
        let sid = u32::from_le_bytes([msg[4], msg[5], msg[6], msg[7]]);
        let raw = &msg[NAME_AT..];
        let name = raw.iter().position(|&b| b == 0).map(|end| &raw[..end]);
        let name = name
            .and_then(|n| std::str::from_utf8(n).ok())
            .filter(|n| !n.is_empty())
            .map(str::to_string);
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = name.map(|n| (sid, n));
    }
}

/// An IPC that passes everything through and notes the algorithm each CREATE asks for.
#[derive(Debug)]
pub struct NameTap<I> {
    inner: I,
    asked: AskedFor,
}

impl<I> NameTap<I> {
    /// Wraps `inner`; names go to `asked` (share it with the [`ByName`]).
    pub fn new(inner: I, asked: AskedFor) -> Self {
        Self { inner, asked }
    }
}

impl<I: Ipc> Ipc for NameTap<I> {
    type Addr = I::Addr;

    fn name() -> String {
        I::name()
    }

    fn send(&self, msg: &[u8], to: &Self::Addr) -> portus::Result<()> {
        self.inner.send(msg, to)
    }

    fn recv(&self, msg: &mut [u8]) -> portus::Result<(usize, Self::Addr)> {
        let (n, addr) = self.inner.recv(msg)?;
        self.asked.note(&msg[..n.min(msg.len())]);
        Ok((n, addr))
    }

    fn close(&mut self) -> portus::Result<()> {
        self.inner.close()
    }
}

/// Every algorithm of a registry as one portus `CongAlg`: a flow gets the algorithm its
/// CREATE named (noted by a [`NameTap`] over the same IPC), else the registry's default
/// ([`ByName::with_default`]), else `otherwise`.
pub struct ByName<D> {
    registry: Registry,
    asked: AskedFor,
    default: Option<Arc<dyn DynAlgorithmConfig>>,
    counters: Arc<AdapterCounters>,
    otherwise: D,
}

impl<D> ByName<D> {
    /// `registry`'s algorithms by the names `asked` notes; `otherwise` for the rest.
    pub fn new(registry: Registry, asked: AskedFor, otherwise: D) -> Self {
        Self {
            registry,
            asked,
            default: None,
            counters: Arc::default(),
            otherwise,
        }
    }

    /// Flows that name no algorithm of the registry get `name` instead of `otherwise`.
    pub fn with_default(mut self, name: &str) -> Result<Self, RegistryError> {
        let e = self
            .registry
            .get(name)
            .ok_or_else(|| self.registry.unknown(name))?;
        self.default = Some(e.config.clone());
        Ok(self)
    }

    /// The counters every registry flow updates.
    pub fn counters(&self) -> Arc<AdapterCounters> {
        self.counters.clone()
    }
}

impl<I: Ipc, D: CongAlg<I>> CongAlg<I> for ByName<D> {
    type Flow = ByNameFlow<I, D::Flow>;

    fn name() -> &'static str {
        "registry"
    }

    fn datapath_programs(&self) -> HashMap<&'static str, String> {
        let mut all = ProgramSpec::registration(&self.registry.programs());
        all.extend(self.otherwise.datapath_programs());
        all
    }

    fn new_flow(&self, datapath: Datapath<I>, info: DatapathInfo) -> Self::Flow {
        let asked = self.asked.take(info.sock_id);
        let config = asked
            .as_deref()
            .and_then(|n| self.registry.get(n))
            .map(|e| &e.config)
            .or(self.default.as_ref());
        match config {
            Some(c) => {
                ByNameFlow::Registered(CcpFlow::start(c.as_ref(), &self.counters, datapath, &info))
            }
            None => ByNameFlow::Other(self.otherwise.new_flow(datapath, info)),
        }
    }
}

/// A flow of [`ByName`].
pub enum ByNameFlow<I: Ipc, F> {
    /// An algorithm of the registry.
    Registered(CcpFlow<I>),
    /// The `otherwise` algorithm's.
    Other(F),
}

impl<I: Ipc, F: Flow> Flow for ByNameFlow<I, F> {
    fn on_report(&mut self, sock_id: u32, report: Report) {
        match self {
            Self::Registered(f) => f.on_report(sock_id, report),
            Self::Other(f) => f.on_report(sock_id, report),
        }
    }

    fn close(&mut self) {
        match self {
            Self::Registered(f) => f.close(),
            Self::Other(f) => f.close(),
        }
    }
}

impl<I: Ipc, F: MeasuredFlow> MeasuredFlow for ByNameFlow<I, F> {
    fn take_measurement(&mut self) -> Option<Measurement> {
        match self {
            Self::Registered(f) => f.take_measurement(),
            Self::Other(f) => f.take_measurement(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RenoConfig;

    #[test]
    fn the_suite_is_registered_in_order_and_its_programs_fit() {
        let r = Registry::builtin();
        assert_eq!(
            r.names(),
            [
                "reno", "cubic", "bbr", "copa", "vegas", "westwood", "illinois", "c2tcp", "vivace",
                "lptcp", "rltcp", "arc"
            ]
        );
        assert!(r.programs().len() <= MAX_PROGRAMS);
        assert!(r.entries().iter().all(|e| !e.description.is_empty()));
        // Variants: found by name, built under it, never in the list of names.
        let variants: Vec<&str> = r.variants().iter().map(|v| v.name).collect();
        assert_eq!(variants, ["reno-ackclock", "cubic-ackclock"]);
        for name in variants {
            let e = r.get(name).unwrap();
            let flow = e.config.build(&crate::test_support::start(1448, 10));
            assert_eq!(flow.name(), name);
            assert!(!r.names().contains(&name));
            assert_eq!(r.resolve(name), Ok(name));
        }
        assert_eq!(
            Registry::builtin().register_variant(
                std::sync::Arc::new(crate::CubicAckClockConfig::default()),
                "again"
            ),
            Err(RegistryError::Duplicate("cubic-ackclock".into()))
        );
    }

    #[test]
    fn a_create_is_noted_by_socket_id() {
        let asked = AskedFor::default();
        let mut create = vec![0u8, 0, 96, 0, 7, 0, 0, 0];
        create.extend([0u8; 24]);
        let mut name = [0u8; 64];
        name[..5].copy_from_slice(b"vegas");
        create.extend(name);
        asked.note(&create);
        assert_eq!(asked.take(8), None, "another flow's CREATE");
        assert_eq!(asked.take(7).as_deref(), Some("vegas"));
        assert_eq!(asked.take(7), None, "taken once");
        // No NUL, not UTF-8, no name, not a CREATE: nothing noted.
        for bad in [
            &create[..35],
            &[create[..32].to_vec(), vec![0xff, 0]].concat()[..],
            &create[..33],
        ] {
            asked.note(bad);
            assert_eq!(asked.take(7), None);
        }
        let mut measure = create.clone();
        measure[0] = 1;
        asked.note(&measure);
        assert_eq!(asked.take(7), None);
    }

    #[test]
    fn bad_and_duplicate_names_are_refused() {
        let mut r = Registry::builtin();
        assert_eq!(
            r.register(RenoConfig::default(), "again"),
            Err(RegistryError::Duplicate("reno".into()))
        );
        assert!(!valid_name(""));
        assert!(!valid_name("Reno"));
        assert!(!valid_name("../x"));
        assert!(!valid_name(&"a".repeat(64)));
        assert!(valid_name("my-cca_2.0"));
        let e = r.resolve("tahoe").unwrap_err().to_string();
        assert!(e.contains("tahoe") && e.contains("vivace"), "{e}");
        let c = r.configs(&["vegas", "reno"]).unwrap();
        assert_eq!(
            c.iter().map(|c| c.name()).collect::<Vec<_>>(),
            ["vegas", "reno"]
        );
        assert!(r.configs(&["vegas", "tahoe"]).is_err());
    }

    #[test]
    fn a_candidate_without_its_model_is_named() {
        let mut r = Registry::empty();
        r.register(RenoConfig::default(), "ready").unwrap();
        r.register(
            crate::arc::ArcConfig::with_model("/nonexistent/actor.onnx"),
            "no model",
        )
        .unwrap();
        assert_eq!(
            r.unready(["reno", "tahoe"]),
            None,
            "ready, or not this check's"
        );
        let why = r.unready(["reno", "arc"]).unwrap();
        assert!(
            why.starts_with("candidate arc: ") && why.contains("/nonexistent/actor"),
            "{why}"
        );
    }
}
