//! The probe's options: the delegate (`probe::delegate`) and the drain (`probe::drain`).

use super::watches::feed_queue;
use super::*;

/// A delegate that counts the reports it sees and flips between Vegas and BBR.
struct Counting(Arc<std::sync::atomic::AtomicU64>);

impl SelectionPolicy for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }
    fn decide(&mut self, f: &Features<'_>) -> Decision {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if f.current == 2 {
            Decision::SwitchTo(0)
        } else {
            Decision::SwitchTo(2)
        }
    }
}

/// A probe over [`one_second_models`] whose default-mode flows hand over to a [`Counting`]
/// delegate through `gate`, and the delegates' report count.
fn delegating(gate: &str, max_swaps: u32) -> (Arc<Probe>, Arc<std::sync::atomic::AtomicU64>) {
    let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = seen.clone();
    let delegate = Delegate {
        name: "counting".into(),
        factory: Arc::new(move |_: &FlowContext<'_>| {
            Box::new(Counting(counter.clone())) as Box<dyn SelectionPolicy>
        }),
        gate: DelegateGate::parse(gate).unwrap(),
        hysteresis: crate::HysteresisConfig::none(),
        max_swaps,
    };
    let probe = Probe::with_options(
        predict!(one_second_models()),
        HashMap::from([(5001, Mode::Delay)]),
        ProbeOptions {
            delegate: Some(delegate),
            drain: None,
            memory: None,
            short: None,
        },
    );
    (probe, seen)
}

#[test]
fn a_flow_past_the_gate_hands_every_later_decision_to_the_delegate() {
    use std::sync::atomic::Ordering::Relaxed;
    assert_eq!(FEATURE_NAMES[MIN_RTT], "min_rtt_ms");
    // The test path's minimum RTT is 50 ms and its queue drains (ratio 1.0): a gate at 40 ms
    // lets it pass. The delegate follows the flow from its first report, is not heard during
    // the probe (Hold), decides from the probe's end on, with its own hysteresis, and stops
    // after its two swaps (it would flip on every report).
    let (probe, seen) = delegating("40:1.1:0", 2);
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(p.hysteresis(), None, "the selector's while probing");
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 40, 0.0);
    assert!(d[..20].iter().all(|d| *d == Decision::Hold), "{d:?}");
    assert_eq!(
        d[20],
        Decision::SwitchTo(2),
        "the delegate's, not the models' stay"
    );
    assert_eq!(d[21], Decision::SwitchTo(0));
    assert!(d[22..].iter().all(|d| *d == Decision::Stay), "{d:?}");
    assert_eq!(current, 0);
    assert_eq!(
        seen.load(Relaxed),
        22,
        "every report once, until its swaps were made"
    );
    assert_eq!(p.hysteresis(), Some(crate::HysteresisConfig::none()));
    assert_eq!(
        p.explain().map(|e| e.by),
        Some("delegate"),
        "the probe's scores are still explained, as the delegate's decisions"
    );
    let (probe, _) = delegating("40:1.1:0", 5);
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 40, 0.0);
    let swaps = d
        .iter()
        .filter(|d| matches!(d, Decision::SwitchTo(_)))
        .count();
    assert_eq!(swaps, 5, "{d:?}");

    // A longer gate keeps the flow: the probe's choice (stay, on this steady path), the
    // delegate dropped after the probe's 20 reports, the selector's hysteresis.
    let (probe, seen) = delegating("60:1.1:0", 2);
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 40, 0.0);
    assert!(d[20..].iter().all(|d| *d == Decision::Stay), "{d:?}");
    assert_eq!((current, seen.load(Relaxed)), (0, 20));
    assert_eq!(p.hysteresis(), None);

    // A delay-sensitive flow never builds a delegate.
    let (probe, seen) = delegating("40:1.1:0", 2);
    let delay = to_port(5001);
    let mut p = probe.policy(&delay);
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 40, 0.0);
    assert!(!d.contains(&Decision::SwitchTo(2)), "{d:?}");
    assert_eq!(seen.load(Relaxed), 0);
}

#[test]
fn delegate_gates_parse_or_say_why_not() {
    assert_eq!(FEATURE_NAMES[RATE_MAX], "rate_max_mbps");
    let g = DelegateGate::parse(" 90 : 1.1 : 20 ").unwrap();
    assert_eq!(
        g,
        DelegateGate {
            min_rtt_ms: 90.0,
            max_drained: 1.1,
            min_rate_mbps: 20.0,
        }
    );
    let mut x = [0.0; N_FEATURES];
    x[MIN_RTT] = 90.0;
    x[DRAINED] = 1.1;
    x[RATE_MAX] = 20.0;
    assert!(g.passes(&x));
    for (i, v) in [(DRAINED, 1.2), (MIN_RTT, 89.0), (RATE_MAX, 19.0)] {
        let mut y = x;
        y[i] = v;
        assert!(!g.passes(&y), "{i} = {v}");
    }
    for bad in [
        "90",
        "90:1.1",
        "90:1.1:",
        ":1.1:20",
        "x:1.1:20",
        "90:0.5:20",
        "-1:1.1:20",
        "inf:1.1:20",
        "90:NaN:20",
        "90:1.1:20:1",
    ] {
        let e = DelegateGate::parse(bad).unwrap_err();
        assert!(
            e.contains("not <min RTT ms>:<max drained ratio>:<min rate"),
            "{bad}: {e}"
        );
    }
}

/// A probe over [`one_second_models`] whose default-mode flows drain by `drain`.
fn draining(drain: &str) -> Arc<Probe> {
    Probe::with_options(
        predict!(one_second_models()),
        HashMap::from([(5001, Mode::Delay)]),
        ProbeOptions {
            delegate: None,
            drain: Some(Drain::parse(drain).unwrap()),
            memory: None,
            short: None,
        },
    )
}

/// Feeds 40 reports of a 10 Mbit/s, 50 ms path (62,500 bytes a report, 43 packets of BDP)
/// whose RTT is `late_rtt_us` on reports 19-21 (the probe's last three) and 50 ms elsewhere.
fn run_queued(p: &mut ProbePolicy, late_rtt_us: u64, cv: f64) -> Vec<Decision> {
    let mut current = p.initial();
    let mut out = Vec::new();
    for i in 1..=40u64 {
        let k = if i.is_multiple_of(2) {
            1.0 + cv
        } else {
            1.0 - cv
        };
        let rtt_us = if (19..=21).contains(&i) {
            late_rtt_us
        } else {
            50_000
        };
        let m = Measurement {
            now_us: 50_000 * i,
            acked_bytes: (62_500.0 * k) as u64,
            rtt_us,
            min_rtt_us: 50_000,
            ..Measurement::default()
        };
        let d = decide_on(p, current, &m, 50_000, i);
        if let Decision::SwitchTo(k) = d {
            current = k;
        }
        out.push(d);
    }
    out
}

#[test]
fn a_flow_that_keeps_its_start_over_its_own_queue_drains_to_one_bdp() {
    assert_eq!(FEATURE_NAMES[RTT_RATIO_LAST], "rtt_ratio_last");
    // The RTT doubled at the probe's end (ratio 2 >= 1.5), the queue had drained before
    // (1.0 <= 1.3), the path holds 43 packets (>= 40): one drain to 62,500 bytes, then the
    // flow stays.
    let probe = draining("1.5:1.3:40:1");
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let d = run_queued(&mut p, 100_000, 0.0);
    assert!(d[..20].iter().all(|d| *d == Decision::Hold), "{d:?}");
    assert_eq!(d[20], Decision::Drain { cwnd_bytes: 62_500 });
    assert!(d[21..].iter().all(|d| *d == Decision::Stay), "{d:?}");
    assert_eq!(p.chosen(), Some(0));
    // Twice the BDP with two BDPs.
    let mut p = draining("1.5:1.3:40:2").policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(
        run_queued(&mut p, 100_000, 0.0)[20],
        Decision::Drain {
            cwnd_bytes: 125_000
        }
    );

    // No drain: an RTT near its floor, a queue that never drained, a path under the least
    // BDP, a flow that moves (a variable rate: Copa), a delay-sensitive flow.
    for (spec, late, cv, ctx_port) in [
        ("1.5:1.3:40:1", 70_000, 0.0, 0),
        ("1.5:1.3:40:1", 100_000, 0.0, 5001),
        ("1.5:1.3:50:1", 100_000, 0.0, 0),
        ("2.5:1.3:40:1", 100_000, 0.0, 0),
        ("1.5:1.3:40:1", 100_000, 0.5, 0),
    ] {
        let ctx = to_port(ctx_port);
        let mut p = draining(spec).policy(&ctx);
        let d = run_queued(&mut p, late, cv);
        assert!(
            !d.iter().any(|d| matches!(d, Decision::Drain { .. })),
            "{spec} {late} {cv} {ctx_port}: {d:?}"
        );
    }
    // A queue up for the whole probe's last five RTTs never drained (ratio 2 > 1.3).
    let mut x = [0.0; N_FEATURES];
    x[RTT_RATIO_LAST] = 2.0;
    x[DRAINED] = 2.0;
    x[RATE_MAX] = 10.0;
    x[MIN_RTT] = 50.0;
    let d = Drain::parse("1.5:1.3:40:1").unwrap();
    assert_eq!(d.window_bytes(&x, 1448), None);
    x[DRAINED] = 1.0;
    assert_eq!(d.window_bytes(&x, 1448), Some(62_500));
}

#[test]
fn drain_specs_parse_or_say_why_not() {
    assert_eq!(
        Drain::parse(" 1.5 : 1.3 : 40 : 1 "),
        Ok(Drain {
            min_ratio: 1.5,
            max_drained: 1.3,
            min_bdp_pkts: 40.0,
            bdps: 1.0,
        })
    );
    assert_eq!(default_drain(), Some(Drain::parse("1.5:1.3:40:1").unwrap()));
    for bad in [
        "1.5",
        "1.5:1.3:40",
        "1.5:1.3:40:1:1",
        "0.5:1.3:40:1",
        "1.5:0.9:40:1",
        "1.5:1.3:-1:1",
        "1.5:1.3:40:0.5",
        "x:1.3:40:1",
        "1.5:1.3:inf:1",
    ] {
        let e = Drain::parse(bad).unwrap_err();
        assert!(
            e.contains("not <min RTT ratio>:<max drained ratio>"),
            "{bad}: {e}"
        );
    }
}

/// A probe over [`one_second_models`] with the path memory `memory` (and the watch `watch`);
/// port 5001 is delay-sensitive.
fn remembering(memory: Memory, watches: Vec<Watch>) -> Arc<Probe> {
    Probe::with_options(
        predict!(one_second_models(), watches: watches),
        HashMap::from([(5001, Mode::Delay)]),
        ProbeOptions {
            delegate: None,
            drain: None,
            memory: Some(memory),
            short: None,
        },
    )
}

#[test]
fn a_flow_starts_on_its_destinations_last_verdict_and_every_fourth_probes_again() {
    let any_queue = Memory {
        agree: 1,
        ..Memory::default()
    };
    let probe = remembering(any_queue, Vec::new());
    // Flow 0 probes on its start (bbr) and moves to Copa on a variable delivery rate.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert!(!p.remembered());
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 40, 0.5);
    assert_eq!(d[20], Decision::SwitchTo(1));
    // Flows 1-3 start on Copa from their first report: no probe, no swap, nothing to
    // explain.
    for _ in 1..4 {
        let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
        assert!(p.remembered());
        assert_eq!(p.initial(), 1);
        let mut current = p.initial();
        let d = run(&mut p, &mut current, 40, 0.0);
        assert!(d.iter().all(|d| *d == Decision::Stay), "{d:?}");
        assert_eq!(p.chosen(), Some(1));
        assert!(p.explain().is_none());
    }
    // Flow 4 probes again; on a steady path it stays on bbr, and that verdict (the start)
    // sends flow 5 back to probing.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert!(!p.remembered());
    assert_eq!(p.initial(), 0);
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 40, 0.0);
    assert!(d[20..].iter().all(|d| *d == Decision::Stay), "{d:?}");
    let p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert!(!p.remembered());
    // A delay-sensitive flow keeps its own start whatever its group holds.
    let mut p = probe.policy(&to_port(5001));
    assert!(!p.remembered());
    let _ = run(&mut p, &mut current, 40, 0.5);
}

#[test]
fn the_deployed_memory_uses_only_verdicts_made_over_a_standing_queue() {
    let deployed = default_memory().unwrap();
    assert_eq!(
        (deployed.prefix_len, deployed.agree, deployed.reprobe_every),
        (24, 1, 4)
    );
    assert!((deployed.min_drained - 1.5).abs() < 1e-12);
    // The probe's move to Copa on a path whose RTT stayed at its floor (drained 1.0): the
    // next flow probes.
    let probe = remembering(deployed, Vec::new());
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let mut current = p.initial();
    assert_eq!(
        run(&mut p, &mut current, 40, 0.5)[20],
        Decision::SwitchTo(1)
    );
    assert!(
        !probe
            .policy(&FlowContext::for_candidates(&NAMES))
            .remembered()
    );
    // The watch's move is made over a queue that never drained: the next flow starts on its
    // target.
    let watch = Watch {
        target: "copa".into(),
        ..Watch::default()
    };
    let probe = remembering(deployed, vec![watch]);
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue(&mut p, 0), Some((101, 1, true)));
    let p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert!(p.remembered());
    assert_eq!(p.initial(), 1);
    // Another /24 knows nothing.
    let elsewhere = FlowContext {
        dst_ip: 0x0A00_0100,
        ..FlowContext::for_candidates(&NAMES)
    };
    assert!(!probe.policy(&elsewhere).remembered());
}

/// A flow of the default mode that sends five reports (a quarter second of a 1-s probe),
/// each of 43 segments delivered and `lost` lost, and closes; whether it started from memory.
fn short_flow(probe: &Probe, lost: u64) -> bool {
    short_flow_to(probe, &FlowContext::for_candidates(&NAMES), lost)
}

/// [`short_flow`] to `ctx`'s destination.
fn short_flow_to(probe: &Probe, ctx: &FlowContext<'_>, lost: u64) -> bool {
    let mut p = probe.policy(ctx);
    let remembered = p.remembered();
    let current = p.initial();
    for i in 1..=5 {
        let m = Measurement {
            now_us: 50_000 * i,
            acked_bytes: 43 * 1448,
            lost_pkts: lost,
            rtt_us: 50_000,
            min_rtt_us: 50_000,
            ..Measurement::default()
        };
        let d = decide_on(&mut p, current, &m, 50_000, i);
        assert!(matches!(d, Decision::Hold | Decision::Stay), "{d:?}");
    }
    remembered
}

#[test]
fn the_deployed_short_flow_verdicts_are_the_documented_ones() {
    let spec = "2:8:vivace:loss_per_kpkt=500..,rate_mean_mbps=..1,rtt_ratio_max=1.3..";
    assert_eq!(default_short(), Some(ShortFlows::parse(spec).unwrap()));
}

#[test]
fn two_lossy_short_flows_start_their_destinations_next_flows_on_the_rules_candidate() {
    let short = ShortFlows::parse("2:8:copa:loss_per_kpkt=500..").unwrap();
    let probe = Probe::with_options(
        predict!(one_second_models()),
        HashMap::new(),
        ProbeOptions {
            delegate: None,
            drain: None,
            memory: default_memory(),
            short: Some(short),
        },
    );
    let start = |p: &ProbePolicy| NAMES[p.initial()];
    // Flow 0 loses 40 of 83 (930 per thousand delivered): one short verdict is not two.
    assert!(!short_flow(&probe, 40));
    assert!(!short_flow(&probe, 40), "flow 1 probes");
    // Flows 2-7 start on Copa (flow 4 too: the short verdicts' cadence is every eighth).
    for flow in 2..8 {
        let p = probe.policy(&FlowContext::for_candidates(&NAMES));
        assert!(p.remembered(), "flow {flow}");
        assert_eq!(start(&p), "copa");
    }
    // Flow 8 probes again; short and clean, it gives no verdict, so flow 9 keeps Copa.
    assert!(!short_flow(&probe, 0));
    assert!(short_flow(&probe, 0), "flow 9");
    for _ in 10..16 {
        assert!(
            probe
                .policy(&FlowContext::for_candidates(&NAMES))
                .remembered()
        );
    }
    // Flow 16 probes to its end on a steady path and stays on its start: a probe's verdict
    // replaces the short flows', and flow 17 probes.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert!(!p.remembered());
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 40, 0.0);
    assert!(d[20..].iter().all(|d| *d == Decision::Stay), "{d:?}");
    drop(p);
    let p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert!(!p.remembered());
    assert_eq!(start(&p), "bbr");
}

#[test]
fn a_short_flow_below_the_rules_loss_or_of_another_mode_gives_no_verdict() {
    let probe = Probe::with_options(
        predict!(one_second_models()),
        HashMap::from([(5001, Mode::Delay)]),
        ProbeOptions {
            delegate: None,
            drain: None,
            memory: default_memory(),
            short: Some(ShortFlows::parse("1:8:copa:loss_per_kpkt=500..").unwrap()),
        },
    );
    // 20 lost of 63 (465 per thousand delivered): below the box.
    assert!(!short_flow(&probe, 20));
    assert!(!short_flow(&probe, 20));
    // A delay-sensitive flow has no ticket: it teaches nothing, and the next default-mode
    // flow probes.
    assert!(!short_flow_to(&probe, &to_port(5001), 40));
    assert!(
        !probe
            .policy(&FlowContext::for_candidates(&NAMES))
            .remembered()
    );
    // One lossy short flow suffices with agreement 1.
    assert!(!short_flow(&probe, 40));
    assert!(
        probe
            .policy(&FlowContext::for_candidates(&NAMES))
            .remembered()
    );
    for bad in [
        "",
        "2:8",
        "0:8:copa:loss_per_kpkt=500..",
        "2:0:copa:loss_per_kpkt=500..",
        "2:x:copa:loss_per_kpkt=500..",
        "2:8:copa",
        "2:8:copa:no_such_feature=1..",
    ] {
        let e = ShortFlows::parse(bad).unwrap_err();
        assert!(e.contains("e.g. 2:8:vivace"), "{bad:?}: {e}");
    }
}
