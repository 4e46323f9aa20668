//! The bridge: kernel records in, runtime invocations, controls back out.

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

use tracing::{debug, warn};

use super::{FALLBACK_TIMEOUT_NS, KernelDatapath, KernelError, Record, RecordKind, monotonic_ns};
use crate::runtime::{Actions, Clock, Control, Datapath, Transport};

/// A control entry is rewritten at least this often while unchanged, so the BPF program never
/// takes it for stale while the agent is in control.
const REFRESH_NS: u64 = FALLBACK_TIMEOUT_NS / 4;
/// Control-loop samples kept until taken (about 24 MB with their parts); later ones are
/// counted in [`BridgeStats::loop_samples_dropped`], not kept.
const MAX_LOOP_SAMPLES: usize = 1 << 20;

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
    /// Of those, writes made as soon as an agent message arrived (not at an ACK).
    pub agent_writes: u64,
    /// Control entries deleted because the runtime fell back.
    pub control_clears: u64,
    /// Runtime errors (unknown flow, table full); the records were dropped.
    pub errors: u64,
    /// Control-loop samples not kept (more than the bridge keeps).
    pub loop_samples_dropped: u64,
    /// Time spent handling records (decode excluded: it happens in the ring-buffer read), ns.
    pub busy_ns: u64,
}

#[derive(Debug, Clone, Copy)]
struct FlowState {
    sid: u32,
    written: Option<(u32, u64)>,
    written_ns: u64,
    /// The flow's window in the kernel at its last record, bytes.
    last_cwnd: u32,
    /// `sacked_out` at the flow's last ACK record (newly SACKed packets are its increase).
    sacked_out: u32,
    /// `now` of the ACK whose invocation sent the last report not yet answered, and when
    /// the bridge read that ACK's record, ns.
    report_ack_ns: Option<(u64, u64)>,
}

/// Runs the CCP runtime over the kernel's `ccp` flows: each [`Record`] becomes an
/// [`invoke`](Datapath::invoke) on its flow, and the resulting cwnd/rate go back to the
/// kernel while the agent is in control.
///
/// The bridge sleeps in `poll(2)` on both the ring buffer and, when the transport has one, the
/// agent's socket: an agent's answer is written to the kernel as soon as it arrives
/// ([`Datapath::apply_agent_updates`]), not at the flow's next ACK. The time from the ACK that
/// triggered a report to the write of the agent's answer is kept per report
/// ([`take_loop_latencies`](Self::take_loop_latencies)): the control loop of `DESIGN.md` §5,
/// on the kernel path; the kernel applies the written window from the next ACK on.
pub struct KernelBridge<T: Transport, C: Clock> {
    /// The loaded BPF datapath.
    pub kernel: KernelDatapath,
    /// The CCP runtime (talks to the agent).
    pub runtime: Datapath<T, C>,
    alg: Option<String>,
    flows: HashMap<u32, FlowState>,
    /// Runtime socket id -> kernel flow id.
    by_sid: HashMap<u32, u32>,
    batch: Vec<Record>,
    loop_ns: Vec<u64>,
    /// For each ACK that sent a report: ring-buffer delay (record read minus ACK) and agent
    /// delay (answer written minus report sent), ns.
    parts_ns: Vec<(u64, u64)>,
    /// Scratch for the agent's staged updates of one round.
    updates: Vec<(u32, Actions)>,
    stats: BridgeStats,
    /// Where every ACK record and every window write goes as a CSV line, if anywhere
    /// ([`KernelBridge::with_trace`]).
    trace: Option<Box<dyn Write + Send>>,
}

impl<T: Transport, C: Clock> KernelBridge<T, C> {
    /// A bridge asking the agent for `alg` on every new flow (`None`: the agent's default).
    pub fn new(kernel: KernelDatapath, runtime: Datapath<T, C>, alg: Option<String>) -> Self {
        Self {
            kernel,
            runtime,
            alg,
            flows: HashMap::new(),
            by_sid: HashMap::new(),
            batch: Vec::with_capacity(4096),
            loop_ns: Vec::new(),
            parts_ns: Vec::new(),
            updates: Vec::new(),
            stats: BridgeStats::default(),
            trace: None,
        }
    }

    /// Writes a CSV trace to `out`: one line per ACK record (`ack`: the kernel's time, flow,
    /// `icsk_ca_state`, the newly lost packets the BPF program reported (`rs->losses`), the
    /// in-order bytes acknowledged, the packets acknowledged or SACKed, `sacked_out`, the
    /// packets in flight, the kernel's window in bytes, the RTT sample) and one per window the
    /// bridge writes for the agent (`write`: the time, flow, window, rate). For comparing what
    /// the agent sees on the kernel with the simulator's datapath (`docs/calibration.md`).
    #[must_use]
    pub fn with_trace(mut self, out: Box<dyn Write + Send>) -> Self {
        let mut out = out;
        let _ = writeln!(
            out,
            "kind,t_ns,flow,ca_state,lost,bytes_acked,pkts_acked,sacked_out,inflight_pkts,cwnd_bytes,rtt_us_or_rate,read_ns"
        );
        self.trace = Some(out);
        self
    }

    /// One ACK record in the trace, if there is one.
    fn trace_ack(&mut self, r: &Record) {
        if self.trace.is_some() {
            self.trace_line(format_args!(
                "ack,{},{},{},{},{},{},{},{},{},{},{}\n",
                r.now_ns,
                r.flow_id,
                r.ca_state,
                r.lost_pkts,
                r.bytes_acked,
                r.packets_acked,
                r.packets_misordered,
                r.packets_in_flight,
                r.cwnd_bytes,
                r.rtt_us,
                monotonic_ns()
            ));
        }
    }

    fn trace_line(&mut self, line: std::fmt::Arguments<'_>) {
        if let Some(t) = self.trace.as_mut()
            && t.write_fmt(line).is_err()
        {
            warn!("kernel bridge trace: write failed, trace stopped");
            self.trace = None;
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

    /// Control-loop samples since the last call, ns: for each report the agent answered with
    /// a window or rate, the time from the ACK (`bpf_ktime_get_ns()` in the BPF program) to
    /// the answer's write into the kernel's control map.
    pub fn take_loop_latencies(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.loop_ns)
    }

    /// The same samples split in two, ns: (ring buffer: from the ACK to the bridge reading its
    /// record; agent: from the report leaving to the answer written).
    pub fn take_loop_parts(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.parts_ns)
    }

    /// One round: waits up to `timeout` for a record or an agent message, takes in the agent's
    /// messages (writing new windows and rates to the kernel at once), then handles every
    /// record available. Returns how many records were handled.
    pub fn step(&mut self, timeout: Duration) -> Result<usize, KernelError> {
        let mut batch = std::mem::take(&mut self.batch);
        batch.clear();
        let waited = if timeout.is_zero() {
            self.kernel.poll_records(|r| batch.push(r))
        } else if let Some(fd) = self.runtime.transport().readiness_fd() {
            self.kernel.wait_records_or(fd, timeout, |r| batch.push(r))
        } else {
            self.kernel.wait_records(timeout, |r| batch.push(r))
        };
        let result = waited.and_then(|_| {
            self.runtime.poll();
            self.write_agent_updates()?;
            let start = Instant::now();
            for r in &batch {
                self.handle(r)?;
            }
            self.stats.busy_ns += start.elapsed().as_nanos() as u64;
            Ok(batch.len())
        });
        self.batch = batch;
        result
    }

    /// Runs [`step`](Self::step) until `deadline`.
    pub fn run_until(&mut self, deadline: Instant) -> Result<(), KernelError> {
        while Instant::now() < deadline {
            self.step(Duration::from_millis(2))?;
        }
        Ok(())
    }

    /// Writes what the agent just decided to the kernel, without waiting for an ACK.
    fn write_agent_updates(&mut self) -> Result<(), KernelError> {
        let mut updates = std::mem::take(&mut self.updates);
        updates.clear();
        self.runtime
            .apply_agent_updates(|sid, a| updates.push((sid, a)));
        let result = self.write_updates(&updates);
        self.updates = updates;
        result
    }

    fn write_updates(&mut self, updates: &[(u32, Actions)]) -> Result<(), KernelError> {
        for &(sid, actions) in updates {
            let Some(&flow_id) = self.by_sid.get(&sid) else {
                continue;
            };
            let Some(flow) = self.flows.get_mut(&flow_id) else {
                continue;
            };
            let want = (
                actions
                    .cwnd_bytes
                    .or(flow.written.map(|w| w.0))
                    .unwrap_or(flow.last_cwnd),
                actions
                    .rate_bytes_per_sec
                    .map(u64::from)
                    .or(flow.written.map(|w| w.1))
                    .unwrap_or(0),
            );
            self.kernel.set_control(flow_id, want.0, want.1)?;
            let now = monotonic_ns();
            if let Some(t) = self.trace.as_mut() {
                let _ = writeln!(t, "write,{now},{flow_id},,,,,,,{},{},", want.0, want.1);
            }
            flow.written = Some(want);
            flow.written_ns = now;
            self.stats.control_writes += 1;
            self.stats.agent_writes += 1;
            if let Some((ack_ns, read_ns)) = flow.report_ack_ns.take() {
                if self.loop_ns.len() < MAX_LOOP_SAMPLES {
                    self.loop_ns.push(now.saturating_sub(ack_ns));
                    self.parts_ns
                        .push((read_ns.saturating_sub(ack_ns), now.saturating_sub(read_ns)));
                } else {
                    self.stats.loop_samples_dropped += 1;
                }
            }
        }
        Ok(())
    }

    fn handle(&mut self, r: &Record) -> Result<(), KernelError> {
        self.stats.records += 1;
        if r.kind == RecordKind::Release {
            if let Some(f) = self.flows.remove(&r.flow_id) {
                self.by_sid.remove(&f.sid);
                self.stats.flows_closed += 1;
                if let Err(e) = self.runtime.close_flow(f.sid) {
                    self.stats.errors += 1;
                    debug!(flow = r.flow_id, error = %e, "closing flow");
                }
            }
            return Ok(());
        }
        if !self.flows.contains_key(&r.flow_id) {
            match self.runtime.create_flow(r.flow_info(self.alg.as_deref())) {
                Ok(sid) => {
                    self.stats.flows_created += 1;
                    self.by_sid.insert(sid, r.flow_id);
                    debug!(flow = r.flow_id, sid, port = r.src_port, "new kernel flow");
                    self.flows.insert(
                        r.flow_id,
                        FlowState {
                            sid,
                            written: None,
                            written_ns: 0,
                            last_cwnd: 0,
                            sacked_out: 0,
                            report_ack_ns: None,
                        },
                    );
                }
                Err(e) => {
                    self.stats.errors += 1;
                    warn!(flow = r.flow_id, error = %e, "cannot track kernel flow");
                    return Ok(());
                }
            }
        }
        if r.kind != RecordKind::Ack {
            return Ok(());
        }
        self.stats.acks += 1;
        self.trace_ack(r);
        let Some(flow) = self.flows.get_mut(&r.flow_id) else {
            return Ok(());
        };
        let mut prims = r.primitives(flow.sacked_out);
        flow.sacked_out = r.packets_misordered;
        flow.last_cwnd = prims.snd_cwnd;
        // A window or rate written for the agent applies from the kernel's next ACK, so records
        // already in flight still carry the previous one; the program must see what the flow
        // is about to run with, or its result would write the old value back.
        if let Some((cwnd, rate)) = flow.written {
            if cwnd != 0 {
                prims.snd_cwnd = cwnd;
            }
            if rate != 0 {
                prims.snd_rate = rate;
            }
        }
        let actions = match self.runtime.invoke(flow.sid, &prims) {
            Ok(a) => a,
            Err(e) => {
                self.stats.errors += 1;
                debug!(flow = r.flow_id, error = %e, "invoke");
                return Ok(());
            }
        };
        if actions.reported {
            flow.report_ack_ns = Some((r.now_ns, monotonic_ns()));
        }
        match actions.control {
            Control::Agent => {
                let want = (
                    actions
                        .cwnd_bytes
                        .or(flow.written.map(|w| w.0))
                        .unwrap_or(0),
                    actions.rate_bytes_per_sec.map_or(0, u64::from),
                );
                let now = r.now_ns;
                if flow.written != Some(want) || now.saturating_sub(flow.written_ns) >= REFRESH_NS {
                    self.kernel.set_control(r.flow_id, want.0, want.1)?;
                    if flow.written.map(|w| w.0) != Some(want.0)
                        && let Some(t) = self.trace.as_mut()
                    {
                        let _ =
                            writeln!(t, "write,{now},{},,,,,,,{},{},", r.flow_id, want.0, want.1);
                    }
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
