//! Python algorithms waiting for the process registry, and its one installation.
//!
//! The registry is installed once per process (`ccp_algorithms::registry::install`, before
//! anything reads `global()`), so `register` only collects; the first `run`, `serve`,
//! `algorithms` or `candidates` installs the suite plus every class registered so far, and a
//! `register` after that is an error saying so.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use ccp_algorithms::{DynAlgorithmConfig, Registry, registry};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::alg::{Counters, PyConfig};

struct Pending {
    /// Every registered class, in order, with its description.
    entries: Vec<(Arc<PyConfig>, &'static str)>,
    installed: bool,
}

static PENDING: Mutex<Pending> = Mutex::new(Pending {
    entries: Vec::new(),
    installed: false,
});

fn registry_with(entries: &[(Arc<PyConfig>, &'static str)]) -> Result<Registry, String> {
    let mut r = Registry::builtin();
    for (c, d) in entries {
        r.register_dyn(c.clone() as Arc<dyn DynAlgorithmConfig>, d)
            .map_err(|e| e.to_string())?;
    }
    Ok(r)
}

/// Adds a Python class to the registry to be installed.
pub(crate) fn register(name: &str, cls: &Bound<'_, PyAny>, description: &str) -> PyResult<()> {
    for method in ["activate", "on_report", "handoff"] {
        if !cls.hasattr(method)? {
            return Err(PyTypeError::new_err(format!(
                "register({name:?}): the class has no `{method}` method (an algorithm has \
                 activate(handoff), on_report(measurement) and handoff())"
            )));
        }
    }
    if !cls.is_callable() {
        return Err(PyTypeError::new_err(format!(
            "register({name:?}): expected a class, got an object that cannot be called"
        )));
    }
    let mut p = PENDING.lock().unwrap_or_else(PoisonError::into_inner);
    if p.installed {
        return Err(PyRuntimeError::new_err(format!(
            "register({name:?}) after the algorithm registry was installed (by the first run(), \
             serve(), algorithms() or candidates() of this process): register every algorithm \
             first"
        )));
    }
    // Registered names live as long as the process (the registry hands out `&'static str`).
    let name: &'static str = Box::leak(name.to_owned().into_boxed_str());
    let description: &'static str = Box::leak(description.to_owned().into_boxed_str());
    let config = Arc::new(PyConfig::new(name, cls.clone().unbind()));
    let mut entries = p.entries.clone();
    entries.push((config, description));
    registry_with(&entries).map_err(PyValueError::new_err)?;
    p.entries = entries;
    Ok(())
}

/// Installs the suite and the registered classes as the process registry, once.
pub(crate) fn ensure_installed() -> PyResult<()> {
    let mut p = PENDING.lock().unwrap_or_else(PoisonError::into_inner);
    if p.installed {
        return Ok(());
    }
    let r = registry_with(&p.entries).map_err(PyValueError::new_err)?;
    registry::install(r).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    p.installed = true;
    Ok(())
}

/// The counters of every registered Python algorithm, by name.
fn counters() -> BTreeMap<&'static str, Arc<Counters>> {
    let p = PENDING.lock().unwrap_or_else(PoisonError::into_inner);
    p.entries
        .iter()
        .map(|(c, _)| (c.as_ref().name(), c.counters().clone()))
        .collect()
}

/// `stats()`: per Python algorithm, flows built, reports handled and errors.
pub(crate) fn stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for (name, c) in counters() {
        let d = PyDict::new(py);
        d.set_item("flows", c.flows.load(Ordering::Relaxed))?;
        d.set_item("reports", c.reports.load(Ordering::Relaxed))?;
        d.set_item("errors", c.errors.load(Ordering::Relaxed))?;
        out.set_item(name, d)?;
    }
    Ok(out)
}
