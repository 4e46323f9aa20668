//! The competition watch: after the probe, a flow that stayed on its start candidate keeps
//! looking for a queue that never drains, and moves once to a candidate that holds its share
//! against buffer-filling flows.
//!
//! The test is Copa's own (Arun & Balakrishnan, NSDI 2018, §2.2): a delay-based flow drains its
//! own queue every few RTTs, so a queue that stays up is somebody else's. Copa answers it with
//! its competitive mode, which still loses most of its share to BBR and Cubic flows
//! (`docs/selector.md`); the watch answers it by leaving Copa. It looks much longer than Copa's 5
//! RTTs (by default 3 s and 30 RTTs: a cellular link's rate swings and web-sized flows passing
//! through lift the floor for a while, a long-running competitor lifts it for good), and only
//! after the probe, whose 1.5 s often ends before a competitor has filled the queue.
//!
//! Left out: telling a BBR competitor from a Cubic one (the target is one candidate for both).

use ccp_algorithms::Measurement;
use ccp_algorithms::rtt::{MinWindow, lower_min};
use serde::{Deserialize, Serialize};

/// When the watch fires and where it moves the flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Watch {
    /// The queue must have stayed up for at least this long, ms.
    pub window_ms: u64,
    /// ... and for at least this many minimum RTTs.
    pub window_rtts: u32,
    /// "Stayed up": every RTT sample of the window at least this multiple of the flow's
    /// minimum RTT (> 1).
    pub ratio: f64,
    /// The candidate the flow moves to.
    pub target: String,
    /// Hand over to the target as in a first slow start ([`crate::SelectionPolicy::afresh`]):
    /// a rate-based target seeded with the starved rate the competitors left would stay there.
    pub afresh: bool,
}

impl Default for Watch {
    fn default() -> Self {
        Self {
            window_ms: 3_000,
            window_rtts: 30,
            ratio: 1.3,
            target: "bbr".into(),
            afresh: true,
        }
    }
}

impl Watch {
    /// Checks the parameters (a clear message for a config file or an environment variable).
    pub fn validate(&self) -> Result<(), String> {
        if !(self.ratio.is_finite() && self.ratio > 1.0) {
            return Err(format!(
                "watch ratio must be a finite number above 1, got {}",
                self.ratio
            ));
        }
        if self.window_ms == 0 && self.window_rtts == 0 {
            return Err("watch window must be longer than 0 ms or 0 RTTs".into());
        }
        if self.target.is_empty() {
            return Err("watch target must name a candidate".into());
        }
        Ok(())
    }

    /// Parses `<ratio>,<window ms>,<window RTTs>,<target>[,kept]` (`kept`: the target continues
    /// from the handed-over rate instead of afresh) and checks it.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let parts: Vec<&str> = spec.split(',').map(str::trim).collect();
        let (ratio, window_ms, window_rtts, target, afresh) = match parts.as_slice() {
            [ratio, ms, rtts, target] => (ratio, ms, rtts, target, true),
            [ratio, ms, rtts, target, "kept"] => (ratio, ms, rtts, target, false),
            _ => {
                return Err(format!(
                    "expected <ratio>,<ms>,<rtts>,<target>[,kept], got {spec:?}"
                ));
            }
        };
        let watch = Self {
            ratio: ratio
                .parse()
                .map_err(|e| format!("watch ratio {ratio:?}: {e}"))?,
            window_ms: window_ms
                .parse()
                .map_err(|e| format!("watch window {window_ms:?} ms: {e}"))?,
            window_rtts: window_rtts
                .parse()
                .map_err(|e| format!("watch window {window_rtts:?} RTTs: {e}"))?,
            target: (*target).to_string(),
            afresh,
        };
        watch.validate().map(|()| watch)
    }

    fn span_us(&self, min_rtt_us: u64) -> u64 {
        self.window_ms
            .saturating_mul(1_000)
            .max(u64::from(self.window_rtts).saturating_mul(min_rtt_us))
    }
}

/// One flow's watch.
#[derive(Debug, Clone)]
pub struct Watcher {
    watch: Watch,
    min_rtt_us: u64,
    since_us: Option<u64>,
    /// The lowest RTT sample over the window.
    recent: MinWindow,
    fired: bool,
}

impl Watcher {
    /// A watch for a flow whose minimum RTT so far is `min_rtt_us` (0: none yet).
    pub fn new(watch: Watch, min_rtt_us: u64) -> Self {
        Self {
            watch,
            min_rtt_us,
            since_us: None,
            recent: MinWindow::default(),
            fired: false,
        }
    }

    /// The candidate to move to.
    pub fn target(&self) -> &str {
        &self.watch.target
    }

    /// Whether the move hands over as in a first slow start.
    pub fn afresh(&self) -> bool {
        self.watch.afresh
    }

    /// Whether it has fired.
    pub fn fired(&self) -> bool {
        self.fired
    }

    /// Adds one report; true (once) when the queue has stayed up for the whole window.
    pub fn push(&mut self, m: &Measurement, now_us: u64) -> bool {
        if self.fired {
            return false;
        }
        let sample = lower_min(0, [m.min_rtt_us, m.rtt_us]);
        self.min_rtt_us = lower_min(self.min_rtt_us, [sample]);
        let since = *self.since_us.get_or_insert(now_us);
        let span = self.watch.span_us(self.min_rtt_us);
        self.recent.update(now_us, sample, span);
        if self.min_rtt_us == 0 || now_us.saturating_sub(since) < span {
            return false;
        }
        self.fired = self.recent.get() as f64 >= self.watch.ratio * self.min_rtt_us as f64;
        self.fired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(rtt_us: u64) -> Measurement {
        Measurement {
            rtt_us,
            min_rtt_us: rtt_us,
            ..Measurement::default()
        }
    }

    fn run(w: &mut Watcher, rtt: impl Fn(u64) -> u64, until_us: u64) -> Option<u64> {
        let mut t = 0;
        while t <= until_us {
            if w.push(&report(rtt(t)), t) {
                return Some(t);
            }
            t += 10_000;
        }
        None
    }

    #[test]
    fn a_queue_that_stays_up_fires_once_after_the_window() {
        let mut w = Watcher::new(Watch::default(), 20_000);
        // 20-ms path, a competitor keeps 30 ms of queue.
        let at = run(&mut w, |_| 50_000, 10_000_000).expect("fires");
        assert_eq!(at, 3_000_000);
        assert!(w.fired());
        assert!(!w.push(&report(50_000), at + 10_000), "fires once");
        assert_eq!(w.target(), "bbr");
    }

    #[test]
    fn a_queue_that_drains_now_and_then_does_not_fire() {
        let mut w = Watcher::new(Watch::default(), 20_000);
        // Drains to the floor for one report a second.
        let fired = run(
            &mut w,
            |t| if t % 1_000_000 == 0 { 21_000 } else { 60_000 },
            20_000_000,
        );
        assert_eq!(fired, None);
    }

    #[test]
    fn the_window_is_at_least_its_rtts() {
        // 200-ms path: 30 RTTs = 6 s.
        let mut w = Watcher::new(Watch::default(), 200_000);
        let at = run(&mut w, |_| 400_000, 20_000_000).expect("fires");
        assert_eq!(at, 6_000_000);
    }

    #[test]
    fn a_small_rise_does_not_fire() {
        let mut w = Watcher::new(Watch::default(), 20_000);
        assert_eq!(run(&mut w, |_| 25_000, 20_000_000), None);
    }

    #[test]
    fn bad_parameters_are_refused() {
        for w in [
            Watch {
                ratio: 1.0,
                ..Watch::default()
            },
            Watch {
                ratio: f64::NAN,
                ..Watch::default()
            },
            Watch {
                window_ms: 0,
                window_rtts: 0,
                ..Watch::default()
            },
            Watch {
                target: String::new(),
                ..Watch::default()
            },
        ] {
            assert!(w.validate().is_err(), "{w:?}");
        }
        assert!(Watch::default().validate().is_ok());
    }

    #[test]
    fn a_spec_parses_or_says_what_is_wrong() {
        assert_eq!(
            Watch::parse("1.5, 2000, 20, arc").unwrap(),
            Watch {
                ratio: 1.5,
                window_ms: 2_000,
                window_rtts: 20,
                target: "arc".into(),
                afresh: true,
            }
        );
        assert!(!Watch::parse("1.3,3000,30,bbr,kept").unwrap().afresh);
        for (bad, says) in [
            ("1.3,3000,30", "expected"),
            ("1.3,3000,30,bbr,again", "expected"),
            ("x,3000,30,bbr", "ratio"),
            ("1.3,-1,30,bbr", "ms"),
            ("1.3,3000,1e9,bbr", "RTTs"),
            ("0.9,3000,30,bbr", "above 1"),
            ("1.3,3000,30,", "name a candidate"),
        ] {
            let err = Watch::parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
