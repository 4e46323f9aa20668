//! The path-change detector's cost per report (`ccp_selector::path_change`), on the two streams
//! a flow mostly gives it: a steady path (every sample near the floor) and a queue sawtooth over
//! a short path (windows opening and closing, delivery-rate samples queued).

#![allow(missing_docs)]

use std::hint::black_box;

use ccp_algorithms::Measurement;
use ccp_selector::{PathChange, PathChangeConfig};
use criterion::{Criterion, criterion_group, criterion_main};

/// A 10-ms report at `rtt_us` delivering `bytes_per_sec`.
fn report(now_us: u64, rtt_us: u64, bytes_per_sec: u64) -> Measurement {
    Measurement {
        now_us,
        acked_bytes: bytes_per_sec / 100,
        rtt_us,
        min_rtt_us: rtt_us,
        rate_incoming_bytes_per_sec: bytes_per_sec,
        ..Measurement::default()
    }
}

fn path_change(c: &mut Criterion) {
    let mut steady = PathChange::new(PathChangeConfig::default());
    let mut now_us = 0u64;
    c.bench_function("path_change_steady_path", |b| {
        b.iter(|| {
            now_us += 10_000;
            let m = report(now_us, 50_000 + now_us % 3_000, 1_200_000);
            black_box(steady.on_report(black_box(&m)))
        });
    });
    let mut sawtooth = PathChange::new(PathChangeConfig::default());
    let mut now_us = 0u64;
    c.bench_function("path_change_queue_sawtooth", |b| {
        b.iter(|| {
            now_us += 10_000;
            // 20-ms path, queue from 15 to 200 ms over 2 s, then drained by a loss.
            let phase = (now_us % 2_000_000) as f64 / 2e6;
            let rtt_us = if now_us < 100_000 {
                20_000
            } else {
                35_000 + (phase * 185_000.0) as u64
            };
            let m = report(now_us, rtt_us, 600_000 + (phase * 600_000.0) as u64);
            black_box(sawtooth.on_report(black_box(&m)))
        });
    });
}

criterion_group!(benches, path_change);
criterion_main!(benches);
