//! The one list of algorithms every tool reads: `ccp-agent` (`--alg`, `selector.candidates`),
//! `ccp-eval` (schemes, `list`), the selector's candidates and the tests.
//!
//! An [`Entry`] is a name, a one-line description and a config (the factory of the algorithm's
//! per-flow state). [`Registry::builtin`] holds the suite, in a fixed order; a researcher's
//! own crate adds its algorithm with [`Registry::register`] and installs the result for the
//! whole process with [`install`] before anything reads [`global`] (the `main_with` entry
//! points of `ccp-eval` and `ccp-agent` do both).
//!
//! # The portus glue, once
//! portus picks a flow's algorithm by the name in the datapath's CREATE among algorithms
//! registered by *type* (`CongAlg::name()` takes no `self`). [`Slot<N>`] is one generic
//! `CongAlg` per position: slot `N` answers to the `N`-th name ever registered in this process
//! (names are interned once, process-wide, at most [`MAX_SLOTS`]) and builds that algorithm
//! through the same adapter as [`crate::Ccp`]. [`register_slots!`](crate::register_slots)
//! adds every slot of a registry to a portus `RunBuilder` (an unused slot is `None`, which
//! portus never picks).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

use portus::ipc::Ipc;
use portus::{CongAlg, Datapath, DatapathInfo};
use thiserror::Error;

use crate::adapter::{AdapterCounters, CcpFlow};
use crate::api::{Algorithm, DynAlgorithmConfig, FlowStart};
use crate::programs::ProgramSpec;

/// How many distinct algorithm names one process can serve through portus.
pub const MAX_SLOTS: usize = 32;

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
    /// More names than portus slots.
    #[error("more than {MAX_SLOTS} algorithm names in one process (`{0}` is one too many)")]
    Full(String),
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
    /// Its portus slot.
    slot: usize,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("slot", &self.slot)
            .finish_non_exhaustive()
    }
}

/// Every algorithm a process can run, in registration order.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    entries: Vec<Entry>,
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
        r
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
        let slot = intern(name)?;
        self.entries.push(Entry {
            name,
            description,
            config,
            slot,
        });
        Ok(())
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

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// Every entry, in registration order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Every name, in registration order.
    pub fn names(&self) -> Vec<&'static str> {
        self.entries.iter().map(|e| e.name).collect()
    }

    /// The name as registered (`&'static`), or an error listing the known ones.
    pub fn resolve(&self, name: &str) -> Result<&'static str, RegistryError> {
        self.get(name).map(|e| e.name).ok_or_else(|| self.unknown(name))
    }

    /// Configs for `names`, in that order (the selector's candidates).
    pub fn configs(&self, names: &[&str]) -> Result<Vec<Box<dyn DynAlgorithmConfig>>, RegistryError> {
        names
            .iter()
            .map(|n| {
                self.get(n)
                    .map(|e| Box::new(Shared(e.config.clone())) as Box<dyn DynAlgorithmConfig>)
                    .ok_or_else(|| self.unknown(n))
            })
            .collect()
    }

    /// The union of every entry's programs, deduplicated by name.
    pub fn programs(&self) -> Vec<&'static ProgramSpec> {
        let mut out: Vec<&'static ProgramSpec> = Vec::new();
        for e in &self.entries {
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

    fn by_slot(&self, slot: usize) -> Option<&Entry> {
        self.entries.iter().find(|e| e.slot == slot)
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
    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        self.0.build(start)
    }
}

/// Names by portus slot, process-wide.
static SLOTS: RwLock<Vec<&'static str>> = RwLock::new(Vec::new());

fn intern(name: &'static str) -> Result<usize, RegistryError> {
    let mut slots = SLOTS.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(i) = slots.iter().position(|n| *n == name) {
        return Ok(i);
    }
    if slots.len() >= MAX_SLOTS {
        return Err(RegistryError::Full(name.to_string()));
    }
    slots.push(name);
    Ok(slots.len() - 1)
}

fn slot_name(slot: usize) -> &'static str {
    SLOTS
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(slot)
        .copied()
        // Never asked for: portus skips a slot that holds no algorithm.
        .unwrap_or("")
}

static GLOBAL: OnceLock<Registry> = OnceLock::new();

/// Makes `registry` the process's registry. Call it before anything reads [`global`] (the
/// first read installs [`Registry::builtin`]).
pub fn install(registry: Registry) -> Result<(), RegistryError> {
    GLOBAL.set(registry).map_err(|_| RegistryError::AlreadyInUse)
}

/// The process's registry: the one [`install`]ed, else the built-in suite.
pub fn global() -> &'static Registry {
    GLOBAL.get_or_init(Registry::builtin)
}

/// Portus slot `N`: the algorithm of the `N`-th name registered in this process, if the
/// registry it was made from has it (see the module docs).
pub struct Slot<const N: usize> {
    config: Arc<dyn DynAlgorithmConfig>,
    counters: Arc<AdapterCounters>,
}

impl<const N: usize> Slot<N> {
    /// Slot `N` of `registry`; `None` when the registry has no algorithm in it.
    pub fn of(registry: &Registry) -> Option<Self> {
        registry.by_slot(N).map(|e| Self {
            config: e.config.clone(),
            counters: Arc::default(),
        })
    }
}

impl<I: Ipc, const N: usize> CongAlg<I> for Slot<N> {
    type Flow = CcpFlow<I>;

    fn name() -> &'static str {
        slot_name(N)
    }

    fn datapath_programs(&self) -> HashMap<&'static str, String> {
        ProgramSpec::registration(self.config.programs())
    }

    fn new_flow(&self, datapath: Datapath<I>, info: DatapathInfo) -> Self::Flow {
        CcpFlow::start(self.config.as_ref(), &self.counters, datapath, &info)
    }
}

/// Adds every portus slot of `$registry` (a `&Registry`) to the portus `RunBuilder`
/// `$builder`. With `|slot| expr`, each slot's algorithm is registered as `expr` (e.g. wrapped
/// in something that sets the initial window).
#[macro_export]
macro_rules! register_slots {
    ($builder:expr, $registry:expr) => {
        $crate::register_slots!($builder, $registry, |slot| slot)
    };
    ($builder:expr, $registry:expr, |$s:ident| $wrap:expr) => {
        $crate::register_slots!(@ $builder, $registry, $s, $wrap;
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31)
    };
    (@ $builder:expr, $registry:expr, $s:ident, $wrap:expr; $($n:literal)*) => {{
        let registry: &$crate::registry::Registry = $registry;
        let b = $builder;
        $(let b = b.additional_alg(
            $crate::registry::Slot::<$n>::of(registry).map(|$s| $wrap),
        );)*
        b
    }};
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
                "reno", "cubic", "bbr", "copa", "vegas", "westwood", "illinois", "c2tcp", "vivace"
            ]
        );
        assert!(r.programs().len() <= MAX_PROGRAMS);
        assert!(r.entries().iter().all(|e| !e.description.is_empty()));
        for e in r.entries() {
            assert_eq!(slot_name(e.slot), e.name);
        }
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
        assert_eq!(c.iter().map(|c| c.name()).collect::<Vec<_>>(), ["vegas", "reno"]);
        assert!(r.configs(&["vegas", "tahoe"]).is_err());
    }
}
