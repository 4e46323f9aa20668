use super::*;

const MSS: u32 = 1000;
/// 1.25 MB/s (10 Mbit/s) x 50 ms.
const RATE: u64 = 1_250_000;
const BDP: u64 = 62_500;

fn start() -> FlowStart {
    FlowStart {
        sock_id: 1,
        mss_bytes: MSS,
        init_cwnd_bytes: 10 * MSS,
        seed: 42,
    }
}

fn bbr() -> Bbr {
    Bbr::new(BbrConfig::default(), &start())
}

fn report(now_us: u64, acked_bytes: u64, rate: u64, inflight_bytes: u64) -> Measurement {
    Measurement {
        now_us,
        acked_bytes,
        rtt_us: 50_000,
        min_rtt_us: 50_000,
        rate_incoming_bytes_per_sec: rate,
        inflight_bytes,
        ..Measurement::default()
    }
}

/// Runs rounds at the link rate until the pipe is full; returns the time.
fn fill(b: &mut Bbr) -> u64 {
    let mut t = 0;
    let mut rate = 100_000;
    while b.mode() == Mode::Startup {
        t += 50_000;
        rate = (rate * 2).min(RATE);
        b.on_report(&report(t, 20_000, rate, 3 * BDP));
        assert!(t < 5_000_000, "never left Startup");
    }
    t
}

#[test]
fn startup_paces_at_high_gain_and_grows_the_window_by_the_acked_bytes() {
    // draft §4.3.1.1 and §4.2.3.4.
    let mut b = bbr();
    let c = b.activate(&Handoff::flow_start(&start()));
    assert!(matches!(c.pacing, Some(Pacing::BytesPerSec(r)) if r > 0));
    b.on_report(&report(50_000, 10_000, 200_000, 10_000));
    assert_eq!(b.mode(), Mode::Startup);
    assert_eq!(b.pacing_bytes_per_sec, (HIGH_GAIN * 200_000.0) as u64);
    assert_eq!(
        b.cwnd_bytes(),
        20_000,
        "below 2 BDP + quanta: cwnd += acked"
    );
}

#[test]
fn a_full_pipe_leads_through_drain_to_probe_bw() {
    // draft §4.3.1.2, §4.3.2.
    let mut b = bbr();
    let t = fill(&mut b);
    assert_eq!(b.mode(), Mode::Drain);
    assert_eq!(b.btl_bw_bytes_per_sec(), RATE);
    assert!((b.pacing_gain() - 1.0 / HIGH_GAIN).abs() < 1e-9);
    b.on_report(&report(t + 50_000, 20_000, RATE, 2 * BDP));
    assert_eq!(b.mode(), Mode::Drain, "still two BDPs in flight");
    b.on_report(&report(t + 100_000, 20_000, RATE, BDP));
    assert!(matches!(b.mode(), Mode::ProbeBw(c) if c.index != 1));
}

#[test]
fn probe_bw_caps_the_window_at_twice_the_bdp_and_paces_at_gain_times_btl_bw() {
    // draft §4.2.1, §4.2.3.2.
    let mut b = bbr();
    let mut t = fill(&mut b);
    for _ in 0..20 {
        t += 50_000;
        b.on_report(&report(t, 60_000, RATE, BDP));
    }
    assert_eq!(u64::from(b.cwnd_bytes()), 2 * BDP + 3 * u64::from(MSS));
    let Mode::ProbeBw(c) = b.mode() else {
        panic!("not in ProbeBW")
    };
    assert_eq!(b.pacing_bytes_per_sec, (c.gain() * RATE as f64) as u64);
}

#[test]
fn a_stale_min_rtt_triggers_probe_rtt_at_four_packets_then_returns_to_probe_bw() {
    // draft §4.3.4: 10 s without a new minimum.
    let mut b = bbr();
    let mut t = fill(&mut b);
    let slower = |t| Measurement {
        min_rtt_us: 60_000,
        rtt_us: 60_000,
        ..report(t, 60_000, RATE, BDP)
    };
    while !matches!(b.mode(), Mode::ProbeRtt(_)) {
        t += 60_000;
        b.on_report(&slower(t));
        assert!(t < 11_000_000, "no ProbeRTT after 10 s");
    }
    assert!(t > 10_000_000);
    b.on_report(&report(t + 60_000, 10_000, RATE, 4_000));
    assert_eq!(b.cwnd_bytes(), 4 * MSS);
    b.on_report(&report(t + 120_000, 4_000, RATE, 4_000));
    assert!(matches!(b.mode(), Mode::ProbeRtt(_)), "200 ms not over");
    b.on_report(&report(t + 300_000, 4_000, RATE, 4_000));
    assert!(matches!(b.mode(), Mode::ProbeBw(_)));
    assert_eq!(b.min_rtt_us(), 50_000);
    assert!(
        b.cwnd_bytes() > 100_000,
        "the window before ProbeRTT is restored"
    );
}

#[test]
fn a_loss_conserves_packets_and_a_timeout_falls_to_the_loss_window() {
    let mut b = bbr();
    let t = fill(&mut b);
    let before = b.cwnd_bytes();
    b.on_report(&Measurement {
        lost_pkts: 2,
        ..report(t + 50_000, 10_000, RATE, 30_000)
    });
    assert!(u64::from(b.cwnd_bytes()) <= 40_000 && b.cwnd_bytes() < before);
    b.on_report(&Measurement {
        timeout: true,
        ..report(t + 400_000, 0, 0, 0)
    });
    assert_eq!(b.cwnd_bytes(), 2 * MSS);
}

#[test]
fn a_handoff_past_slow_start_goes_to_probe_bw_within_twice_the_window() {
    let mut b = bbr();
    let h = Handoff {
        now_us: 1_000_000,
        cwnd_bytes: 80_000,
        srtt_us: 60_000,
        min_rtt_us: 50_000,
        delivery_rate_bytes_per_sec: 0,
        in_first_slow_start: false,
        ..Handoff::flow_start(&start())
    };
    let c = b.activate(&h);
    assert_eq!(c.cwnd_bytes, Some(80_000));
    assert!(matches!(c.pacing, Some(Pacing::BytesPerSec(r)) if r > 0));
    assert!(matches!(b.mode(), Mode::ProbeBw(_)));
    // A tiny rate sample would make the target collapse; the first RTT keeps >= cwnd / 2.
    b.on_report(&report(1_050_000, 10_000, 10_000, 80_000));
    assert!(b.cwnd_bytes() >= 40_000);
    assert!(b.handoff().delivery_rate_bytes_per_sec > 0);
    assert!(!b.handoff().in_first_slow_start);
}
