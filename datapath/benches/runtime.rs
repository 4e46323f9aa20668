//! Criterion benches of the runtime alone: `invoke` on the ~20-instruction program of
//! `vm_vs_libccp`, and decoding (plus validating) that program's INSTALL.
//!
//! This binary must never link the `libccp` crate (its C symbol `log` replaces libm's, and
//! criterion's statistics call `f64::ln`).
//!
//! Run: `cargo bench -p ccp-datapath --bench runtime`

#![allow(
    missing_docs,
    reason = "criterion_group! generates an undocumented pub fn"
)]

use std::hint::black_box;

use ccp_datapath::runtime::program::Program;
use ccp_datapath::runtime::wire::{self, AgentMsg, DecodeLimits};
use ccp_datapath::runtime::{ManualClock, MonotonicClock};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod common;
use common::{VM_PROGRAM_SRC, VM_PROGRAM_UID, install_msg, our_datapath, prims};

fn bench_invoke(c: &mut Criterion) {
    let mut g = c.benchmark_group("invoke");
    g.throughput(Throughput::Elements(1));

    let clock = ManualClock::new(0);
    let Ok((mut dp, sid)) = our_datapath(clock.clone()) else {
        panic!("datapath setup failed");
    };
    let mut i = 0_u64;
    g.bench_function("program_20_instrs/manual_clock", |b| {
        b.iter(|| {
            clock.advance_ns(1_000);
            i += 1;
            black_box(dp.invoke(sid, black_box(&prims(i))))
        });
    });

    let Ok((mut dp, sid)) = our_datapath(MonotonicClock::new()) else {
        panic!("datapath setup failed");
    };
    g.bench_function("program_20_instrs/monotonic_clock", |b| {
        b.iter(|| {
            i += 1;
            black_box(dp.invoke(sid, black_box(&prims(i))))
        });
    });
    g.finish();
}

fn bench_install(c: &mut Criterion) {
    let Ok((_, install)) = install_msg(VM_PROGRAM_SRC, VM_PROGRAM_UID) else {
        panic!("portus could not compile the program");
    };
    let limits = DecodeLimits::default();
    let mut g = c.benchmark_group("install");
    g.throughput(Throughput::Bytes(install.len() as u64));
    g.bench_function("decode", |b| {
        b.iter(|| black_box(wire::decode_agent_msg(black_box(&install), &limits)));
    });
    g.bench_function("decode_and_validate", |b| {
        b.iter(|| {
            let Ok((
                AgentMsg::Install {
                    program_uid,
                    events,
                    instrs,
                },
                _,
            )) = wire::decode_agent_msg(black_box(&install), &limits)
            else {
                panic!("not an INSTALL");
            };
            black_box(Program::from_raw(program_uid, &events, &instrs))
        });
    });
    // The whole path of an INSTALL through a datapath (decode, validate, store).
    let Ok((mut dp, _)) = our_datapath(ManualClock::new(0)) else {
        panic!("datapath setup failed");
    };
    g.bench_function("datapath_recv_msg", |b| {
        b.iter(|| black_box(dp.recv_msg(black_box(&install))).is_ok());
    });
    g.finish();
}

criterion_group!(benches, bench_invoke, bench_install);
criterion_main!(benches);
