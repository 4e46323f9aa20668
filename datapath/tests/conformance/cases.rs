//! Programs and cases: compiling a source, the scripted case, and running one on both datapaths.

use std::panic::{self, AssertUnwindSafe};

use ccp_datapath::runtime::Primitives;
use portus::lang::{self, Bin, Reg, Scope, Type};
use portus::serialize;

use crate::harness::{Installed, Pair, PairFlow};
use crate::{HAND_ACKS, MSS, Rng};

// ---------------------------------------------------------------------------------------------
// Programs and cases.

/// A source program with compile-time default overrides (portus `compile`'s `updates`).
#[derive(Clone)]
pub(crate) struct Src {
    pub(crate) text: String,
    pub(crate) presets: Vec<(&'static str, u32)>,
}

impl Src {
    pub(crate) fn new(text: &str) -> Self {
        Self {
            text: text.to_string(),
            presets: Vec::new(),
        }
    }
}

/// Why a program was not run.
#[derive(Debug)]
pub(crate) enum Skip {
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
pub(crate) enum Val {
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
pub(crate) struct Case {
    pub(crate) name: String,
    pub(crate) programs: Vec<Src>,
    pub(crate) flows: usize,
    pub(crate) acks: usize,
    /// Whether the first CHANGE_PROG carries the flow's initial `Cwnd`.
    pub(crate) start_cwnd: bool,
    /// Further fields sent with the first CHANGE_PROG.
    pub(crate) start_fields: Vec<(&'static str, Val)>,
    /// UPDATE_FIELD messages to every flow before the given ACK.
    pub(crate) updates: Vec<(usize, Vec<(&'static str, Val)>)>,
    /// Random UPDATE_FIELD / CHANGE_PROG traffic (1 in this many ACKs; 0: none).
    pub(crate) random_agent_every: u64,
    /// Clock advance per ACK, ns (uniform in the range).
    pub(crate) tick_ns: (u64, u64),
}

impl Case {
    pub(crate) fn new(name: &str, programs: Vec<Src>) -> Self {
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
pub(crate) fn run_case(pair: &mut Pair<'_>, case: &Case, rng: &mut Rng) -> Result<(), Skip> {
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
