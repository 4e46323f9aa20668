//! `serve`: the agent (`ccp-agent --ipc unix` with this process's registry: the suite and the
//! Python algorithms) on a thread, serving real datapaths over `/tmp/ccp/<name>`; and
//! `datapath_flow`, one flow of the suite's datapath runtime played against an agent in real
//! time, to see it served.

use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ccp_agent::{AgentState, DefaultAlg, IpcKind, Registry};
use ccp_datapath::runtime::{
    Control, Datapath, FlowInfo, MonotonicClock, Primitives, UnixTransport,
};
use pyo3::exceptions::{PyRuntimeError, PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// How long `serve` waits for the agent's socket to appear.
const BIND_TIMEOUT: Duration = Duration::from_secs(10);

/// A running agent; `stop()` ends it (within about a second: the agent's socket read timeout).
#[pyclass(name = "Agent", module = "ccp_suite")]
pub(crate) struct PyAgent {
    /// Socket name: the agent is bound at `/tmp/ccp/<name>`.
    #[pyo3(get)]
    name: String,
    /// The algorithm of flows that ask for none (or an unknown one).
    #[pyo3(get)]
    alg: String,
    keep_running: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<Result<(), String>>>>,
}

impl PyAgent {
    fn join(&self, py: Python<'_>) -> PyResult<()> {
        let handle = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(handle) = handle else {
            return Ok(());
        };
        match py.detach(|| handle.join()) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(PyRuntimeError::new_err(format!(
                "agent `{}`: {e}",
                self.name
            ))),
            Err(_) => Err(PyRuntimeError::new_err(format!(
                "agent `{}` panicked",
                self.name
            ))),
        }
    }
}

#[pymethods]
impl PyAgent {
    /// Stops the agent and waits for its thread; raises if it had failed.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        self.keep_running.store(false, Ordering::SeqCst);
        let r = self.join(py);
        let _ = std::fs::remove_file(Path::new("/tmp/ccp").join(&self.name));
        r
    }

    /// Whether the agent's thread is still serving.
    #[getter]
    fn running(&self) -> bool {
        self.thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|h| !h.is_finished())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _ty: &Bound<'_, PyAny>,
        _value: &Bound<'_, PyAny>,
        _tb: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        self.stop(py)?;
        Ok(false)
    }
}

/// Starts the agent on a thread.
pub(crate) fn serve(py: Python<'_>, agent_name: &str, alg: &str) -> PyResult<PyAgent> {
    crate::pending::ensure_installed()?;
    ccp_agent::socket::claim(agent_name).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let state = AgentState::with_defaults(IpcKind::Unix)
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let default = DefaultAlg::new(Registry::new(&state), alg)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let keep_running = Arc::new(AtomicBool::new(true));
    let (name, flag) = (agent_name.to_string(), keep_running.clone());
    let thread = std::thread::Builder::new()
        .name(format!("ccp-agent-{agent_name}"))
        .spawn(move || {
            let r = ccp_agent::run(IpcKind::Unix, &name, default, flag, state.guard().clone());
            state.shutdown();
            r.map_err(|e| e.to_string())
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the agent thread: {e}")))?;
    let agent = PyAgent {
        name: agent_name.to_string(),
        alg: alg.to_string(),
        keep_running,
        thread: Mutex::new(Some(thread)),
    };
    let sock = Path::new("/tmp/ccp").join(agent_name);
    let started = Instant::now();
    py.detach(|| {
        while !sock.exists() && agent.running() && started.elapsed() < BIND_TIMEOUT {
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    if !agent.running() {
        agent.join(py)?;
        return Err(PyRuntimeError::new_err(format!(
            "agent `{agent_name}` stopped at start"
        )));
    }
    if !sock.exists() {
        agent.stop(py)?;
        return Err(PyTimeoutError::new_err(format!(
            "agent `{agent_name}` did not bind {} in {BIND_TIMEOUT:?}",
            sock.display()
        )));
    }
    Ok(agent)
}

/// Plays one flow of the suite's datapath runtime against the agent at `agent_name` in real
/// time, asking for `alg`: ACKs of one MSS at `rtt_us` every 200 µs until `acks` ran under the
/// agent's control (or `timeout_s` passed). Returns counts and the window.
#[pyfunction]
#[pyo3(signature = (agent_name, alg = None, acks = 200, rtt_us = 10_000, timeout_s = 20.0))]
pub(crate) fn datapath_flow<'py>(
    py: Python<'py>,
    agent_name: &str,
    alg: Option<String>,
    acks: u64,
    rtt_us: u64,
    timeout_s: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let dp_name = format!("py-dp-{}-{agent_name}", std::process::id());
    let transport = UnixTransport::bind(&dp_name, agent_name)
        .map_err(|e| PyRuntimeError::new_err(format!("datapath socket: {e}")))?;
    let mss = 1448;
    let init_cwnd_bytes = 10 * mss;
    let result = py.detach(|| -> Result<(u64, u64, u32), String> {
        let mut dp = Datapath::new(
            ccp_datapath::agent::demo_config(),
            transport,
            MonotonicClock::new(),
        );
        let sid = dp
            .create_flow(FlowInfo {
                init_cwnd_bytes,
                mss_bytes: mss,
                src_ip: u32::from(Ipv4Addr::new(192, 0, 2, 1)),
                src_port: 40_000,
                dst_ip: u32::from(Ipv4Addr::new(198, 51, 100, 1)),
                dst_port: 443,
                alg,
            })
            .map_err(|e| format!("create_flow: {e:?}"))?;
        let mut prims = Primitives {
            rtt_sample_us: rtt_us,
            snd_cwnd: init_cwnd_bytes,
            ..Primitives::default()
        };
        let (mut agent_acks, mut total) = (0u64, 0u64);
        let started = Instant::now();
        while agent_acks < acks && started.elapsed().as_secs_f64() < timeout_s {
            dp.poll();
            prims.bytes_acked = mss;
            prims.packets_acked = 1;
            let a = dp
                .invoke(sid, &prims)
                .map_err(|e| format!("invoke: {e:?}"))?;
            if let Some(c) = a.cwnd_bytes {
                prims.snd_cwnd = c;
            }
            total += 1;
            agent_acks += u64::from(a.control == Control::Agent);
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok((agent_acks, total, prims.snd_cwnd))
    });
    let _ = std::fs::remove_file(Path::new("/tmp/ccp").join(&dp_name));
    let (agent_acks, total, cwnd) = result.map_err(PyRuntimeError::new_err)?;
    let d = PyDict::new(py);
    d.set_item("acks", total)?;
    d.set_item("agent_acks", agent_acks)?;
    d.set_item("init_cwnd_bytes", init_cwnd_bytes)?;
    d.set_item("cwnd_bytes", cwnd)?;
    Ok(d)
}
