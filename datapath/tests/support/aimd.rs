//! A minimal portus algorithm for this crate's own tests (the datapath cannot depend on
//! `ccp-algorithms`, which builds on it): its datapath program sums acked bytes and losses and
//! reports once per RTT, or at once on a loss or timeout; the agent then adds one MSS per
//! report, or halves the window on loss, and sends the new `Cwnd` back with UPDATE_FIELD.
//! Included by the tests that need it with `#[path = "support/aimd.rs"] mod aimd;`.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use portus::ipc::Ipc;
use portus::lang::Scope;
use portus::{CongAlg, DatapathInfo, DatapathTrait, Flow, Report};

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
                let _ = e;
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
