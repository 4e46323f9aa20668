//! What the learned policies' decision benches share: the candidates a model was trained over
//! (read from its sidecar, so a retrained model is benched over its own candidates), a steady
//! synthetic report, and a timed pass of single decisions for the tail criterion cannot give.

#![allow(dead_code)]

use std::path::Path;

use ccp_algorithms::Measurement;
use ccp_datapath::stats::percentile;
use ccp_selector::Features;

/// The `candidates` of a model's sidecar JSON, leaked to `'static` (a bench loads one model).
pub(crate) fn sidecar_candidates(sidecar: &Path) -> Result<Vec<&'static str>, String> {
    let text =
        std::fs::read_to_string(sidecar).map_err(|e| format!("{}: {e}", sidecar.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", sidecar.display()))?;
    let list = v["candidates"]
        .as_array()
        .ok_or_else(|| format!("{}: no candidates", sidecar.display()))?;
    Ok(list
        .iter()
        .filter_map(serde_json::Value::as_str)
        .map(|s| &*Box::leak(s.to_string().into_boxed_str()))
        .collect())
}

/// A report at `now_us` of a steady 1.2 MB/s flow near 50 ms, one loss every `loss_every_us`.
pub(crate) fn report(now_us: u64, loss_every_us: u64) -> Measurement {
    Measurement {
        now_us,
        acked_bytes: 60_000,
        lost_pkts: u64::from(now_us.is_multiple_of(loss_every_us)),
        rtt_us: 50_000 + now_us % 7_000,
        min_rtt_us: 50_000,
        rate_incoming_bytes_per_sec: 1_200_000,
        ..Measurement::default()
    }
}

/// The features of `m` for a flow on candidate 1 of `names`.
pub(crate) fn features<'a>(
    m: &'a Measurement,
    now_us: u64,
    names: &'a [&'static str],
) -> Features<'a> {
    Features {
        measurement: m,
        current: 1,
        candidates: names,
        now_us,
        srtt_us: 50_000,
        reports: now_us / 50_000,
    }
}

/// Times `n` single calls of `decide(now_us)`, the clock moving `step_us` before each, and
/// returns "`n` samples: median, p99, max" in µs.
pub(crate) fn timed_pass(
    n: usize,
    step_us: u64,
    now_us: &mut u64,
    mut decide: impl FnMut(u64),
) -> String {
    let mut times_ns: Vec<u128> = (0..n)
        .map(|_| {
            *now_us += step_us;
            let t = std::time::Instant::now();
            decide(*now_us);
            t.elapsed().as_nanos()
        })
        .collect();
    times_ns.sort_unstable();
    let at = |per_mille| percentile(&times_ns, per_mille).unwrap_or(0) as f64 / 1e3;
    format!(
        "{} samples: median {:.2} us, p99 {:.2} us, max {:.2} us",
        times_ns.len(),
        at(500),
        at(990),
        at(1000)
    )
}
