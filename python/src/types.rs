//! The Python face of `ccp_algorithms::api`: `FlowStart`, `Measurement`, `Handoff` and
//! `Control` as classes with the Rust structs' fields (units in the names), and the
//! conversions both ways.

use ccp_algorithms::{Control, FlowStart, Handoff, Measurement, Pacing};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// What a flow starts with; the argument of an algorithm class's constructor.
#[pyclass(name = "FlowStart", module = "ccp_suite", frozen, get_all)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct PyFlowStart {
    /// The datapath's socket id.
    sock_id: u32,
    /// Maximum segment size, bytes (at least 1).
    mss_bytes: u32,
    /// The datapath's initial window, bytes.
    init_cwnd_bytes: u32,
    /// Seed for the algorithm's randomness (its only source of it).
    seed: u64,
}

impl From<&FlowStart> for PyFlowStart {
    fn from(s: &FlowStart) -> Self {
        Self {
            sock_id: s.sock_id,
            mss_bytes: s.mss_bytes.max(1),
            init_cwnd_bytes: s.init_cwnd_bytes,
            seed: s.seed,
        }
    }
}

#[pymethods]
impl PyFlowStart {
    #[new]
    #[pyo3(signature = (mss_bytes = 1448, init_cwnd_bytes = 14480, sock_id = 0, seed = 0))]
    fn new(mss_bytes: u32, init_cwnd_bytes: u32, sock_id: u32, seed: u64) -> Self {
        Self {
            sock_id,
            mss_bytes: mss_bytes.max(1),
            init_cwnd_bytes,
            seed,
        }
    }

    fn __repr__(&self) -> String {
        format!("{self:?}").replace("PyFlowStart", "FlowStart")
    }
}

/// One report from the datapath (sums over the report interval; "latest" values are the last
/// ACK's).
#[pyclass(name = "Measurement", module = "ccp_suite", frozen, get_all)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PyMeasurement {
    /// Datapath time of the last ACK in the interval, µs.
    now_us: u64,
    /// In-order bytes newly acknowledged.
    acked_bytes: u64,
    /// Out-of-order (SACKed) bytes.
    sacked_bytes: u64,
    /// Packets newly detected lost.
    lost_pkts: u64,
    /// A retransmission timeout happened in the interval.
    timeout: bool,
    /// Latest RTT sample, µs (0: none yet).
    rtt_us: u64,
    /// Smallest RTT sample in the interval, µs (0: none).
    min_rtt_us: u64,
    /// Largest delivery-rate sample in the interval, bytes/s (0: none).
    rate_incoming_bytes_per_sec: u64,
    /// Latest sending-rate sample, bytes/s (0: none).
    rate_outgoing_bytes_per_sec: u64,
    /// Bytes in flight at the last ACK.
    inflight_bytes: u64,
    /// The datapath's window at the last ACK, bytes.
    cwnd_bytes: u64,
}

impl From<&Measurement> for PyMeasurement {
    fn from(m: &Measurement) -> Self {
        Self {
            now_us: m.now_us,
            acked_bytes: m.acked_bytes,
            sacked_bytes: m.sacked_bytes,
            lost_pkts: m.lost_pkts,
            timeout: m.timeout,
            rtt_us: m.rtt_us,
            min_rtt_us: m.min_rtt_us,
            rate_incoming_bytes_per_sec: m.rate_incoming_bytes_per_sec,
            rate_outgoing_bytes_per_sec: m.rate_outgoing_bytes_per_sec,
            inflight_bytes: m.inflight_bytes,
            cwnd_bytes: m.cwnd_bytes,
        }
    }
}

#[pymethods]
impl PyMeasurement {
    /// A report with these values (for an algorithm's own unit tests).
    #[new]
    #[pyo3(signature = (*, now_us = 0, acked_bytes = 0, sacked_bytes = 0, lost_pkts = 0,
        timeout = false, rtt_us = 0, min_rtt_us = 0, rate_incoming_bytes_per_sec = 0,
        rate_outgoing_bytes_per_sec = 0, inflight_bytes = 0, cwnd_bytes = 0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        now_us: u64,
        acked_bytes: u64,
        sacked_bytes: u64,
        lost_pkts: u64,
        timeout: bool,
        rtt_us: u64,
        min_rtt_us: u64,
        rate_incoming_bytes_per_sec: u64,
        rate_outgoing_bytes_per_sec: u64,
        inflight_bytes: u64,
        cwnd_bytes: u64,
    ) -> Self {
        Self {
            now_us,
            acked_bytes,
            sacked_bytes,
            lost_pkts,
            timeout,
            rtt_us,
            min_rtt_us,
            rate_incoming_bytes_per_sec,
            rate_outgoing_bytes_per_sec,
            inflight_bytes,
            cwnd_bytes,
        }
    }

    /// Whether the interval saw a loss or a timeout.
    fn congestion(&self) -> bool {
        self.timeout || self.lost_pkts > 0
    }

    fn __repr__(&self) -> String {
        format!("{self:?}").replace("PyMeasurement", "Measurement")
    }
}

/// What the next algorithm needs to continue a flow: the argument of `activate` and the
/// result of `handoff`.
#[pyclass(name = "Handoff", module = "ccp_suite", frozen, get_all)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct PyHandoff {
    /// When the handoff happens, µs on the datapath's clock.
    now_us: u64,
    /// Congestion window, bytes.
    cwnd_bytes: u32,
    /// Slow-start threshold, bytes (`2**32 - 1`: none yet).
    ssthresh_bytes: u32,
    /// Pacing rate, bytes/s (`None`: unpaced).
    pacing_bytes_per_sec: Option<u32>,
    /// Smoothed RTT, µs (0: no sample yet).
    srtt_us: u64,
    /// Minimum RTT seen, µs (0: no sample yet).
    min_rtt_us: u64,
    /// Delivery-rate estimate, bytes/s (0: none).
    delivery_rate_bytes_per_sec: u64,
    /// Time of the most recent loss or timeout, µs (`None`: no loss seen).
    last_loss_us: Option<u64>,
    /// Whether the flow is still in its first slow start.
    in_first_slow_start: bool,
}

impl From<&Handoff> for PyHandoff {
    fn from(h: &Handoff) -> Self {
        Self {
            now_us: h.now_us,
            cwnd_bytes: h.cwnd_bytes,
            ssthresh_bytes: h.ssthresh_bytes,
            pacing_bytes_per_sec: match h.pacing {
                Pacing::Unpaced => None,
                Pacing::BytesPerSec(r) => Some(r),
            },
            srtt_us: h.srtt_us,
            min_rtt_us: h.min_rtt_us,
            delivery_rate_bytes_per_sec: h.delivery_rate_bytes_per_sec,
            last_loss_us: h.last_loss_us,
            in_first_slow_start: h.in_first_slow_start,
        }
    }
}

impl From<&PyHandoff> for Handoff {
    fn from(h: &PyHandoff) -> Self {
        Self {
            now_us: h.now_us,
            cwnd_bytes: h.cwnd_bytes,
            ssthresh_bytes: h.ssthresh_bytes,
            pacing: h
                .pacing_bytes_per_sec
                .map_or(Pacing::Unpaced, Pacing::BytesPerSec),
            srtt_us: h.srtt_us,
            min_rtt_us: h.min_rtt_us,
            delivery_rate_bytes_per_sec: h.delivery_rate_bytes_per_sec,
            last_loss_us: h.last_loss_us,
            in_first_slow_start: h.in_first_slow_start,
        }
    }
}

#[pymethods]
impl PyHandoff {
    #[new]
    #[pyo3(signature = (*, cwnd_bytes, now_us = 0, ssthresh_bytes = u32::MAX,
        pacing_bytes_per_sec = None, srtt_us = 0, min_rtt_us = 0,
        delivery_rate_bytes_per_sec = 0, last_loss_us = None, in_first_slow_start = true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        cwnd_bytes: u32,
        now_us: u64,
        ssthresh_bytes: u32,
        pacing_bytes_per_sec: Option<u32>,
        srtt_us: u64,
        min_rtt_us: u64,
        delivery_rate_bytes_per_sec: u64,
        last_loss_us: Option<u64>,
        in_first_slow_start: bool,
    ) -> Self {
        Self {
            now_us,
            cwnd_bytes,
            ssthresh_bytes,
            pacing_bytes_per_sec,
            srtt_us,
            min_rtt_us,
            delivery_rate_bytes_per_sec,
            last_loss_us,
            in_first_slow_start,
        }
    }

    fn __repr__(&self) -> String {
        format!("{self:?}").replace("PyHandoff", "Handoff")
    }
}

/// What an algorithm asks of the datapath: a window, a pacing rate, both or nothing.
/// `Control()` (or returning `None`) changes nothing.
#[pyclass(name = "Control", module = "ccp_suite", frozen, get_all)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PyControl {
    /// New congestion window, bytes (`None`: keep the datapath's).
    cwnd_bytes: Option<u32>,
    /// New pacing rate, bytes/s (`None`: keep the datapath's, unless `unpaced`).
    pacing_bytes_per_sec: Option<u32>,
    /// Clear pacing (send unpaced).
    unpaced: bool,
}

impl PyControl {
    /// The Rust `Control` this asks for.
    pub(crate) fn to_control(self) -> Control {
        let mut c = Control::none();
        c.cwnd_bytes = self.cwnd_bytes;
        c.pacing = if self.unpaced {
            Some(Pacing::Unpaced)
        } else {
            self.pacing_bytes_per_sec.map(Pacing::BytesPerSec)
        };
        c
    }
}

#[pymethods]
impl PyControl {
    #[new]
    #[pyo3(signature = (cwnd_bytes = None, pacing_bytes_per_sec = None, unpaced = false))]
    fn new(
        cwnd_bytes: Option<u32>,
        pacing_bytes_per_sec: Option<u32>,
        unpaced: bool,
    ) -> PyResult<Self> {
        if unpaced && pacing_bytes_per_sec.is_some() {
            return Err(PyValueError::new_err(
                "Control: give pacing_bytes_per_sec or unpaced=True, not both",
            ));
        }
        if pacing_bytes_per_sec == Some(0) {
            return Err(PyValueError::new_err(
                "Control: a pacing rate of 0 bytes/s would be ignored by the datapath; use unpaced=True",
            ));
        }
        Ok(Self {
            cwnd_bytes,
            pacing_bytes_per_sec,
            unpaced,
        })
    }

    /// Change nothing.
    #[staticmethod]
    fn none() -> Self {
        Self::default()
    }

    /// Set the window only.
    #[staticmethod]
    fn cwnd(cwnd_bytes: u32) -> Self {
        Self {
            cwnd_bytes: Some(cwnd_bytes),
            ..Self::default()
        }
    }

    /// Whether it changes nothing.
    fn is_none(&self) -> bool {
        self.to_control().is_none()
    }

    fn __repr__(&self) -> String {
        format!("{self:?}").replace("PyControl", "Control")
    }
}
