//! The datapath: program table, connection table, the link to the agent and its fallback.

use std::collections::VecDeque;

use tracing::{debug, info, warn};

use super::connection::{Connection, ProgramRef};
use super::program::{Program, implicit};
use super::transport::{SendError, Transport};
use super::vm::{self, Now};
use super::wire::{self, AgentMsg, DecodeError, WireError};
use super::{
    Actions, Clock, Control, DatapathConfig, FlowInfo, Primitives, RuntimeError, Stats, WideValues,
};

/// Receive buffer size: the largest message libccp accepts.
const RECV_BUF_LEN: usize = wire::MAX_MSG_LEN;
/// A faulting program is logged on its first fault and then once per this many.
const FAULT_LOG_EVERY: u64 = 1024;

/// What the datapath knows about the agent.
#[derive(Debug)]
struct AgentLink {
    /// First send not yet followed by any agent message, ns.
    awaiting_since_ns: Option<u64>,
    in_fallback: bool,
    next_ready_ns: u64,
    backoff_ns: u64,
    /// A READY went out: the next INSTALL starts a new program generation.
    new_generation_pending: bool,
    last_ready_ns: u64,
}

/// The datapath half of CCP. See the [module docs](super) for the model.
///
/// `T` is the transport to the agent, `C` the clock. Nothing here blocks or panics on bad
/// input; every failure is a [`RuntimeError`], a log line and a counter in [`Stats`].
pub struct Datapath<T: Transport, C: Clock> {
    cfg: DatapathConfig,
    transport: T,
    clock: C,
    zero_ns: u64,
    programs: Vec<Option<Program>>,
    generation: u64,
    conns: Vec<Option<Connection>>,
    live_conns: usize,
    link: AgentLink,
    outq: VecDeque<Vec<u8>>,
    scratch: Vec<u8>,
    recv_buf: Vec<u8>,
    stats: Stats,
}

impl<T: Transport, C: Clock> Datapath<T, C> {
    /// Starts a datapath and announces it to the agent with READY.
    pub fn new(cfg: DatapathConfig, transport: T, clock: C) -> Self {
        let now = clock.now_ns();
        let mut dp = Self {
            programs: (0..cfg.max_programs).map(|_| None).collect(),
            conns: Vec::new(),
            live_conns: 0,
            generation: 0,
            link: AgentLink {
                awaiting_since_ns: None,
                in_fallback: false,
                next_ready_ns: now,
                backoff_ns: cfg.retry_initial_ns,
                new_generation_pending: false,
                last_ready_ns: now,
            },
            outq: VecDeque::new(),
            scratch: Vec::with_capacity(wire::CREATE_MSG_LEN),
            recv_buf: vec![0; RECV_BUF_LEN],
            stats: Stats::default(),
            zero_ns: now,
            cfg,
            transport,
            clock,
        };
        dp.send_ready(now);
        dp
    }

    /// Counters since start.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The configuration in force.
    pub fn config(&self) -> &DatapathConfig {
        &self.cfg
    }

    /// Whether the agent is currently taken for gone.
    pub fn in_fallback(&self) -> bool {
        self.link.in_fallback
    }

    /// Number of open flows.
    pub fn connection_count(&self) -> usize {
        self.live_conns
    }

    /// Number of installed programs.
    pub fn program_count(&self) -> usize {
        self.programs.iter().filter(|p| p.is_some()).count()
    }

    /// A flow, if open.
    pub fn connection(&self, sid: u32) -> Option<&Connection> {
        let i = (sid as usize).checked_sub(1)?;
        self.conns.get(i)?.as_ref()
    }

    /// The transport.
    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// The transport, e.g. to wait on it in lock-step embeddings.
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Opens a flow and sends CREATE. Returns its socket id (1-based, as in libccp).
    pub fn create_flow(&mut self, info: FlowInfo) -> Result<u32, RuntimeError> {
        let slot = match self.conns.iter().position(Option::is_none) {
            Some(i) => i,
            None if self.conns.len() < self.cfg.max_connections => {
                self.conns.push(None);
                self.conns.len() - 1
            }
            None => return Err(RuntimeError::ConnectionTableFull(self.cfg.max_connections)),
        };
        let sid = (slot + 1) as u32;
        self.conns[slot] = Some(Connection::new(sid, info, self.cfg.retry_initial_ns));
        self.live_conns += 1;
        let now = self.clock.now_ns();
        self.send_create(slot, now);
        Ok(sid)
    }

    /// Closes a flow: tells the agent (MEASURE with no fields) and frees its slot.
    pub fn close_flow(&mut self, sid: u32) -> Result<(), RuntimeError> {
        let slot = self.slot(sid)?;
        self.conns[slot] = None;
        self.live_conns -= 1;
        wire::encode_measure(&mut self.scratch, sid, 0, &[]);
        // The agent frees the flow and says nothing: not a reason to wait for it.
        self.send_scratch_unanswered();
        Ok(())
    }

    fn slot(&self, sid: u32) -> Result<usize, RuntimeError> {
        let slot = (sid as usize)
            .checked_sub(1)
            .ok_or(RuntimeError::UnknownConnection(sid))?;
        match self.conns.get(slot) {
            Some(Some(_)) => Ok(slot),
            _ => Err(RuntimeError::UnknownConnection(sid)),
        }
    }

    /// One ACK on flow `sid`: applies staged changes, runs the flow's program (or the
    /// fallback rule), sends a report if the program asks for one, and returns what to apply.
    pub fn invoke(&mut self, sid: u32, prims: &Primitives) -> Result<Actions, RuntimeError> {
        let slot = self.slot(sid)?;
        let now_ns = self.clock.now_ns();
        self.check_link(now_ns);
        let now = Now {
            now_ns,
            datapath_zero_ns: self.zero_ns,
        };

        let Some(conn) = self.conns[slot].as_mut() else {
            return Err(RuntimeError::UnknownConnection(sid));
        };
        conn.last_cwnd = prims.snd_cwnd;
        let mut actions = Actions::default();
        conn.regs
            .set_implicit(implicit::CWND, u64::from(prims.snd_cwnd));
        conn.regs.set_implicit(implicit::RATE, prims.snd_rate);

        let wide = self.cfg.wide_values;
        apply_staged(
            conn,
            &self.programs,
            self.generation,
            now_ns,
            wide,
            &mut actions,
        );

        let program = match conn.program {
            Some(r) if r.generation == self.generation && !self.link.in_fallback => {
                self.programs[r.slot].as_ref()
            }
            _ => None,
        };
        let Some(program) = program else {
            // No agent control: the built-in rule keeps the window moving.
            let base = Primitives {
                snd_cwnd: actions.cwnd_bytes.unwrap_or(prims.snd_cwnd),
                ..*prims
            };
            actions.cwnd_bytes = Some(conn.fallback.on_ack(&base, now_ns));
            actions.control = Control::Fallback;
            self.stats.fallback_acks += 1;
            if conn.needs_create && !self.link.in_fallback && now_ns >= conn.next_create_ns {
                self.send_create(slot, now_ns);
            }
            return Ok(actions);
        };

        actions.control = Control::Agent;
        actions.agent_cwnd_bytes = actions.cwnd_bytes;
        let mut report = false;
        match vm::run(program, &mut conn.regs, prims, now) {
            Ok(()) => {
                let regs = &conn.regs;
                let cwnd = regs.implicit(implicit::CWND);
                if cwnd > 0 {
                    actions.cwnd_bytes = Some(self.cfg.wide_values.narrow(cwnd));
                }
                let rate = regs.implicit(implicit::RATE);
                if rate != 0 {
                    actions.rate_bytes_per_sec = Some(self.cfg.wide_values.narrow(rate));
                }
                if regs.implicit(implicit::SHOULD_REPORT) != 0 {
                    let fields = &conn.regs.report()[..program.num_to_return];
                    wire::encode_measure(&mut self.scratch, sid, program.uid, fields);
                    conn.regs.reset_volatile(program);
                    report = true;
                }
            }
            Err(e) => {
                conn.faults += 1;
                self.stats.vm_faults += 1;
                if conn.faults % FAULT_LOG_EVERY == 1 {
                    warn!(sid, program = program.uid, faults = conn.faults, error = %e,
                        "program fault; this ACK's invocation stopped, the flow continues");
                }
                actions.fault = Some(e);
            }
        }
        if report {
            self.stats.reports_sent += 1;
            self.send_scratch(now_ns);
        }
        actions.reported = report;
        Ok(actions)
    }

    /// Applies what the agent has staged (a program change, a window or rate update) to every
    /// flow now, instead of at the flow's next [`invoke`](Self::invoke), and hands each flow
    /// whose window or rate changed to `f` with the values to apply. Datapaths whose next ACK
    /// may be far away (the kernel's, at low rates) call this after [`poll`](Self::poll) so an
    /// agent's decision reaches the flow without waiting for an ACK. Nothing is applied while
    /// the agent is taken for gone. Returns how many flows were handed to `f`.
    pub fn apply_agent_updates(&mut self, mut f: impl FnMut(u32, Actions)) -> usize {
        if self.link.in_fallback {
            return 0;
        }
        let now_ns = self.clock.now_ns();
        let mut handed = 0;
        for conn in self.conns.iter_mut().flatten() {
            if conn.staged.is_none() && conn.pending.is_empty() {
                continue;
            }
            let mut actions = Actions {
                control: Control::Agent,
                ..Actions::default()
            };
            let wide = self.cfg.wide_values;
            apply_staged(
                conn,
                &self.programs,
                self.generation,
                now_ns,
                wide,
                &mut actions,
            );
            if actions.cwnd_bytes.is_some() || actions.rate_bytes_per_sec.is_some() {
                handed += 1;
                f(conn.sid, actions);
            }
        }
        handed
    }

    /// Takes in every message the agent has sent, flushes queued sends and runs timers.
    /// Returns the number of agent messages handled. Never blocks.
    pub fn poll(&mut self) -> usize {
        let handled = self.drain_incoming();
        let now = self.clock.now_ns();
        self.flush();
        self.check_link(now);
        handled
    }

    fn drain_incoming(&mut self) -> usize {
        let mut handled = 0;
        let mut buf = std::mem::take(&mut self.recv_buf);
        loop {
            match self.transport.try_recv(&mut buf) {
                Ok(Some(n)) => handled += self.recv_msgs(&buf[..n]),
                Ok(None) => break,
                Err(e) => {
                    debug!(error = %e, "receive from agent failed");
                    break;
                }
            }
        }
        self.recv_buf = buf;
        handled
    }

    /// Handles a buffer of one or more agent messages; returns how many were accepted.
    /// Each rejected message is logged and counted; the rest of the buffer is still read when
    /// the bad message's length is known.
    pub fn recv_msgs(&mut self, mut buf: &[u8]) -> usize {
        let mut accepted = 0;
        while buf.len() >= wire::HEADER_LEN {
            let len = match wire::decode_header(buf) {
                Ok(h) => h.len,
                Err(e) => {
                    self.reject(&RuntimeError::Decode(e.into()));
                    return accepted;
                }
            };
            match self.recv_msg(&buf[..len]) {
                Ok(()) => accepted += 1,
                Err(e) => self.reject(&e),
            }
            buf = &buf[len..];
        }
        if !buf.is_empty() {
            let e = WireError::Truncated {
                needed: wire::HEADER_LEN,
                have: buf.len(),
            };
            self.reject(&RuntimeError::Decode(e.into()));
        }
        accepted
    }

    fn reject(&mut self, e: &RuntimeError) {
        self.stats.msgs_rejected += 1;
        // An answer to a flow closed since the agent sent it (its slot is free, not yet
        // reused): expected whenever flows end, not worth a warning.
        if let RuntimeError::UnknownConnection(sid) = e
            && (1..=self.conns.len()).contains(&(*sid as usize))
        {
            debug!(error = %e, "agent message for a closed flow dropped");
            return;
        }
        warn!(error = %e, "agent message dropped");
    }

    /// Handles exactly one agent message.
    pub fn recv_msg(&mut self, buf: &[u8]) -> Result<(), RuntimeError> {
        let (msg, _) = wire::decode_agent_msg(buf, &self.cfg.limits).map_err(|e| match e {
            DecodeError::Wire(w) => RuntimeError::Decode(w.into()),
            l @ DecodeError::Limit(_) => RuntimeError::Decode(l),
        })?;
        let now = self.clock.now_ns();
        self.stats.msgs_received += 1;
        if self.link.in_fallback && matches!(msg, AgentMsg::UpdateField { .. }) {
            // Written before the agent went quiet (or by an agent that lost the flow): it
            // neither proves the agent is back nor applies to a flow on the fallback rule.
            debug!("window update ignored: flow is on the fallback rule");
            return Ok(());
        }
        self.heard_from_agent(now);
        match msg {
            AgentMsg::Install {
                program_uid,
                events,
                instrs,
            } => {
                let program =
                    Program::from_raw(program_uid, &events, &instrs).map_err(|source| {
                        RuntimeError::Program {
                            uid: program_uid,
                            source,
                        }
                    })?;
                self.install(program, now)
            }
            AgentMsg::UpdateField { sid, updates } => {
                let slot = self.slot(sid)?;
                let conn = self.conns[slot]
                    .as_mut()
                    .ok_or(RuntimeError::UnknownConnection(sid))?;
                conn.pending
                    .stage(&updates)
                    .map_err(|b| RuntimeError::BadUpdate {
                        sid,
                        reg_type: b.reg_type,
                        index: b.index,
                    })
            }
            AgentMsg::ChangeProg {
                sid,
                program_uid,
                updates,
            } => {
                let slot = self.slot(sid)?;
                let target = self
                    .programs
                    .iter()
                    .position(|p| p.as_ref().is_some_and(|p| p.uid == program_uid))
                    .ok_or(RuntimeError::UnknownProgram {
                        sid,
                        uid: program_uid,
                    })?;
                let generation = self.generation;
                let conn = self.conns[slot]
                    .as_mut()
                    .ok_or(RuntimeError::UnknownConnection(sid))?;
                let mut pending = super::connection::Pending::default();
                pending
                    .stage(&updates)
                    .map_err(|b| RuntimeError::BadUpdate {
                        sid,
                        reg_type: b.reg_type,
                        index: b.index,
                    })?;
                // Like libccp: the switch replaces any staged but unapplied updates.
                conn.pending = pending;
                conn.staged = Some(ProgramRef {
                    slot: target,
                    generation,
                });
                if conn.needs_create {
                    conn.needs_create = false;
                    conn.create_backoff_ns = self.cfg.retry_initial_ns;
                }
                Ok(())
            }
        }
    }

    fn install(&mut self, program: Program, now: u64) -> Result<(), RuntimeError> {
        // A READY we sent, or uid 1 (libccp's marker of a freshly started portus) when it is
        // not a repeat of the installed uid 1, means a new agent session: its programs
        // replace all earlier ones.
        let fresh_agent = program.uid == 1 && !self.programs.iter().flatten().any(|p| p.uid == 1);
        if self.link.new_generation_pending || fresh_agent {
            self.link.new_generation_pending = false;
            self.new_generation(now);
        }
        let uid = program.uid;
        let slot = self
            .programs
            .iter()
            .position(|p| p.as_ref().is_some_and(|p| p.uid == uid))
            .or_else(|| self.programs.iter().position(Option::is_none))
            .ok_or(RuntimeError::ProgramTableFull {
                uid,
                max: self.cfg.max_programs,
            })?;
        debug!(
            uid,
            slot,
            instrs = program.instrs.len(),
            "program installed"
        );
        let replaced = self.programs[slot].is_some();
        self.programs[slot] = Some(program);
        if replaced {
            // Flows running the old version start the new one (its constants, its defaults)
            // on their next ACK.
            let current = Some(ProgramRef {
                slot,
                generation: self.generation,
            });
            for conn in self.conns.iter_mut().flatten() {
                if conn.program == current && conn.staged.is_none() {
                    conn.staged = current;
                }
            }
        }
        Ok(())
    }

    /// Clears the program table; flows that ran an old program must be created again, except
    /// those whose CREATE already went to the new agent session.
    fn new_generation(&mut self, now: u64) {
        self.programs.iter_mut().for_each(|p| *p = None);
        self.generation += 1;
        let last_ready = self.link.last_ready_ns;
        for conn in self.conns.iter_mut().flatten() {
            let created_since_ready = conn.create_sent_ns.is_some_and(|t| t >= last_ready);
            if conn.program.take().is_some() {
                conn.fallback.leave_slow_start(conn.last_cwnd);
            }
            conn.staged = None;
            if !created_since_ready {
                conn.needs_create = true;
                conn.next_create_ns = now;
            }
        }
    }

    fn heard_from_agent(&mut self, now: u64) {
        self.link.awaiting_since_ns = None;
        self.link.backoff_ns = self.cfg.retry_initial_ns;
        if self.link.in_fallback {
            self.link.in_fallback = false;
            self.stats.agent_recoveries += 1;
            info!(
                now_ns = now,
                "agent answered; flows return to agent control as it recreates them"
            );
            // Flows the agent has not taken yet get their CREATE promptly.
            for conn in self.conns.iter_mut().flatten() {
                if conn.needs_create {
                    conn.next_create_ns = now;
                }
            }
        }
    }

    /// Enters fallback when the agent has been silent too long, and re-sends READY/CREATE
    /// with backoff while in fallback.
    fn check_link(&mut self, now: u64) {
        if !self.link.in_fallback
            && let Some(since) = self.link.awaiting_since_ns
            && now.saturating_sub(since) >= self.cfg.agent_timeout_ns
        {
            self.link.in_fallback = true;
            self.stats.fallback_entries += 1;
            warn!(
                silent_ms = now.saturating_sub(since) / 1_000_000,
                "agent not answering; flows switch to the built-in fallback rule"
            );
            for conn in self.conns.iter_mut().flatten() {
                if conn.program.take().is_some() {
                    conn.fallback.leave_slow_start(conn.last_cwnd);
                }
                conn.staged = None;
                conn.needs_create = true;
            }
            self.link.next_ready_ns = now;
            self.link.backoff_ns = self.cfg.retry_initial_ns;
        }
        if self.link.in_fallback && now >= self.link.next_ready_ns {
            // An answer may already be waiting: read it before asking again, so a returning
            // agent is not made to recreate its flows twice.
            self.drain_incoming();
            if !self.link.in_fallback {
                return;
            }
            self.send_ready(now);
            for slot in 0..self.conns.len() {
                if self.conns[slot].as_ref().is_some_and(|c| c.needs_create) {
                    self.send_create(slot, now);
                }
            }
            self.link.next_ready_ns = now.saturating_add(self.link.backoff_ns);
            self.link.backoff_ns = (self.link.backoff_ns * 2).min(self.cfg.retry_max_ns);
        }
    }

    fn send_ready(&mut self, now: u64) {
        wire::encode_ready(&mut self.scratch, self.cfg.id);
        self.link.new_generation_pending = true;
        self.link.last_ready_ns = now;
        self.stats.readies_sent += 1;
        self.send_scratch(now);
    }

    fn send_create(&mut self, slot: usize, now: u64) {
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        let info = FlowInfo {
            // The agent takes the flow back from where it is now.
            init_cwnd_bytes: if conn.create_sent_ns.is_some() {
                conn.last_cwnd
            } else {
                conn.info.init_cwnd_bytes
            },
            ..conn.info.clone()
        };
        conn.create_sent_ns = Some(now);
        conn.next_create_ns = now.saturating_add(conn.create_backoff_ns);
        conn.create_backoff_ns = (conn.create_backoff_ns * 2).min(self.cfg.retry_max_ns);
        wire::encode_create(&mut self.scratch, conn.sid, &info);
        self.stats.creates_sent += 1;
        self.send_scratch(now);
    }

    /// Sends the message in `scratch`, keeping order with anything already queued.
    /// Sends the message in `scratch`, which the agent answers: its silence from now on counts
    /// towards the fallback.
    fn send_scratch(&mut self, now: u64) {
        if self.link.awaiting_since_ns.is_none() {
            self.link.awaiting_since_ns = Some(now);
        }
        self.send_scratch_unanswered();
    }

    /// Sends the message in `scratch`, which needs no answer (a flow's close).
    fn send_scratch_unanswered(&mut self) {
        if !self.outq.is_empty() {
            self.flush();
        }
        if self.outq.is_empty() {
            match self.transport.send(&self.scratch) {
                Ok(()) => return,
                Err(SendError::Full) => self.stats.sends_full += 1,
                Err(SendError::Disconnected(why)) => {
                    self.stats.sends_failed += 1;
                    if self.stats.sends_failed == 1 || !self.link.in_fallback {
                        debug!(%why, "agent unreachable");
                    }
                    return;
                }
            }
        }
        if self.outq.len() >= self.cfg.max_queued_msgs {
            self.outq.pop_front();
            self.stats.msgs_dropped += 1;
        }
        self.outq.push_back(self.scratch.clone());
    }

    fn flush(&mut self) {
        while let Some(front) = self.outq.front() {
            match self.transport.send(front) {
                Ok(()) => {
                    self.outq.pop_front();
                }
                Err(SendError::Full) => {
                    self.stats.sends_full += 1;
                    return;
                }
                Err(SendError::Disconnected(_)) => {
                    self.stats.sends_failed += 1;
                    self.stats.msgs_dropped += self.outq.len() as u64;
                    self.outq.clear();
                    return;
                }
            }
        }
    }
}

/// Starts a staged program (if still of the current generation) and applies staged register
/// updates; a new window or rate goes into `actions`.
fn apply_staged(
    conn: &mut Connection,
    programs: &[Option<Program>],
    generation: u64,
    now_ns: u64,
    wide: WideValues,
    actions: &mut Actions,
) {
    if let Some(staged) = conn.staged.take()
        && staged.generation == generation
        && let Some(p) = programs[staged.slot].as_ref()
    {
        conn.program = Some(staged);
        conn.regs.start_program(p, now_ns);
    }
    if !conn.pending.is_empty() {
        conn.pending.apply_controls(&mut conn.regs);
        if let Some(c) = conn.pending.cwnd.take() {
            conn.regs.set_implicit(implicit::CWND, c);
            if c != 0 {
                actions.cwnd_bytes = Some(wide.narrow(c));
            }
        }
        if let Some(r) = conn.pending.rate.take() {
            conn.regs.set_implicit(implicit::RATE, r);
            if r != 0 {
                actions.rate_bytes_per_sec = Some(wide.narrow(r));
            }
        }
    }
}
