//! The documented range of every numeric field (`docs/eval.md`), checked at load.

use toml::Spanned;

use super::ScenarioError;
use super::raw::{Src, fmt_num};

/// Longest run: a day of simulated time, s.
pub const MAX_DURATION_S: f64 = 86_400.0;
/// Most seeds (a `seeds` list or `repetitions`).
pub const MAX_SEEDS: usize = 10_000;
/// Most conditions in a scenario (listed and grid together).
pub const MAX_CONDITIONS: usize = 100_000;
/// Most values in one `[grid]` list.
pub const MAX_GRID_VALUES: usize = 1_000;
/// Most phases of one condition.
pub const MAX_PHASES: usize = 1_000;
/// Most flows in one run (every `[[flows]]` and `[[cross]]` group together).
pub const MAX_FLOWS_PER_RUN: usize = 10_000;
/// Largest finite flow, bytes (1 TB).
pub const MAX_SIZE_BYTES: u64 = 1_000_000_000_000;
/// Largest `buffer_bytes` (1 GB).
pub const MAX_BUFFER_BYTES: u64 = 1_000_000_000;
/// Largest `buffer_pkts`.
pub const MAX_BUFFER_PKTS: u64 = 1_000_000;
/// Most time-series points per flow (`duration_s` over `series_interval_ms`).
pub const MAX_SERIES_POINTS: f64 = 100_000.0;
/// Most packets the bottleneck can carry in one run: the condition's highest rate (a phase's,
/// or a trace's mean) times `duration_s`, over 1500-byte packets. The simulator keeps a few
/// bytes per packet (every RTT and queueing-delay sample), so this is about 2 GB per run, and
/// about a minute at its 4-5 M packets/s.
pub const MAX_PACKETS_PER_RUN: f64 = 2.5e8;
/// Largest trace file read, bytes.
pub const MAX_TRACE_FILE_BYTES: u64 = 256 << 20;
/// Latest timestamp in a trace file, ms (a day).
pub const MAX_TRACE_MS: u64 = 86_400_000;

/// The range of a numeric field: finite, between two bounds, each open or closed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Range {
    lo: f64,
    lo_open: bool,
    hi: f64,
    hi_open: bool,
    unit: &'static str,
}

impl Range {
    /// `[lo, hi]`.
    pub(super) const fn closed(lo: f64, hi: f64, unit: &'static str) -> Self {
        Self {
            lo,
            lo_open: false,
            hi,
            hi_open: false,
            unit,
        }
    }

    /// `(lo, hi]`.
    pub(super) const fn above(lo: f64, hi: f64, unit: &'static str) -> Self {
        Self {
            lo_open: true,
            ..Self::closed(lo, hi, unit)
        }
    }

    /// `[lo, hi)`.
    pub(super) const fn below(lo: f64, hi: f64, unit: &'static str) -> Self {
        Self {
            hi_open: true,
            ..Self::closed(lo, hi, unit)
        }
    }

    pub(super) fn contains(self, x: f64) -> bool {
        x.is_finite()
            && if self.lo_open {
                x > self.lo
            } else {
                x >= self.lo
            }
            && if self.hi_open {
                x < self.hi
            } else {
                x <= self.hi
            }
    }

    pub(super) fn message(self) -> String {
        format!(
            "must be a finite number in {}{}, {}{}{}{}",
            if self.lo_open { '(' } else { '[' },
            fmt_num(self.lo),
            fmt_num(self.hi),
            if self.hi_open { ')' } else { ']' },
            if self.unit.is_empty() { "" } else { " " },
            self.unit
        )
    }
}

pub(super) const DURATION_S: Range =
    Range::above(0.0, MAX_DURATION_S, "s (a day of simulated time)");
pub(super) const BW_MBPS: Range = Range::closed(0.01, 100_000.0, "Mbit/s");
pub(super) const RTT_MS: Range = Range::closed(0.01, 10_000.0, "ms");
pub(super) const LOSS: Range = Range::below(0.0, 1.0, "(a probability)");
pub(super) const BUFFER_BDP: Range = Range::above(0.0, 1_000.0, "BDPs");
pub(super) const ACK_AGGREGATION_MS: Range = Range::closed(0.0, 1_000.0, "ms");
pub(super) const ON_OFF_S: Range = Range::closed(0.001, MAX_DURATION_S, "s");
pub(super) const CELLULAR_MEAN_MBPS: Range = Range::closed(
    crate::traces::MIN_MEAN_MBPS,
    crate::traces::MAX_MEAN_MBPS,
    "Mbit/s",
);
pub(super) const CELLULAR_PERIOD_S: Range = Range::closed(
    crate::traces::MIN_PERIOD_S,
    crate::traces::MAX_PERIOD_S,
    "s",
);
pub(super) const CELLULAR_SIGMA: Range = Range::closed(0.0, crate::traces::MAX_SIGMA, "");

/// Checks a float field against its range and returns it.
pub(super) fn in_range(
    src: &Src<'_>,
    v: &Spanned<f64>,
    field: impl Into<String>,
    r: Range,
) -> Result<f64, ScenarioError> {
    in_range_at(src, v, *v.get_ref(), field, r)
}

/// Checks `x`, a value inside `at` (a list or a table), against its range.
pub(super) fn in_range_at<T>(
    src: &Src<'_>,
    at: &Spanned<T>,
    x: f64,
    field: impl Into<String>,
    r: Range,
) -> Result<f64, ScenarioError> {
    if r.contains(x) {
        Ok(x)
    } else {
        Err(src.invalid(at, field.into(), &r.message()))
    }
}

/// Checks the packets a condition's bottleneck can carry in a run ([`MAX_PACKETS_PER_RUN`]).
pub(super) fn packets_per_run<T>(
    src: &Src<'_>,
    at: &Spanned<T>,
    field: String,
    peak_mbps: f64,
    duration_s: f64,
) -> Result<(), ScenarioError> {
    let packets = peak_mbps * 1e6 * duration_s / (1500.0 * 8.0);
    if packets <= MAX_PACKETS_PER_RUN {
        return Ok(());
    }
    Err(src.invalid(
        at,
        field,
        &format!(
            "{} Mbit/s for duration_s = {} s is {packets:.3e} packets through the bottleneck in \
             one run; at most {MAX_PACKETS_PER_RUN:.1e} (the simulator keeps every packet's \
             delay samples): shorten the run or lower the rate",
            fmt_num(peak_mbps),
            fmt_num(duration_s)
        ),
    ))
}
