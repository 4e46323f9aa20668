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

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[path = "../support/aimd.rs"]
mod aimd;
mod cases;
mod corpus;
mod generator;
mod harness;
mod libccp_side;

use ccp_datapath::runtime::{Datapath, DatapathConfig, ManualClock, WideValues};

use crate::cases::{Case, Skip, Src, run_case};
use crate::corpus::hand_cases;
use crate::generator::random_program;
use crate::harness::{Pair, Recorder, Tally};
use crate::libccp_side::{LibOps, Sent, use_virtual_clock};

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
