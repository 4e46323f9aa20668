//! The watches after the probe (`probe::watch`) and the later models' choice beside them.

use super::*;

#[test]
fn a_path_change_starts_the_watch_over_on_the_new_floor() {
    // The held-queue watch to Vegas; at report 41 the path becomes 100 ms long and the selector
    // says so: the watch measures against the new floor and never fires.
    let probe = watching(Watch {
        target: "vegas".into(),
        min_drained: 0.0,
        ..Watch::held_queue()
    });
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue_with(&mut p, 0, 400, 40, true), None);
    // Not told, it moves at report 201 (`the_deployed_watches_tell_...`).
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue_for(&mut p, 0, 400), Some((201, 2, true)));
}

/// A steady 50-ms path for 2 s (the probe keeps bbr), then a competitor's queue holds every RTT
/// at 100 ms; every report (50 ms apart) acknowledges 62,500 bytes (43 packets) and loses
/// `lost_pkts`. Returns the watch's move: (report, candidate, afresh).
pub(super) fn feed_queue(p: &mut ProbePolicy, lost_pkts: u64) -> Option<(u64, usize, bool)> {
    feed_queue_for(p, lost_pkts, 200)
}

/// [`feed_queue`] over `reports` reports.
fn feed_queue_for(p: &mut ProbePolicy, lost_pkts: u64, reports: u64) -> Option<(u64, usize, bool)> {
    feed_queue_after(p, lost_pkts, reports, 40)
}

/// [`feed_queue_for`] with the queue rising after report `rise` instead of 40.
fn feed_queue_after(
    p: &mut ProbePolicy,
    lost_pkts: u64,
    reports: u64,
    rise: u64,
) -> Option<(u64, usize, bool)> {
    feed_queue_with(p, lost_pkts, reports, rise, false)
}

/// [`feed_queue_after`]; with `path_change` the rise is a longer path, and the policy is told
/// so (as the selector's detector would) when it comes.
fn feed_queue_with(
    p: &mut ProbePolicy,
    lost_pkts: u64,
    reports: u64,
    rise: u64,
    path_change: bool,
) -> Option<(u64, usize, bool)> {
    let rtt = |i: u64| if i <= rise { 50_000 } else { 100_000 };
    let mut current = p.initial();
    let mut moved = None;
    for i in 1..=reports {
        if path_change && i == rise + 1 {
            p.path_changed(rtt(i));
        }
        let m = Measurement {
            now_us: 50_000 * i,
            acked_bytes: 62_500,
            lost_pkts: if i > rise { lost_pkts } else { 0 },
            rtt_us: rtt(i),
            min_rtt_us: rtt(i),
            ..Measurement::default()
        };
        let d = decide_on(p, current, &m, rtt(i), i);
        if let Decision::SwitchTo(k) = d {
            assert!(moved.is_none(), "one move, report {i}");
            moved = Some((i, k, p.afresh(k)));
            current = k;
        }
    }
    moved
}

fn watching(watch: Watch) -> Arc<Probe> {
    Probe::new(
        predict!(one_second_models(), watches: vec![watch]),
        HashMap::from([(5001, Mode::Delay)]),
    )
}

#[test]
fn the_watch_moves_a_flow_that_stayed_once_a_queue_never_drains() {
    let probe = watching(Watch {
        target: "copa".into(),
        ..Watch::default()
    });
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    // The queue rises at report 41 (2.05 s); the watch has run since the probe ended at
    // report 21 and needs 3 s of it without a drained sample: report 101 (5.05 s).
    assert_eq!(feed_queue(&mut p, 0), Some((101, 1, true)));
    assert_eq!(p.chosen(), Some(1));
    assert_eq!(p.explain().unwrap().by, "watch");
    assert!(!p.afresh(2), "only the watch's own move is made afresh");
    assert!(
        !p.afresh_floor(1),
        "the path's floor, unless the watch says otherwise"
    );

    // A delay-sensitive flow keeps its start: the watch is for the default mode.
    let ctx = to_port(5001);
    let mut p = probe.policy(&ctx);
    assert_eq!(feed_queue(&mut p, 0), None);

    // A watch with `fresh_floor` hands its target the flow's smoothed RTT as the floor, and
    // only its target.
    let probe = watching(Watch {
        target: "copa".into(),
        fresh_floor: true,
        ..Watch::default()
    });
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue(&mut p, 0), Some((101, 1, true)));
    assert!(p.afresh_floor(1) && !p.afresh_floor(2));
    // ... and only afresh: a kept move continues from the handed-over state.
    let probe = watching(Watch {
        target: "copa".into(),
        afresh: false,
        fresh_floor: true,
        ..Watch::default()
    });
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue(&mut p, 0), Some((101, 1, false)));
    assert!(!p.afresh_floor(1));
}

#[test]
fn the_deployed_watch_moves_only_when_the_queue_also_overflows() {
    assert_eq!(default_watch()[0], Watch::overflowing_queue());
    let probe = watching(Watch {
        target: "copa".into(),
        ..Watch::overflowing_queue()
    });
    // 4 packets lost of 47 a report (8.5 %): a queue that overflows steadily. Its window is
    // 2 s, so the move comes 2 s after the queue rose (report 41): report 81.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue(&mut p, 4), Some((81, 1, true)));
    // The same queue without losses (or with 1 of 44, 2.3 %) is not an overflowing one.
    for lost in [0, 1] {
        let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
        assert_eq!(feed_queue(&mut p, lost), None, "{lost} lost a report");
    }
}

#[test]
fn the_deployed_watches_tell_an_overflowing_queue_from_a_held_one() {
    assert_eq!(
        default_watch(),
        vec![Watch::overflowing_queue(), Watch::held_queue()]
    );
    // The two deployed watches, with targets among the test's candidates: BBR for the
    // overflowing queue, Vegas for the held one (whose probe test is left out first: this
    // path's queue drained during the probe).
    let probe = Probe::new(
        predict!(
            one_second_models(),
            watches: vec![
                Watch {
                    target: "bbr".into(),
                    ..Watch::overflowing_queue()
                },
                Watch {
                    target: "vegas".into(),
                    min_drained: 0.0,
                    ..Watch::held_queue()
                },
            ],
        ),
        HashMap::new(),
    );
    // The flow keeps bbr at the probe's end (the test's models), so the overflowing watch's
    // target is its own candidate and only the held-queue watch runs. The queue rises at
    // report 41 (2.05 s); held without losses, the move comes 8 s later, at report 201.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue_for(&mut p, 0, 400), Some((201, 2, true)));
    // The same queue losing 1 packet of 44 a report (2.3 %) is neither held nor overflowing.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue_for(&mut p, 1, 400), None);
    // With the deployed probe test the held-queue watch never starts here: the queue came
    // after the probe, which saw it drain.
    let gated = watching(Watch {
        target: "vegas".into(),
        ..Watch::held_queue()
    });
    let mut p = gated.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue_for(&mut p, 0, 400), None);
    // A queue there from report 11 (0.55 s) on, through the probe's last RTTs: the watch
    // starts once the probe has ended (the first report 1 s after the flow's first, report
    // 21; it counts from the next) and moves the flow 8 s later.
    let mut p = gated.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue_after(&mut p, 0, 400, 10), Some((182, 2, true)));
}

/// Models whose window ends after 2 s, trained on flows where a switch to Vegas gains 0.3
/// whatever the path.
fn two_second_models() -> Arc<ProbeModels> {
    later_models(2_000)
}

/// [`two_second_models`] with a window of `min_ms`.
fn later_models(min_ms: u64) -> Arc<ProbeModels> {
    let mut later: Vec<ProbeSample> = samples(400);
    for s in &mut later {
        s.gain = if s.target == "vegas" { 0.3 } else { -0.2 };
    }
    let window = ProbeWindow { min_ms, rtts: 10 };
    Arc::new(ProbeModels::train(&later, window, starts()).unwrap())
}

fn looking_later(later: Option<Arc<ProbeModels>>, prefs: HashMap<u32, Mode>) -> Arc<Probe> {
    Probe::new(predict!(one_second_models(), later: later), prefs)
}

#[test]
fn default_mode_flows_choose_with_the_later_models_at_their_window() {
    // A steady path: at the probe's end (1 s) the flow keeps bbr; at 2 s the later models
    // move it to Vegas.
    let probe = looking_later(Some(two_second_models()), HashMap::new());
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 60, 0.0);
    assert_eq!(d[20], Decision::Stay, "the probe's end: stays");
    // 2 s from the first report: the 41st report.
    assert!(d[21..40].iter().all(|d| *d == Decision::Stay), "{d:?}");
    assert_eq!(d[40], Decision::SwitchTo(2), "at 2 s: Vegas; {d:?}");
    assert!(d[41..].iter().all(|d| *d == Decision::Stay), "{d:?}");
    assert_eq!(p.chosen(), Some(2));
    assert!(
        p.explain().unwrap().scores[2] > 0.2,
        "explained by the later models"
    );
    assert_eq!(p.part(), Part::LaterModels);

    // Without later models the flow keeps its start.
    let probe = looking_later(None, HashMap::new());
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let mut current = p.initial();
    run(&mut p, &mut current, 60, 0.0);
    assert_eq!(current, 0);

    // A variable rate, where the probe's models would move to Copa at 1 s: the flow waits for
    // the later models, which say Vegas.
    let probe = looking_later(Some(two_second_models()), HashMap::new());
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 60, 0.5);
    assert_eq!(d[20], Decision::Stay, "{d:?}");
    assert_eq!(d[40], Decision::SwitchTo(2), "{d:?}");

    // A throughput-sensitive flow chooses at the probe's end with the probe's models.
    let probe = looking_later(
        Some(two_second_models()),
        HashMap::from([(5002, Mode::Throughput)]),
    );
    let mut ctx = FlowContext::for_candidates(&NAMES);
    ctx.dst_port = 5002;
    let mut p = probe.policy(&ctx);
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 60, 0.5);
    assert_eq!(d[20], Decision::SwitchTo(1), "{d:?}");
    assert_eq!(current, 1);
}

#[test]
fn the_watch_and_the_later_choice_the_first_to_come_decides() {
    let probe = |later_ms: u64| {
        Probe::new(
            predict!(
                one_second_models(),
                watches: vec![Watch {
                    target: "copa".into(),
                    ..Watch::default()
                }],
                later: Some(later_models(later_ms)),
            ),
            HashMap::new(),
        )
    };
    // The watch fires at report 101 (5.05 s): before a 6-s later choice, which is then not
    // made (one move only), and after a 3-s one, which ends the watch.
    let mut p = probe(6_000).policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue(&mut p, 0), Some((101, 1, true)));
    let mut p = probe(3_000).policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue(&mut p, 0), Some((61, 2, false)));
}

/// A 50-ms path whose delivery rate varies by half every other report (the test's models move
/// the flow from bbr to copa at the probe's end, report 21), each report acknowledging 43
/// packets and, from report `from` on, losing `lost` of them. Returns the moves.
fn feed_variable_losses(p: &mut ProbePolicy, lost: u64, from: u64) -> Vec<(u64, usize, bool)> {
    let mut current = p.initial();
    let mut moves = Vec::new();
    for i in 1..=200_u64 {
        let k = if i.is_multiple_of(2) { 1.5 } else { 0.5 };
        let m = Measurement {
            now_us: 50_000 * i,
            acked_bytes: (62_500.0 * k) as u64,
            lost_pkts: if i >= from { lost } else { 0 },
            rtt_us: 50_000,
            min_rtt_us: 50_000,
            ..Measurement::default()
        };
        let d = decide_on(p, current, &m, 50_000, i);
        if let Decision::SwitchTo(c) = d {
            moves.push((i, c, p.afresh(c)));
            current = c;
        }
    }
    moves
}

#[test]
fn a_watch_from_the_probes_choice_leaves_it_where_it_loses_a_band_of_packets() {
    let from_copa = || {
        Watch::parse(
            "1,2000,10,vegas,kept,loss=0.03,maxloss=0.08,from=copa,probe=loss_per_kpkt=..50",
        )
        .unwrap()
    };
    let probe = watching(from_copa());
    // 2 of 45 packets lost a report from report 41 (4.4 %): the watch's 2-s window (41
    // reports) first loses 3 % at report 68 (28 lossy reports of the 41).
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let moves = feed_variable_losses(&mut p, 2, 41);
    assert_eq!(moves.len(), 2, "{moves:?}");
    assert_eq!(moves[0], (21, 1, false), "the probe's choice");
    let (at, to, afresh) = moves[1];
    assert!(at == 68 && to == 2 && !afresh, "{moves:?}");
    assert_eq!(p.chosen(), Some(2));
    // No losses, or more than the band (6 of 49, 12 %) in every report the watch sees: the
    // flow stays on copa.
    for lost in [0, 6] {
        let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
        assert_eq!(
            feed_variable_losses(&mut p, lost, 22).len(),
            1,
            "{lost} lost"
        );
    }
    // A probe that lost 2 of 45 packets (44 per thousand) lies in the box; one that lost 4 of
    // 47 (85 per thousand) does not, and its flow is never watched.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_variable_losses(&mut p, 2, 1).len(), 2);
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_variable_losses(&mut p, 4, 1).len(), 1);
    // A flow that kept its start (a steady path) is not on copa: never watched.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue(&mut p, 2), None);
    // Nor is one another watch moved to copa: the queue watch's move is the only one.
    let both = Probe::new(
        predict!(
            one_second_models(),
            watches: vec![
                Watch {
                    target: "copa".into(),
                    ..Watch::default()
                },
                from_copa(),
            ],
        ),
        HashMap::new(),
    );
    let mut p = both.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue(&mut p, 2), Some((101, 1, true)));
}
