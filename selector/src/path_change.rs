//! Path-change detection from the RTT floor, and what the selector does when the path changed.
//!
//! A rise of the path's propagation delay (a route change, a handover, TCP-RL's dynamic path
//! going from 20 to 40 ms) leaves every algorithm that keeps an RTT minimum blind while the old
//! minimum lasts: Copa (a 10-s window) and Vegas (the flow's minimum: for good) read the new
//! delay as standing queue and slow down, C2TCP's target stays at a multiple of the old delay.
//! On TCP-RL's `dynamic` path Copa runs at 6 Mbit/s of 50 for 10.5 s after the change. TCP-RL
//! (`../shared/PAPERS.md` §1.2) answers a detected change by re-exploring schemes, each new
//! scheme starting fresh; a selector that carries RTT state across swaps must instead say which
//! part of that state the change made stale.
//!
//! The detector ([`PathChange`]) fires when three things hold together:
//! - the per-report minimum RTT has *stepped* from near the flow's floor to at least `rise`
//!   above it (and `min_rise_us` in absolute terms) within `step_rtts` floors;
//! - without falling back below that since, it settled within `settle_rtts` floors of its
//!   first sample above the threshold (kernel reports straddling the change pass through values
//!   in between) and then stayed within `flat` of its lowest sample for `window_rtts` floors (at
//!   least `min_window_us`);
//! - the mean delivery rate over that window (acknowledged bytes over its length) is at least
//!   `slowdown` below the highest delivery-rate sample of the `window_rtts` floors before the
//!   step.
//!
//! Each test separates a longer path from a queue. A queue that a window-based algorithm
//! builds grows by about a packet per RTT, so it takes many RTTs to lift the floor by half; it
//! sweeps up and down with the window; and a flow that keeps a standing queue is delivering at
//! the bottleneck's rate, not below it. A longer path moves every sample at once, and the
//! algorithms it blinds slow down and then sit on the new floor. On firing, the flow's floor
//! becomes the window's lowest sample. A datapath that reports no delivery rate never fires.
//!
//! When it fires the selector re-seats the active candidate: it hands the candidate its own
//! state (window, pacing, smoothed RTT, loss time) with the minimum RTT replaced by the new
//! floor, through the same `activate` a swap uses, and restarts the hysteresis (decisions
//! counted before the change no longer count). The policy is not told: it sees the path
//! through its own features, as before. Left out: decreases of the delay need no detector
//! (every windowed minimum takes a lower sample at once), and neither do rate or loss changes
//! (no algorithm here keeps state those make stale for longer than an RTT or a loss episode).

use std::collections::VecDeque;

use ccp_algorithms::Measurement;
use ccp_algorithms::rtt::lower_min;

/// Detector parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathChangeConfig {
    /// Relative rise of the floor that counts as a change (0.5: 50 % above the flow's floor).
    pub rise: f64,
    /// The rise must happen within this many floors of the last sample near the floor (less
    /// than half of the rise above it).
    pub step_rtts: f64,
    /// The samples must settle (the flat window start) within this many floors of the first
    /// sample above the threshold.
    pub settle_rtts: f64,
    /// Absolute rise that counts as a change, µs.
    pub min_rise_us: u64,
    /// Length of the window the new floor must hold for, in floors (old floor).
    pub window_rtts: f64,
    /// Shortest window, µs.
    pub min_window_us: u64,
    /// Largest spread of the window's samples over its floor (0.1: within 10 %).
    pub flat: f64,
    /// How far below the rate before the step the window's delivery rate must stay (0.3: at
    /// most 70 % of it).
    pub slowdown: f64,
}

impl Default for PathChangeConfig {
    fn default() -> Self {
        Self {
            rise: 0.5,
            step_rtts: 3.0,
            settle_rtts: 4.0,
            min_rise_us: 5_000,
            window_rtts: 8.0,
            min_window_us: 500_000,
            flat: 0.1,
            slowdown: 0.3,
        }
    }
}

impl PathChangeConfig {
    /// The parameters with every number made valid (finite, non-negative).
    fn sanitized(self) -> Self {
        let clean = |v: f64, default: f64| {
            if v.is_finite() && v >= 0.0 {
                v
            } else {
                default
            }
        };
        let d = Self::default();
        Self {
            rise: clean(self.rise, d.rise),
            step_rtts: clean(self.step_rtts, d.step_rtts),
            settle_rtts: clean(self.settle_rtts, d.settle_rtts),
            min_rise_us: self.min_rise_us,
            window_rtts: clean(self.window_rtts, d.window_rtts),
            min_window_us: self.min_window_us,
            flat: clean(self.flat, d.flat),
            slowdown: clean(self.slowdown, d.slowdown).min(1.0),
        }
    }
}

/// A run of samples above the threshold.
#[derive(Debug, Clone, Copy)]
struct Episode {
    /// When its first sample came, µs.
    start_us: u64,
    /// Whether it began with a step from near the floor; only then can it fire.
    stepped: bool,
    /// Highest delivery rate before it began, bytes/s.
    rate_before: u64,
    /// The current flat stretch of it, if any.
    window: Option<Window>,
}

/// A stretch of an episode whose samples are within `flat` of each other.
#[derive(Debug, Clone, Copy)]
struct Window {
    start_us: u64,
    min_us: u64,
    max_us: u64,
    /// Bytes acknowledged (cumulatively or selectively) in the window.
    acked_bytes: u64,
}

impl Window {
    fn at(now_us: u64, sample: u64) -> Self {
        Self {
            start_us: now_us,
            min_us: sample,
            max_us: sample,
            acked_bytes: 0,
        }
    }
}

/// Per-flow detector state.
#[derive(Debug, Clone)]
pub struct PathChange {
    config: PathChangeConfig,
    floor_us: u64,
    /// When the last sample near the floor came, µs.
    near_us: u64,
    /// Delivery-rate samples outside windows, (time µs, bytes/s), decreasing in rate: the
    /// front is the highest of the last `window_rtts` floors.
    rates: VecDeque<(u64, u64)>,
    episode: Option<Episode>,
    fired: u32,
}

impl PathChange {
    /// A detector that has seen nothing.
    pub fn new(config: PathChangeConfig) -> Self {
        Self {
            config: config.sanitized(),
            floor_us: 0,
            near_us: 0,
            rates: VecDeque::new(),
            episode: None,
            fired: 0,
        }
    }

    /// The flow's RTT floor as the detector holds it, µs (0: no sample yet).
    pub fn floor_us(&self) -> u64 {
        self.floor_us
    }

    /// Changes detected so far.
    pub fn fired(&self) -> u32 {
        self.fired
    }

    /// Feeds one report; returns the new floor (µs) when the path is judged to have changed.
    pub fn on_report(&mut self, m: &Measurement) -> Option<u64> {
        let sample = lower_min(0, [m.min_rtt_us, m.rtt_us]);
        if sample == 0 || m.now_us == 0 {
            return None;
        }
        let rate = m.rate_incoming_bytes_per_sec;
        if self.floor_us == 0 || sample <= self.floor_us {
            self.floor_us = sample;
            self.near_us = m.now_us;
            self.episode = None;
            self.push_rate(m.now_us, rate);
            return None;
        }
        let c = self.config;
        let floor = self.floor_us as f64;
        let span = (c.window_rtts * floor).max(c.min_window_us as f64);
        let threshold = (floor * (1.0 + c.rise)).max(floor + c.min_rise_us as f64);
        let s = sample as f64;
        if s < threshold {
            if s < f64::midpoint(floor, threshold) {
                self.near_us = m.now_us;
            }
            self.episode = None;
            self.push_rate(m.now_us, rate);
            return None;
        }
        if self.episode.is_none() {
            // Only an episode that begins with a step up from near the floor can fire; its
            // samples may pass through values in between (a datapath's reports straddle the
            // change), so the window below may restart until `settle_rtts` floors in.
            let stepped = (m.now_us.saturating_sub(self.near_us) as f64) <= c.step_rtts * floor;
            let rate_before = self.rate_before(m.now_us, span);
            self.episode = Some(Episode {
                start_us: m.now_us,
                stepped,
                rate_before,
                window: None,
            });
        }
        let ep = self.episode.as_mut()?;
        if !ep.stepped {
            self.push_rate(m.now_us, rate);
            return None;
        }
        let w = ep.window.get_or_insert(Window::at(m.now_us, sample));
        w.min_us = w.min_us.min(sample);
        w.max_us = w.max_us.max(sample);
        if w.max_us as f64 > w.min_us as f64 * (1.0 + c.flat) {
            // Moving: a ramp into the new floor, or a queue. The window may start again here
            // while the episode is young enough for a ramp; after that the episode is a queue.
            if (m.now_us.saturating_sub(ep.start_us) as f64) > c.settle_rtts * floor {
                ep.stepped = false;
                ep.window = None;
                self.push_rate(m.now_us, rate);
            } else {
                *w = Window::at(m.now_us, sample);
            }
            return None;
        }
        let elapsed_us = m.now_us.saturating_sub(w.start_us);
        if elapsed_us > 0 {
            // The report that opens the window acknowledged what came before it.
            w.acked_bytes = w
                .acked_bytes
                .saturating_add(m.acked_bytes.saturating_add(m.sacked_bytes));
        }
        if (elapsed_us as f64) < span {
            return None;
        }
        let mean = w.acked_bytes as f64 * 1e6 / elapsed_us as f64;
        if ep.rate_before == 0 || mean > (1.0 - c.slowdown) * ep.rate_before as f64 {
            // Delivering about as fast as before the step (or no rate to compare with): a
            // standing queue, not a longer path. Nothing more from this episode.
            ep.stepped = false;
            ep.window = None;
            return None;
        }
        let new_floor = w.min_us;
        self.floor_us = new_floor;
        self.near_us = m.now_us;
        self.episode = None;
        self.rates.clear();
        self.fired = self.fired.saturating_add(1);
        Some(new_floor)
    }

    /// Records a delivery-rate sample taken outside a window (0: none).
    fn push_rate(&mut self, now_us: u64, rate: u64) {
        if rate == 0 {
            return;
        }
        while self.rates.back().is_some_and(|&(_, r)| r <= rate) {
            self.rates.pop_back();
        }
        self.rates.push_back((now_us, rate));
    }

    /// The highest delivery rate of the last `span_us` before `now_us` (0: none).
    fn rate_before(&mut self, now_us: u64, span_us: f64) -> u64 {
        while self
            .rates
            .front()
            .is_some_and(|&(t, _)| now_us.saturating_sub(t) as f64 > span_us)
        {
            self.rates.pop_front();
        }
        self.rates.front().map_or(0, |&(_, r)| r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 10-ms report at `rtt_ms` delivering `mbps`.
    fn m(now_ms: u64, rtt_ms: f64, mbps: f64) -> Measurement {
        let us = (rtt_ms * 1e3) as u64;
        let bytes_per_sec = (mbps * 1e6 / 8.0) as u64;
        Measurement {
            now_us: now_ms * 1_000,
            rtt_us: us,
            min_rtt_us: us,
            acked_bytes: bytes_per_sec / 100,
            rate_incoming_bytes_per_sec: bytes_per_sec,
            ..Measurement::default()
        }
    }

    /// Feeds `path(t) = (rtt ms, Mbit/s)` every 10 ms from `from_ms` to `to_ms`; returns the
    /// firing times and floors.
    fn run(
        d: &mut PathChange,
        from_ms: u64,
        to_ms: u64,
        path: impl Fn(u64) -> (f64, f64),
    ) -> Vec<(u64, u64)> {
        (from_ms..to_ms)
            .step_by(10)
            .filter_map(|t| {
                let (rtt, mbps) = path(t);
                d.on_report(&m(t, rtt, mbps)).map(|f| (t, f))
            })
            .collect()
    }

    #[test]
    fn a_delay_step_that_slows_the_flow_fires_once_after_the_window_with_the_new_floor() {
        let mut d = PathChange::new(PathChangeConfig::default());
        assert!(run(&mut d, 10, 5_000, |_| (20.0, 19.0)).is_empty());
        // TCP-RL's dynamic path under Copa: 20 -> 40 ms, and Copa, reading the new delay as
        // queue, falls from 19 to 6 Mbit/s after an RTT.
        let fired = run(&mut d, 5_000, 10_000, |t| {
            (
                40.0 + (t % 7) as f64 * 0.1,
                if t < 5_040 { 19.0 } else { 6.0 },
            )
        });
        assert_eq!(fired.len(), 1, "{fired:?}");
        let (t, floor) = fired[0];
        // The window is max(8 x 20 ms, 500 ms) from the first sample above the threshold.
        assert!((5_500..5_520).contains(&t), "fired at {t} ms");
        assert_eq!(floor, 40_000);
        assert_eq!(d.floor_us(), 40_000);
        assert_eq!(d.fired(), 1);
        // The new floor holds: nothing more fires on it.
        assert!(run(&mut d, 10_000, 30_000, |_| (41.0, 6.0)).is_empty());
    }

    #[test]
    fn a_step_through_values_in_between_still_fires() {
        // As kernel reports straddle the change: 20 ms, then 30 and 35 ms for two reports
        // 20 ms apart, then 40 ms, the flow slowing from 19 to 4 Mbit/s.
        let mut d = PathChange::new(PathChangeConfig::default());
        assert!(run(&mut d, 10, 5_000, |_| (20.0, 19.0)).is_empty());
        let fired = run(&mut d, 5_000, 7_000, |t| match t {
            5_000..5_020 => (30.1, 10.0),
            5_020..5_040 => (35.0, 6.0),
            _ => (40.2, 4.0),
        });
        assert_eq!(fired.len(), 1, "{fired:?}");
        assert!((5_540..5_560).contains(&fired[0].0), "{fired:?}");
        assert_eq!(fired[0].1, 40_200);
    }

    #[test]
    fn a_standing_queue_at_the_bottleneck_rate_never_fires() {
        let mut d = PathChange::new(PathChangeConfig::default());
        // Slow start into a 1-BDP buffer: the RTT doubles within two RTTs and stays there,
        // flat, with the flow delivering the link's 50 Mbit/s.
        let fired = run(&mut d, 10, 30_000, |t| {
            if t < 200 {
                (20.0, t as f64 / 4.0)
            } else if t < 240 {
                (30.0, 50.0)
            } else {
                (40.0, 50.0)
            }
        });
        assert!(fired.is_empty(), "{fired:?}");
    }

    #[test]
    fn a_queue_sawtooth_over_a_short_path_never_fires() {
        let mut d = PathChange::new(PathChangeConfig::default());
        // A loss-based window over a deep buffer: 20 ms path, queue from 15 to 200 ms and back
        // down after each loss, a 2-s sawtooth; the rate halves after each loss.
        let fired = run(&mut d, 10, 120_000, |t| {
            if t < 100 {
                (20.0, 10.0)
            } else {
                let phase = (t % 2_000) as f64 / 2_000.0;
                (35.0 + phase * 185.0, 5.0 + 5.0 * phase)
            }
        });
        assert!(fired.is_empty(), "{fired:?}");
    }

    #[test]
    fn a_slow_rise_small_or_short_rises_do_not_fire_and_a_decrease_is_taken_at_once() {
        let mut d = PathChange::new(PathChangeConfig::default());
        run(&mut d, 10, 1_000, |_| (50.0, 10.0));
        // 40 % higher for a long time: under the 50 % rise.
        assert!(run(&mut d, 1_000, 20_000, |_| (70.0, 3.0)).is_empty());
        // 100 % higher, but for 300 ms at a time only.
        assert!(
            run(&mut d, 20_000, 40_000, |t| if t % 600 < 300 {
                (100.0, 3.0)
            } else {
                (55.0, 10.0)
            })
            .is_empty()
        );
        // A shorter path lowers the floor with no window.
        assert!(run(&mut d, 40_000, 40_100, |_| (30.0, 10.0)).is_empty());
        assert_eq!(d.floor_us(), 30_000);
        // From 30 to 60 ms over 2 s (a queue growing), then flat and slow: no step, no fire.
        assert!(
            run(&mut d, 40_100, 50_000, |t| {
                let grown = ((t - 40_100) as f64 / 2_000.0).min(1.0);
                (30.0 + 30.0 * grown, 10.0 - 7.0 * grown)
            })
            .is_empty()
        );
        // 2 ms on a 2-ms path is 100 % but under the 5 ms absolute rise.
        let mut d = PathChange::new(PathChangeConfig::default());
        run(&mut d, 10, 1_000, |_| (2.0, 10.0));
        assert!(run(&mut d, 1_000, 10_000, |_| (4.0, 1.0)).is_empty());
    }

    #[test]
    fn without_delivery_rates_nothing_fires() {
        let mut d = PathChange::new(PathChangeConfig::default());
        run(&mut d, 10, 1_000, |_| (20.0, 0.0));
        assert!(run(&mut d, 1_000, 5_000, |_| (40.0, 0.0)).is_empty());
    }

    #[test]
    fn bad_parameters_and_empty_reports_are_harmless() {
        let mut d = PathChange::new(PathChangeConfig {
            rise: f64::NAN,
            window_rtts: -1.0,
            flat: f64::INFINITY,
            slowdown: 7.0,
            ..PathChangeConfig::default()
        });
        assert_eq!(d.on_report(&Measurement::default()), None);
        run(&mut d, 10, 1_000, |_| (20.0, 10.0));
        // `slowdown` capped at 1: the window must deliver nothing at all.
        assert!(run(&mut d, 1_000, 3_000, |_| (40.0, 1.0)).is_empty());
        let mut d = PathChange::new(PathChangeConfig {
            slowdown: f64::NAN,
            ..PathChangeConfig::default()
        });
        run(&mut d, 10, 1_000, |_| (20.0, 10.0));
        assert_eq!(run(&mut d, 1_000, 3_000, |_| (40.0, 1.0)).len(), 1);
    }
}
