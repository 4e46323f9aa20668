//! Support shared by the simulator tests: an algorithm that hands a flow from one algorithm to
//! another mid-run, as the selector will, and records what happened; the flows' late
//! throughputs and their Jain index.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use std::marker::PhantomData;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use ccp_algorithms::{
    Algorithm, AlgorithmConfig, Control, FlowStart, Handoff, Measurement, ProgramSpec,
};

/// Handoffs performed by [`SwapConfig`] flows so far.
pub(crate) static SWAPS: AtomicU64 = AtomicU64::new(0);

/// The last handoff: (time, smoothed RTT handed over, µs; the incoming algorithm set a rate).
static LAST_SWAP: Mutex<(u64, u64, bool)> = Mutex::new((0, 0, false));

/// Takes (and clears) the record of the last handoff.
pub(crate) fn take_last_swap() -> (u64, u64, bool) {
    std::mem::take(&mut *LAST_SWAP.lock().unwrap())
}

/// Runs `A`, then at the first report from `at_us` on hands the flow over to `B`.
pub(crate) struct SwapConfig<A, B> {
    /// When to hand over, µs.
    pub(crate) at_us: u64,
    /// The two algorithms.
    pub(crate) algs: PhantomData<fn() -> (A, B)>,
}

struct Swap {
    current: Box<dyn Algorithm>,
    next: Option<Box<dyn Algorithm>>,
    at_us: u64,
}

impl<A: AlgorithmConfig + Default, B: AlgorithmConfig + Default> AlgorithmConfig
    for SwapConfig<A, B>
{
    const NAME: &'static str = "swap";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        // Whatever either algorithm installs: the whole shared library.
        &ccp_algorithms::programs::ALL
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        Box::new(Swap {
            current: A::default().build(start),
            next: Some(B::default().build(start)),
            at_us: self.at_us,
        })
    }
}

impl Algorithm for Swap {
    fn name(&self) -> &'static str {
        "swap"
    }
    fn programs(&self) -> &'static [&'static ProgramSpec] {
        self.current.programs()
    }
    fn activate(&mut self, handoff: &Handoff) -> Control {
        self.current.activate(handoff)
    }
    fn on_report(&mut self, report: &Measurement) -> Control {
        let control = self.current.on_report(report);
        if report.now_us >= self.at_us
            && let Some(mut next) = self.next.take()
        {
            let handoff = self.current.handoff();
            let control = next.activate(&handoff);
            *LAST_SWAP.lock().unwrap() = (report.now_us, handoff.srtt_us, control.pacing.is_some());
            SWAPS.fetch_add(1, Ordering::Relaxed);
            self.current = next;
            return control;
        }
        control
    }
    fn handoff(&self) -> Handoff {
        self.current.handoff()
    }
}

/// Throughput of each flow between `from_ns` and the end of its series, bits per second.
pub(crate) fn late_throughputs(r: &ccp_datapath::sim::SimResult, from_ns: u64) -> Vec<f64> {
    r.flows
        .iter()
        .map(|f| {
            let at = |t: u64| {
                f.series
                    .iter()
                    .rfind(|s| s.t_ns <= t)
                    .map_or(0, |s| s.delivered_bytes)
            };
            let end = f.series.last().map_or(from_ns, |s| s.t_ns);
            let secs = end.saturating_sub(from_ns) as f64 / 1e9;
            (at(end) - at(from_ns)) as f64 * 8.0 / secs.max(1e-9)
        })
        .collect()
}

/// A flow's window around a handoff, in packets.
pub(crate) struct HandoffWindows {
    /// The last sample before the handoff.
    pub before: f64,
    /// Every sample of the first 100 ms after it (about an RTT on the tests' paths), rounded.
    pub first_rtt: Vec<f64>,
    /// The largest sample of the second after it.
    pub next_second: f64,
}

impl HandoffWindows {
    /// The first flow's window around a handoff at `at_ns`, in packets of `mss_bytes`.
    pub(crate) fn of(r: &ccp_datapath::sim::SimResult, at_ns: u64, mss_bytes: u32) -> Self {
        const MS: u64 = 1_000_000;
        let f = &r.flows[0];
        let pkts = |s: &ccp_datapath::sim::Sample| f64::from(s.cwnd_bytes) / f64::from(mss_bytes);
        let after = |span_ns: u64| {
            f.series
                .iter()
                .filter(move |s| s.t_ns >= at_ns && s.t_ns < at_ns + span_ns)
        };
        Self {
            before: f
                .series
                .iter()
                .rfind(|s| s.t_ns < at_ns)
                .map(pkts)
                .expect("samples before the handoff"),
            first_rtt: after(100 * MS).map(|s| pkts(s).round()).collect(),
            next_second: after(1_000 * MS).map(pkts).fold(0.0, f64::max),
        }
    }

    /// Prints the windows and asserts that the first RTT after the handoff kept the window
    /// within a factor of two of the one handed over.
    pub(crate) fn check_first_rtt(&self, label: &str, utilization: f64) {
        let Self {
            before,
            first_rtt,
            next_second,
        } = self;
        println!(
            "{label}: cwnd {before:.1} pkts before, {first_rtt:?} in the first RTT after, max {next_second:.1} in the next second; utilization {utilization:.3}"
        );
        assert!(
            first_rtt
                .iter()
                .all(|&w| w >= before / 2.0 && w <= before * 2.0),
            "{label}: the window left [cwnd/2, 2 cwnd] in the first RTT"
        );
    }

    /// Asserts that the window stayed at most `max_pkts` in the second after the handoff.
    pub(crate) fn check_next_second(&self, label: &str, max_pkts: f64) {
        let Self {
            before,
            next_second,
            ..
        } = self;
        assert!(
            *next_second <= max_pkts,
            "{label}: the window grew from {before:.1} to {next_second:.1} pkts in a second"
        );
    }
}

/// Jain's fairness index of `x` (0 when every value is 0).
pub(crate) fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    if sq <= 0.0 {
        0.0
    } else {
        s * s / (x.len() as f64 * sq)
    }
}
