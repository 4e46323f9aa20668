//! `run`: a scenario through the harness's runner in this process, its `results.csv` rows as
//! dicts.

use std::path::PathBuf;

use ccp_eval::results::FlowRow;
use ccp_eval::runner::{self, RunOptions};
use ccp_eval::scenario::Scenario;
use pyo3::exceptions::{PyFileNotFoundError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

/// A built-in scenario by name, else a scenario file.
pub(crate) fn load(scenario: &Bound<'_, PyAny>) -> PyResult<Scenario> {
    if let Ok(s) = scenario.cast::<PyString>() {
        let name = s.to_cow()?;
        if let Some(s) = ccp_eval::builtin::scenario(&name) {
            return s.map_err(|e| PyValueError::new_err(e.to_string()));
        }
    }
    let path: PathBuf = scenario.extract()?;
    if !path.exists() {
        return Err(PyFileNotFoundError::new_err(format!(
            "no built-in scenario or file named `{}` (built-in: {})",
            path.display(),
            ccp_eval::builtin::SCENARIOS
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Scenario::load(&path).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The column names of `results.csv`, in order.
fn columns(row: &FlowRow) -> PyResult<Vec<String>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.serialize(row)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let bytes = w
        .into_inner()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let text = String::from_utf8_lossy(&bytes);
    let header = text.lines().next().unwrap_or_default();
    Ok(header.split(',').map(str::to_string).collect())
}

fn to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.into_pyobject(py)?.into_any(),
            (None, Some(i)) => i.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        other => other.to_string().into_pyobject(py)?.into_any(),
    })
}

/// The rows as dicts keyed by `results.csv`'s column names, in its column order.
pub(crate) fn rows_to_py<'py>(py: Python<'py>, rows: &[FlowRow]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    let Some(first) = rows.first() else {
        return Ok(out);
    };
    let cols = columns(first)?;
    for r in rows {
        let v = serde_json::to_value(r).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let d = PyDict::new(py);
        for c in &cols {
            d.set_item(c, to_py(py, v.get(c).unwrap_or(&serde_json::Value::Null))?)?;
        }
        out.append(d)?;
    }
    Ok(out)
}

/// Runs `scenario` and returns its rows.
pub(crate) fn run<'py>(
    py: Python<'py>,
    scenario: &Bound<'py, PyAny>,
    schemes: Option<Vec<String>>,
    seed: Option<u64>,
    jobs: usize,
) -> PyResult<Bound<'py, PyList>> {
    crate::pending::ensure_installed()?;
    let scenario = load(scenario)?;
    let opts = RunOptions {
        jobs,
        seed,
        schemes,
        ..RunOptions::default()
    };
    let plan = runner::plan(&scenario, &opts).map_err(|e| PyValueError::new_err(e.to_string()))?;
    // Python algorithms take the GIL on the runner's threads.
    let out = py.detach(|| runner::run(&scenario, &plan, &opts));
    rows_to_py(py, &out.rows)
}
