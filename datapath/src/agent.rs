//! A small portus agent to run beside a datapath: one AIMD algorithm and helpers that start a
//! portus agent over the in-process channel or over unix sockets.
//!
//! [`Aimd`] is deliberately minimal (it exists to exercise the protocol end to end, in demos,
//! tests and benchmarks): its datapath program sums acked bytes and losses and reports once per
//! RTT, or at once on a loss or timeout; the agent then adds one MSS per report, or halves the
//! window on loss, and sends the new `Cwnd` back with UPDATE_FIELD. The real algorithm suite
//! lives in `ccp-algorithms`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use portus::ipc::{BackendBuilder, Blocking, Ipc};
use portus::lang::Scope;
use portus::{CCPHandle, CongAlg, DatapathInfo, DatapathTrait, Flow, Report};
use tracing::debug;

use crate::runtime::transport::AgentChannels;
use crate::runtime::{
    Control, Datapath, DatapathConfig, FlowInfo, MonotonicClock, Primitives, RuntimeError,
    Transport,
};

/// Name portus registers the algorithm under.
pub const AIMD_NAME: &str = "aimd";
/// Name of its datapath program.
pub const AIMD_PROGRAM: &str = "aimd_per_rtt";

/// The datapath program: accumulate, report once per RTT or on loss.
pub const AIMD_PROGRAM_SRC: &str = "
(def (Report
    (volatile acked 0)
    (volatile loss 0)
    (volatile timeout false)
    (volatile rtt 0)
    (volatile cwnd 0)))
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Report.loss (+ Report.loss Ack.lost_pkts_sample))
    (:= Report.timeout Flow.was_timeout)
    (:= Report.rtt Flow.rtt_sample_us)
    (:= Report.cwnd Cwnd)
    (fallthrough))
(when (|| Report.timeout (> Report.loss 0))
    (report)
    (:= Micros 0))
(when (> Micros Report.rtt)
    (report)
    (:= Micros 0))
";

/// Counters shared between the agent thread and whoever started it.
#[derive(Debug, Default)]
pub struct AgentCounters {
    /// Flows created.
    pub flows: AtomicU64,
    /// Reports handled.
    pub reports: AtomicU64,
    /// Reports dropped because they came from a program the flow no longer runs.
    pub stale_reports: AtomicU64,
    /// Window updates sent.
    pub updates: AtomicU64,
    /// Last window sent, bytes.
    pub last_cwnd: AtomicU64,
}

/// The AIMD algorithm (config and factory).
#[derive(Debug, Clone, Default)]
pub struct Aimd {
    /// Counters for observers; cloned into every flow.
    pub counters: Arc<AgentCounters>,
}

/// One AIMD flow.
pub struct AimdFlow<I: Ipc> {
    control: portus::Datapath<I>,
    scope: Option<Scope>,
    cwnd_bytes: u32,
    mss_bytes: u32,
    counters: Arc<AgentCounters>,
}

impl<I: Ipc> CongAlg<I> for Aimd {
    type Flow = AimdFlow<I>;

    fn name() -> &'static str {
        AIMD_NAME
    }

    fn datapath_programs(&self) -> HashMap<&'static str, String> {
        HashMap::from([(AIMD_PROGRAM, AIMD_PROGRAM_SRC.to_string())])
    }

    fn new_flow(&self, mut control: portus::Datapath<I>, info: DatapathInfo) -> Self::Flow {
        let mss_bytes = info.mss.max(1);
        let cwnd_bytes = info.init_cwnd.max(2 * mss_bytes);
        // The window travels inside the program change: an UPDATE_FIELD sent just before a
        // CHANGE_PROG would be discarded by the datapath.
        let scope = match control.set_program(AIMD_PROGRAM, Some(&[("Cwnd", cwnd_bytes)])) {
            Ok(sc) => Some(sc),
            Err(e) => {
                debug!(error = ?e, "set_program failed");
                None
            }
        };
        self.counters.flows.fetch_add(1, Ordering::Relaxed);
        AimdFlow {
            control,
            scope,
            cwnd_bytes,
            mss_bytes,
            counters: self.counters.clone(),
        }
    }
}

impl<I: Ipc> Flow for AimdFlow<I> {
    fn on_report(&mut self, _sock_id: u32, m: Report) {
        let Some(sc) = self.scope.as_ref() else {
            return;
        };
        let fields = (
            m.get_field("Report.acked", sc),
            m.get_field("Report.loss", sc),
            m.get_field("Report.timeout", sc),
        );
        let (Ok(acked), Ok(loss), Ok(timeout)) = fields else {
            self.counters.stale_reports.fetch_add(1, Ordering::Relaxed);
            return;
        };
        self.counters.reports.fetch_add(1, Ordering::Relaxed);
        let min = 2 * self.mss_bytes;
        if timeout != 0 || loss > 0 {
            self.cwnd_bytes = (self.cwnd_bytes / 2).max(min);
        } else if acked > 0 {
            self.cwnd_bytes = self.cwnd_bytes.saturating_add(self.mss_bytes);
        }
        if self
            .control
            .update_field(sc, &[("Cwnd", self.cwnd_bytes)])
            .is_ok()
        {
            self.counters.updates.fetch_add(1, Ordering::Relaxed);
            self.counters
                .last_cwnd
                .store(u64::from(self.cwnd_bytes), Ordering::Relaxed);
        }
    }
}

/// Starts a portus agent running `alg` in its own thread, over the in-process channel.
pub fn spawn_channel_agent<A>(alg: A, channels: AgentChannels) -> portus::Result<CCPHandle>
where
    A: CongAlg<portus::ipc::chan::Socket<Blocking>> + Send + 'static,
{
    let sock =
        portus::ipc::chan::Socket::<Blocking>::new(channels.to_datapath, channels.from_datapath);
    portus::RunBuilder::new(BackendBuilder { sock })
        .default_alg(alg)
        .spawn_thread()
        .run()
}

/// Starts a portus agent running `alg` in its own thread, bound to `/tmp/ccp/<bind_name>`.
pub fn spawn_unix_agent<A>(alg: A, bind_name: &str) -> portus::Result<CCPHandle>
where
    A: CongAlg<portus::ipc::unix::Socket<Blocking>> + Send + 'static,
{
    let sock = portus::ipc::unix::Socket::<Blocking>::new(bind_name)?;
    portus::RunBuilder::new(BackendBuilder { sock })
        .default_alg(alg)
        .spawn_thread()
        .run()
}

/// Settings for demos and tests that run an agent beside a datapath in real time: a short
/// agent timeout so a dead agent is noticed within 100 ms.
pub fn demo_config() -> DatapathConfig {
    DatapathConfig {
        id: 7,
        agent_timeout_ns: 100_000_000,
        retry_initial_ns: 20_000_000,
        retry_max_ns: 200_000_000,
        ..DatapathConfig::default()
    }
}

/// A synthetic flow played in real time against a datapath: every ACK acknowledges one
/// segment, the RTT sample is fixed, the window is whatever the datapath last set. It has no
/// network behind it; it exists to exercise the control loop (the simulator models networks).
#[derive(Debug, Clone)]
pub struct SyntheticFlow {
    /// Socket id.
    pub sid: u32,
    /// Segment size, bytes.
    pub mss_bytes: u32,
    /// Current window, bytes.
    pub cwnd_bytes: u32,
    /// RTT sample every ACK carries, µs.
    pub rtt_us: u64,
    /// Gap between ACKs.
    pub ack_gap: Duration,
    /// ACKs played.
    pub acks: u64,
    /// ACKs handled by an agent program.
    pub agent_acks: u64,
    /// ACKs handled by the fallback rule.
    pub fallback_acks: u64,
}

impl SyntheticFlow {
    /// Opens a flow on `dp` asking for algorithm `alg`.
    pub fn start<T: Transport>(
        dp: &mut Datapath<T, MonotonicClock>,
        alg: &str,
        mss_bytes: u32,
        init_cwnd_bytes: u32,
    ) -> Result<Self, RuntimeError> {
        let info = FlowInfo {
            init_cwnd_bytes,
            mss_bytes,
            src_port: 4242,
            dst_port: 80,
            alg: Some(alg.to_string()),
            ..FlowInfo::default()
        };
        let sid = dp.create_flow(info)?;
        Ok(Self {
            sid,
            mss_bytes,
            cwnd_bytes: init_cwnd_bytes,
            rtt_us: 300,
            ack_gap: Duration::from_micros(100),
            acks: 0,
            agent_acks: 0,
            fallback_acks: 0,
        })
    }

    /// Plays `n` ACKs, polling the agent after each.
    pub fn run<T: Transport>(
        &mut self,
        dp: &mut Datapath<T, MonotonicClock>,
        n: u64,
    ) -> Result<(), RuntimeError> {
        for _ in 0..n {
            let prims = Primitives {
                bytes_acked: self.mss_bytes,
                packets_acked: 1,
                rtt_sample_us: self.rtt_us,
                bytes_in_flight: self.cwnd_bytes,
                packets_in_flight: self.cwnd_bytes / self.mss_bytes.max(1),
                snd_cwnd: self.cwnd_bytes,
                ..Primitives::default()
            };
            let a = dp.invoke(self.sid, &prims)?;
            if let Some(c) = a.cwnd_bytes {
                self.cwnd_bytes = c;
            }
            match a.control {
                Control::Agent => self.agent_acks += 1,
                Control::Fallback => self.fallback_acks += 1,
            }
            self.acks += 1;
            dp.poll();
            std::thread::sleep(self.ack_gap);
        }
        Ok(())
    }

    /// Plays ACKs until `pred` holds or `timeout` passes; returns whether it held.
    pub fn run_until<T: Transport>(
        &mut self,
        dp: &mut Datapath<T, MonotonicClock>,
        timeout: Duration,
        mut pred: impl FnMut(&Datapath<T, MonotonicClock>, &Self) -> bool,
    ) -> Result<bool, RuntimeError> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if pred(dp, self) {
                return Ok(true);
            }
            self.run(dp, 10)?;
        }
        Ok(pred(dp, self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aimd_program_compiles() {
        let (bin, scope) = portus::lang::compile(AIMD_PROGRAM_SRC.as_bytes(), &[]).unwrap();
        assert!(bin.instrs.len() < 40);
        assert!(scope.get("Report.acked").is_some());
    }
}
