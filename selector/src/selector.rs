//! The selector as a portus `CongAlg` over every IPC (same shape as `ccp_algorithms::adapter`,
//! with several candidates per flow).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use ccp_algorithms::programs::ProgramSpec;
use ccp_algorithms::{
    Algorithm, Control, DynAlgorithmConfig, Handoff, MeasuredFlow, Measurement, Pacing,
    ProgramLink, flow_start,
};
use portus::ipc::Ipc;
use portus::{CongAlg, Datapath, DatapathInfo, Flow, Report};

use crate::hysteresis::{Hysteresis, HysteresisConfig};
use crate::path_change::{PathChange, PathChangeConfig};
use crate::policy::{Decision, Explanation, Features, FlowContext, SelectionPolicy};

/// What an [`Event`] records.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// A policy decision (before hysteresis); `to == from` means stay.
    Decision {
        /// The features and per-candidate scores the policy decided on (learned policies).
        explanation: Option<Explanation>,
    },
    /// An actual swap.
    Swap {
        /// The part of the policy that asked for it ([`SelectionPolicy::decided_by`]; `None`
        /// for a policy that does not explain itself), also in the swap's log line.
        by: Option<&'static str>,
        /// Window handed over, bytes.
        cwnd_bytes: u32,
        /// The `Cwnd` sent in the CHANGE_PROG, bytes.
        installed_cwnd_bytes: u32,
        /// The `Rate` sent in the CHANGE_PROG.
        installed_rate: u32,
        /// Smoothed RTT handed over, µs.
        srtt_us: u64,
        /// The incoming candidate's smoothed RTT right after activation, µs.
        srtt_after_us: u64,
    },
    /// The policy asked for a drain and the active candidate was re-seated with a smaller
    /// window ([`Decision::Drain`]); `from == to`.
    Drain {
        /// Window before, bytes.
        cwnd_bytes: u32,
        /// The `Cwnd` sent in the CHANGE_PROG, bytes.
        installed_cwnd_bytes: u32,
    },
    /// The path's RTT floor rose and the active candidate was re-seated with the new floor
    /// ([`crate::path_change`]); `from == to`.
    PathChange {
        /// The flow's floor before, µs.
        old_floor_us: u64,
        /// The new floor handed to the candidate, µs.
        floor_us: u64,
    },
}

/// One decision or swap of one flow.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The flow's socket id.
    pub sock_id: u32,
    /// Datapath time, µs.
    pub time_us: u64,
    /// Active candidate before.
    pub from: usize,
    /// Candidate asked for / switched to.
    pub to: usize,
    /// What happened.
    pub kind: EventKind,
}

/// Counters and the event trace shared by every flow of one [`Selector`].
#[derive(Debug, Default)]
pub struct SelectorLog {
    /// Flows created.
    pub flows: AtomicU64,
    /// Reports decoded and handed to the active candidate.
    pub reports: AtomicU64,
    /// Swaps performed.
    pub swaps: AtomicU64,
    /// Reports dropped because they came from an older program.
    pub stale_reports: AtomicU64,
    /// Reports dropped because a field could not be read.
    pub bad_reports: AtomicU64,
    /// Messages portus refused to send.
    pub send_errors: AtomicU64,
    /// Path changes detected (each re-seated a candidate; [`crate::path_change`]).
    pub path_changes: AtomicU64,
    /// Drains a policy asked for that cut a window ([`Decision::Drain`]).
    pub drains: AtomicU64,
    /// Whether [`Event`]s are kept (decisions are one per report).
    pub record_events: bool,
    events: Mutex<Vec<Event>>,
}

impl SelectorLog {
    /// A log that keeps events if `record_events`.
    pub fn new(record_events: bool) -> Self {
        Self {
            record_events,
            ..Self::default()
        }
    }

    /// A copy of the events so far.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The swaps so far.
    pub fn swap_events(&self) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|e| matches!(e.kind, EventKind::Swap { .. }))
            .collect()
    }

    fn push(&self, e: Event) {
        if self.record_events {
            self.events
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(e);
        }
    }
}

/// Builds a fresh policy for each flow, from what is known about the flow at its start.
pub type PolicyFactory = Arc<dyn Fn(&FlowContext<'_>) -> Box<dyn SelectionPolicy> + Send + Sync>;

/// The policy factory, hysteresis and path-change detection new flows are built with,
/// replaceable while flows run (an agent reloading its config): flows already running keep
/// what they were built with.
#[derive(Clone)]
pub struct PolicyHandle {
    slot: Arc<RwLock<Slot>>,
}

/// What a [`PolicyHandle`] holds, replaced together.
#[derive(Clone)]
struct Slot {
    factory: PolicyFactory,
    hysteresis: HysteresisConfig,
    path_change: Option<PathChangeConfig>,
}

impl std::fmt::Debug for PolicyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let slot = self.slot();
        f.debug_struct("PolicyHandle")
            .field("hysteresis", &slot.hysteresis)
            .field("path_change", &slot.path_change)
            .finish_non_exhaustive()
    }
}

impl PolicyHandle {
    /// A slot holding `policy` and `hysteresis`, path-change detection off.
    pub fn new(policy: PolicyFactory, hysteresis: HysteresisConfig) -> Self {
        Self {
            slot: Arc::new(RwLock::new(Slot {
                factory: policy,
                hysteresis,
                path_change: None,
            })),
        }
    }

    /// Replaces all three for every flow created from now on (`path_change`: `None` is off;
    /// [`crate::path_change`]).
    pub fn replace(
        &self,
        policy: PolicyFactory,
        hysteresis: HysteresisConfig,
        path_change: Option<PathChangeConfig>,
    ) {
        *self.write() = Slot {
            factory: policy,
            hysteresis,
            path_change,
        };
    }

    /// The current factory and hysteresis (a poisoned lock still holds a complete slot).
    pub fn get(&self) -> (PolicyFactory, HysteresisConfig) {
        let slot = self.slot();
        (slot.factory, slot.hysteresis)
    }

    /// The path-change detection new flows get.
    pub fn path_change(&self) -> Option<PathChangeConfig> {
        self.slot().path_change
    }

    fn set_hysteresis(&self, hysteresis: HysteresisConfig) {
        self.write().hysteresis = hysteresis;
    }

    fn set_path_change(&self, path_change: Option<PathChangeConfig>) {
        self.write().path_change = path_change;
    }

    fn slot(&self) -> Slot {
        self.slot
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Slot> {
        self.slot.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The meta-selector: portus algorithm `selector`.
pub struct Selector {
    candidates: Arc<Vec<Box<dyn DynAlgorithmConfig>>>,
    policy: PolicyHandle,
    log: Arc<SelectorLog>,
    /// Turns the datapath's destination address into a host-order IPv4 address.
    decode_ip: fn(u32) -> u32,
}

impl std::fmt::Debug for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Selector")
            .field("candidates", &self.names())
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Selector {
    /// A selector over `candidates` (at least one) deciding with policies from `policy`,
    /// default hysteresis, events recorded.
    pub fn new(candidates: Vec<Box<dyn DynAlgorithmConfig>>, policy: PolicyFactory) -> Self {
        Self {
            candidates: Arc::new(candidates),
            policy: PolicyHandle::new(policy, HysteresisConfig::default()),
            log: Arc::new(SelectorLog::new(true)),
            decode_ip: std::convert::identity,
        }
    }

    /// Reads the destination addresses of new flows as network-order bytes in a native
    /// `u32` (ccp-kernel's `inet_daddr`) when `network`, else as
    /// host-order integers (this project's datapaths, the default). Policies see host order
    /// ([`FlowContext::dst_ip`]), so a /24 is the address's first three octets.
    #[must_use]
    pub fn with_network_order_ips(mut self, network: bool) -> Self {
        self.decode_ip = if network {
            |v| u32::from_be_bytes(v.to_ne_bytes())
        } else {
            std::convert::identity
        };
        self
    }

    /// Detects path changes with `config` (`None`: off, the default) and re-seats the active
    /// candidate with the new RTT floor when one is detected ([`crate::path_change`]).
    #[must_use]
    pub fn with_path_change(self, config: Option<PathChangeConfig>) -> Self {
        self.policy.set_path_change(config);
        self
    }

    /// Replaces the hysteresis parameters.
    #[must_use]
    pub fn with_hysteresis(self, hysteresis: HysteresisConfig) -> Self {
        self.policy.set_hysteresis(hysteresis);
        self
    }

    /// Takes policy and hysteresis from `handle` (shared with whoever replaces them later).
    #[must_use]
    pub fn with_policy_handle(mut self, handle: PolicyHandle) -> Self {
        self.policy = handle;
        self
    }

    /// The slot new flows read their policy factory and hysteresis from.
    pub fn policy_handle(&self) -> PolicyHandle {
        self.policy.clone()
    }

    /// Replaces the shared log (e.g. one that records no events).
    #[must_use]
    pub fn with_log(mut self, log: Arc<SelectorLog>) -> Self {
        self.log = log;
        self
    }

    /// The counters and events every flow updates.
    pub fn log(&self) -> Arc<SelectorLog> {
        self.log.clone()
    }

    /// Candidate names, by index.
    pub fn names(&self) -> Vec<&'static str> {
        self.candidates.iter().map(|c| c.name()).collect()
    }
}

/// One flow: the candidates' state machines, the policy and the datapath handle.
pub struct SelectorFlow<I: Ipc> {
    link: ProgramLink<I>,
    sock_id: u32,
    candidates: Vec<Box<dyn Algorithm>>,
    names: Vec<&'static str>,
    current: usize,
    policy: Box<dyn SelectionPolicy>,
    hysteresis: Hysteresis,
    reports: u64,
    log: Arc<SelectorLog>,
    last: Option<Measurement>,
    path_change: Option<PathChange>,
}

impl<I: Ipc> CongAlg<I> for Selector {
    type Flow = SelectorFlow<I>;

    fn name() -> &'static str {
        "selector"
    }

    fn datapath_programs(&self) -> HashMap<&'static str, String> {
        let mut all: Vec<&'static ProgramSpec> = Vec::new();
        for c in self.candidates.iter() {
            for p in c.programs() {
                if !all.iter().any(|q| q.name == p.name) {
                    all.push(p);
                }
            }
        }
        ProgramSpec::registration(&all)
    }

    fn new_flow(&self, datapath: Datapath<I>, info: DatapathInfo) -> Self::Flow {
        let start = flow_start(&info);
        self.log.flows.fetch_add(1, Ordering::Relaxed);
        let names = self.names();
        let Slot {
            factory,
            hysteresis,
            path_change,
        } = self.policy.slot();
        let policy = factory(&FlowContext {
            candidates: &names,
            sock_id: info.sock_id,
            dst_ip: (self.decode_ip)(info.dst_ip),
            dst_port: info.dst_port,
            src_port: info.src_port,
            mss_bytes: start.mss_bytes,
        });
        let current = policy.initial().min(names.len().saturating_sub(1));
        let mut flow = SelectorFlow {
            link: ProgramLink::new(datapath),
            sock_id: info.sock_id,
            candidates: self.candidates.iter().map(|c| c.build(&start)).collect(),
            names,
            current,
            policy,
            hysteresis: Hysteresis::new(hysteresis, 0),
            reports: 0,
            log: self.log.clone(),
            last: None,
            path_change: path_change.map(PathChange::new),
        };
        if let Some(alg) = flow.candidates.get_mut(current) {
            let control = alg.activate(&Handoff::flow_start(&start));
            flow.install(current, &control, None);
        }
        flow
    }
}

impl<I: Ipc> SelectorFlow<I> {
    /// Installs candidate `idx`'s program (the one its activation names, else its first) with
    /// `Cwnd` and `Rate` in the same CHANGE_PROG. Returns the values sent.
    fn install(&mut self, idx: usize, control: &Control, handoff: Option<&Handoff>) -> (u32, u32) {
        let Some(alg) = self.candidates.get(idx) else {
            return (0, 0);
        };
        let program = control
            .program
            .as_ref()
            .map(|s| s.program)
            .or_else(|| alg.programs().first().copied());
        let cwnd = control
            .cwnd_bytes
            .or(handoff.map(|h| h.cwnd_bytes))
            .unwrap_or_else(|| alg.cwnd_bytes());
        let rate = control.pacing.unwrap_or(Pacing::Unpaced).datapath_rate();
        let mut fields: Vec<(&str, u32)> = vec![("Cwnd", cwnd), ("Rate", rate)];
        if let Some(s) = &control.program {
            fields.extend(s.fields.iter().copied());
        }
        if let Some(program) = program {
            self.link.switch(program, &fields, &self.log.send_errors);
        }
        (cwnd, rate)
    }

    /// Sends an active candidate's control: a program change goes through [`Self::install`]
    /// (Cwnd and Rate always inside it), anything else as the single-algorithm adapter does.
    fn apply(&mut self, control: &Control) {
        if control.program.is_some() {
            self.install(self.current, control, None);
        } else {
            self.link.apply(control, &self.log.send_errors);
        }
    }

    fn decode(&self, report: &Report) -> Option<Measurement> {
        self.link
            .decode(report, &self.log.stale_reports, &self.log.bad_reports)
    }

    /// The active candidate's state at `now_us`, as a swap hands it over.
    fn handoff_at(&self, now_us: u64) -> Option<Handoff> {
        let mut handoff = self.candidates.get(self.current)?.handoff();
        handoff.now_us = now_us;
        Some(handoff)
    }

    /// Makes candidate `to` the active one from `handoff` (its `activate`, then one
    /// CHANGE_PROG); returns the `Cwnd` and `Rate` installed and its smoothed RTT right after.
    fn hand_to(&mut self, to: usize, handoff: &Handoff) -> Option<(u32, u32, u64)> {
        let incoming = self.candidates.get_mut(to)?;
        let control = incoming.activate(handoff);
        let srtt_after_us = incoming.handoff().srtt_us;
        self.current = to;
        let (cwnd, rate) = self.install(to, &control, Some(handoff));
        Some((cwnd, rate, srtt_after_us))
    }

    /// Re-seats the active candidate after a path change: its own state handed back to it
    /// through `activate`, with the minimum RTT replaced by the new floor.
    fn reseat(&mut self, old_floor_us: u64, floor_us: u64, now_us: u64) {
        let current = self.current;
        let Some(mut handoff) = self.handoff_at(now_us) else {
            return;
        };
        handoff.min_rtt_us = floor_us;
        if self.hand_to(current, &handoff).is_none() {
            return;
        }
        self.hysteresis.restart(now_us);
        self.policy.path_changed(floor_us);
        self.log.path_changes.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            sock = self.sock_id,
            active = self.names.get(current).copied().unwrap_or("?"),
            old_floor_us,
            floor_us,
            "path change"
        );
        self.log.push(Event {
            sock_id: self.sock_id,
            time_us: now_us,
            from: current,
            to: current,
            kind: EventKind::PathChange {
                old_floor_us,
                floor_us,
            },
        });
    }

    /// Re-seats the active candidate with its window cut to at most `cap_bytes` (a
    /// [`Decision::Drain`]); a window already within it is left alone. Whether it re-seated
    /// (if not, the candidate's own control for the report still applies).
    fn drain(&mut self, cap_bytes: u32, now_us: u64) -> bool {
        let current = self.current;
        let Some(mut handoff) = self.handoff_at(now_us) else {
            return false;
        };
        let before = handoff.cwnd_bytes;
        if cap_bytes == 0 || before <= cap_bytes {
            return false;
        }
        handoff.cwnd_bytes = cap_bytes;
        handoff.ssthresh_bytes = handoff.ssthresh_bytes.min(cap_bytes);
        handoff.in_first_slow_start = false;
        let Some((installed_cwnd_bytes, _, _)) = self.hand_to(current, &handoff) else {
            return false;
        };
        self.log.drains.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            sock = self.sock_id,
            active = self.names.get(current).copied().unwrap_or("?"),
            cwnd_bytes = before,
            installed_cwnd_bytes,
            "drain"
        );
        self.log.push(Event {
            sock_id: self.sock_id,
            time_us: now_us,
            from: current,
            to: current,
            kind: EventKind::Drain {
                cwnd_bytes: before,
                installed_cwnd_bytes,
            },
        });
        true
    }

    /// Hands the flow from the active candidate to `to` with one CHANGE_PROG.
    fn swap(&mut self, to: usize, now_us: u64) {
        let from = self.current;
        let Some(mut handoff) = self.handoff_at(now_us) else {
            return;
        };
        if self.policy.afresh(to) {
            handoff.in_first_slow_start = true;
            if self.policy.afresh_floor(to) {
                handoff.min_rtt_us = handoff.min_rtt_us.max(handoff.srtt_us);
            }
        }
        let Some((installed_cwnd_bytes, installed_rate, srtt_after_us)) =
            self.hand_to(to, &handoff)
        else {
            return;
        };
        self.log.swaps.fetch_add(1, Ordering::Relaxed);
        let by = self.policy.decided_by();
        tracing::info!(
            sock = self.sock_id,
            from = self.names.get(from).copied().unwrap_or("?"),
            to = self.names.get(to).copied().unwrap_or("?"),
            by = by.unwrap_or("-"),
            cwnd_bytes = handoff.cwnd_bytes,
            installed_cwnd_bytes,
            srtt_us = handoff.srtt_us,
            "swap"
        );
        self.log.push(Event {
            sock_id: self.sock_id,
            time_us: now_us,
            from,
            to,
            kind: EventKind::Swap {
                by,
                cwnd_bytes: handoff.cwnd_bytes,
                installed_cwnd_bytes,
                installed_rate,
                srtt_us: handoff.srtt_us,
                srtt_after_us,
            },
        });
    }
}

impl<I: Ipc> MeasuredFlow for SelectorFlow<I> {
    fn take_measurement(&mut self) -> Option<Measurement> {
        self.last.take()
    }
}

impl<I: Ipc> Flow for SelectorFlow<I> {
    fn on_report(&mut self, _sock_id: u32, report: Report) {
        self.last = self.decode(&report);
        let Some(m) = self.last else {
            return;
        };
        self.log.reports.fetch_add(1, Ordering::Relaxed);
        self.reports += 1;
        if let Some(detector) = self.path_change.as_mut() {
            let old_floor_us = detector.floor_us();
            if let Some(floor_us) = detector.on_report(&m) {
                // The report still goes to the candidate (its counters and estimators), then
                // the candidate is re-seated; the policy decides again from the next report.
                if let Some(active) = self.candidates.get_mut(self.current) {
                    let _ = active.on_report(&m);
                }
                self.reseat(old_floor_us, floor_us, m.now_us);
                return;
            }
        }
        let Some(active) = self.candidates.get_mut(self.current) else {
            return;
        };
        let control = active.on_report(&m);
        let state = active.handoff();
        let srtt_us = state.srtt_us;
        let decision = self.policy.decide(&Features {
            measurement: &m,
            current: self.current,
            candidates: &self.names,
            now_us: m.now_us,
            srtt_us,
            reports: self.reports,
        });
        if self.log.record_events && decision != Decision::Hold {
            self.log.push(Event {
                sock_id: self.sock_id,
                time_us: m.now_us,
                from: self.current,
                to: match decision {
                    Decision::Hold | Decision::Stay | Decision::Drain { .. } => self.current,
                    Decision::SwitchTo(k) => k,
                },
                kind: EventKind::Decision {
                    explanation: self.policy.explain(),
                },
            });
        }
        if let Decision::Drain { cwnd_bytes } = decision
            && self.drain(cwnd_bytes, m.now_us)
        {
            return;
        }
        let hysteresis = self
            .policy
            .hysteresis()
            .unwrap_or_else(|| *self.hysteresis.config());
        match self.hysteresis.filter_with(
            &hysteresis,
            decision,
            self.current,
            m.now_us,
            srtt_us,
            state.last_loss_us,
        ) {
            Some(to) if to < self.candidates.len() => self.swap(to, m.now_us),
            _ => {
                if !control.is_none() {
                    self.apply(&control);
                }
            }
        }
    }
}
