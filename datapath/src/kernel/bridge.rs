//! The bridge: kernel records in, runtime invocations, controls back out.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tracing::{debug, warn};

use super::{FALLBACK_TIMEOUT_NS, KernelDatapath, KernelError, Record, RecordKind};
use crate::runtime::{Clock, Control, Datapath, Transport};

/// A control entry is rewritten at least this often while unchanged, so the BPF program never
/// takes it for stale while the agent is in control.
const REFRESH_NS: u64 = FALLBACK_TIMEOUT_NS / 4;

/// What the bridge has done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BridgeStats {
    /// Records handled (all kinds).
    pub records: u64,
    /// ACK records handed to the runtime.
    pub acks: u64,
    /// Flows created in the runtime.
    pub flows_created: u64,
    /// Flows closed in the runtime.
    pub flows_closed: u64,
    /// Control map writes.
    pub control_writes: u64,
    /// Control entries deleted because the runtime fell back.
    pub control_clears: u64,
    /// Runtime errors (unknown flow, table full); the records were dropped.
    pub errors: u64,
    /// Time spent handling records (decode excluded: it happens in the ring-buffer read), ns.
    pub busy_ns: u64,
}

#[derive(Debug, Clone, Copy)]
struct FlowState {
    sid: u32,
    written: Option<(u32, u64)>,
    written_ns: u64,
}

/// Runs the CCP runtime over the kernel's `ccp` flows: each [`Record`] becomes an
/// [`invoke`](Datapath::invoke) on its flow, and the resulting cwnd/rate go back to the
/// kernel while the agent is in control.
pub struct KernelBridge<T: Transport, C: Clock> {
    /// The loaded BPF datapath.
    pub kernel: KernelDatapath,
    /// The CCP runtime (talks to the agent).
    pub runtime: Datapath<T, C>,
    alg: Option<String>,
    flows: HashMap<u32, FlowState>,
    batch: Vec<Record>,
    stats: BridgeStats,
}

impl<T: Transport, C: Clock> KernelBridge<T, C> {
    /// A bridge asking the agent for `alg` on every new flow (`None`: the agent's default).
    pub fn new(kernel: KernelDatapath, runtime: Datapath<T, C>, alg: Option<String>) -> Self {
        Self {
            kernel,
            runtime,
            alg,
            flows: HashMap::new(),
            batch: Vec::with_capacity(4096),
            stats: BridgeStats::default(),
        }
    }

    /// What the bridge has done so far.
    pub fn stats(&self) -> BridgeStats {
        self.stats
    }

    /// The runtime's socket id for a kernel flow id, once the bridge has seen the flow.
    pub fn sid(&self, flow_id: u32) -> Option<u32> {
        self.flows.get(&flow_id).map(|f| f.sid)
    }

    /// One round: takes in the agent's messages, waits up to `timeout` for records, handles
    /// every record available. Returns how many records were handled.
    pub fn step(&mut self, timeout: Duration) -> Result<usize, KernelError> {
        self.runtime.poll();
        let batch = &mut self.batch;
        batch.clear();
        if timeout.is_zero() {
            self.kernel.poll_records(|r| batch.push(r))?;
        } else {
            self.kernel.wait_records(timeout, |r| batch.push(r))?;
        }
        let start = Instant::now();
        let batch = std::mem::take(&mut self.batch);
        for r in &batch {
            self.handle(r)?;
        }
        self.batch = batch;
        self.stats.busy_ns += start.elapsed().as_nanos() as u64;
        Ok(self.batch.len())
    }

    /// Runs [`step`](Self::step) until `deadline`.
    pub fn run_until(&mut self, deadline: Instant) -> Result<(), KernelError> {
        while Instant::now() < deadline {
            self.step(Duration::from_millis(2))?;
        }
        Ok(())
    }

    fn handle(&mut self, r: &Record) -> Result<(), KernelError> {
        self.stats.records += 1;
        if r.kind == RecordKind::Release {
            if let Some(f) = self.flows.remove(&r.flow_id) {
                self.stats.flows_closed += 1;
                if let Err(e) = self.runtime.close_flow(f.sid) {
                    self.stats.errors += 1;
                    debug!(flow = r.flow_id, error = %e, "closing flow");
                }
            }
            return Ok(());
        }
        let flow = match self.flows.get_mut(&r.flow_id) {
            Some(f) => f,
            None => match self.runtime.create_flow(r.flow_info(self.alg.as_deref())) {
                Ok(sid) => {
                    self.stats.flows_created += 1;
                    debug!(flow = r.flow_id, sid, port = r.src_port, "new kernel flow");
                    self.flows.entry(r.flow_id).or_insert(FlowState {
                        sid,
                        written: None,
                        written_ns: 0,
                    })
                }
                Err(e) => {
                    self.stats.errors += 1;
                    warn!(flow = r.flow_id, error = %e, "cannot track kernel flow");
                    return Ok(());
                }
            },
        };
        if r.kind != RecordKind::Ack {
            return Ok(());
        }
        self.stats.acks += 1;
        let actions = match self.runtime.invoke(flow.sid, &r.primitives()) {
            Ok(a) => a,
            Err(e) => {
                self.stats.errors += 1;
                debug!(flow = r.flow_id, error = %e, "invoke");
                return Ok(());
            }
        };
        match actions.control {
            Control::Agent => {
                let want = (
                    actions.cwnd_bytes.unwrap_or(0),
                    actions.rate_bytes_per_sec.map_or(0, u64::from),
                );
                let now = r.now_ns;
                if flow.written != Some(want) || now.saturating_sub(flow.written_ns) >= REFRESH_NS {
                    self.kernel.set_control(r.flow_id, want.0, want.1)?;
                    flow.written = Some(want);
                    flow.written_ns = now;
                    self.stats.control_writes += 1;
                }
            }
            Control::Fallback => {
                if flow.written.take().is_some() {
                    self.kernel.clear_control(r.flow_id)?;
                    self.stats.control_clears += 1;
                }
            }
        }
        Ok(())
    }
}
