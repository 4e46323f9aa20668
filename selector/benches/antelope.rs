//! One `antelope` decision over the nine candidates (issue 5 target: p99 <= 50 µs; Antelope
//! needed 135-140 ms per prediction in user space).
//!
//! The models are fitted here on synthetic samples with the real shape (nine candidates,
//! depth-6 trees, 40 per model); every report closes a data unit, so every call predicts with
//! all nine regressors, updates the IP-level counts and records the explanation. Criterion
//! gives the median; a timed pass of 200,000 decisions then prints p50/p99/p999.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Instant;

use ccp_algorithms::Measurement;
use ccp_datapath::stats::percentile;
use ccp_selector::antelope::{Antelope, AntelopeConfig, ModelSet, Sample};
use ccp_selector::{Features, FlowContext, SelectionPolicy};
use criterion::{Criterion, criterion_group, criterion_main};

const NAMES: [&str; 9] = [
    "cubic", "reno", "bbr", "copa", "vegas", "westwood", "illinois", "c2tcp", "vivace",
];

fn models() -> ModelSet {
    let mut samples = Vec::new();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64
    };
    for (k, name) in NAMES.iter().enumerate() {
        for _ in 0..3_000 {
            let f = [
                20.0 + 200.0 * next(),
                20.0 + 30.0 * next(),
                5.0 * next(),
                10.0 + 300.0 * next(),
                1e3 + 2e5 * next(),
                1e3 + 2e5 * next(),
                10.0 + 150.0 * next(),
            ];
            let r = (f[5] / f[4]) * (1.0 + 0.1 * k as f64) - f[2] * 0.05 + 0.1 * next();
            samples.push(Sample {
                features: f,
                next_cca: (*name).into(),
                rewards: [r, r * 0.5, r * 2.0],
            });
        }
    }
    ModelSet::train(&samples, 20).unwrap()
}

fn bench(c: &mut Criterion) {
    let shared = Antelope::new(AntelopeConfig::default(), Arc::new(models()));
    let mut policy = shared.policy(&FlowContext::for_candidates(&NAMES));
    let mut now_us = 0u64;
    let mut step = move |p: &mut dyn SelectionPolicy| {
        now_us += 50_000;
        let m = Measurement {
            now_us,
            acked_bytes: 30 * 1448,
            rtt_us: 50_000 + (now_us / 50_000 % 7) * 3_000,
            min_rtt_us: 50_000,
            rate_incoming_bytes_per_sec: 1_250_000,
            ..Measurement::default()
        };
        p.decide(&Features {
            measurement: &m,
            current: 0,
            candidates: &NAMES,
            now_us,
            srtt_us: m.rtt_us,
            reports: 1,
        })
    };
    c.bench_function("antelope decision, 9 candidates", |b| {
        b.iter(|| step(&mut policy));
    });
    let mut samples_ns: Vec<u64> = (0..200_000)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(step(&mut policy));
            t.elapsed().as_nanos() as u64
        })
        .collect();
    samples_ns.sort_unstable();
    let q = |per_mille| percentile(&samples_ns, per_mille).unwrap_or(0) as f64 / 1e3;
    println!(
        "antelope decision: p50 {:.2} µs, p99 {:.2} µs, p999 {:.2} µs over {} decisions",
        q(500),
        q(990),
        q(999),
        samples_ns.len()
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
