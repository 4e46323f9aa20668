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
//! A queue alone does not say who keeps it, and the answer differs: against BBR flows BBR is
//! the best single candidate or close to it (ahead of Copa in 16 of 17 such training and
//! validation conditions, by up to 1.6 ln units of the friendly score), against Cubic flows
//! ARC or a loss-based candidate, and moving a flow into Cubic flows mid-flow in a deep buffer
//! loses share (`docs/selector.md`). So the watch can also ask for **losses** over the same
//! window ([`Watch::min_loss`]): a queue that stays up and overflows steadily is kept by a
//! sender that does not back off on loss, as BBR v1 does not (Cardwell et al., ACM Queue 2016:
//! its window is 2 BDP of its own estimate, whatever is lost; Hock, Bless and Zitterbart,
//! ICNP 2017, measured the resulting loss rates in shallow buffers), while a Cubic flow cuts its
//! window by 30 % after each overflow and its losses come in bursts seconds apart.
//! [`Watch::overflowing_queue`] is that watch, and the one deployed ([`super::default_watch`]).
//!
//! A buffer deep enough to hold the competitors' flight (BBR's 2 BDP, Cubic's window between
//! its cuts) holds a queue without overflowing it; [`Watch::max_loss`] caps the window's losses
//! instead, and [`Watch::held_queue`] (deployed too) moves a flow whose queue stayed up for 8 s
//! with at most 0.5 % lost to ARC, which on the training and validation sets holds its share
//! there where BBR moved mid-flow does not. Both watches start over on a new floor when the
//! selector detects a longer path ([`Watcher::restart`]). Left out: telling BBR competitors in
//! such buffers from Cubic ones (BBR's `ProbeRTT`, a drain every 10 s, which a queue-and-drain
//! rule tried on the training traces could not tell from the drains of a delay-based flow on
//! cellular and long WAN paths).

use std::collections::VecDeque;

use super::rule::FeatureRange;
use ccp_algorithms::Measurement;
use ccp_algorithms::rtt::{MinWindow, lower_min};

/// When the watch fires and where it moves the flow.
#[derive(Debug, Clone, PartialEq)]
pub struct Watch {
    /// The queue must have stayed up for at least this long, ms.
    pub window_ms: u64,
    /// ... and for at least this many minimum RTTs.
    pub window_rtts: u32,
    /// "Stayed up": every RTT sample of the window at least this multiple of the flow's
    /// minimum RTT (1: no queue test, the loss test alone).
    pub ratio: f64,
    /// The candidate the flow moves to.
    pub target: String,
    /// Hand over to the target as in a first slow start ([`crate::SelectionPolicy::afresh`]):
    /// a rate-based target seeded with the starved rate the competitors left would stay there.
    pub afresh: bool,
    /// ... and with the flow's smoothed RTT as the target's RTT floor
    /// ([`crate::SelectionPolicy::afresh_floor`]; only with `afresh`). BBR v1's window is
    /// 2 x bandwidth x floor: handed the path's floor under a competitor's standing queue, it
    /// delivers about what its start-up estimated, leaves start-up and stays near the rate
    /// the competitors left the flow, where a BBR flow started then would have measured its
    /// floor over their queue. Off in the deployed watches: measured, and not deployed
    /// (`docs/selector/measured-not-deployed-models.md`, "BBR handed a flow afresh").
    pub fresh_floor: bool,
    /// ... and over the same window at least this share of the flow's packets lost (lost /
    /// (lost + acknowledged); 0: no loss test). A queue that stays up *and* overflows steadily
    /// is a competitor that does not back off on loss (BBR), where a loss-based one (Cubic)
    /// cuts its window after each overflow.
    pub min_loss: f64,
    /// ... and over the same window at most this share lost (1: no cap; 0: not one packet).
    /// A queue that stays up *without* losses is kept by a competitor whose flight the buffer
    /// holds: BBR v1 in a buffer deeper than its 2 BDP, where a loss-based competitor would
    /// overflow it now and then.
    pub max_loss: f64,
    /// The watch runs only for a flow whose probe ended over a queue that never drained:
    /// `rtt_ratio_drained` (the probe's feature) at least this (0: every flow). A competitor
    /// that holds a queue is there from the flow's start, where a path that changes later (a
    /// longer route the detector missed, a rate drop under a deep buffer) lifts the RTT only
    /// after the probe.
    pub min_drained: f64,
    /// The candidate whose flows the watch runs on (`None`: a flow that kept its start at the
    /// probe's end). A watch from a candidate starts when the probe's choice moved the flow to
    /// it (not when another watch did: a flow moves at most twice), so that a candidate that
    /// pays in one kind of competition can be left again where the flow turns out to be in
    /// another kind.
    pub from: Option<String>,
    /// The watch runs only for a flow whose probe's features lie in every one of these ranges
    /// (none: every flow; a flow without a probe, started from the path memory, lies in
    /// none).
    pub probe: Vec<FeatureRange>,
    /// The window begins this long after the watch starts, ms: a target moved to afresh
    /// overflows the buffer in its own slow start, which says nothing about the path.
    pub after_ms: u64,
}

impl Default for Watch {
    fn default() -> Self {
        Self {
            window_ms: 3_000,
            window_rtts: 30,
            ratio: 1.3,
            target: "bbr".into(),
            afresh: true,
            fresh_floor: false,
            min_loss: 0.0,
            max_loss: 1.0,
            min_drained: 0.0,
            from: None,
            probe: Vec::new(),
            after_ms: 0,
        }
    }
}

impl Watch {
    /// The deployed watch: every RTT sample of the last 2 s and 30 RTTs at least 1.05x the
    /// flow's minimum and at least 4 % of its packets lost over that window; the flow moves to
    /// BBR afresh. Chosen on the training and validation sets (`docs/selector.md`): a 1.3x
    /// queue misses shallow buffers (0.3-1 BDP, a queue of at most 1.3-2x), and 4 % separates
    /// them (BBR competitors in such buffers: 6.6-53 % of Copa's packets lost in the 3 s after
    /// the probe in most flows; Cubic competitors alone: at most 3 %).
    pub fn overflowing_queue() -> Self {
        Self {
            window_ms: 2_000,
            window_rtts: 30,
            ratio: 1.05,
            target: "bbr".into(),
            afresh: true,
            fresh_floor: false,
            min_loss: 0.04,
            max_loss: 1.0,
            min_drained: 0.0,
            from: None,
            probe: Vec::new(),
            after_ms: 0,
        }
    }

    /// The deployed watch for a queue held without losses: for a flow whose probe ended over a
    /// queue that never drained (`rtt_ratio_drained` >= 1.5, the path memory's test of a
    /// standing queue), every RTT sample of the last 8 s and 30 RTTs at least 1.3x the flow's
    /// minimum and at most 0.5 % of its packets lost over that window; the flow moves to ARC
    /// afresh. A buffer deep enough to hold the competitors' flight without overflowing (BBR's
    /// 2 BDP, Cubic's between its cuts) holds a queue that Copa's competitive mode keeps losing
    /// share to; ARC, the best single candidate against such mixes on the training and
    /// validation sets, takes it back. The 8 s are longer than the overflowing watch's 2: a
    /// delay-based flow's own queue lifts the floor for seconds too; the probe's test keeps out
    /// paths that change after it. Chosen on the three validation sets (`docs/selector.md`, "A
    /// queue held without losses moves a staying flow to ARC").
    pub fn held_queue() -> Self {
        Self {
            window_ms: 8_000,
            window_rtts: 30,
            ratio: 1.3,
            target: "arc".into(),
            afresh: true,
            fresh_floor: false,
            min_loss: 0.0,
            max_loss: 0.005,
            min_drained: 1.5,
            from: None,
            probe: Vec::new(),
            after_ms: 0,
        }
    }

    /// A watch from ARC, measured and not deployed: for a flow the probe moved to ARC over a
    /// shallow buffer (its probe's RTT at most 3 times the floor, at most 50 packets per
    /// thousand lost), at least 3 % and at most 8 % of its packets lost over 2 s and 30 RTTs,
    /// whatever its queue; the flow moves to Reno, keeping its window and rate. ARC chosen
    /// against Cubic flows in a buffer under about one BDP takes two thirds of the link and
    /// overflows it steadily (3.7-6.3 % of its packets lost over the whole flow on the
    /// validation sets), which the friendly score counts against it; Reno, the best single
    /// candidate in those conditions, backs off to its share. Against BBR flows ARC loses more
    /// (11-20 %) and pays; a probe that already lost many packets (BBR competitors, 73-267 per
    /// thousand on the validation sets) starts no watch, nor does one over a deeper buffer,
    /// where mixes with BBR keep ARC's losses inside the band. Left out: flows the held-queue
    /// watch moved to ARC mid-flow (their buffers are deeper, and ARC's slow start afresh
    /// overflows them for seconds; moving them too lost on `selection-train`). Chosen on the
    /// three validation sets (+0.0067 per condition), it lost on the third test set (-0.0012)
    /// and on the recurring-flow sets, and gained only within its noise on the fresh
    /// `selection-val3` (+0.0043), so it is not deployed
    /// (`docs/selector/measured-not-deployed.md`, "A watch from the probe's move to ARC").
    pub fn overflowing_arc() -> Self {
        Self {
            window_ms: 2_000,
            window_rtts: 30,
            ratio: 1.0,
            target: "reno".into(),
            afresh: false,
            fresh_floor: false,
            min_loss: 0.03,
            max_loss: 0.08,
            min_drained: 0.0,
            from: Some("arc".into()),
            probe: vec![
                FeatureRange {
                    feature: super::features::LOSS,
                    min: f64::NEG_INFINITY,
                    max: 50.0,
                },
                FeatureRange {
                    feature: super::features::RTT_RATIO_MAX,
                    min: f64::NEG_INFINITY,
                    max: 3.0,
                },
            ],
            after_ms: 0,
        }
    }

    /// Checks the parameters (a clear message for a config file or an environment variable).
    pub fn validate(&self) -> Result<(), String> {
        if !(self.ratio.is_finite() && self.ratio >= 1.0) {
            return Err(format!(
                "watch ratio must be a finite number of at least 1 (1: no queue test), got {}",
                self.ratio
            ));
        }
        if self.ratio <= 1.0 && !self.tests_losses() {
            return Err("a watch without a queue test (ratio 1) needs a loss test".into());
        }
        if self.window_ms == 0 && self.window_rtts == 0 {
            return Err("watch window must be longer than 0 ms or 0 RTTs".into());
        }
        if self.target.is_empty() {
            return Err("watch target must name a candidate".into());
        }
        if let Some(from) = &self.from
            && (from.is_empty() || *from == self.target)
        {
            return Err(format!(
                "watch must run from a candidate other than its target {:?}, got {from:?}",
                self.target
            ));
        }
        if !(self.min_loss.is_finite() && (0.0..1.0).contains(&self.min_loss)) {
            return Err(format!(
                "watch loss share must be a number in [0, 1), got {}",
                self.min_loss
            ));
        }
        if !(self.max_loss.is_finite() && (self.min_loss..=1.0).contains(&self.max_loss)) {
            return Err(format!(
                "watch loss cap must be a number in [{}, 1], got {}",
                self.min_loss, self.max_loss
            ));
        }
        if !(self.min_drained.is_finite() && self.min_drained >= 0.0) {
            return Err(format!(
                "watch drained ratio must be a number >= 0, got {}",
                self.min_drained
            ));
        }
        Ok(())
    }

    /// Whether a flow whose probe ended with features `x` (empty: no probe) runs this watch
    /// when it runs `running` for good, `start` being its start candidate: a watch from a
    /// candidate watches that candidate, any other watch a flow that kept its start.
    pub fn applies(&self, x: &[f64], running: &str, start: &str) -> bool {
        let on = self.from.as_deref().unwrap_or(start);
        let drained = x.get(super::features::DRAINED).copied().unwrap_or(f64::NAN);
        on == running
            && (self.min_drained <= 0.0 || drained >= self.min_drained)
            && self.probe.iter().all(|r| r.holds(x))
    }

    /// Whether the watch counts losses (it has a loss test or a loss cap).
    fn tests_losses(&self) -> bool {
        self.min_loss > 0.0 || self.max_loss < 1.0
    }

    /// Parses `<ratio>,<window ms>,<window RTTs>,<target>[,kept|,floor][,loss=<share>][,maxloss=<share>]
    /// [,drained=<ratio>][,from=<candidate>][,probe=<feature>=<min>..<max>...][,after=<ms>]`
    /// (`kept`: the target continues from the handed-over rate instead of afresh; `floor`:
    /// [`Self::fresh_floor`], not with `kept`; `loss`:
    /// [`Self::min_loss`]; `maxloss`: [`Self::max_loss`]; `drained`: [`Self::min_drained`];
    /// `from`: [`Self::from`]; `probe`, once per feature: [`Self::probe`]; `after`:
    /// [`Self::after_ms`]) and checks it.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let parts: Vec<&str> = spec.split(',').map(str::trim).collect();
        let expected = || {
            format!(
                "expected <ratio>,<ms>,<rtts>,<target>[,kept|,floor][,loss=<share>][,maxloss=<share>][,drained=<ratio>][,from=<candidate>][,probe=<feature>=<min>..<max>][,after=<ms>], got {spec:?}"
            )
        };
        let [ratio, window_ms, window_rtts, target, rest @ ..] = parts.as_slice() else {
            return Err(expected());
        };
        // Each option at most once.
        let (mut kept, mut floor) = (false, false);
        let (mut min_loss, mut max_loss, mut min_drained) = (None, None, None);
        let (mut from, mut probe, mut after_ms) = (None, Vec::<FeatureRange>::new(), None);
        let share = |v: &str| {
            v.parse::<f64>()
                .map_err(|e| format!("watch loss share {v:?}: {e}"))
        };
        for option in rest {
            let (key, value) = option
                .split_once('=')
                .map_or((*option, None), |(k, v)| (k, Some(v)));
            match (key, value) {
                ("kept", None) if !kept && !floor => kept = true,
                ("floor", None) if !kept && !floor => floor = true,
                ("loss", Some(v)) if min_loss.is_none() => min_loss = Some(share(v)?),
                ("maxloss", Some(v)) if max_loss.is_none() => max_loss = Some(share(v)?),
                ("drained", Some(v)) if min_drained.is_none() => {
                    let ratio = v
                        .parse::<f64>()
                        .map_err(|e| format!("watch drained ratio {v:?}: {e}"))?;
                    min_drained = Some(ratio);
                }
                ("from", Some(v)) if from.is_none() => from = Some(v.to_string()),
                ("probe", Some(v)) => {
                    let range = FeatureRange::parse(v).map_err(|e| format!("watch probe: {e}"))?;
                    if probe.iter().any(|r| r.feature == range.feature) {
                        return Err(format!("watch probe: {v:?}'s feature given twice"));
                    }
                    probe.push(range);
                }
                ("after", Some(v)) if after_ms.is_none() => {
                    let ms = v
                        .parse::<u64>()
                        .map_err(|e| format!("watch start delay {v:?} ms: {e}"))?;
                    after_ms = Some(ms);
                }
                _ => return Err(expected()),
            }
        }
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
            afresh: !kept,
            fresh_floor: floor,
            min_loss: min_loss.unwrap_or(0.0),
            max_loss: max_loss.unwrap_or(1.0),
            min_drained: min_drained.unwrap_or(0.0),
            from,
            probe,
            after_ms: after_ms.unwrap_or(0),
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
    mss_bytes: u64,
    /// The first report's time.
    started_us: Option<u64>,
    /// The first report of the window's time (the first after [`Watch::after_ms`]).
    since_us: Option<u64>,
    /// The lowest RTT sample over the window.
    recent: MinWindow,
    /// The window's reports (time, packets lost, bytes acknowledged), with their sums, when
    /// the watch has a loss test.
    losses: VecDeque<(u64, u64, u64)>,
    lost_pkts: u64,
    acked_bytes: u64,
    fired: bool,
}

impl Watcher {
    /// A watch for a flow of `mss_bytes` segments whose minimum RTT so far is `min_rtt_us`
    /// (0: none yet).
    pub fn new(watch: Watch, min_rtt_us: u64, mss_bytes: u64) -> Self {
        Self {
            watch,
            min_rtt_us,
            mss_bytes: mss_bytes.max(1),
            started_us: None,
            since_us: None,
            recent: MinWindow::default(),
            losses: VecDeque::new(),
            lost_pkts: 0,
            acked_bytes: 0,
            fired: false,
        }
    }

    /// Starts the watch over on a new RTT floor (the path changed): what it saw so far was
    /// measured against the old one. A fired watch stays fired.
    pub fn restart(&mut self, min_rtt_us: u64) {
        if !self.fired {
            *self = Self::new(self.watch.clone(), min_rtt_us, self.mss_bytes);
        }
    }

    /// The candidate to move to.
    pub fn target(&self) -> &str {
        &self.watch.target
    }

    /// Whether the watch runs from the probe's choice ([`Watch::from`]) rather than on a flow
    /// that kept its start.
    pub fn from_choice(&self) -> bool {
        self.watch.from.is_some()
    }

    /// Whether the move hands over as in a first slow start.
    pub fn afresh(&self) -> bool {
        self.watch.afresh
    }

    /// Whether the move hands the target the flow's smoothed RTT as its floor.
    pub fn fresh_floor(&self) -> bool {
        self.watch.afresh && self.watch.fresh_floor
    }

    /// Whether it has fired.
    pub fn fired(&self) -> bool {
        self.fired
    }

    /// Adds one report; true (once) when the queue has stayed up for the whole window (and,
    /// with a loss test, the window lost at least its share of packets).
    pub fn push(&mut self, m: &Measurement, now_us: u64) -> bool {
        if self.fired {
            return false;
        }
        let sample = lower_min(0, [m.min_rtt_us, m.rtt_us]);
        self.min_rtt_us = lower_min(self.min_rtt_us, [sample]);
        let started = *self.started_us.get_or_insert(now_us);
        if now_us.saturating_sub(started) < self.watch.after_ms.saturating_mul(1_000) {
            return false;
        }
        let since = *self.since_us.get_or_insert(now_us);
        let span = self.watch.span_us(self.min_rtt_us);
        self.recent.update(now_us, sample, span);
        if self.watch.tests_losses() {
            self.count_losses(m, now_us, span);
        }
        if self.min_rtt_us == 0 || now_us.saturating_sub(since) < span {
            return false;
        }
        let share = self.loss_share();
        self.fired = self.recent.get() as f64 >= self.watch.ratio * self.min_rtt_us as f64
            && share >= self.watch.min_loss
            && share <= self.watch.max_loss;
        self.fired
    }

    /// Adds a report's losses and acknowledged bytes and drops reports older than `span_us`.
    fn count_losses(&mut self, m: &Measurement, now_us: u64, span_us: u64) {
        self.losses.push_back((now_us, m.lost_pkts, m.acked_bytes));
        self.lost_pkts = self.lost_pkts.saturating_add(m.lost_pkts);
        self.acked_bytes = self.acked_bytes.saturating_add(m.acked_bytes);
        while let Some(&(t, lost, acked)) = self.losses.front() {
            if now_us.saturating_sub(t) <= span_us {
                break;
            }
            self.losses.pop_front();
            // Saturating both ways: a datapath's absurd counts must not wrap the sums.
            self.lost_pkts = self.lost_pkts.saturating_sub(lost);
            self.acked_bytes = self.acked_bytes.saturating_sub(acked);
        }
    }

    /// The window's lost packets over lost and acknowledged ones (0 without a loss test).
    fn loss_share(&self) -> f64 {
        let lost = self.lost_pkts as f64;
        let acked = (self.acked_bytes / self.mss_bytes) as f64;
        if lost > 0.0 {
            lost / (lost + acked)
        } else {
            0.0
        }
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
        let mut w = Watcher::new(Watch::default(), 20_000, 1_448);
        // 20-ms path, a competitor keeps 30 ms of queue.
        let at = run(&mut w, |_| 50_000, 10_000_000).expect("fires");
        assert_eq!(at, 3_000_000);
        assert!(w.fired());
        assert!(!w.push(&report(50_000), at + 10_000), "fires once");
        assert_eq!(w.target(), "bbr");
    }

    #[test]
    fn a_queue_that_drains_now_and_then_does_not_fire() {
        let mut w = Watcher::new(Watch::default(), 20_000, 1_448);
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
        let mut w = Watcher::new(Watch::default(), 200_000, 1_448);
        let at = run(&mut w, |_| 400_000, 20_000_000).expect("fires");
        assert_eq!(at, 6_000_000);
    }

    #[test]
    fn a_small_rise_does_not_fire() {
        let mut w = Watcher::new(Watch::default(), 20_000, 1_448);
        assert_eq!(run(&mut w, |_| 25_000, 20_000_000), None);
    }

    /// A 20-ms path, a report every 20 ms acknowledging 10 packets, with the RTT and the
    /// packets lost given per report time.
    fn run_lossy(
        w: &mut Watcher,
        rtt_lost: impl Fn(u64) -> (u64, u64),
        until_us: u64,
    ) -> Option<u64> {
        let mut t = 0;
        while t <= until_us {
            let (rtt_us, lost_pkts) = rtt_lost(t);
            let m = Measurement {
                rtt_us,
                min_rtt_us: rtt_us,
                acked_bytes: 10 * 1_448,
                lost_pkts,
                ..Measurement::default()
            };
            if w.push(&m, t) {
                return Some(t);
            }
            t += 20_000;
        }
        None
    }

    fn loss_watch() -> Watch {
        Watch::parse("1.1,2000,30,bbr,loss=0.04").expect("a valid spec")
    }

    #[test]
    fn with_a_loss_test_a_queue_that_overflows_steadily_fires() {
        // 5 ms of queue, one packet in eleven lost all along (9 %).
        let mut w = Watcher::new(loss_watch(), 20_000, 1_448);
        assert_eq!(
            run_lossy(&mut w, |_| (25_000, 1), 10_000_000),
            Some(2_000_000)
        );
    }

    #[test]
    fn a_start_delay_moves_the_window_and_a_loss_band_without_a_queue_test_fires_inside_it() {
        // The same overflowing queue, the window beginning 1 s after the watch: 1 s later.
        let late = Watch::parse("1.1,2000,30,bbr,loss=0.04,after=1000").unwrap();
        let mut w = Watcher::new(late, 20_000, 1_448);
        assert_eq!(
            run_lossy(&mut w, |_| (25_000, 1), 10_000_000),
            Some(3_000_000)
        );
        // No queue test (ratio 1), a band of 3-8 % lost: the flow's own RTT may come back
        // to the floor; 1 lost in 11 (9 %) is over the band, 1 in 21 (4.8 %) inside it.
        let band = || Watch::parse("1,2000,30,reno,loss=0.03,maxloss=0.08").unwrap();
        let mut w = Watcher::new(band(), 20_000, 1_448);
        assert_eq!(run_lossy(&mut w, |_| (20_000, 1), 10_000_000), None);
        let mut w = Watcher::new(band(), 20_000, 1_448);
        let every_other = |t: u64| (20_000, u64::from(t.is_multiple_of(40_000)));
        assert_eq!(run_lossy(&mut w, every_other, 10_000_000), Some(2_000_000));
    }

    #[test]
    fn with_a_loss_test_a_standing_queue_without_losses_does_not_fire() {
        let mut w = Watcher::new(loss_watch(), 20_000, 1_448);
        assert_eq!(run_lossy(&mut w, |_| (25_000, 0), 10_000_000), None);
        // The same queue with a loss burst every two seconds (a loss-based competitor backing
        // off after each overflow): 5 packets in 1,000, under the 4 %.
        let mut w = Watcher::new(loss_watch(), 20_000, 1_448);
        let burst = |t: u64| (25_000, if t.is_multiple_of(2_000_000) { 5 } else { 0 });
        assert_eq!(run_lossy(&mut w, burst, 10_000_000), None);
        // A lossy path without a queue (random loss) does not fire either.
        let mut w = Watcher::new(loss_watch(), 20_000, 1_448);
        assert_eq!(run_lossy(&mut w, |_| (20_500, 1), 10_000_000), None);
    }

    #[test]
    fn losses_older_than_the_window_do_not_count() {
        // Drained and losing 5 packets a report for the first second, then a standing queue
        // without losses: once the queue has stayed up for a whole window (at 3 s), the
        // losses have left it. Counted since the start they would be 250 of 1,750 packets.
        let mut w = Watcher::new(loss_watch(), 20_000, 1_448);
        let early = |t: u64| {
            if t < 1_000_000 {
                (21_000, 5)
            } else {
                (25_000, 0)
            }
        };
        assert_eq!(run_lossy(&mut w, early, 10_000_000), None);
        // The other way round (drained and clean, then a lossy standing queue), it fires as
        // soon as one whole window is queue: at 3 s.
        let mut w = Watcher::new(loss_watch(), 20_000, 1_448);
        let late = |t: u64| {
            if t < 1_000_000 {
                (21_000, 0)
            } else {
                (25_000, 5)
            }
        };
        assert_eq!(run_lossy(&mut w, late, 10_000_000), Some(3_000_000));
    }

    #[test]
    fn with_a_loss_cap_a_queue_held_without_losses_fires_and_an_overflowing_one_does_not() {
        let held = || Watcher::new(Watch::held_queue(), 20_000, 1_448);
        // 10 ms of queue on a 20-ms path (1.5x), nothing lost: fires after the 8-s window.
        assert_eq!(
            run_lossy(&mut held(), |_| (30_000, 0), 20_000_000),
            Some(8_000_000)
        );
        // One packet in 1,001 a second (0.1 %) is under the cap.
        let rare = |t: u64| (30_000, u64::from(t.is_multiple_of(1_000_000)));
        assert_eq!(run_lossy(&mut held(), rare, 20_000_000), Some(8_000_000));
        // One in eleven (9 %) is an overflowing queue, not a held one; nor is 1.2x a queue.
        assert_eq!(run_lossy(&mut held(), |_| (30_000, 1), 20_000_000), None);
        assert_eq!(run_lossy(&mut held(), |_| (24_000, 0), 20_000_000), None);
    }

    #[test]
    fn a_restart_on_a_new_floor_forgets_the_old_one() {
        // A 20-ms path becomes a 40-ms one at 1 s: over the old floor that is a 2x queue held
        // for good, over the new one none.
        let mut w = Watcher::new(Watch::held_queue(), 20_000, 1_448);
        let mut t = 0;
        while t <= 20_000_000 {
            if t == 1_000_000 {
                w.restart(40_000);
            }
            assert!(!w.push(&report(40_000), t), "fired at {t} us");
            t += 20_000;
        }
        // Without the restart it fires.
        let mut w = Watcher::new(Watch::held_queue(), 20_000, 1_448);
        assert_eq!(run(&mut w, |_| 40_000, 20_000_000), Some(8_000_000));
    }

    #[test]
    fn absurd_counts_from_a_datapath_neither_panic_nor_stick() {
        // Drained reports losing u64::MAX packets each (a broken or hostile datapath), then a
        // standing queue without losses: the sums saturate instead of wrapping, and once the
        // absurd reports have left the window nothing of them is counted.
        let mut w = Watcher::new(loss_watch(), 20_000, 1_448);
        let absurd = |t: u64| {
            if t < 100_000 {
                (21_000, u64::MAX)
            } else {
                (25_000, 0)
            }
        };
        assert_eq!(run_lossy(&mut w, absurd, 10_000_000), None);
        assert_eq!(w.lost_pkts, 0);
    }

    #[test]
    fn bad_parameters_are_refused() {
        for w in [
            Watch {
                ratio: 0.9,
                ..Watch::default()
            },
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
            Watch {
                min_loss: 1.0,
                ..Watch::default()
            },
            Watch {
                min_loss: f64::NAN,
                ..Watch::default()
            },
            Watch {
                max_loss: 1.5,
                ..Watch::default()
            },
            Watch {
                min_loss: 0.04,
                max_loss: 0.01,
                ..Watch::default()
            },
            Watch {
                max_loss: f64::NAN,
                ..Watch::held_queue()
            },
        ] {
            assert!(w.validate().is_err(), "{w:?}");
        }
        for w in [
            Watch::default(),
            Watch::overflowing_queue(),
            Watch::held_queue(),
            Watch::overflowing_arc(),
        ] {
            assert!(w.validate().is_ok(), "{w:?}");
        }
    }

    #[test]
    fn the_floor_option_hands_the_target_the_smoothed_rtt_and_only_afresh() {
        assert!(!Watch::overflowing_queue().fresh_floor && !Watch::held_queue().fresh_floor);
        let w = Watch::parse("1.05,2000,30,bbr,loss=0.04,floor").unwrap();
        assert!(w.afresh && w.fresh_floor);
        assert_eq!(
            Watch {
                fresh_floor: false,
                ..w
            },
            Watch::overflowing_queue()
        );
        assert!(!Watch::parse("1.05,2000,30,bbr,kept").unwrap().fresh_floor);
        for spec in [
            "1.3,3000,30,bbr,kept,floor",
            "1.3,3000,30,bbr,floor,kept",
            "1.3,3000,30,bbr,floor,floor",
        ] {
            let e = Watch::parse(spec).unwrap_err();
            assert!(e.contains("expected"), "{spec}: {e}");
        }
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
                fresh_floor: false,
                min_loss: 0.0,
                max_loss: 1.0,
                min_drained: 0.0,
                from: None,
                probe: Vec::new(),
                after_ms: 0,
            }
        );
        assert!(!Watch::parse("1.3,3000,30,bbr,kept").unwrap().afresh);
        let w = Watch::parse("1.05,2000,30,bbr,loss=0.04").unwrap();
        assert!(w.afresh);
        assert!((w.min_loss - 0.04).abs() < 1e-12);
        let w = Watch::parse("1.05,2000,30,bbr,loss=0.04,kept").unwrap();
        assert!(!w.afresh && w.min_loss > 0.0);
        assert_eq!(
            Watch::parse("1.3,8000,30,arc,maxloss=0.005,drained=1.5").unwrap(),
            Watch::held_queue()
        );
        assert_eq!(
            Watch::parse(
                "1,2000,30,reno,kept,loss=0.03,maxloss=0.08,from=arc,\
                 probe=loss_per_kpkt=..50,probe=rtt_ratio_max=..3"
            )
            .unwrap(),
            Watch::overflowing_arc()
        );
        let drained = |d: f64| {
            let mut x = [1.0; super::super::features::N_FEATURES];
            x[super::super::features::DRAINED] = d;
            x
        };
        let w = Watch::held_queue();
        assert!(w.applies(&drained(1.5), "copa", "copa"));
        assert!(w.applies(&drained(f64::INFINITY), "copa", "copa"));
        assert!(!w.applies(&drained(1.2), "copa", "copa"));
        assert!(!w.applies(&drained(f64::NAN), "copa", "copa"));
        assert!(!w.applies(&[], "copa", "copa"), "no probe");
        assert!(
            !w.applies(&drained(1.5), "arc", "copa"),
            "not once the flow left its start"
        );
        assert!(Watch::overflowing_queue().applies(&drained(1.0), "copa", "copa"));
        assert!(Watch::overflowing_queue().applies(&[], "copa", "copa"));
        let w = Watch::parse(
            "1,4000,30,reno,kept,loss=0.03,maxloss=0.08,from=arc,probe=loss_per_kpkt=..50,\
             probe=rtt_ratio_max=..3,after=2000",
        )
        .unwrap();
        assert_eq!(w.from.as_deref(), Some("arc"));
        assert!(!w.afresh && w.min_loss > 0.0 && w.max_loss < 1.0);
        assert_eq!((w.probe.len(), w.after_ms), (2, 2_000));
        let mut x = drained(1.0);
        assert!(w.applies(&x, "arc", "copa") && !w.applies(&x, "copa", "copa"));
        x[super::super::features::LOSS] = 80.0;
        assert!(!w.applies(&x, "arc", "copa"), "outside the probe's box");
        for (bad, says) in [
            ("1.3,3000,30", "expected"),
            ("1.3,3000,30,bbr,again", "expected"),
            ("1.3,3000,30,bbr,from=bbr", "other than its target"),
            ("1.3,3000,30,bbr,from=arc,from=copa", "expected"),
            ("1,3000,30,bbr", "needs a loss test"),
            ("1.3,3000,30,bbr,probe=rtt_vc=..1", "no feature"),
            (
                "1.3,3000,30,bbr,probe=rtt_cv=..1,probe=rtt_cv=0..",
                "given twice",
            ),
            ("1.3,3000,30,bbr,after=-1", "start delay"),
            ("x,3000,30,bbr", "ratio"),
            ("1.3,-1,30,bbr", "ms"),
            ("1.3,3000,1e9,bbr", "RTTs"),
            ("0.9,3000,30,bbr", "at least 1"),
            ("1.3,3000,30,", "name a candidate"),
            ("1.3,3000,30,bbr,kept,kept", "expected"),
            ("1.3,3000,30,bbr,loss=x", "loss share"),
            ("1.3,3000,30,bbr,loss=1", "[0, 1)"),
            ("1.3,3000,30,bbr,loss=-0.1", "[0, 1)"),
            ("1.3,3000,30,bbr,maxloss=2", "loss cap"),
            ("1.3,3000,30,bbr,loss=0.04,maxloss=0.01", "loss cap"),
            ("1.3,3000,30,bbr,maxloss=0,maxloss=0", "expected"),
            ("1.3,3000,30,bbr,maxloss=x", "loss share"),
            ("1.3,3000,30,bbr,drained=x", "drained ratio"),
            ("1.3,3000,30,bbr,drained=-1", ">= 0"),
            ("1.3,3000,30,bbr,drained=1,drained=2", "expected"),
        ] {
            let err = Watch::parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
