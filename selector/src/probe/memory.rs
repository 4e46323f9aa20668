//! The path memory: a flow to a destination whose last probing flows agreed on a candidate
//! starts on it, from its first packet, without a probe.
//!
//! Why: against competing flows the candidates that win, win from the first packet (their
//! start-up takes the share); a switch at the probe's end (1.5 s and ten RTTs) recovers part
//! of it only (`docs/selector.md`, where the headroom is left). A server sees the same clients
//! again, so what the probe concluded for one flow to a destination is a prior for the next.
//!
//! What it takes from TCP-RL (`PAPERS.md` §1.1): users grouped by destination (its subnet
//! leaves; here an IPv4 prefix, /24 by default) and a per-group table consulted before the
//! connection sends (its `SetParm(fd, iw, cc)` sets the CC per socket from the group's entry).
//! What it changes: the entry is not a bandit's arm over measured rewards but the probe's own
//! verdict (the candidate its models chose, or the watch's move), kept per group and
//! preference mode; a group's entry is used only when its last `agree` verdicts name the same
//! candidate and it is not the mode's start (a flow that would stay probes as before, and
//! keeps its drain and watch), and, with `min_drained`, only when each was made over a queue
//! that never drained (the deployed memory: [`super::default_memory`]; measured in
//! `docs/selector/path-memory.md`). Every `reprobe_every`-th flow of a group probes anyway,
//! so a path that changed is seen within that many flows. Left out: TCP-RL's grouping by ISP and
//! province (no geolocation database here) and its jitter test for a group; a flow started
//! from memory gives no verdict (it did not probe), so only probing flows teach the table:
//! those whose probe ended, and, with [`ShortFlows`], those that ended first, whose verdicts
//! are kept apart and agree among themselves (`docs/selector/short-flows.md`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use crate::antelope::reward::Mode;

/// How the memory groups flows and when it is trusted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Memory {
    /// Destination prefix length, bits (0-32): flows to addresses that share it are one group.
    pub prefix_len: u8,
    /// How many of a group's last verdicts must name the same candidate (at least 1).
    pub agree: usize,
    /// Every this many flows of a group (the first included) probe whatever the memory holds
    /// (at least 1; 1: every flow probes and the memory is never used).
    pub reprobe_every: u64,
    /// The most groups remembered: a new group past it first forgets the half of the groups
    /// whose last flow came longest ago (0: nothing is remembered).
    pub max_groups: usize,
    /// The least `rtt_ratio_drained` (the RTT over its floor where the probe's queue drained
    /// most) of a verdict that is used: a queue that never drained is a competitor's, and
    /// against competitors the share is taken at the start (0: every verdict is used).
    pub min_drained: f64,
}

impl Default for Memory {
    /// /24 groups, every verdict of any queue, two agreeing verdicts, every fourth flow
    /// probes, 65,536 groups (the deployed memory is [`super::default_memory`]).
    fn default() -> Self {
        Self {
            prefix_len: 24,
            agree: 2,
            reprobe_every: 4,
            max_groups: 1 << 16,
            min_drained: 0.0,
        }
    }
}

impl Memory {
    /// Parses `<prefix bits>:<agree>:<reprobe every>[:<min drained>]`, e.g. `24:2:4` or
    /// `24:1:4:1.5` (the table's size stays the default; no fourth number: 0).
    pub fn parse(spec: &str) -> Result<Self, String> {
        let err = || {
            format!(
                "{spec:?}: not <prefix bits 0-32>:<agree >= 1>:<reprobe every >= 1>[:<min \
                 drained>], e.g. 24:2:4"
            )
        };
        let [prefix, agree, every, min_drained] = super::spec_numbers::<4>(spec)
            .or_else(|| super::spec_numbers::<3>(spec).map(|[p, a, e]| [p, a, e, 0.0]))
            .ok_or_else(err)?;
        let whole = |x: f64| x.fract() == 0.0;
        if !(whole(prefix) && whole(agree) && whole(every))
            || prefix > 32.0
            || agree < 1.0
            || every < 1.0
            || agree > 64.0
        {
            return Err(err());
        }
        Ok(Self {
            prefix_len: prefix as u8,
            agree: agree as usize,
            reprobe_every: every as u64,
            min_drained,
            ..Self::default()
        })
    }

    fn key(&self, ip: u32, mode: Mode) -> (u32, Mode) {
        (crate::policy::ip_prefix(ip, self.prefix_len), mode)
    }
}

/// How a new flow starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// It probes; its verdict goes back under the ticket (`None`: the table is full).
    Probe(Option<Ticket>),
    /// It starts on this candidate and keeps it.
    Remembered(&'static str),
}

/// Where a probing flow's verdict goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    key: (u32, Mode),
    /// When the group was made (a group forgotten and made again is another one).
    born: u64,
    flow: u64,
}

#[derive(Debug, Default)]
struct Group {
    /// When it was made and when its last flow started, in flows of the whole table.
    born: u64,
    last_use: u64,
    flows: u64,
    /// The last verdicts of probing flows, oldest first.
    verdicts: VecDeque<Verdict>,
    /// The last verdicts of flows that ended before their probe did ([`ShortFlows`]), oldest
    /// first.
    shorts: VecDeque<Verdict>,
    /// Verdicts recorded so far (each verdict's `at`).
    recorded: u64,
}

#[derive(Debug, Clone, Copy)]
struct Verdict {
    /// The flow's number in its group.
    flow: u64,
    candidate: &'static str,
    /// Its probe's queue stayed up enough for the verdict to be used ([`Memory::min_drained`]).
    usable: bool,
    /// When it was recorded, in the group's verdicts (a replacement counts as new).
    at: u64,
}

/// Verdicts of flows that end before their probe does: what such flows to a destination met
/// decides where the next ones start (`super::ProbeOptions::short`).
#[derive(Debug, Clone, PartialEq)]
pub struct ShortFlows {
    /// A short flow whose reports so far fall inside the rule's box gives the rule's
    /// candidate as its verdict; one outside it gives none.
    pub rule: super::ProbeRule,
    /// How many of a group's last short flows' verdicts must name the same candidate, with no
    /// probing flow's verdict since (at least 1). A usable verdict of a probing flow
    /// ([`Memory`]) is consulted first.
    pub agree: usize,
    /// Every this many flows of a group (the first included) probe whatever the short flows'
    /// verdicts say (at least 1).
    pub reprobe_every: u64,
}

impl ShortFlows {
    /// Parses `<agree>:<reprobe every>:<rule>`, the rule as [`super::ProbeRule::parse`]
    /// reads it, e.g. `2:8:vivace:loss_per_kpkt=600..`.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let err = |why: String| {
            format!(
                "{spec:?}: {why}; expected <agree >= 1>:<reprobe every >= 1>:<rule>, e.g. \
                 2:8:vivace:loss_per_kpkt=600.."
            )
        };
        let mut parts = spec.trim().splitn(3, ':');
        let (Some(agree), Some(every), Some(rule)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(err("too few parts".into()));
        };
        let count = |v: &str| {
            v.trim()
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=64).contains(n))
        };
        let (Some(agree), Some(every)) = (count(agree), count(every)) else {
            return Err(err("agree and reprobe every are whole numbers 1-64".into()));
        };
        let rule = super::ProbeRule::parse(rule).map_err(err)?;
        Ok(Self {
            rule,
            agree: agree as usize,
            reprobe_every: every,
        })
    }
}

/// The verdicts of every group: shared by the flows of one selector.
#[derive(Debug)]
pub struct Groups {
    memory: Memory,
    /// How flows that end before their probe does give verdicts, when they do.
    short: Option<ShortFlows>,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    /// Flows started so far (the groups' clock).
    flows: u64,
    groups: HashMap<(u32, Mode), Group>,
}

impl Table {
    /// Forgets the half of the groups (rounded up) whose last flow is oldest.
    fn forget_oldest_half(&mut self) {
        let mut uses: Vec<u64> = self.groups.values().map(|g| g.last_use).collect();
        if uses.is_empty() {
            return;
        }
        let k = (uses.len() - 1) / 2;
        let (_, &mut cut, _) = uses.select_nth_unstable(k);
        self.groups.retain(|_, g| g.last_use > cut);
    }
}

impl Groups {
    /// An empty table grouping as `memory` says.
    pub fn new(memory: Memory) -> Self {
        Self {
            memory,
            short: None,
            table: Mutex::new(Table::default()),
        }
    }

    /// The table, with the verdicts of flows that end before their probe does used as
    /// `short` says (its agreement and re-probe cadence; [`Self::record_short`]).
    #[must_use]
    pub fn with_short(mut self, short: Option<ShortFlows>) -> Self {
        self.short = short;
        self
    }

    /// The rule that gives a flow ending before its probe does a verdict ([`ShortFlows`]).
    pub fn short_rule(&self) -> Option<&super::ProbeRule> {
        self.short.as_ref().map(|s| &s.rule)
    }

    /// How a new `mode` flow to `ip` starts, when probing starts it on `start`.
    pub fn start(&self, ip: u32, mode: Mode, start: &str) -> Start {
        let m = &self.memory;
        let key = m.key(ip, mode);
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        if m.max_groups == 0 {
            return Start::Probe(None);
        }
        if !table.groups.contains_key(&key) && table.groups.len() >= m.max_groups {
            table.forget_oldest_half();
        }
        table.flows += 1;
        let now = table.flows;
        let g = table.groups.entry(key).or_insert_with(|| Group {
            born: now,
            ..Group::default()
        });
        g.last_use = now;
        let born = g.born;
        let flow = g.flows;
        g.flows += 1;
        if !flow.is_multiple_of(m.reprobe_every.max(1))
            && let Some(c) = agreed(&g.verdicts, m.agree)
            && c != start
        {
            return Start::Remembered(c);
        }
        if let Some(short) = &self.short
            && !flow.is_multiple_of(short.reprobe_every.max(1))
            && let Some(c) = agreed_short(g, short.agree)
            && c != start
        {
            return Start::Remembered(c);
        }
        Start::Probe(Some(Ticket { key, born, flow }))
    }

    /// Records `candidate` as the verdict of the flow holding `ticket`, whose probe's queue
    /// drained to `drained` times the RTT floor at best (`rtt_ratio_drained`; infinite for the
    /// watch's move, made on a queue that never drained). It replaces the verdict the flow gave
    /// before, if still kept (the watch's move after the probe's stay).
    pub fn record(&self, ticket: &Ticket, candidate: &'static str, drained: f64) {
        let usable = drained >= self.memory.min_drained;
        self.push(ticket, candidate, usable, self.memory.agree, |g| {
            &mut g.verdicts
        });
    }

    /// Records `candidate` as the verdict of the flow holding `ticket`, a flow that ended
    /// before its probe did ([`ShortFlows`]): later flows start on it once the group's last
    /// verdicts are as many such verdicts as [`Self::with_short`] asks, all naming it.
    pub fn record_short(&self, ticket: &Ticket, candidate: &'static str) {
        let keep = self.short.as_ref().map_or(1, |s| s.agree);
        self.push(ticket, candidate, true, keep, |g| &mut g.shorts);
    }

    /// Keeps the verdict of the flow holding `ticket` in the group's list `list` picks (at
    /// most `keep` of them), replacing the flow's earlier one there.
    fn push(
        &self,
        ticket: &Ticket,
        candidate: &'static str,
        usable: bool,
        keep: usize,
        list: fn(&mut Group) -> &mut VecDeque<Verdict>,
    ) {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        // A group forgotten since the flow started (and perhaps made again) takes no verdict
        // from it.
        let Some(g) = table
            .groups
            .get_mut(&ticket.key)
            .filter(|g| g.born == ticket.born)
        else {
            return;
        };
        g.recorded += 1;
        let verdict = Verdict {
            flow: ticket.flow,
            candidate,
            usable,
            at: g.recorded,
        };
        let verdicts = list(g);
        if let Some(v) = verdicts.iter_mut().find(|v| v.flow == ticket.flow) {
            *v = verdict;
            return;
        }
        verdicts.push_back(verdict);
        while verdicts.len() > keep.max(1) {
            verdicts.pop_front();
        }
    }
}

/// The candidate the last `agree` verdicts all name, if they do, there are that many and each
/// is usable.
fn agreed(verdicts: &VecDeque<Verdict>, agree: usize) -> Option<&'static str> {
    let agree = agree.max(1);
    if verdicts.len() < agree {
        return None;
    }
    let mut last = verdicts.iter().rev().take(agree);
    let first = last.next().filter(|v| v.usable)?;
    last.all(|v| v.usable && v.candidate == first.candidate)
        .then_some(first.candidate)
}

/// The candidate the group's last `agree` short flows' verdicts all name, if they do, there
/// are that many and no probing flow gave a verdict since.
fn agreed_short(g: &Group, agree: usize) -> Option<&'static str> {
    let newest = g.shorts.back()?;
    if g.verdicts.back().is_some_and(|v| v.at > newest.at) {
        return None;
    }
    agreed(&g.shorts, agree)
}

/// The path memory deployed flows use (this module): /24 groups per preference mode; a flow
/// starts on the last verdict of its group when that verdict's probe found a standing queue
/// (its RTT never came back within 1.5 times the floor, or the watch moved it); every fourth
/// flow of a group probes anyway. Chosen on `selection-recurring` (validation; per flow over
/// the memory off: +0.035, competition +0.167, cellular -0.010, changing -0.017, WAN 0; +0.012
/// on a second draw), where using every verdict gained less (+0.025: cellular, changing and
/// WAN lost more) and two agreeing verdicts almost nothing (-0.001: they rarely agree); on the
/// held-out `selection-recurring-test` +0.005 (`docs/selector/path-memory.md`).
pub fn default_memory() -> Option<Memory> {
    Some(Memory {
        agree: 1,
        min_drained: 1.5,
        ..Memory::default()
    })
}

/// The short flows' verdicts deployed flows use ([`super::ProbeOptions::short`]): when the last two
/// verdicts of a destination are short flows' that lost at least 500 packets per thousand
/// delivered, at a mean rate of at most 1 Mbit/s, with an RTT that rose to at least 1.3 times
/// its floor, its next flows start on Vivace, every eighth probing again.
///
/// Why: web-like flows mostly end before the probe does (1.5 s), so the probe's choice never
/// reaches them and they run their start, Copa. Over the recorded cellular links where Copa's
/// web-like flows lose many packets (slow EVDO and UMTS links, LTE uplinks in shallow buffers)
/// Vivace finishes them sooner (measured, not traced to a cause): run whole, +0.2 to +0.7 per
/// condition there, but far below Copa where they lose little. The rate and RTT bounds keep
/// out web-like flows that lose as much beside long Cubic flows on wired paths (the older
/// sets' web class), where Vivace lost (`docs/selector/short-flows.md`).
///
/// Chosen on the web classes of three drawn sets (generator seeds 7001, 7101, 7201) and of the
/// tenth to twelfth test sets (recorded links: +0.020 per web condition, all six better) and
/// of five older sets (wired web-like flows: -0.002, at most one condition worse per set).
/// A first form without the rate and RTT bounds was tested on the thirteenth test set
/// (+0.0080 per condition, web +0.048) but lost on the five older sets' wired web classes
/// (-0.032 per web condition). The final form, tested once on the fourteenth test set, drawn for it
/// with the decision written first: +0.0043 per condition (+0.0004 to +0.0082), web +0.026
/// with 8 conditions better and 1 worse, no other class changed.
pub fn default_short() -> Option<ShortFlows> {
    Some(ShortFlows {
        rule: super::ProbeRule {
            candidate: "vivace".into(),
            ranges: vec![
                super::FeatureRange {
                    feature: super::features::LOSS,
                    min: 500.0,
                    max: f64::INFINITY,
                },
                super::FeatureRange {
                    feature: super::features::RATE_MEAN,
                    min: f64::NEG_INFINITY,
                    max: 1.0,
                },
                super::FeatureRange {
                    feature: super::features::RTT_RATIO_MAX,
                    min: 1.3,
                    max: f64::INFINITY,
                },
            ],
        },
        agree: 2,
        reprobe_every: 8,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: u32 = 0x0A00_0001; // 10.0.0.1

    fn replayed(s: Start) -> &'static str {
        match s {
            Start::Remembered(c) => c,
            other @ Start::Probe(_) => panic!("expected a start from memory, got {other:?}"),
        }
    }

    fn probe(s: Start) -> Ticket {
        match s {
            Start::Probe(Some(t)) => t,
            other => panic!("expected a probe with a ticket, got {other:?}"),
        }
    }

    #[test]
    fn two_agreeing_verdicts_start_the_next_flows_until_the_reprobe() {
        let g = Groups::new(Memory::default());
        let m = Mode::Default;
        // Flows 0 and 1 know nothing yet: both probe.
        let t0 = probe(g.start(A, m, "copa"));
        let t1 = probe(g.start(A + 1, m, "copa"));
        g.record(&t0, "bbr", 2.0);
        // One verdict is not two: flow 2 probes.
        let t2 = probe(g.start(A, m, "copa"));
        g.record(&t1, "bbr", 2.0);
        // Flow 3: the last two agree.
        assert_eq!(g.start(A + 7, m, "copa"), Start::Remembered("bbr"));
        // Flow 4 re-probes (every fourth), flow 5 is remembered again.
        let t4 = probe(g.start(A, m, "copa"));
        assert_eq!(g.start(A, m, "copa"), Start::Remembered("bbr"));
        // Flow 2's and 4's verdicts disagree with each other: the next flows probe.
        g.record(&t2, "cubic", 2.0);
        g.record(&t4, "bbr", 2.0);
        assert!(matches!(g.start(A, m, "copa"), Start::Probe(Some(_))));
        // Another /24, and another mode, know nothing.
        assert!(matches!(g.start(A + 256, m, "copa"), Start::Probe(Some(_))));
        assert!(matches!(
            g.start(A, Mode::Throughput, "copa"),
            Start::Probe(Some(_))
        ));
    }

    #[test]
    fn a_verdict_of_the_start_is_not_used_and_a_later_move_replaces_a_flows_verdict() {
        let g = Groups::new(Memory::default());
        let m = Mode::Default;
        let t0 = probe(g.start(A, m, "copa"));
        let t1 = probe(g.start(A, m, "copa"));
        g.record(&t0, "copa", 2.0);
        g.record(&t1, "copa", 2.0);
        // Both stayed: the next flow probes (on the start) and keeps its drain and watch.
        let t2 = probe(g.start(A, m, "copa"));
        // Flow 1's watch moved it to BBR: its verdict is replaced, not added.
        g.record(&t1, "bbr", 2.0);
        g.record(&t2, "bbr", 2.0);
        assert_eq!(g.start(A, m, "copa"), Start::Remembered("bbr"));
    }

    #[test]
    fn a_verdict_over_a_queue_that_drained_is_kept_but_not_used() {
        let g = Groups::new(Memory {
            agree: 1,
            min_drained: 1.5,
            ..Memory::default()
        });
        let m = Mode::Default;
        let t0 = probe(g.start(A, m, "copa"));
        g.record(&t0, "arc", 1.2);
        assert!(matches!(g.start(A, m, "copa"), Start::Probe(Some(_))));
        // The same flow's later move over a standing queue (the watch's) replaces it.
        g.record(&t0, "bbr", f64::INFINITY);
        assert_eq!(g.start(A, m, "copa"), Start::Remembered("bbr"));
        assert_eq!(g.start(A, m, "copa"), Start::Remembered("bbr"));
        // Flow 4 re-probes; NaN (no probe features) is never a standing queue.
        let t = probe(g.start(A, m, "copa"));
        g.record(&t, "bbr", f64::NAN);
        assert!(matches!(g.start(A, m, "copa"), Start::Probe(Some(_))));
    }

    #[test]
    fn the_table_is_bounded_and_specs_parse_or_say_why_not() {
        let one = Groups::new(Memory {
            agree: 1,
            max_groups: 2,
            ..Memory::default()
        });
        let mode = Mode::Default;
        let (old, kept, new) = (A, A + 256, A + 512);
        let tx = probe(one.start(old, mode, "copa"));
        let ty = probe(one.start(kept, mode, "copa"));
        one.record(&tx, "bbr", 2.0);
        one.record(&ty, "arc", 2.0);
        // `kept` is used again, then a third group comes: `old`, used longest ago, goes.
        assert_eq!(replayed(one.start(kept, mode, "copa")), "arc");
        let tz = probe(one.start(new, mode, "copa"));
        one.record(&tz, "cubic", 2.0);
        // `old` is a new group (forgetting `kept`, now the oldest); a verdict of the forgotten group's
        // flow is not taken by it.
        let tx2 = probe(one.start(old, mode, "copa"));
        one.record(&tx, "cubic", 2.0);
        assert!(matches!(
            one.start(old, mode, "copa"),
            Start::Probe(Some(_))
        ));
        one.record(&tx2, "reno", 2.0);
        assert_eq!(replayed(one.start(old, mode, "copa")), "reno");
        assert_eq!(replayed(one.start(new, mode, "copa")), "cubic");
        let none = Groups::new(Memory {
            max_groups: 0,
            ..Memory::default()
        });
        assert_eq!(none.start(A, Mode::Default, "copa"), Start::Probe(None));
        let m = Memory::parse(" 16 : 3 : 5 ").unwrap();
        assert_eq!((m.prefix_len, m.agree, m.reprobe_every), (16, 3, 5));
        assert_eq!(m.max_groups, Memory::default().max_groups);
        let m = Memory::parse("24:1:4:1.5").unwrap();
        assert!((m.min_drained - 1.5).abs() < 1e-12);
        for bad in [
            "",
            "24:2",
            "24:2:4:1:1",
            "33:2:4",
            "24:0:4",
            "24:2:0",
            "24:1.5:4",
            "x:2:4",
            "24:2:4:-1",
        ] {
            let e = Memory::parse(bad).unwrap_err();
            assert!(e.contains("e.g. 24:2:4"), "{bad:?}: {e}");
        }
        // /0 puts every address in one group; one agreeing verdict suffices with agree 1.
        let g = Groups::new(Memory::parse("0:1:3").unwrap());
        let t = probe(g.start(A, Mode::Default, "copa"));
        g.record(&t, "cubic", 2.0);
        assert_eq!(
            g.start(0xC0A8_0001, Mode::Default, "copa"),
            Start::Remembered("cubic")
        );
    }
}
