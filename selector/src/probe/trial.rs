//! The trial: a switch the models propose is measured on the path before the flow keeps it.
//!
//! After the probe, the models name the candidate with the largest predicted gain. Instead of
//! switching for good, the flow measures its start candidate for one window (the reference:
//! after the probe, so past the start's slow start), switches to the proposed candidate, lets
//! the switch settle, measures it for one window, and keeps it only if it measured better than
//! the reference (by `min_gain`); otherwise it goes back to the start. At most two swaps per
//! flow, and a proposal the models got wrong costs one window and a settle, not the rest of
//! the flow. TCP-RL (`PAPERS.md` §1.2) converges by trying schemes on the path too ("within
//! 3 trials"); here the models choose which one to try.
//!
//! A window's score is the mode's objective measured by the flow itself ([`WindowScore`]):
//! ln(delivery rate, Mbit/s / mean RTT, ms) for the default mode, ln(delivery rate) - 2 ln(RTT
//! p95) for delay-sensitive flows, ln(delivery rate) for throughput-sensitive ones. The flow
//! cannot see other flows, so in competition its own share stands for the friendly objective.

use ccp_algorithms::Measurement;
use ccp_datapath::stats::percentile_unsorted;
use serde::{Deserialize, Serialize};

use crate::antelope::reward::Mode;

/// The trial's windows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// Shortest measuring window (reference and trial), ms.
    pub window_ms: u64,
    /// Shortest measuring window in minimum RTTs.
    pub window_rtts: u32,
    /// Time left out after the switch before the trial window starts, ms.
    pub settle_ms: u64,
    /// The same in minimum RTTs.
    pub settle_rtts: u32,
    /// How much better (ln units) the trial must measure than the reference to be kept.
    pub min_gain: f64,
    /// A proposal predicted to gain at least this much (ln units) is kept without a trial: a
    /// short window under-measures what an aggressive candidate wins against competing flows,
    /// which back off over many RTTs.
    pub confident_gain: f64,
}

impl Default for Trial {
    /// 1.5 s and 8 RTTs per window, 0.5 s and 2 RTTs to settle, kept when it measures better at
    /// all: about 4 s of a 30-s flow on a 100-ms path.
    fn default() -> Self {
        Self {
            window_ms: 1_500,
            window_rtts: 8,
            settle_ms: 500,
            settle_rtts: 2,
            min_gain: 0.0,
            confident_gain: f64::INFINITY,
        }
    }
}

impl Trial {
    fn window_us(&self, min_rtt_us: u64) -> u64 {
        (self.window_ms * 1_000).max(u64::from(self.window_rtts) * min_rtt_us)
    }

    fn settle_us(&self, min_rtt_us: u64) -> u64 {
        (self.settle_ms * 1_000).max(u64::from(self.settle_rtts) * min_rtt_us)
    }
}

/// One measuring window: what the flow delivered and the RTTs it saw.
#[derive(Debug, Clone, Default)]
pub struct WindowScore {
    first_us: Option<u64>,
    last_us: u64,
    delivered_bytes: u64,
    rtts_us: Vec<u64>,
}

impl WindowScore {
    /// Adds one report (the first report only starts the window's clock: the bytes it
    /// acknowledges were sent before the window).
    pub fn push(&mut self, m: &Measurement, now_us: u64) {
        if self.first_us.is_none() {
            self.first_us = Some(now_us);
            self.last_us = now_us;
            return;
        }
        self.delivered_bytes = self
            .delivered_bytes
            .saturating_add(m.acked_bytes.saturating_add(m.sacked_bytes));
        if m.rtt_us > 0 {
            self.rtts_us.push(m.rtt_us);
        }
        self.last_us = self.last_us.max(now_us);
    }

    /// Time covered, µs.
    pub fn elapsed_us(&self) -> u64 {
        self.first_us.map_or(0, |f| self.last_us.saturating_sub(f))
    }

    /// The mode's objective over the window (ln units); `None` before two reports with an RTT.
    pub fn score(&self, mode: Mode) -> Option<f64> {
        let elapsed = self.elapsed_us();
        if elapsed == 0 || self.rtts_us.is_empty() {
            return None;
        }
        let mbps = (self.delivered_bytes as f64 * 8.0 / elapsed as f64).max(1e-3);
        let mean_ms = self.rtts_us.iter().sum::<u64>() as f64 / self.rtts_us.len() as f64 / 1e3;
        // The harness's p95 rule (nearest rank), so a trial measures what the bench scores.
        let p95_us = percentile_unsorted(&mut self.rtts_us.clone(), 950).unwrap_or(0);
        let p95_ms = p95_us as f64 / 1e3;
        Some(match mode {
            Mode::Default => mbps.ln() - mean_ms.max(1e-3).ln(),
            Mode::Delay => mbps.ln() - 2.0 * p95_ms.max(1e-3).ln(),
            Mode::Throughput => mbps.ln(),
        })
    }
}

/// Where a flow is in its trial.
#[derive(Debug, Clone)]
pub(super) enum Stage {
    /// Measuring the start candidate after the probe.
    Reference { target: usize, window: WindowScore },
    /// Switched (or switching) to `target`; measuring it once settled.
    Trying {
        target: usize,
        reference: f64,
        switched_us: Option<u64>,
        window: WindowScore,
    },
}

/// What a flow's trial works with besides each report.
#[derive(Debug, Clone, Copy)]
pub(super) struct TrialFlow<'a> {
    /// The windows.
    pub(super) trial: &'a Trial,
    /// The flow's preference mode (the objective measured).
    pub(super) mode: Mode,
    /// The candidate the flow started (and was probed) on.
    pub(super) start: usize,
    /// The flow's smallest RTT so far, µs.
    pub(super) min_rtt_us: u64,
}

/// What a stage step asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Keep going on this candidate.
    Run(usize),
    /// The trial is over: keep this candidate for good.
    Done(usize),
}

impl Stage {
    /// One report on `current` (the active candidate).
    pub(super) fn step(
        &mut self,
        flow: &TrialFlow<'_>,
        current: usize,
        m: &Measurement,
        now_us: u64,
    ) -> Step {
        let TrialFlow {
            trial,
            mode,
            start,
            min_rtt_us,
        } = *flow;
        match self {
            Stage::Reference { target, window } => {
                let target = *target;
                window.push(m, now_us);
                if window.elapsed_us() < trial.window_us(min_rtt_us) {
                    return Step::Run(start);
                }
                let Some(reference) = window.score(mode) else {
                    return Step::Done(start);
                };
                *self = Stage::Trying {
                    target,
                    reference,
                    switched_us: None,
                    window: WindowScore::default(),
                };
                Step::Run(target)
            }
            Stage::Trying {
                target,
                reference,
                switched_us,
                window,
            } => {
                if current != *target {
                    // The selector has not switched yet (a loss episode holds it).
                    return Step::Run(*target);
                }
                let since = *switched_us.get_or_insert(now_us);
                if now_us.saturating_sub(since) < trial.settle_us(min_rtt_us) {
                    return Step::Run(*target);
                }
                window.push(m, now_us);
                if window.elapsed_us() < trial.window_us(min_rtt_us) {
                    return Step::Run(*target);
                }
                match window.score(mode) {
                    Some(s) if s > *reference + trial.min_gain => Step::Done(*target),
                    _ => Step::Done(start),
                }
            }
        }
    }

    /// The measured scores so far: (reference, trial).
    pub(super) fn scores(&self, mode: Mode) -> (Option<f64>, Option<f64>) {
        match self {
            Stage::Reference { window, .. } => (window.score(mode), None),
            Stage::Trying {
                reference, window, ..
            } => (Some(*reference), window.score(mode)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(acked: u64, rtt_us: u64) -> Measurement {
        Measurement {
            acked_bytes: acked,
            rtt_us,
            ..Measurement::default()
        }
    }

    #[test]
    fn a_window_scores_the_modes_objective_from_its_own_reports() {
        let mut w = WindowScore::default();
        // 10 Mbit/s (62,500 bytes per 50 ms) at RTTs of 100 ms, and one of 200 ms.
        for i in 0..=20u64 {
            let rtt = if i == 10 { 200_000 } else { 100_000 };
            w.push(&report(62_500, rtt), i * 50_000);
        }
        assert_eq!(w.elapsed_us(), 1_000_000);
        let mean = (19.0 * 100.0 + 200.0) / 20.0;
        assert!((w.score(Mode::Default).unwrap() - (10f64.ln() - f64::ln(mean))).abs() < 1e-9);
        assert!((w.score(Mode::Throughput).unwrap() - 10f64.ln()).abs() < 1e-9);
        // p95 of 20 samples, nearest rank: the 19th, 100 ms.
        assert!((w.score(Mode::Delay).unwrap() - (10f64.ln() - 2.0 * 100f64.ln())).abs() < 1e-9);
        assert!(WindowScore::default().score(Mode::Default).is_none());
    }

    fn flow(trial: &Trial) -> TrialFlow<'_> {
        TrialFlow {
            trial,
            mode: Mode::Throughput,
            start: 0,
            min_rtt_us: 50_000,
        }
    }

    fn run(
        stage: &mut Stage,
        trial: &Trial,
        current: usize,
        mbps: f64,
        from_us: u64,
    ) -> (Step, u64) {
        let per_report = (mbps * 1e6 / 8.0 * 0.05) as u64;
        let mut now = from_us;
        loop {
            now += 50_000;
            let s = stage.step(&flow(trial), current, &report(per_report, 50_000), now);
            match s {
                Step::Run(c) if c == current => {}
                other => return (other, now),
            }
        }
    }

    #[test]
    fn a_trial_keeps_the_target_only_when_it_measures_better() {
        let trial = Trial::default();
        for (start_mbps, target_mbps, keep) in [(5.0, 8.0, true), (8.0, 5.0, false)] {
            let mut stage = Stage::Reference {
                target: 2,
                window: WindowScore::default(),
            };
            // The reference runs on the start (0) until its window is full, then asks for 2.
            let (s, t) = run(&mut stage, &trial, 0, start_mbps, 0);
            assert_eq!(s, Step::Run(2));
            assert!(t >= 1_500_000);
            // Until the selector has switched, it keeps asking for 2.
            assert_eq!(
                stage.step(&flow(&trial), 0, &report(1, 1), t + 1),
                Step::Run(2)
            );
            let (s, t2) = run(&mut stage, &trial, 2, target_mbps, t);
            assert_eq!(
                s,
                Step::Done(if keep { 2 } else { 0 }),
                "{start_mbps} -> {target_mbps}"
            );
            // Settle (0.5 s) and a full window (1.5 s) after the switch.
            assert!(t2 - t >= 2_000_000, "{}", t2 - t);
        }
    }
}
