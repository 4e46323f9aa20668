//! The selector in the simulator: continuity across swaps, 1,000 forced swaps, hysteresis and
//! stale reports, on a 10 Mbit/s, 50 ms path with a 1-BDP drop-tail buffer.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::Ordering;

use ccp_algorithms::{
    BbrConfig, CopaConfig, CubicConfig, DynAlgorithmConfig, RenoConfig, VegasConfig,
};
use ccp_datapath::runtime::DatapathConfig;
use ccp_datapath::sim::{
    FlowSpec, LinkRate, LinkSpec, LockstepAgent, Scheme, SimConfig, SimResult, Simulation,
};
use ccp_selector::policy::{Decision, Features, FlowContext, SelectionPolicy};
use ccp_selector::{EventKind, EveryN, HysteresisConfig, Selector, SelectorLog, StaticPolicy};

const MS: u64 = 1_000_000;
const MSS: u32 = 1448;
const LINK_BPS: u64 = 10_000_000;
const BDP_BYTES: u64 = LINK_BPS / 8 / 20;

fn four() -> Vec<Box<dyn DynAlgorithmConfig>> {
    vec![
        Box::new(RenoConfig::default()),
        Box::new(CubicConfig::default()),
        Box::new(VegasConfig::default()),
        Box::new(BbrConfig::default()),
    ]
}

fn run(sel: Selector, secs: u64, agent_latency_ns: u64) -> (SimResult, Arc<SelectorLog>) {
    run_on(sel, secs, agent_latency_ns, BDP_BYTES, Vec::new())
}

/// [`run`] with `buffer_bytes` of buffer and `others` beside the selector's flow.
fn run_on(
    sel: Selector,
    secs: u64,
    agent_latency_ns: u64,
    buffer_bytes: u64,
    others: Vec<FlowSpec>,
) -> (SimResult, Arc<SelectorLog>) {
    let log = sel.log();
    let mut flows = vec![FlowSpec::bulk(
        Scheme::Ccp {
            alg: "selector".to_string(),
        },
        25 * MS,
    )];
    flows.extend(others);
    let cfg = SimConfig {
        seed: 7,
        duration_ns: secs * 1_000 * MS,
        link: LinkSpec {
            rate: LinkRate::Constant { bps: LINK_BPS },
            buffer_bytes,
            loss: 0.0,
        },
        flows,
        changes: Vec::new(),
        agent_latency_ns,
        ack_aggregation_ns: 0,
        sample_interval_ns: 10 * MS,
        datapath: DatapathConfig::default(),
    };
    let r = Simulation::new(cfg, Some(LockstepAgent::new(sel)))
        .expect("config")
        .run()
        .expect("run");
    (r, log)
}

fn utilization(r: &SimResult) -> f64 {
    r.flows[0].throughput_bps(r.duration_ns) / LINK_BPS as f64
}

/// Round-robin every `n` reports, no hysteresis except the hold after a loss.
fn every(n: u64) -> Selector {
    Selector::new(
        four(),
        Arc::new(move |_: &FlowContext<'_>| Box::new(EveryN { n }) as _),
    )
    .with_hysteresis(HysteresisConfig {
        loss_hold_rtts: 1.0,
        ..HysteresisConfig::none()
    })
}

#[test]
fn cwnd_and_srtt_are_continuous_across_swaps() {
    let (r, log) = run(every(10), 20, 0);
    let f = &r.flows[0];
    let swaps = log.swap_events();
    assert!(swaps.len() >= 20, "only {} swaps", swaps.len());
    let init = 10 * MSS;
    let mut max_jump = 0.0_f64;
    for e in &swaps {
        let EventKind::Swap {
            cwnd_bytes,
            installed_cwnd_bytes,
            srtt_us,
            srtt_after_us,
            ..
        } = e.kind
        else {
            unreachable!()
        };
        // The incoming candidate continues from the handed-over RTT state.
        if srtt_us > 0 {
            let ratio = srtt_after_us as f64 / srtt_us as f64;
            assert!((0.5..=2.0).contains(&ratio), "{e:?}: srtt {ratio:.2}x");
        }
        assert!(installed_cwnd_bytes <= 2 * cwnd_bytes, "{e:?}");
        // One RTT (~60 ms) after the swap: no burst above 2x, no drop to the initial window.
        let t0 = e.time_us * 1_000;
        for s in f
            .series
            .iter()
            .filter(|s| s.t_ns > t0 && s.t_ns <= t0 + 60 * MS)
        {
            let jump = f64::from(s.cwnd_bytes) / f64::from(cwnd_bytes.max(1));
            max_jump = max_jump.max(jump);
            assert!(
                s.cwnd_bytes <= 2 * cwnd_bytes,
                "{e:?}: cwnd {}",
                s.cwnd_bytes
            );
            if cwnd_bytes >= 4 * init {
                assert!(s.cwnd_bytes > init, "{e:?}: back to the initial window");
            }
        }
    }
    println!(
        "continuity: {} swaps, max cwnd after/handed-over within one RTT {max_jump:.2}x",
        swaps.len()
    );
}

#[test]
fn a_thousand_forced_swaps_lose_no_data() {
    let secs = 150;
    let (r, log) = run(every(1), secs, 0);
    let (s, _) = run(
        Selector::new(
            four(),
            Arc::new(|_: &FlowContext<'_>| Box::new(StaticPolicy { candidate: 1 }) as _),
        ),
        secs,
        0,
    );
    let f = &r.flows[0];
    let swaps = log.swaps.load(Ordering::Relaxed);
    let util = utilization(&r);
    println!(
        "1,000 swaps: {swaps} swaps, utilization {util:.3} (static cubic {:.3}), timeouts {} (static {}), stale {}",
        utilization(&s),
        f.timeouts,
        s.flows[0].timeouts,
        log.stale_reports.load(Ordering::Relaxed)
    );
    assert!(swaps >= 1_000, "{swaps} swaps");
    assert!(util >= 0.85, "utilization {util:.3}");
    assert!(f.timeouts <= s.flows[0].timeouts, "swaps caused timeouts");
    assert_eq!(f.vm_faults, 0);
    // Delivered bytes keep growing after the start-up: every second moves data.
    let per_sec: Vec<u64> = f
        .series
        .chunks_exact(100)
        .map(|c| c.last().unwrap().delivered_bytes - c.first().unwrap().delivered_bytes)
        .collect();
    assert!(per_sec.iter().skip(1).all(|&b| b > 0), "{per_sec:?}");
}

/// Asks for candidate 1 and candidate 2 on alternate reports.
struct Flipper;

impl SelectionPolicy for Flipper {
    fn name(&self) -> &'static str {
        "flipper"
    }
    fn decide(&mut self, f: &Features<'_>) -> Decision {
        Decision::SwitchTo(1 + (f.reports % 2) as usize)
    }
}

#[test]
fn a_policy_that_flips_every_report_never_swaps_with_m_2() {
    let sel = Selector::new(
        four(),
        Arc::new(|_: &FlowContext<'_>| Box::new(Flipper) as _),
    )
    .with_hysteresis(HysteresisConfig {
        agreeing_decisions: 2,
        dwell_rtts: 0.0,
        loss_hold_rtts: 0.0,
    });
    let (r, log) = run(sel, 5, 0);
    let decisions = log
        .events()
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Decision { .. }) && e.to != e.from)
        .count();
    assert!(decisions > 50, "{decisions} decisions");
    assert_eq!(log.swaps.load(Ordering::Relaxed), 0);
    assert!(utilization(&r) > 0.5);
}

#[test]
fn stale_reports_after_a_swap_are_counted_not_unwrapped() {
    // Reno (urgent per-RTT program) and BBR (per-RTT program) alternate; with agent latency,
    // reports of the old program still arrive after each CHANGE_PROG.
    let cands: Vec<Box<dyn DynAlgorithmConfig>> = vec![
        Box::new(RenoConfig::default()),
        Box::new(BbrConfig::default()),
    ];
    let sel = Selector::new(
        cands,
        Arc::new(|_: &FlowContext<'_>| Box::new(EveryN { n: 1 }) as _),
    )
    .with_hysteresis(HysteresisConfig::none());
    let (r, log) = run(sel, 10, 20 * MS);
    let stale = log.stale_reports.load(Ordering::Relaxed);
    println!(
        "stale: {stale} stale reports over {} swaps",
        log.swaps.load(Ordering::Relaxed)
    );
    assert!(stale > 0);
    assert_eq!(log.bad_reports.load(Ordering::Relaxed), 0);
    assert!(r.flows[0].delivered_bytes > 0);
}

/// Starts on Vegas and asks for BBR from report `at` on, afresh or not, and when afresh with
/// the flow's smoothed RTT as BBR's floor (`fresh_floor`) or the path's.
#[derive(Clone, Copy)]
struct ToBbr {
    at: u64,
    afresh: bool,
    fresh_floor: bool,
}

impl SelectionPolicy for ToBbr {
    fn name(&self) -> &'static str {
        "to-bbr"
    }
    fn initial(&self) -> usize {
        2
    }
    fn decide(&mut self, f: &Features<'_>) -> Decision {
        if f.reports >= self.at {
            Decision::SwitchTo(3)
        } else {
            Decision::Stay
        }
    }
    fn afresh(&self, to: usize) -> bool {
        self.afresh && to == 3
    }
    fn afresh_floor(&self, to: usize) -> bool {
        self.fresh_floor && to == 3
    }
}

impl ToBbr {
    /// A selector over [`four`] whose flows follow this policy, without hysteresis.
    fn selector(self) -> Selector {
        Selector::new(
            four(),
            Arc::new(move |_: &FlowContext<'_>| Box::new(self) as _),
        )
        .with_hysteresis(HysteresisConfig::none())
    }
}

#[test]
fn a_swap_made_afresh_starts_the_incoming_candidate_in_its_first_slow_start() {
    let installed = |afresh: bool| {
        let sel = ToBbr {
            at: 100,
            afresh,
            fresh_floor: false,
        }
        .selector();
        let (r, log) = run(sel, 8, 0);
        let swaps = log.swap_events();
        assert_eq!(swaps.len(), 1, "{swaps:?}");
        assert!(utilization(&r) > 0.5);
        match swaps[0].kind {
            EventKind::Swap { installed_rate, .. } => installed_rate,
            ref k => panic!("{k:?}"),
        }
    };
    // Same flow up to the swap; BBR continuing from Vegas's rate paces at 0.75-1.25 of it in
    // ProbeBW, BBR afresh at Startup's 2/ln 2 of it.
    let (kept, afresh) = (installed(false), installed(true));
    println!("installed rate: afresh {afresh}, kept {kept}");
    assert!(
        f64::from(afresh) > 2.0 * f64::from(kept),
        "afresh {afresh}, kept {kept}"
    );
}

#[test]
fn bbr_handed_the_smoothed_rtt_as_its_floor_takes_a_share_of_a_cubic_queue() {
    // A 4-BDP buffer that a Cubic flow keeps full: Vegas backs off to a trickle and, at its
    // 20th report (a few seconds in, RTTs of up to 250 ms), hands over to BBR afresh. BBR
    // handed the path's 50-ms floor keeps a window of 2 x its estimate x 50 ms under a queue
    // of up to 200 ms, so it delivers about what it estimated and stays there; handed the
    // smoothed RTT (the queue included), its window counts the queue, as a BBR flow started
    // at 5 s would.
    let ours = |fresh_floor: bool| {
        let sel = ToBbr {
            at: 20,
            afresh: true,
            fresh_floor,
        }
        .selector();
        let cubic = FlowSpec::bulk(Scheme::Cubic, 25 * MS);
        let (r, log) = run_on(sel, 30, 0, 4 * BDP_BYTES, vec![cubic]);
        assert_eq!(log.swap_events().len(), 1);
        (r.flows[0].delivered_bytes, r.flows[1].delivered_bytes)
    };
    let (path_floor, cubic_then) = ours(false);
    let (own_floor, cubic_now) = ours(true);
    println!(
        "delivered, ours / Cubic's: path's floor {path_floor} / {cubic_then}, smoothed RTT {own_floor} / {cubic_now}"
    );
    assert!(
        own_floor > path_floor * 3 / 2,
        "smoothed RTT {own_floor}, path's floor {path_floor}"
    );
    assert!(cubic_now < cubic_then);
}

/// Stays on candidate `on` and asks once, on report `at`, for a drain to `cap_bytes`.
struct DrainOnce {
    on: usize,
    at: u64,
    cap_bytes: u32,
}

impl SelectionPolicy for DrainOnce {
    fn name(&self) -> &'static str {
        "drain-once"
    }
    fn initial(&self) -> usize {
        self.on
    }
    fn decide(&mut self, f: &Features<'_>) -> Decision {
        if f.reports == self.at {
            Decision::Drain {
                cwnd_bytes: self.cap_bytes,
            }
        } else {
            Decision::Stay
        }
    }
}

#[test]
fn a_drain_re_seats_the_active_candidate_with_its_window_cut() {
    let drained = |cap_bytes: u32| {
        let sel = Selector::new(
            four(),
            Arc::new(move |_: &FlowContext<'_>| {
                Box::new(DrainOnce {
                    on: 1,
                    at: 80,
                    cap_bytes,
                }) as _
            }),
        )
        .with_hysteresis(HysteresisConfig::default());
        run(sel, 10, 0)
    };
    // Cubic in a 1-BDP buffer holds up to 2 BDP: a drain to half a BDP cuts it, on Cubic,
    // through the selector's hysteresis (not a swap), and loses no data.
    let cap = (BDP_BYTES / 2) as u32;
    let (r, log) = drained(cap);
    let events: Vec<_> = log
        .events()
        .into_iter()
        .filter(|e| matches!(e.kind, EventKind::Drain { .. }))
        .collect();
    assert_eq!(
        events.len(),
        1,
        "{events:?} reports {}",
        log.reports.load(Ordering::Relaxed)
    );
    let e = &events[0];
    assert_eq!((e.from, e.to), (1, 1));
    let EventKind::Drain {
        cwnd_bytes,
        installed_cwnd_bytes,
    } = e.kind
    else {
        unreachable!()
    };
    assert!(cwnd_bytes > cap, "{e:?}");
    assert!(installed_cwnd_bytes <= cap, "{e:?}");
    assert_eq!(log.swaps.load(Ordering::Relaxed), 0);
    assert_eq!(log.drains.load(Ordering::Relaxed), 1);
    let t0 = e.time_us * 1_000;
    let f = &r.flows[0];
    let after = f
        .series
        .iter()
        .find(|s| s.t_ns > t0 + 5 * MS)
        .expect("a sample after the drain");
    assert!(
        after.cwnd_bytes <= 2 * cap,
        "cwnd {} after",
        after.cwnd_bytes
    );
    assert_eq!(f.timeouts, 0);
    assert!(utilization(&r) > 0.8, "{}", utilization(&r));

    // A window already within the cap is left alone: no event, no drain counted.
    let (_, log) = drained(u32::MAX);
    assert_eq!(log.drains.load(Ordering::Relaxed), 0);
    assert!(
        !log.events()
            .iter()
            .any(|e| matches!(e.kind, EventKind::Drain { .. }))
    );
}

/// Asks for BBR on every report and for no hysteresis of its own.
struct Impatient;

impl SelectionPolicy for Impatient {
    fn name(&self) -> &'static str {
        "impatient"
    }
    fn decide(&mut self, f: &Features<'_>) -> Decision {
        if f.current == 3 {
            Decision::Stay
        } else {
            Decision::SwitchTo(3)
        }
    }
    fn hysteresis(&self) -> Option<HysteresisConfig> {
        Some(HysteresisConfig::none())
    }
}

#[test]
fn a_policy_s_own_hysteresis_replaces_the_selector_s() {
    // Behind 100 agreeing decisions the selector alone would hold the swap for 100 reports;
    // the policy's own (none) lets its first ask through.
    let sel = Selector::new(
        four(),
        Arc::new(|_: &FlowContext<'_>| Box::new(Impatient) as _),
    )
    .with_hysteresis(HysteresisConfig {
        agreeing_decisions: 100,
        dwell_rtts: 50.0,
        loss_hold_rtts: 50.0,
    });
    let (_, log) = run(sel, 3, 0);
    let swaps = log.swap_events();
    assert_eq!(swaps.len(), 1, "{swaps:?}");
    assert!(swaps[0].time_us < 200_000, "{:?}", swaps[0]);
}

#[test]
fn a_drain_that_cuts_nothing_leaves_the_flow_as_it_was() {
    // A window already within the cap: the report's own control still applies, so the flow is
    // the candidate's alone, byte for byte (Copa in its slow start, which sets its window on
    // every report: with a control dropped there it delivers two packets less in 10 s).
    let delivered = |policy: fn() -> Box<dyn SelectionPolicy>| {
        let copa: Vec<Box<dyn DynAlgorithmConfig>> = vec![Box::new(CopaConfig::default())];
        let sel = Selector::new(copa, Arc::new(move |_: &FlowContext<'_>| policy()));
        run(sel, 10, 0).0.flows[0]
            .series
            .last()
            .unwrap()
            .delivered_bytes
    };
    let drained = delivered(|| {
        Box::new(DrainOnce {
            on: 0,
            at: 10,
            cap_bytes: u32::MAX,
        })
    });
    let alone = delivered(|| Box::new(StaticPolicy { candidate: 0 }));
    assert_eq!(drained, alone);
}

/// The simulator's CREATE carries 10.0.0.2 as a host-order integer: the selector hands it to
/// policies as it is, and byte-swapped when told the datapath sends network-order bytes
/// (ccp-kernel's encoding), so a policy's /24 is always the first three octets.
#[test]
fn policies_see_the_destination_in_host_order() {
    let seen = |network: bool| {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = seen.clone();
        let sel = Selector::new(
            four(),
            Arc::new(move |ctx: &FlowContext<'_>| {
                sink.lock().unwrap().push(ctx.dst_ip);
                Box::new(StaticPolicy::default()) as _
            }),
        )
        .with_network_order_ips(network);
        let _ = run(sel, 1, 0);
        seen.lock().unwrap().clone()
    };
    let ten_0_0_2 = u32::from(std::net::Ipv4Addr::new(10, 0, 0, 2));
    assert_eq!(seen(false), [ten_0_0_2]);
    // Read as network-order bytes, the same integer is 2.0.0.10.
    assert_eq!(
        seen(true),
        [u32::from(std::net::Ipv4Addr::new(2, 0, 0, 10))]
    );
}

/// [`ToBbr`] that explains its decisions as made by `part`.
struct Explained(ToBbr, &'static str);

impl SelectionPolicy for Explained {
    fn name(&self) -> &'static str {
        "explained"
    }
    fn initial(&self) -> usize {
        self.0.initial()
    }
    fn decide(&mut self, f: &Features<'_>) -> Decision {
        self.0.decide(f)
    }
    fn explain(&self) -> Option<ccp_selector::Explanation> {
        Some(ccp_selector::Explanation {
            by: self.1,
            ..Default::default()
        })
    }
}

/// Each swap names the part of the policy that asked for it (its event, and its log line), or
/// none for a policy that does not explain itself.
#[test]
fn a_swap_names_the_part_that_asked_for_it() {
    let to_bbr = ToBbr {
        at: 20,
        afresh: false,
        fresh_floor: false,
    };
    let explained = Selector::new(
        four(),
        Arc::new(move |_: &FlowContext<'_>| Box::new(Explained(to_bbr, "kind")) as _),
    )
    .with_hysteresis(HysteresisConfig::none());
    let by = |sel: Selector| {
        let (_, log) = run(sel, 2, 0);
        let swaps = log.swap_events();
        assert_eq!(swaps.len(), 1, "{swaps:?}");
        match swaps[0].kind {
            EventKind::Swap { by, .. } => by,
            ref k => panic!("{k:?}"),
        }
    };
    assert_eq!(by(explained), Some("kind"));
    assert_eq!(by(to_bbr.selector()), None);
}
