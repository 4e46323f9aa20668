//! The one generic adapter: any [`AlgorithmConfig`] becomes a portus [`CongAlg`] over every
//! IPC, so each algorithm also runs alone (`ccp-agent --alg cubic`, `ccp-eval --schemes cubic`).
//!
//! The per-flow object owns the portus [`Datapath`] handle (the algorithm never sees it). It
//! decodes each report with the program it installed, hands the [`Measurement`] to the
//! algorithm and turns the returned [`Control`] into datapath messages: a program change
//! carries `Cwnd` and `Rate` inside the CHANGE_PROG (an UPDATE_FIELD sent just before it would
//! be discarded by the datapath); otherwise they go as one UPDATE_FIELD. Reports that still
//! carry an older program's uid are dropped and counted, never unwrapped.
//!
//! Each flow keeps the measurement of the latest report it decoded until an observer takes it
//! ([`MeasuredFlow`]): the agent's IW learner builds its flow records from them.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use portus::ipc::Ipc;
use portus::lang::Scope;
use portus::{CongAlg, Datapath, DatapathInfo, DatapathTrait, Flow, Report};
use tracing::debug;

use crate::api::{
    Algorithm, AlgorithmConfig, Control, DynAlgorithmConfig, FlowStart, Handoff, Measurement,
};
use crate::programs::{DecodeError, ProgramSpec};

/// Counters shared by every flow of one adapter.
#[derive(Debug, Default)]
pub struct AdapterCounters {
    /// Flows created.
    pub flows: AtomicU64,
    /// Reports decoded and handed to the algorithm.
    pub reports: AtomicU64,
    /// Reports dropped because they came from a program the flow no longer runs.
    pub stale_reports: AtomicU64,
    /// Reports dropped because a field could not be read.
    pub bad_reports: AtomicU64,
    /// Messages portus refused to send (unknown program or field, closed IPC).
    pub send_errors: AtomicU64,
}

/// An algorithm config run as a portus algorithm.
#[derive(Debug, Default)]
pub struct Ccp<C> {
    config: C,
    counters: Arc<AdapterCounters>,
}

impl<C: AlgorithmConfig> Ccp<C> {
    /// Wraps `config`.
    pub fn new(config: C) -> Self {
        Self {
            config,
            counters: Arc::default(),
        }
    }

    /// The counters every flow of this adapter updates.
    pub fn counters(&self) -> Arc<AdapterCounters> {
        self.counters.clone()
    }
}

/// One flow: the algorithm's state machine and the datapath handle it never sees.
pub struct CcpFlow<I: Ipc> {
    link: ProgramLink<I>,
    alg: Box<dyn Algorithm>,
    counters: Arc<AdapterCounters>,
    last: Option<Measurement>,
}

/// A portus flow that lets an observer see what it measured: the decoded measurement of the
/// latest report handed to `on_report`, once.
pub trait MeasuredFlow {
    /// The measurement of the latest report, if it was decoded and not taken yet (`None` after
    /// a stale or unreadable report).
    fn take_measurement(&mut self) -> Option<Measurement>;
}

impl<I: Ipc> MeasuredFlow for CcpFlow<I> {
    fn take_measurement(&mut self) -> Option<Measurement> {
        self.last.take()
    }
}

/// A flow's side of the datapath: the portus handle and the program the flow runs. Shared by
/// this adapter and the selector; errors are counted in the caller's counters.
pub struct ProgramLink<I: Ipc> {
    datapath: Datapath<I>,
    program: Option<(&'static ProgramSpec, Scope)>,
}

impl<I: Ipc> ProgramLink<I> {
    /// A link running no program yet.
    pub fn new(datapath: Datapath<I>) -> Self {
        Self {
            datapath,
            program: None,
        }
    }

    /// Switches to `program`, with `fields` (e.g. `Cwnd`, `Rate`) inside the CHANGE_PROG.
    pub fn switch(
        &mut self,
        program: &'static ProgramSpec,
        fields: &[(&str, u32)],
        send_errors: &AtomicU64,
    ) {
        match self.datapath.set_program(program.name, Some(fields)) {
            Ok(scope) => self.program = Some((program, scope)),
            Err(e) => {
                send_errors.fetch_add(1, Ordering::Relaxed);
                debug!(error = %e.0, program = program.name, "set_program failed");
            }
        }
    }

    /// Sends what `control` asks for: a program change carries `Cwnd` and `Rate` inside the
    /// CHANGE_PROG (an UPDATE_FIELD sent just before it would be discarded); otherwise they go
    /// as one UPDATE_FIELD to the running program.
    pub fn apply(&mut self, control: &Control, send_errors: &AtomicU64) {
        let mut fields: Vec<(&str, u32)> = Vec::with_capacity(2);
        if let Some(c) = control.cwnd_bytes {
            fields.push(("Cwnd", c));
        }
        if let Some(p) = control.pacing {
            fields.push(("Rate", p.datapath_rate()));
        }
        if let Some(switch) = &control.program {
            fields.extend(switch.fields.iter().copied());
            self.switch(switch.program, &fields, send_errors);
        } else if let (false, Some((_, scope))) = (fields.is_empty(), self.program.as_ref())
            && let Err(e) = self.datapath.update_field(scope, &fields)
        {
            send_errors.fetch_add(1, Ordering::Relaxed);
            debug!(error = %e.0, "update_field failed");
        }
    }

    /// Decodes a report with the running program's decoder; reports of an older program
    /// (`stale`) and unreadable ones (`bad`) are counted and dropped.
    pub fn decode(
        &self,
        report: &Report,
        stale: &AtomicU64,
        bad: &AtomicU64,
    ) -> Option<Measurement> {
        let (program, scope) = self.program.as_ref()?;
        match program.decode(report, scope) {
            Ok(m) => Some(m),
            Err(DecodeError::Stale { .. }) => {
                stale.fetch_add(1, Ordering::Relaxed);
                None
            }
            Err(e @ DecodeError::Field { .. }) => {
                bad.fetch_add(1, Ordering::Relaxed);
                debug!(error = %e, "report dropped");
                None
            }
        }
    }
}

impl<I: Ipc, C: AlgorithmConfig> CongAlg<I> for Ccp<C> {
    type Flow = CcpFlow<I>;

    fn name() -> &'static str {
        C::NAME
    }

    fn datapath_programs(&self) -> HashMap<&'static str, String> {
        ProgramSpec::registration(self.config.programs())
    }

    fn new_flow(&self, datapath: Datapath<I>, info: DatapathInfo) -> Self::Flow {
        CcpFlow::start(&self.config, &self.counters, datapath, &info)
    }
}

impl<I: Ipc> CcpFlow<I> {
    /// A new flow of `config`'s algorithm, activated and running its first program: the one
    /// place a CREATE becomes an algorithm (for [`Ccp`] and the registry's slots).
    pub(crate) fn start(
        config: &dyn DynAlgorithmConfig,
        counters: &Arc<AdapterCounters>,
        datapath: Datapath<I>,
        info: &DatapathInfo,
    ) -> Self {
        let start = flow_start(info);
        counters.flows.fetch_add(1, Ordering::Relaxed);
        let mut flow = CcpFlow {
            link: ProgramLink::new(datapath),
            alg: config.build(&start),
            counters: counters.clone(),
            last: None,
        };
        flow.take_over(&Handoff::flow_start(&start));
        flow
    }

    /// Activates the algorithm with `handoff`, installing its first program unless the
    /// activation names another.
    fn take_over(&mut self, handoff: &Handoff) {
        let mut control = self.alg.activate(handoff);
        if control.program.is_none()
            && let Some(first) = self.alg.programs().first()
        {
            control = control.with_program(first);
        }
        self.apply(&control);
    }

    fn apply(&mut self, control: &Control) {
        self.link.apply(control, &self.counters.send_errors);
    }

    fn decode(&self, report: &Report) -> Option<Measurement> {
        let c = &self.counters;
        self.link.decode(report, &c.stale_reports, &c.bad_reports)
    }
}

impl<I: Ipc> Flow for CcpFlow<I> {
    fn on_report(&mut self, _sock_id: u32, report: Report) {
        self.last = self.decode(&report);
        let Some(m) = self.last else {
            return;
        };
        self.counters.reports.fetch_add(1, Ordering::Relaxed);
        let control = self.alg.on_report(&m);
        if !control.is_none() {
            self.apply(&control);
        }
    }
}

/// What an algorithm is told about a new flow, from what the datapath said in CREATE. The
/// seed mixes the whole flow identity (a simulator varies the source port with its seed).
pub fn flow_start(info: &DatapathInfo) -> FlowStart {
    FlowStart {
        sock_id: info.sock_id,
        mss_bytes: info.mss.max(1),
        init_cwnd_bytes: info.init_cwnd,
        seed: flow_seed(info),
    }
}

/// A seed for an algorithm from everything the datapath says about the flow.
fn flow_seed(info: &DatapathInfo) -> u64 {
    let mut x = u64::from(info.sock_id);
    for v in [info.src_ip, info.src_port, info.dst_ip, info.dst_port] {
        x = (x ^ u64::from(v)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 31;
    }
    x
}
