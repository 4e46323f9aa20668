//! `ccp_suite`: the suite from Python (built with maturin into an abi3 wheel; `make venv`
//! installs it into `.venv`).
//!
//! - `run`: a scenario (built-in name or TOML file) through `ccp_eval::runner` in this
//!   process; the `results.csv` rows as dicts.
//! - `register`: a Python class with `activate(handoff)`, `on_report(measurement)` and
//!   `handoff()` becomes an algorithm of the process registry: a `run` scheme, a selector
//!   candidate, an algorithm `serve` offers.
//! - `serve`: the agent (`ccp-agent`'s run loop with this registry) on a thread, over
//!   `/tmp/ccp/<name>`; `datapath_flow` plays one flow of the datapath runtime against it.
//!
//! The modules: `alg` the bridge (errors in Python are counted and logged, never unwound into
//! the datapath), `pending` the once-per-process installation of the registry, `scenario` the
//! runs, `agent` the agent, `types` the mirror of `ccp_algorithms::api`
//! (`FlowStart`, `Measurement`, `Handoff`, `Control`).
//! The typed Python signatures are in `ccp_suite/_native.pyi`; `tests/` is the test suite (pytest).

mod agent;
mod alg;
mod gym;
mod pending;
mod scenario;
mod types;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// Registers `cls` under `name` (a-z, 0-9, `-`, `_`, `.`, starting with a letter; at most 63
/// bytes): every flow that runs it gets `cls(flow_start)`, then `activate(handoff)`, then
/// `on_report(measurement)` per report (once per RTT). Call before the first `run`/`serve`.
#[pyfunction]
#[pyo3(signature = (name, cls, description = "a Python algorithm"))]
fn register(name: &str, cls: &Bound<'_, PyAny>, description: &str) -> PyResult<()> {
    pending::register(name, cls, description)
}

/// Runs `scenario` (a built-in name or a TOML file) in this process with the simulator and
/// returns one dict per flow per run, keyed like `results.csv`'s columns.
#[pyfunction]
#[pyo3(signature = (scenario, schemes = None, seed = None, jobs = 0))]
fn run<'py>(
    py: Python<'py>,
    scenario: &Bound<'py, PyAny>,
    schemes: Option<Vec<String>>,
    seed: Option<u64>,
    jobs: usize,
) -> PyResult<Bound<'py, PyList>> {
    scenario::run(py, scenario, schemes, seed, jobs)
}

/// Serves real flows over `/tmp/ccp/<agent_name>` on a thread: every algorithm of the
/// registry by name, `alg` for flows that name none. Returns the agent; `stop()` ends it.
#[pyfunction]
#[pyo3(signature = (agent_name = "portus", alg = "cubic"))]
fn serve(py: Python<'_>, agent_name: &str, alg: &str) -> PyResult<agent::PyAgent> {
    agent::serve(py, agent_name, alg)
}

/// Every algorithm of the process registry, in order (installs it).
#[pyfunction]
fn algorithms() -> PyResult<Vec<&'static str>> {
    pending::ensure_installed()?;
    Ok(ccp_algorithms::registry::global().names())
}

/// The selectors' candidates, in order (installs the registry).
#[pyfunction]
fn candidates() -> PyResult<Vec<&'static str>> {
    pending::ensure_installed()?;
    Ok(ccp_eval::selectors::candidate_names())
}

/// Per registered Python algorithm: `flows` built, `reports` handled, `errors` (calls that
/// raised or answered the wrong type).
#[pyfunction]
fn stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    pending::stats(py)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<types::PyFlowStart>()?;
    m.add_class::<types::PyMeasurement>()?;
    m.add_class::<types::PyHandoff>()?;
    m.add_class::<types::PyControl>()?;
    m.add_class::<agent::PyAgent>()?;
    m.add_class::<gym::EnvCore>()?;
    m.add_function(wrap_pyfunction!(register, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(serve, m)?)?;
    m.add_function(wrap_pyfunction!(agent::datapath_flow, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms, m)?)?;
    m.add_function(wrap_pyfunction!(candidates, m)?)?;
    m.add_function(wrap_pyfunction!(stats, m)?)?;
    m.add("UNPACED_RATE", ccp_algorithms::Pacing::UNPACED_RATE)?;
    Ok(())
}
