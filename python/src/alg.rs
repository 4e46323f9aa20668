//! A Python class as a suite algorithm: [`PyConfig`] is its `DynAlgorithmConfig` (the factory:
//! `build` instantiates the class with a `FlowStart`), [`PyAlgorithm`] the per-flow
//! `Algorithm` that calls the instance's `activate`, `on_report` and `handoff` under the GIL.
//!
//! A Python method that raises (or returns the wrong type) never unwinds into the datapath:
//! the error is counted, logged through Python's `logging` (logger `ccp_suite`, the first
//! [`LOGGED_ERRORS`] per algorithm), and the call answers as if the method had returned
//! `None`: the datapath keeps its window (a report is answered with the window last asked for,
//! since the datapath takes an unanswered report for a silent agent); a failed `handoff`
//! answers the last state the flow was seen in.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ccp_algorithms::programs::PER_RTT;
use ccp_algorithms::{
    Algorithm, Control, DynAlgorithmConfig, FlowStart, Handoff, Measurement, ProgramSpec,
};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;

use crate::types::{PyControl, PyFlowStart, PyHandoff, PyMeasurement};

/// Errors of one algorithm logged with their traceback; later ones are counted only.
pub(crate) const LOGGED_ERRORS: u64 = 10;

/// A Python thread state that a runner or agent thread keeps from its first call into Python
/// to its exit. Without it each call would create and delete one (`PyGILState_Ensure` on a
/// thread Python does not know), mapping and unmapping its frame stack: with two runner
/// threads the unmaps' TLB shootdowns made a call 3.5x slower than with one thread.
struct KeptThreadState(Option<(pyo3::ffi::PyGILState_STATE, *mut pyo3::ffi::PyThreadState)>);

impl KeptThreadState {
    fn new() -> Self {
        // SAFETY: both calls may be made without the GIL. A thread with no thread state gets
        // one and the GIL (`Ensure`), then releases the GIL keeping the state (`SaveThread`);
        // `Drop` undoes both on this same thread.
        unsafe {
            if !pyo3::ffi::PyGILState_GetThisThreadState().is_null() {
                return Self(None);
            }
            let gil = pyo3::ffi::PyGILState_Ensure();
            Self(Some((gil, pyo3::ffi::PyEval_SaveThread())))
        }
    }
}

impl Drop for KeptThreadState {
    fn drop(&mut self) {
        if let Some((gil, state)) = self.0.take() {
            // SAFETY: runs at the exit of the thread that made `state` in `new`, which holds
            // no GIL now; this takes the GIL back and deletes the state (the interpreter is
            // still up: threads of `run` end before it returns, `serve`'s at `stop`).
            unsafe {
                if pyo3::ffi::Py_IsInitialized() != 0 {
                    pyo3::ffi::PyEval_RestoreThread(state);
                    pyo3::ffi::PyGILState_Release(gil);
                }
            }
        }
    }
}

thread_local! {
    static KEPT: KeptThreadState = KeptThreadState::new();
}

/// Runs `f` with the GIL, keeping this thread's Python thread state ([`KeptThreadState`]).
fn with_python<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> R {
    KEPT.with(|_| ());
    Python::attach(f)
}

/// The datapath programs every Python algorithm installs: the suite's once-per-RTT report.
static PROGRAMS: [&ProgramSpec; 1] = [&PER_RTT];

/// What one Python algorithm has done in this process.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Flows built.
    pub(crate) flows: AtomicU64,
    /// Reports passed to `on_report`.
    pub(crate) reports: AtomicU64,
    /// Calls that raised or answered the wrong type.
    pub(crate) errors: AtomicU64,
}

/// A registered Python class: the factory of its flows.
pub(crate) struct PyConfig {
    name: &'static str,
    cls: Py<PyAny>,
    counters: Arc<Counters>,
}

impl PyConfig {
    pub(crate) fn new(name: &'static str, cls: Py<PyAny>) -> Self {
        Self {
            name,
            cls,
            counters: Arc::default(),
        }
    }

    pub(crate) fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }
}

impl DynAlgorithmConfig for PyConfig {
    fn name(&self) -> &'static str {
        self.name
    }

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &PROGRAMS
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        self.counters.flows.fetch_add(1, Ordering::Relaxed);
        let instance =
            with_python(
                |py| match self.cls.bind(py).call1((PyFlowStart::from(start),)) {
                    Ok(i) => Some(i.unbind()),
                    Err(e) => {
                        failed(py, self.name, "__init__", &e, &self.counters);
                        None
                    }
                },
            );
        Box::new(PyAlgorithm {
            name: self.name,
            instance,
            counters: self.counters.clone(),
            last: Handoff::flow_start(start),
        })
    }
}

/// One flow of a Python algorithm.
pub(crate) struct PyAlgorithm {
    name: &'static str,
    /// `None`: the constructor raised; every call then answers `Control` none.
    instance: Option<Py<PyAny>>,
    counters: Arc<Counters>,
    /// The flow as last seen (activation, then the windows asked for): what a failed
    /// `handoff` answers.
    last: Handoff,
}

impl PyAlgorithm {
    /// Calls `method` (through `call`, which gets the instance) and reads a `Control` (or
    /// `None`) back; an error is counted and answers `Control` none.
    fn call_for_control(
        &self,
        method: &str,
        call: impl for<'py> FnOnce(&Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>>,
    ) -> Control {
        let Some(instance) = &self.instance else {
            self.counters.errors.fetch_add(1, Ordering::Relaxed);
            return Control::none();
        };
        with_python(|py| {
            call(instance.bind(py))
                .and_then(|r| control_of(method, &r))
                .unwrap_or_else(|e| {
                    failed(py, self.name, method, &e, &self.counters);
                    Control::none()
                })
        })
    }

    fn note(&mut self, c: &Control) {
        if let Some(w) = c.cwnd_bytes {
            self.last.cwnd_bytes = w;
        }
        if let Some(p) = c.pacing {
            self.last.pacing = p;
        }
    }
}

/// The `Control` a Python method answered: a `Control`, or `None` for "change nothing".
fn control_of(method: &str, r: &Bound<'_, PyAny>) -> PyResult<Control> {
    if r.is_none() {
        return Ok(Control::none());
    }
    match r.cast::<PyControl>() {
        Ok(c) => Ok(c.get().to_control()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{method} returned {}, expected a ccp_suite.Control or None",
            r.get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string())
        ))),
    }
}

/// Counts an error of `name.method` and logs the first [`LOGGED_ERRORS`] with their traceback.
fn failed(py: Python<'_>, name: &str, method: &str, err: &PyErr, counters: &Counters) {
    let n = counters.errors.fetch_add(1, Ordering::Relaxed) + 1;
    if n > LOGGED_ERRORS {
        return;
    }
    let trace = err
        .traceback(py)
        .and_then(|t| t.format().ok())
        .unwrap_or_default();
    let tail = if n == LOGGED_ERRORS {
        "; later errors of this algorithm are counted (ccp_suite.stats()), not logged"
    } else {
        ""
    };
    let msg = format!(
        "Python algorithm `{name}`: {method} raised {err}; the datapath keeps its window \
         (error {n}{tail})\n{trace}"
    );
    tracing::warn!(algorithm = name, method, "{msg}");
    // Without a logging module (the interpreter shutting down) the count is what remains.
    let _ = py
        .import(intern!(py, "logging"))
        .and_then(|l| l.call_method1(intern!(py, "getLogger"), ("ccp_suite",)))
        .and_then(|l| l.call_method1(intern!(py, "warning"), (msg,)));
}

impl Algorithm for PyAlgorithm {
    fn name(&self) -> &'static str {
        self.name
    }

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &PROGRAMS
    }

    fn activate(&mut self, handoff: &Handoff) -> Control {
        self.last = *handoff;
        let h = PyHandoff::from(handoff);
        let c = self.call_for_control("activate", |i| {
            i.call_method1(intern!(i.py(), "activate"), (h,))
        });
        self.note(&c);
        c
    }

    fn on_report(&mut self, report: &Measurement) -> Control {
        self.counters.reports.fetch_add(1, Ordering::Relaxed);
        self.last.now_us = report.now_us;
        let m = PyMeasurement::from(report);
        let c = self.call_for_control("on_report", |i| {
            i.call_method1(intern!(i.py(), "on_report"), (m,))
        });
        self.note(&c);
        if c.is_none() {
            // The datapath takes a report left unanswered for a silent agent (and hands the
            // flow to its fallback rule): "keep the window" is said with the window.
            return Control::cwnd(self.last.cwnd_bytes);
        }
        c
    }

    fn handoff(&self) -> Handoff {
        let Some(instance) = &self.instance else {
            return self.last;
        };
        with_python(|py| {
            let r = instance
                .bind(py)
                .call_method0(intern!(py, "handoff"))
                .and_then(|h| match h.cast::<PyHandoff>() {
                    Ok(h) => Ok(Handoff::from(h.get())),
                    Err(_) => Err(PyTypeError::new_err(
                        "handoff returned something other than a ccp_suite.Handoff",
                    )),
                });
            r.unwrap_or_else(|e| {
                failed(py, self.name, "handoff", &e, &self.counters);
                self.last
            })
        })
    }

    /// The window last asked for (no Python call: the selector asks often).
    fn cwnd_bytes(&self) -> u32 {
        self.last.cwnd_bytes
    }
}
