//! Conformance: our runtime against the real libccp (crate `libccp`), as the VM oracle.
//!
//! Both datapaths get the same agent messages (INSTALL, CHANGE_PROG and UPDATE_FIELD bytes
//! serialized by portus) and the same primitives on every ACK. After each ACK the test compares
//! the cwnd and rate each one installed (for libccp: the last `set_cwnd` / `set_rate_abs` call
//! of that invocation, or none), whether the program faulted and how, and every MEASURE message
//! (reports and flow closes) bit for bit.
//!
//! The corpus: the AIMD program of the tests' `support/aimd.rs`, portus's own integration-test
//! programs (basic, preset, timing, twoflow, update, volatile), hand-written programs covering
//! every operation, fault and register kind, and a thousand cases of programs generated from a
//! grammar by a seeded xorshift PRNG (the test prints the counts), some of them switching
//! programs mid-flow (CHANGE_PROG with `Cwnd`) and receiving UPDATE_FIELD messages at random
//! ACKs. Faults (division by zero, add/mul overflow, sub underflow) must match in kind, and then
//! neither datapath may set anything from the program or send a report for that ACK.
//!
//! # Time and tolerance
//! There is no tolerance: every comparison is exact, including programs that read `Micros` or
//! `Ack.now`, because both datapaths read one virtual clock. Ours gets a [`ManualClock`];
//! in libccp the test replaces the `now` / `since_usecs` / `after_usecs` callbacks and
//! `time_zero` of the `ccp_datapath` struct (the crate hard-wires wall time) with functions
//! reading the same virtual time, after checking the struct's layout against `ccp.h`.
//!
//! # Intended differences, kept out of the comparison
//! - A flow with no program: ours runs its fallback rule, libccp does nothing. Every flow gets
//!   CHANGE_PROG before its first ACK.
//! - Agent silence: `agent_timeout_ns` is `u64::MAX`, so our fallback never fires.
//!
//! # libccp behaviours excluded from the corpus (libccp bugs or undefined behaviour)
//! - Temporary registers 8..=15: portus emits them for deep expressions, libccp stores 8, so it
//!   reads past the array and drops the writes. Programs using them are skipped (counted).
//! - Programs of 256 or more instructions: libccp's per-event loop index is a `u8`.
//! - Re-installing a uid that is already installed: libccp adds a second copy and keeps
//!   running the first. Every case installs fresh uids after a uid-1 INSTALL clears the table.
//! - Invoking a flow after a uid-1 INSTALL without a new CHANGE_PROG: libccp keeps running
//!   whatever program now occupies the old slot. Flows are closed before the table is cleared.
//! - A flow opened in a slot whose previous flow sent CREATE less than 100 ms earlier: libccp
//!   reads the stale `last_create_msg_sent`, delays the CREATE and swallows the first ACKs.
//!   Every case advances the clock by 200 ms before opening flows.
//! - UPDATE_FIELD with a control index ≥ 110 (an unchecked write in libccp): never sent.
//!
//! The libccp crate exports a C symbol `log` that replaces libm's: nothing in this binary may
//! call `f64::ln` (hence the integer-only PRNG and no float formatting).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test binary: failing loudly is the point

use std::fmt::Write as _;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[path = "support/aimd.rs"]
mod aimd;

use ccp_datapath::runtime::transport::{RecvError, SendError};
use ccp_datapath::runtime::vm::VmError;
use ccp_datapath::runtime::{
    Datapath, DatapathConfig, FlowInfo, ManualClock, Primitives, Transport, WideValues,
};
use portus::lang::{self, Bin, Reg, Scope, Type};
use portus::serialize;

/// Virtual time both datapaths read, ns. Starts far from zero so `Micros` writes never wrap.
const T0_NS: u64 = 1_000_000_000_000;
static VCLOCK_NS: AtomicU64 = AtomicU64::new(T0_NS);

const MSS: u32 = 1448;
const RANDOM_PROGRAMS: usize = 1000;
const RANDOM_ACKS: usize = 300;
const HAND_ACKS: usize = 300;
/// Mismatches printed in full (all are counted).
const MAX_PRINTED: usize = 20;

// ---------------------------------------------------------------------------------------------
// Deterministic randomness (integers only: no libm in this binary).

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }

    /// A value from a mix of zero, small, medium, 32-bit and edge values.
    fn value32(&mut self) -> u32 {
        match self.below(8) {
            0 | 1 => 0,
            2 => self.below(10) as u32,
            3 | 4 => self.below(100_000) as u32,
            5 => self.next() as u32,
            6 => *self.pick(&[1, 2, u32::MAX, u32::MAX - 1, 0x3fff_ffff, 1 << 31]),
            _ => self.below(2_000) as u32,
        }
    }

    /// Like [`Self::value32`], sometimes beyond 32 bits.
    fn value64(&mut self) -> u64 {
        match self.below(10) {
            0 => self.next() >> self.below(64),
            1 => *self.pick(&[u64::MAX, 1 << 32, 1 << 63, u64::from(u32::MAX) + 1]),
            _ => u64::from(self.value32()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// libccp side.

type Sent = Arc<Mutex<Vec<Vec<u8>>>>;

struct LibOps(Sent);

impl libccp::DatapathOps for LibOps {
    fn send_msg(&mut self, msg: &[u8]) {
        self.0.lock().unwrap().push(msg.to_vec());
    }
}

/// libccp's per-flow callbacks: the last cwnd and rate set during the current invocation.
#[derive(Default)]
struct LibFlow {
    cwnd: Option<u32>,
    rate: Option<u32>,
}

impl libccp::CongestionOps for LibFlow {
    fn set_cwnd(&mut self, cwnd: u32) {
        self.cwnd = Some(cwnd);
    }

    fn set_rate_abs(&mut self, rate: u32) {
        self.rate = Some(rate);
    }
}

/// `struct ccp_datapath` from libccp's `ccp.h`, field for field.
#[repr(C)]
struct RawCcpDatapath {
    set_cwnd: *const (),
    set_rate_abs: *const (),
    send_msg: *const (),
    log: *const (),
    time_zero: u64,
    now: Option<extern "C" fn() -> u64>,
    since_usecs: Option<extern "C" fn(u64) -> u64>,
    after_usecs: Option<extern "C" fn(u64) -> u64>,
    max_connections: usize,
    ccp_active_connections: *mut (),
    fto_us: u64,
    last_msg_sent: u64,
    in_fallback: bool,
    max_programs: usize,
    programs: *mut (),
    impl_: *mut (),
}

extern "C" fn virtual_now() -> u64 {
    VCLOCK_NS.load(Ordering::SeqCst)
}

extern "C" fn virtual_since_usecs(then: u64) -> u64 {
    virtual_now().wrapping_sub(then) / 1_000
}

extern "C" fn virtual_after_usecs(usecs: u64) -> u64 {
    virtual_now().wrapping_add(usecs.wrapping_mul(1_000))
}

/// Points libccp's clock callbacks at the virtual clock. Refuses (panics) if the struct does
/// not look like the one in `ccp.h` with the values `libccp::DatapathBuilder::init` sets.
fn use_virtual_clock(dp: &mut libccp::Datapath) {
    assert_eq!(
        size_of::<libccp::Datapath>(),
        size_of::<RawCcpDatapath>(),
        "libccp::Datapath is not a bare struct ccp_datapath"
    );
    let raw = std::ptr::from_mut(dp).cast::<RawCcpDatapath>();
    // SAFETY: `libccp::Datapath` is a newtype over bindgen's `#[repr(C)] ccp_datapath`, which
    // `RawCcpDatapath` mirrors (sizes checked above, field values checked below before any
    // write). We hold the only reference, and no connection exists yet.
    let raw = unsafe { &mut *raw };
    assert!(
        raw.max_connections == 1024
            && raw.max_programs == 10
            && raw.fto_us == 1000
            && !raw.in_fallback
            && !raw.programs.is_null()
            && !raw.impl_.is_null()
            && !raw.ccp_active_connections.is_null()
            && raw.now.is_some()
            && raw.since_usecs.is_some()
            && raw.after_usecs.is_some()
            && !raw.set_cwnd.is_null()
            && !raw.set_rate_abs.is_null()
            && !raw.send_msg.is_null()
            && !raw.log.is_null(),
        "libccp's struct ccp_datapath layout is not the one this test knows"
    );
    raw.now = Some(virtual_now);
    raw.since_usecs = Some(virtual_since_usecs);
    raw.after_usecs = Some(virtual_after_usecs);
    raw.time_zero = virtual_now();
    raw.last_msg_sent = 0;
}

fn lib_prims(p: &Primitives) -> libccp::Primitives {
    libccp::Primitives::default()
        .with_bytes_acked(p.bytes_acked)
        .with_packets_acked(p.packets_acked)
        .with_bytes_misordered(p.bytes_misordered)
        .with_packets_misordered(p.packets_misordered)
        .with_ecn_bytes(p.ecn_bytes)
        .with_ecn_packets(p.ecn_packets)
        .with_lost_pkts_sample(p.lost_pkts_sample)
        .with_was_timeout(p.was_timeout)
        .with_rtt_sample_us(p.rtt_sample_us)
        .with_rate_outgoing(p.rate_outgoing)
        .with_rate_incoming(p.rate_incoming)
        .with_bytes_in_flight(p.bytes_in_flight)
        .with_packets_in_flight(p.packets_in_flight)
        .with_snd_cwnd(p.snd_cwnd)
        .with_snd_rate(p.snd_rate)
        .with_bytes_pending(p.bytes_pending)
}

// ---------------------------------------------------------------------------------------------
// Our side.

struct Recorder(Sent);

impl Transport for Recorder {
    fn send(&mut self, msg: &[u8]) -> Result<(), SendError> {
        self.0.lock().unwrap().push(msg.to_vec());
        Ok(())
    }

    fn try_recv(&mut self, _buf: &mut [u8]) -> Result<Option<usize>, RecvError> {
        Ok(None)
    }
}

// ---------------------------------------------------------------------------------------------
// The comparison harness.

/// How an invocation ended, in terms both datapaths share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    AddOverflow,
    SubUnderflow,
    MulOverflow,
    DivByZero,
    Other,
}

fn lib_outcome(r: Result<(), libccp::LibccpError>) -> Outcome {
    use libccp::LibccpError as E;
    match r {
        Ok(()) => Outcome::Ok,
        Err(E::LibccpAddIntOverflow) => Outcome::AddOverflow,
        Err(E::LibccpSubIntUnderflow) => Outcome::SubUnderflow,
        Err(E::LibccpMulIntOverflow) => Outcome::MulOverflow,
        Err(E::LibccpDivByZero) => Outcome::DivByZero,
        Err(_) => Outcome::Other,
    }
}

fn our_outcome(f: Option<VmError>) -> Outcome {
    match f {
        None => Outcome::Ok,
        Some(VmError::AddOverflow { .. }) => Outcome::AddOverflow,
        Some(VmError::SubUnderflow { .. }) => Outcome::SubUnderflow,
        Some(VmError::MulOverflow { .. }) => Outcome::MulOverflow,
        Some(VmError::DivByZero { .. }) => Outcome::DivByZero,
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    programs: u64,
    acks: u64,
    measures: u64,
    reports: u64,
    cwnd_sets: u64,
    rate_sets: u64,
    faults: u64,
    agent_msgs: u64,
    switches: u64,
    updates: u64,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.programs += o.programs;
        self.acks += o.acks;
        self.measures += o.measures;
        self.reports += o.reports;
        self.cwnd_sets += o.cwnd_sets;
        self.rate_sets += o.rate_sets;
        self.faults += o.faults;
        self.agent_msgs += o.agent_msgs;
        self.switches += o.switches;
        self.updates += o.updates;
    }
}

fn is_measure(m: &[u8]) -> bool {
    m.len() >= 2 && m[0] == 1 && m[1] == 0
}

fn sid_of(m: &[u8]) -> u32 {
    u32::from_le_bytes([m[4], m[5], m[6], m[7]])
}

/// One program as the test installs it.
struct Installed {
    uid: u32,
    scope: Scope,
}

/// An open flow on both datapaths.
struct PairFlow<'dp> {
    sid: u32,
    lib: libccp::Connection<'dp, LibFlow>,
    /// Current program (index into the case's programs).
    program: usize,
    /// Window the (simulated) transport runs with.
    cwnd: u32,
    rate: u64,
}

struct Pair<'dp> {
    lib: &'dp libccp::Datapath,
    lib_sent: Sent,
    ours: Datapath<Recorder, ManualClock>,
    our_sent: Sent,
    clock: ManualClock,
    tally: Tally,
    mismatches: Vec<String>,
    /// What the current case is, for mismatch reports.
    context: String,
}

impl<'dp> Pair<'dp> {
    fn advance(&mut self, ns: u64) {
        let now = VCLOCK_NS.fetch_add(ns, Ordering::SeqCst) + ns;
        self.clock.set_ns(now);
    }

    fn mismatch(&mut self, what: String) {
        if self.mismatches.len() < MAX_PRINTED {
            println!("MISMATCH in {}: {what}", self.context);
        }
        self.mismatches.push(what);
    }

    fn take_sent(&self) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let lib = std::mem::take(&mut *self.lib_sent.lock().unwrap());
        let ours = std::mem::take(&mut *self.our_sent.lock().unwrap());
        (lib, ours)
    }

    /// Compares the MEASURE messages both sides sent since the last call.
    fn compare_measures(&mut self, when: &str) {
        let (lib, ours) = self.take_sent();
        let lib: Vec<_> = lib.into_iter().filter(|m| is_measure(m)).collect();
        let ours: Vec<_> = ours.into_iter().filter(|m| is_measure(m)).collect();
        if lib == ours {
            self.tally.measures += lib.len() as u64;
            self.tally.reports += lib.iter().filter(|m| m.len() > 16).count() as u64;
        } else {
            self.mismatch(format!("{when}: MEASURE libccp {lib:?} ours {ours:?}"));
        }
    }

    /// Feeds one agent message to both datapaths; both must accept it or both refuse it.
    fn deliver(&mut self, msg: &[u8], what: &str) -> bool {
        let mut copy = msg.to_vec();
        let lib_ok = self.lib.recv_msg(&mut copy).is_ok();
        let our = self.ours.recv_msg(msg);
        self.tally.agent_msgs += 1;
        if lib_ok != our.is_ok() {
            self.mismatch(format!("{what}: libccp accepted={lib_ok}, ours {our:?}"));
        }
        lib_ok && our.is_ok()
    }

    fn install(&mut self, uid: u32, bin: Bin, what: &str) {
        let msg = serialize::install::Msg {
            sid: 0,
            program_uid: uid,
            num_events: bin.events.len() as u32,
            num_instrs: bin.instrs.len() as u32,
            instrs: bin,
        };
        let bytes = serialize::serialize(&msg).expect("serialize INSTALL");
        self.deliver(&bytes, &format!("INSTALL {what}"));
    }

    fn open(&mut self, init_cwnd: u32) -> PairFlow<'dp> {
        // libccp reuses a slot's stale CREATE timestamp: keep clear of its 100 ms window.
        self.advance(200_000_000);
        let info = libccp::FlowInfo::default()
            .with_init_cwnd(init_cwnd)
            .with_mss(MSS)
            .with_four_tuple(0x0a00_0001, 4242, 0x0a00_0002, 80);
        let lib = libccp::Connection::start(self.lib, LibFlow::default(), info)
            .expect("libccp flow start");
        let sid = self
            .ours
            .create_flow(FlowInfo {
                init_cwnd_bytes: init_cwnd,
                mss_bytes: MSS,
                src_ip: 0x0a00_0001,
                src_port: 4242,
                dst_ip: 0x0a00_0002,
                dst_port: 80,
                alg: None,
            })
            .expect("create flow");
        let (lib_msgs, our_msgs) = self.take_sent();
        let lib_sid = lib_msgs.iter().find(|m| m[0] == 0).map(|m| sid_of(m));
        let our_sid = our_msgs.iter().find(|m| m[0] == 0).map(|m| sid_of(m));
        assert_eq!(
            lib_sid,
            Some(sid),
            "libccp did not send CREATE for sid {sid}"
        );
        assert_eq!(our_sid, Some(sid));
        PairFlow {
            sid,
            lib,
            program: 0,
            cwnd: init_cwnd,
            rate: 0,
        }
    }

    fn close(&mut self, flow: PairFlow<'_>) {
        let sid = flow.sid;
        drop(flow.lib);
        self.ours.close_flow(sid).expect("close flow");
        self.compare_measures(&format!("close sid {sid}"));
    }

    fn change_prog(
        &mut self,
        flow: &mut PairFlow<'_>,
        idx: usize,
        prog: &Installed,
        fields: Vec<(Reg, u64)>,
    ) {
        let msg = serialize::changeprog::Msg {
            sid: flow.sid,
            program_uid: prog.uid,
            num_fields: fields.len() as u32,
            fields,
        };
        let bytes = serialize::serialize(&msg).expect("serialize CHANGE_PROG");
        if self.deliver(
            &bytes,
            &format!("CHANGE_PROG sid {} uid {}", flow.sid, prog.uid),
        ) {
            flow.program = idx;
            self.tally.switches += 1;
        }
    }

    fn update(&mut self, flow: &PairFlow<'_>, fields: Vec<(Reg, u64)>) {
        let msg = serialize::update_field::Msg {
            sid: flow.sid,
            num_fields: fields.len() as u8,
            fields,
        };
        let bytes = serialize::serialize(&msg).expect("serialize UPDATE_FIELD");
        self.deliver(&bytes, &format!("UPDATE_FIELD sid {}", flow.sid));
        self.tally.updates += 1;
    }

    /// One ACK on both datapaths; compares everything they did.
    fn step(&mut self, flow: &mut PairFlow<'_>, prims: &Primitives, ack: usize) {
        flow.lib.cwnd = None;
        flow.lib.rate = None;
        flow.lib.load_primitives(lib_prims(prims));
        let lib = lib_outcome(flow.lib.invoke());
        let ours = self.ours.invoke(flow.sid, prims).expect("invoke");
        self.tally.acks += 1;
        let when = format!("sid {} ack {ack}", flow.sid);
        let our = our_outcome(ours.fault);
        if lib != our {
            self.mismatch(format!(
                "{when}: outcome libccp {lib:?} ours {our:?} ({prims:?})"
            ));
        } else if lib != Outcome::Ok {
            self.tally.faults += 1;
        }
        if flow.lib.cwnd != ours.cwnd_bytes {
            self.mismatch(format!(
                "{when}: cwnd libccp {:?} ours {:?} ({prims:?})",
                flow.lib.cwnd, ours.cwnd_bytes
            ));
        } else if ours.cwnd_bytes.is_some() {
            self.tally.cwnd_sets += 1;
        }
        if flow.lib.rate != ours.rate_bytes_per_sec {
            self.mismatch(format!(
                "{when}: rate libccp {:?} ours {:?} ({prims:?})",
                flow.lib.rate, ours.rate_bytes_per_sec
            ));
        } else if ours.rate_bytes_per_sec.is_some() {
            self.tally.rate_sets += 1;
        }
        if let Some(c) = ours.cwnd_bytes {
            flow.cwnd = c;
        }
        if let Some(r) = ours.rate_bytes_per_sec {
            flow.rate = u64::from(r);
        }
        self.compare_measures(&when);
    }
}

// ---------------------------------------------------------------------------------------------
// Programs and cases.

/// A source program with compile-time default overrides (portus `compile`'s `updates`).
#[derive(Clone)]
struct Src {
    text: String,
    presets: Vec<(&'static str, u32)>,
}

impl Src {
    fn new(text: &str) -> Self {
        Self {
            text: text.to_string(),
            presets: Vec::new(),
        }
    }
}

/// Why a program was not run.
#[derive(Debug)]
enum Skip {
    /// portus refused it (or panicked compiling it).
    Portus,
    /// It uses temporary registers libccp does not have.
    TmpRegs,
    /// Too long for libccp's `u8` instruction index.
    TooLong,
}

fn compile(src: &Src) -> Result<(Bin, Scope), Skip> {
    let presets = src.presets.clone();
    let text = src.text.clone();
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let compiled = panic::catch_unwind(AssertUnwindSafe(|| {
        lang::compile(text.as_bytes(), &presets).ok()
    }));
    panic::set_hook(hook);
    let (bin, scope) = compiled.ok().flatten().ok_or(Skip::Portus)?;
    // Serialization refuses out-of-range registers and immediates: check it up front.
    if bin.serialize().is_err() {
        return Err(Skip::Portus);
    }
    if bin.instrs.len() >= 256 {
        return Err(Skip::TooLong);
    }
    let big_tmp = |r: &Reg| matches!(r, Reg::Tmp(i, _) if *i >= 8);
    if bin
        .instrs
        .iter()
        .any(|i| big_tmp(&i.res) || big_tmp(&i.left) || big_tmp(&i.right))
    {
        return Err(Skip::TmpRegs);
    }
    Ok((bin, scope))
}

/// A value for a register update, maybe depending on the flow.
#[derive(Clone, Copy)]
enum Val {
    Const(u64),
    SidTimes(u64),
}

/// A register to update: `Cwnd`, `Rate`, or a control variable by name.
fn field(scope: &Scope, name: &str, v: u64) -> (Reg, u64) {
    let reg = match name {
        "Cwnd" => Reg::Implicit(4, Type::Num(None)),
        "Rate" => Reg::Implicit(5, Type::Num(None)),
        "Micros" => Reg::Implicit(3, Type::Num(None)),
        _ => scope.get(name).cloned().expect("control register in scope"),
    };
    (reg, v)
}

/// A scripted case: programs, flows, and what the agent sends when.
struct Case {
    name: String,
    programs: Vec<Src>,
    flows: usize,
    acks: usize,
    /// Whether the first CHANGE_PROG carries the flow's initial `Cwnd`.
    start_cwnd: bool,
    /// Further fields sent with the first CHANGE_PROG.
    start_fields: Vec<(&'static str, Val)>,
    /// UPDATE_FIELD messages to every flow before the given ACK.
    updates: Vec<(usize, Vec<(&'static str, Val)>)>,
    /// Random UPDATE_FIELD / CHANGE_PROG traffic (1 in this many ACKs; 0: none).
    random_agent_every: u64,
    /// Clock advance per ACK, ns (uniform in the range).
    tick_ns: (u64, u64),
}

impl Case {
    fn new(name: &str, programs: Vec<Src>) -> Self {
        Self {
            name: name.to_string(),
            programs,
            flows: 1,
            acks: HAND_ACKS,
            start_cwnd: true,
            start_fields: Vec::new(),
            updates: Vec::new(),
            random_agent_every: 0,
            tick_ns: (0, 2_000_000),
        }
    }
}

fn controls_of(scope: &Scope, src: &Src) -> Vec<Reg> {
    // Control names the generator and the hand-written programs use.
    let mut out = Vec::new();
    for w in src
        .text
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter(|w| !w.is_empty())
    {
        if let Some(r @ Reg::Control(..)) = scope.get(w)
            && !out.contains(r)
        {
            out.push(r.clone());
        }
    }
    out
}

fn random_prims(rng: &mut Rng, flow: &PairFlow<'_>) -> Primitives {
    let mut p = Primitives {
        bytes_acked: rng.value32(),
        packets_acked: rng.value32(),
        bytes_misordered: rng.value32(),
        packets_misordered: rng.value32(),
        ecn_bytes: rng.value32(),
        ecn_packets: rng.value32(),
        lost_pkts_sample: if rng.chance(1, 4) { rng.value32() } else { 0 },
        was_timeout: rng.chance(1, 20),
        rtt_sample_us: rng.value64(),
        rate_outgoing: rng.value64(),
        rate_incoming: rng.value64(),
        bytes_in_flight: rng.value32(),
        packets_in_flight: rng.value32(),
        snd_cwnd: flow.cwnd,
        snd_rate: flow.rate,
        bytes_pending: rng.value32(),
    };
    if rng.chance(1, 8) {
        p.snd_cwnd = rng.value32();
    }
    if rng.chance(1, 8) {
        p.snd_rate = rng.value64();
    }
    if rng.chance(1, 3) {
        // A plain, realistic ACK: small numbers that rarely fault.
        p.packets_acked = rng.range(1, 4) as u32;
        p.bytes_acked = p.packets_acked * MSS;
        p.rtt_sample_us = rng.range(1_000, 100_000);
        p.lost_pkts_sample = 0;
        p.was_timeout = false;
    }
    p
}

fn resolve(v: Val, sid: u32) -> u64 {
    match v {
        Val::Const(c) => c,
        Val::SidTimes(k) => u64::from(sid) * k,
    }
}

/// Runs one case; returns `Err` if a program was skipped.
fn run_case(pair: &mut Pair<'_>, case: &Case, rng: &mut Rng) -> Result<(), Skip> {
    let mut compiled = Vec::new();
    for src in &case.programs {
        compiled.push(compile(src)?);
    }
    pair.context.clone_from(&case.name);
    let mut installed = Vec::new();
    for (i, (bin, scope)) in compiled.into_iter().enumerate() {
        // uid 1 clears both program tables; later uids are fresh.
        let uid = i as u32 + 1;
        pair.install(uid, bin, &format!("{} program {i}", case.name));
        installed.push(Installed { uid, scope });
    }
    pair.tally.programs += installed.len() as u64;
    let controls: Vec<Vec<Reg>> = installed
        .iter()
        .zip(&case.programs)
        .map(|(p, src)| controls_of(&p.scope, src))
        .collect();

    let mut flows = Vec::new();
    for _ in 0..case.flows {
        let init = if rng.chance(1, 2) {
            10 * MSS
        } else {
            rng.value32()
        };
        let mut flow = pair.open(init);
        let mut fields = Vec::new();
        if case.start_cwnd {
            fields.push(field(&installed[0].scope, "Cwnd", u64::from(init)));
        }
        for &(name, v) in &case.start_fields {
            fields.push(field(&installed[0].scope, name, resolve(v, flow.sid)));
        }
        pair.change_prog(&mut flow, 0, &installed[0], fields);
        flows.push(flow);
    }

    for ack in 0..case.acks {
        for (at, ups) in &case.updates {
            if *at == ack {
                for flow in &flows {
                    let fields = ups
                        .iter()
                        .map(|&(n, v)| {
                            field(&installed[flow.program].scope, n, resolve(v, flow.sid))
                        })
                        .collect();
                    pair.update(flow, fields);
                }
            }
        }
        let fi = rng.below(flows.len() as u64) as usize;
        let flow = &mut flows[fi];
        if case.random_agent_every > 0 && rng.chance(1, case.random_agent_every) {
            random_agent_msg(pair, flow, &installed, &controls, rng);
        }
        let tick = rng.range(case.tick_ns.0, case.tick_ns.1);
        let tick = if rng.chance(1, 50) {
            tick + rng.below(4_000_000_000)
        } else {
            tick
        };
        pair.advance(tick);
        let prims = random_prims(rng, flow);
        pair.step(flow, &prims, ack);
    }
    for flow in flows {
        pair.close(flow);
    }
    Ok(())
}

/// Random agent traffic: UPDATE_FIELD of controls, `Cwnd`, `Rate` (and an implicit register
/// the datapath must ignore), or a program switch carrying `Cwnd`, sometimes preceded by an
/// UPDATE_FIELD the switch must discard.
fn random_agent_msg(
    pair: &mut Pair<'_>,
    flow: &mut PairFlow<'_>,
    installed: &[Installed],
    controls: &[Vec<Reg>],
    rng: &mut Rng,
) {
    let random_fields = |rng: &mut Rng, prog: usize| {
        let mut fields = Vec::new();
        for _ in 0..rng.range(1, 3) {
            let v = if rng.chance(1, 2) {
                rng.below(200_000)
            } else {
                rng.value64()
            };
            let reg = match rng.below(6) {
                0 => Reg::Implicit(4, Type::Num(None)),
                1 => Reg::Implicit(5, Type::Num(None)),
                2 => Reg::Implicit(3, Type::Num(None)),
                _ if !controls[prog].is_empty() => rng.pick(&controls[prog]).clone(),
                _ => Reg::Implicit(4, Type::Num(None)),
            };
            fields.push((reg, v));
        }
        fields
    };
    if rng.chance(1, 20) {
        // A switch to a program that is not installed: both refuse it, the flow carries on.
        let msg = serialize::changeprog::Msg {
            sid: flow.sid,
            program_uid: 99,
            num_fields: 1,
            fields: vec![field(&installed[0].scope, "Cwnd", 1)],
        };
        let bytes = serialize::serialize(&msg).expect("serialize CHANGE_PROG");
        pair.deliver(&bytes, "CHANGE_PROG to an unknown uid");
    } else if installed.len() > 1 && rng.chance(1, 2) {
        if rng.chance(1, 4) {
            let f = random_fields(rng, flow.program);
            pair.update(flow, f);
        }
        let to = rng.below(installed.len() as u64) as usize;
        let mut fields = vec![field(&installed[to].scope, "Cwnd", u64::from(flow.cwnd))];
        if rng.chance(1, 3) {
            fields.extend(random_fields(rng, to));
        }
        pair.change_prog(flow, to, &installed[to], fields);
    } else {
        let f = random_fields(rng, flow.program);
        pair.update(flow, f);
    }
}

// ---------------------------------------------------------------------------------------------
// The random program generator.

const NUM_PRIMS: &[&str] = &[
    "Ack.bytes_acked",
    "Ack.bytes_misordered",
    "Ack.ecn_bytes",
    "Ack.ecn_packets",
    "Ack.lost_pkts_sample",
    "Ack.now",
    "Ack.packets_acked",
    "Ack.packets_misordered",
    "Flow.bytes_in_flight",
    "Flow.bytes_pending",
    "Flow.packets_in_flight",
    "Flow.rate_incoming",
    "Flow.rate_outgoing",
    "Flow.rtt_sample_us",
];
const NUM_OPS: &[&str] = &["+", "-", "*", "/", "max", "min", "wrapped_max"];

struct Gen<'r> {
    rng: &'r mut Rng,
    num_reports: Vec<String>,
    bool_reports: Vec<String>,
    controls: Vec<String>,
    locals: Vec<String>,
    next_local: usize,
}

impl Gen<'_> {
    fn imm(&mut self) -> String {
        let v: u64 = match self.rng.below(10) {
            0..=4 => self.rng.below(11),
            5..=7 => self.rng.below(100_000),
            8 => self.rng.below(1 << 31),
            _ => *self.rng.pick(&[0, 1, 10, 1448, 0x3fff_ffff, (1 << 31) - 1]),
        };
        v.to_string()
    }

    fn default_value(&mut self) -> String {
        match self.rng.below(6) {
            0 => "+infinity".to_string(),
            1 => "1073741823".to_string(),
            _ => self.imm(),
        }
    }

    fn num_atom(&mut self) -> String {
        let r = self.rng.below(20);
        match r {
            0..=6 => (*self.rng.pick(NUM_PRIMS)).to_string(),
            7..=9 if !self.num_reports.is_empty() => self.rng.pick(&self.num_reports).clone(),
            10 | 11 if !self.controls.is_empty() => self.rng.pick(&self.controls).clone(),
            12 if !self.locals.is_empty() => self.rng.pick(&self.locals).clone(),
            13 => "Cwnd".to_string(),
            14 => (*self.rng.pick(&["Rate", "Micros"])).to_string(),
            _ => self.imm(),
        }
    }

    fn num_expr(&mut self, depth: u32) -> String {
        if depth == 0 || self.rng.chance(1, 3) {
            return self.num_atom();
        }
        let op = *self.rng.pick(NUM_OPS);
        let l = self.num_expr(depth - 1);
        let r = self.num_expr(depth - 1);
        format!("({op} {l} {r})")
    }

    fn bool_atom(&mut self) -> String {
        match self.rng.below(4) {
            0 if !self.bool_reports.is_empty() => self.rng.pick(&self.bool_reports).clone(),
            1 => "Flow.was_timeout".to_string(),
            2 => "true".to_string(),
            _ => "false".to_string(),
        }
    }

    /// A boolean operation (never a bare atom: portus wants an operation or a literal at the
    /// top of a `when`).
    fn bool_op(&mut self, depth: u32) -> String {
        if depth >= 2 && self.rng.chance(1, 3) {
            let op = *self.rng.pick(&["&&", "||"]);
            let l = self.bool_expr(depth - 1);
            let r = self.bool_expr(depth - 1);
            return format!("({op} {l} {r})");
        }
        let op = *self.rng.pick(&[">", "<", "=="]);
        let l = self.num_expr(depth - 1);
        let r = self.num_expr(depth - 1);
        format!("({op} {l} {r})")
    }

    fn bool_expr(&mut self, depth: u32) -> String {
        if depth == 0 || self.rng.chance(1, 4) {
            return self.bool_atom();
        }
        self.bool_op(depth)
    }

    fn condition(&mut self) -> String {
        match self.rng.below(16) {
            0 | 1 => "true".to_string(),
            2 => "false".to_string(),
            _ => {
                let d = self.rng.range(1, 3) as u32;
                self.bool_op(d)
            }
        }
    }

    /// A Report or control register (the targets of `if`, `!if` and `ewma`).
    fn stateful_target(&mut self) -> Option<String> {
        let n = self.num_reports.len() + self.controls.len();
        if n == 0 {
            return None;
        }
        let i = self.rng.below(n as u64) as usize;
        Some(if i < self.num_reports.len() {
            self.num_reports[i].clone()
        } else {
            self.controls[i - self.num_reports.len()].clone()
        })
    }

    fn statement(&mut self) -> String {
        loop {
            match self.rng.below(40) {
                0..=11 => {
                    if let Some(t) = self.stateful_target() {
                        let d = self.rng.below(4) as u32;
                        return format!("(:= {t} {})", self.num_expr(d));
                    }
                }
                12..=17 => {
                    if let Some(t) = self.stateful_target() {
                        let d = self.rng.below(3) as u32;
                        let e = match self.rng.below(3) {
                            0 => format!("(if {} {})", self.bool_expr(2), self.num_expr(d)),
                            1 => format!("(!if {} {})", self.bool_expr(2), self.num_expr(d)),
                            _ => format!("(ewma {} {})", self.rng.below(12), self.num_expr(d + 1)),
                        };
                        return format!("(:= {t} {e})");
                    }
                }
                18..=20 => {
                    if self.next_local < 6 && (self.locals.is_empty() || self.rng.chance(1, 2)) {
                        let name = format!("l{}", self.next_local);
                        self.next_local += 1;
                        let s = format!("(:= {name} {})", self.num_expr(2));
                        self.locals.push(name);
                        return s;
                    } else if !self.locals.is_empty() {
                        let name = self.rng.pick(&self.locals).clone();
                        return format!("(:= {name} {})", self.num_expr(3));
                    }
                }
                21 | 22 => {
                    if !self.bool_reports.is_empty() {
                        let t = self.rng.pick(&self.bool_reports).clone();
                        return format!("(:= {t} {})", self.bool_expr(3));
                    }
                }
                23..=27 => return format!("(:= Cwnd {})", self.num_expr(3)),
                28..=30 => return format!("(:= Rate {})", self.num_expr(2)),
                31..=34 => return "(report)".to_string(),
                35..=37 => return "(fallthrough)".to_string(),
                38 => return format!("(:= Micros {})", self.imm()),
                _ => return format!("(:= Cwnd (+ Cwnd {}))", self.num_atom()),
            }
        }
    }

    fn program(&mut self) -> String {
        let mut defs = String::from("(def (Report");
        for i in 0..self.rng.range(1, 5) {
            let vol = if self.rng.chance(1, 2) {
                "volatile "
            } else {
                ""
            };
            if self.rng.chance(1, 6) {
                let b = if self.rng.chance(1, 2) {
                    "true"
                } else {
                    "false"
                };
                write!(defs, " ({vol}b{i} {b})").unwrap();
                self.bool_reports.push(format!("Report.b{i}"));
            } else {
                let v = self.default_value();
                write!(defs, " ({vol}r{i} {v})").unwrap();
                self.num_reports.push(format!("Report.r{i}"));
            }
        }
        defs += ")";
        for i in 0..self.rng.below(4) {
            let vol = if self.rng.chance(1, 3) {
                "volatile "
            } else {
                ""
            };
            let v = self.default_value();
            write!(defs, " ({vol}c{i} {v})").unwrap();
            self.controls.push(format!("c{i}"));
        }
        defs += ")\n";
        let mut out = defs;
        for _ in 0..self.rng.range(1, 4) {
            let cond = self.condition();
            write!(out, "(when {cond}").unwrap();
            for _ in 0..self.rng.range(1, 5) {
                out += "\n    ";
                out += &self.statement();
            }
            out += ")\n";
        }
        out
    }
}

fn random_program(rng: &mut Rng) -> String {
    Gen {
        rng,
        num_reports: Vec::new(),
        bool_reports: Vec::new(),
        controls: Vec::new(),
        locals: Vec::new(),
        next_local: 0,
    }
    .program()
}

// ---------------------------------------------------------------------------------------------
// Hand-written corpus.

const PORTUS_BASIC: &str = "
    (def (Report.acked 0) (Control.num_invoked 0) (Report.cwnd 0) (Report.rate 0))
    (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Control.num_invoked (+ Control.num_invoked 1))
        (:= Report.cwnd Cwnd)
        (:= Report.rate Rate)
        (fallthrough)
    )
    (when (== Control.num_invoked 20)
        (report)
    )";

const PORTUS_PRESET: &str = "
    (def
        (Report
            (testFoo 0)
        )
        (foo 0)
    )
    (when true
        (:= Report.testFoo foo)
        (report)
    )";

const PORTUS_TIMING: &str = "
    (def (Report.acked 0) (Control.state 0) (Report.cwnd 0) (Report.rate 0))
    (when true
        (:= Report.acked Ack.bytes_acked)
        (:= Report.cwnd Cwnd)
        (:= Report.rate Rate)
        (fallthrough)
    )
    (when (&& (> Micros 3000000) (== Control.state 0))
        (:= Control.state 1)
        (report)
    )";

const PORTUS_TWOFLOW: &str = "
    (def (Control.number 0) (Report.value 0))
    (when (> Control.number 0)
        (:= Report.value Control.number)
        (:= Control.numer 0)
        (report)
    )";

const PORTUS_UPDATE: &str = "
    (def (Report.acked 0) (Report.cwnd 0) (Report.rate 0))
    (when true
        (:= Report.acked Ack.bytes_acked)
        (:= Report.cwnd Cwnd)
        (:= Report.rate Rate)
        (fallthrough)
    )
    (when (== Cwnd 42)
        (report)
    )
    (when (> Micros 10000000)
        (report)
    )";

const PORTUS_VOLATILE: &str = "
    (def
        (volatile foo1 0)
        (Report
            (volatile foo 0)
            (bar 0)
            (volatile sum 0)
        )
        (bar1 0)
    )
    (when true
        (:= Report.foo (+ Report.foo 1))
        (:= Report.bar (+ Report.bar 1))
        (:= foo1 (+ foo1 1))
        (:= bar1 (+ bar1 1))
        (:= Report.sum (+ foo1 bar1))
        (fallthrough)
    )
    (when (== Report.foo 10)
        (report)
    )";

/// Every operation, both report kinds, both control kinds, locals, `if`/`!if`/`ewma`.
const ALL_OPS: &str = "
    (def
        (Report
            (volatile sum 0) (volatile diff 0) (volatile prod 0) (volatile quot 0)
            (volatile eq false) (volatile gt false) (volatile lt false)
            (mx 0) (mn +infinity) (wmx 0)
            (volatile both false) (volatile either false)
            (cond 0) (ncond 0) (avg 0) (loc 0)
        )
        (ctl 7)
        (volatile vctl 0)
    )
    (when true
        (:= Report.sum (+ Report.sum Ack.bytes_acked))
        (:= Report.diff (- Flow.bytes_in_flight (min Flow.bytes_in_flight Ack.bytes_acked)))
        (:= Report.prod (* Ack.packets_acked ctl))
        (:= Report.quot (/ Flow.bytes_pending (+ Ack.packets_acked 1)))
        (:= Report.eq (== Ack.ecn_packets 0))
        (:= Report.gt (> Flow.rtt_sample_us 50000))
        (:= Report.lt (< Flow.rtt_sample_us 50000))
        (:= Report.mx (max Report.mx Flow.rtt_sample_us))
        (:= Report.mn (min Report.mn Flow.rtt_sample_us))
        (:= Report.wmx (wrapped_max Report.wmx Flow.bytes_pending))
        (:= Report.both (&& Report.eq Report.gt))
        (:= Report.either (|| Report.eq Flow.was_timeout))
        (:= Report.cond (if Report.gt Ack.bytes_acked))
        (:= Report.ncond (!if Report.gt Ack.packets_acked))
        (:= Report.avg (ewma 8 Flow.bytes_in_flight))
        (:= tmp (max Ack.bytes_acked Ack.bytes_misordered))
        (:= Report.loc (+ Report.loc tmp))
        (:= vctl (+ vctl 1))
        (fallthrough)
    )
    (when (> vctl 5)
        (:= Cwnd (+ Cwnd Ack.bytes_acked))
        (:= Rate (max Flow.rate_incoming 1))
        (report)
    )";

/// Fallthrough chains: the flag, once set, carries through later true clauses.
const FALLTHROUGH: &str = "
    (def (Report (volatile a 0) (volatile b 0) (volatile c 0) (volatile d 0)))
    (when (> Ack.bytes_acked 3000)
        (:= Report.a (+ Report.a 1))
        (fallthrough)
    )
    (when (> Ack.bytes_acked 1500)
        (:= Report.b (+ Report.b 1))
    )
    (when (> Ack.packets_acked 1)
        (:= Report.c (+ Report.c 1))
    )
    (when true
        (:= Report.d (+ Report.d 1))
        (:= Cwnd (+ Cwnd (* Report.d 10)))
        (report)
    )";

/// Division by zero on ACKs without packets: no cwnd, no report.
const DIV_ZERO: &str = "
    (def (Report (volatile per_pkt 0)))
    (when true
        (:= Report.per_pkt (/ Ack.bytes_acked Ack.packets_acked))
        (:= Cwnd (+ Cwnd Report.per_pkt))
        (report)
    )";

/// Underflow when more bytes are acked than the window holds.
const SUB_UNDERFLOW: &str = "
    (def (Report (volatile left 0)))
    (when true
        (:= Cwnd (- Cwnd Ack.bytes_acked))
        (:= Report.left Cwnd)
        (report)
    )";

/// 64-bit overflows: add and libccp's partial multiplication check.
const OVERFLOWS: &str = "
    (def (Report (volatile s 0) (volatile p 0)))
    (when true
        (:= Report.s (+ Flow.rate_outgoing Flow.rate_incoming))
        (:= Report.p (* Flow.rate_outgoing Flow.rate_incoming))
        (:= Rate Report.p)
        (report)
    )";

/// Infinity defaults (both spellings), cwnd/rate edge values: 0 (ignored), 2^32 (truncated).
const EDGES: &str = "
    (def
        (Report (minrtt +infinity) (old 1073741823) (volatile big 0))
        (lim +infinity)
    )
    (when true
        (:= Report.minrtt (min Report.minrtt Flow.rtt_sample_us))
        (:= Report.big (* 65536 65536))
        (fallthrough)
    )
    (when (== Ack.packets_acked 0)
        (:= Cwnd 0)
        (:= Rate 0)
        (report)
    )
    (when (== Ack.packets_acked 1)
        (:= Cwnd Report.big)
        (:= Rate lim)
        (report)
    )
    (when (> Ack.packets_acked 1)
        (:= Cwnd (min lim (+ Cwnd 1448)))
        (:= Rate (+ Report.big 1))
    )";

/// Micros: reset by writes, read against a control threshold; Ack.now is reported.
const TIMERS: &str = "
    (def (Report (volatile acked 0) (volatile at 0) (volatile m 0)) (period 40000))
    (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Report.at Ack.now)
        (:= Report.m Micros)
        (fallthrough)
    )
    (when (> Micros period)
        (:= Micros 0)
        (report)
    )";

/// A control set only by the agent steers the window.
const CONTROLLED: &str = "
    (def (Report (volatile acked 0)) (target 14480) (volatile gain 1))
    (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Cwnd (+ (min Cwnd target) (* gain 1448)))
        (fallthrough)
    )
    (when (> Report.acked 20000)
        (report)
    )";

fn hand_cases() -> Vec<Case> {
    let s = Src::new;
    let mut cases = Vec::new();

    let mut aimd = Case::new("agent AIMD", vec![s(aimd::AIMD_PROGRAM_SRC)]);
    aimd.tick_ns = (0, 30_000_000);
    cases.push(aimd);

    // portus's tests switch programs without fields (but preset's `foo`).
    let portus = |name: &str, src: &str| {
        let mut c = Case::new(name, vec![s(src)]);
        c.start_cwnd = false;
        c
    };
    cases.push(portus("portus basic", PORTUS_BASIC));

    let mut preset = portus("portus preset (CHANGE_PROG field)", PORTUS_PRESET);
    preset.start_fields = vec![("foo", Val::Const(52))];
    cases.push(preset);
    let preset_compiled = Src {
        text: PORTUS_PRESET.to_string(),
        presets: vec![("foo", 52)],
    };
    let mut preset = Case::new("portus preset (compile-time)", vec![preset_compiled]);
    preset.start_cwnd = false;
    cases.push(preset);

    let mut timing = portus("portus timing", PORTUS_TIMING);
    timing.tick_ns = (10_000_000, 50_000_000);
    cases.push(timing);

    let mut twoflow = portus("portus twoflow", PORTUS_TWOFLOW);
    twoflow.flows = 2;
    twoflow.updates = vec![(0, vec![("Control.number", Val::SidTimes(10))])];
    cases.push(twoflow);

    let mut update = portus("portus update", PORTUS_UPDATE);
    update.updates = vec![
        (0, vec![("Cwnd", Val::Const(42)), ("Rate", Val::Const(10))]),
        (150, vec![("Cwnd", Val::Const(42))]),
    ];
    update.tick_ns = (0, 100_000_000);
    cases.push(update);

    cases.push(portus("portus volatile", PORTUS_VOLATILE));

    let mut all_ops = Case::new("all ops", vec![s(ALL_OPS)]);
    all_ops.start_fields = vec![("ctl", Val::Const(3)), ("vctl", Val::Const(4))];
    all_ops.updates = vec![(100, vec![("ctl", Val::Const(9)), ("vctl", Val::Const(2))])];
    all_ops.flows = 2;
    cases.push(all_ops);

    cases.push(Case::new("fallthrough", vec![s(FALLTHROUGH)]));
    cases.push(Case::new("division by zero", vec![s(DIV_ZERO)]));
    cases.push(Case::new("sub underflow", vec![s(SUB_UNDERFLOW)]));
    cases.push(Case::new("add/mul overflow", vec![s(OVERFLOWS)]));

    let mut edges = Case::new("infinity and cwnd/rate edges", vec![s(EDGES)]);
    edges.updates = vec![(50, vec![("Rate", Val::Const(0)), ("Cwnd", Val::Const(0))])];
    cases.push(edges);

    let mut timers = Case::new("Micros and Ack.now", vec![s(TIMERS)]);
    timers.tick_ns = (0, 20_000_000);
    timers.updates = vec![(
        120,
        vec![("period", Val::Const(5_000)), ("Micros", Val::Const(7))],
    )];
    cases.push(timers);

    let mut controlled = Case::new("agent-set controls", vec![s(CONTROLLED)]);
    controlled.updates = vec![
        (
            60,
            vec![("target", Val::Const(100_000)), ("gain", Val::Const(3))],
        ),
        (200, vec![("gain", Val::Const(0))]),
    ];
    cases.push(controlled);

    let mut switching = Case::new(
        "program switching",
        vec![
            s(ALL_OPS),
            s(aimd::AIMD_PROGRAM_SRC),
            s(CONTROLLED),
            s(TIMERS),
        ],
    );
    switching.flows = 2;
    switching.acks = 600;
    switching.random_agent_every = 8;
    cases.push(switching);

    cases
}

// ---------------------------------------------------------------------------------------------

/// Runs [`RANDOM_PROGRAMS`] generated cases; returns what they compared.
fn run_random(pair: &mut Pair<'_>) -> Tally {
    let saved = pair.tally;
    pair.tally = Tally::default();
    let (mut refused, mut tmp_regs, mut too_long) = (0u64, 0u64, 0u64);
    let mut done = 0;
    let mut seed = 1u64;
    while done < RANDOM_PROGRAMS {
        seed += 1;
        let mut rng = Rng::new(seed);
        let mut programs = vec![Src::new(&random_program(&mut rng))];
        if rng.chance(1, 3) {
            programs.push(Src::new(&random_program(&mut rng)));
        }
        let mut case = Case::new(&format!("random seed {seed}"), programs);
        case.acks = RANDOM_ACKS;
        case.flows = if rng.chance(1, 4) { 2 } else { 1 };
        case.start_cwnd = rng.chance(3, 4);
        case.random_agent_every = 20;
        case.tick_ns = (0, 40_000_000);
        let failures = pair.mismatches.len();
        match run_case(pair, &case, &mut rng) {
            Ok(()) => done += 1,
            Err(Skip::Portus) => refused += 1,
            Err(Skip::TmpRegs) => tmp_regs += 1,
            Err(Skip::TooLong) => too_long += 1,
        }
        if pair.mismatches.len() > failures && failures < MAX_PRINTED {
            for (i, p) in case.programs.iter().enumerate() {
                println!("program {i} of {}:\n{}", case.name, p.text);
            }
        }
    }
    let random = std::mem::replace(&mut pair.tally, saved);
    println!(
        "random: {done} cases ({} programs) run; skipped: {refused} refused by portus, \
         {tmp_regs} using tmp registers >= 8, {too_long} of >= 256 instructions",
        random.programs
    );

    random
}

#[test]
fn runtime_matches_libccp() {
    let lib_sent: Sent = Arc::default();
    let mut lib = libccp::DatapathBuilder::default()
        .with_ops(LibOps(lib_sent.clone()))
        .with_id(0)
        .init()
        .expect("libccp init");
    use_virtual_clock(&mut lib);

    let our_sent: Sent = Arc::default();
    let clock = ManualClock::new(VCLOCK_NS.load(Ordering::SeqCst));
    let cfg = DatapathConfig {
        agent_timeout_ns: u64::MAX,
        // libccp keeps windows and rates in `uint32_t`: a wider value is cut, not saturated.
        wide_values: WideValues::Truncate,
        ..DatapathConfig::default()
    };
    let ours = Datapath::new(cfg, Recorder(our_sent.clone()), clock.clone());
    let mut pair = Pair {
        lib: &lib,
        lib_sent,
        ours,
        our_sent,
        clock,
        tally: Tally::default(),
        mismatches: Vec::new(),
        context: String::new(),
    };
    pair.take_sent();

    // Hand-written and portus programs.
    let mut rng = Rng::new(0xC0FF_EE00);
    for case in hand_cases() {
        let before = pair.tally;
        if let Err(skip) = run_case(&mut pair, &case, &mut rng) {
            panic!("hand-written case {} not runnable: {skip:?}", case.name);
        }
        let t = pair.tally;
        println!(
            "{:40} acks {:5} measures {:5} reports {:5} cwnd {:5} rate {:5} faults {:5}",
            case.name,
            t.acks - before.acks,
            t.measures - before.measures,
            t.reports - before.reports,
            t.cwnd_sets - before.cwnd_sets,
            t.rate_sets - before.rate_sets,
            t.faults - before.faults,
        );
    }
    let hand = pair.tally;

    let random = run_random(&mut pair);

    let mut total = hand;
    total.add(&random);
    for (name, t) in [("hand-written", hand), ("random", random), ("total", total)] {
        println!(
            "{name}: {} programs, {} ACK steps, {} MEASURE messages matched ({} reports), \
             {} cwnd and {} rate settings matched, {} faults matched, {} agent messages \
             ({} CHANGE_PROG, {} UPDATE_FIELD)",
            t.programs,
            t.acks,
            t.measures,
            t.reports,
            t.cwnd_sets,
            t.rate_sets,
            t.faults,
            t.agent_msgs,
            t.switches,
            t.updates,
        );
    }
    println!("mismatches: {}", pair.mismatches.len());
    assert!(
        pair.mismatches.is_empty(),
        "{} mismatches between libccp and the runtime",
        pair.mismatches.len()
    );
}
