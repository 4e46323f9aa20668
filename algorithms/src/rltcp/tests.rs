use super::*;

const MSS: u32 = 1000;

fn start(seed: u64) -> FlowStart {
    FlowStart {
        sock_id: 1,
        mss_bytes: MSS,
        init_cwnd_bytes: 10 * MSS,
        seed,
    }
}

/// A flow in avoidance at `cwnd` segments with a 100 ms RTT.
fn in_avoidance(cfg: &RlTcpConfig, seed: u64, cwnd: u32) -> RlTcp {
    let mut alg = RlTcp::new(cfg, &start(seed));
    alg.activate(&Handoff {
        cwnd_bytes: cwnd * MSS,
        ssthresh_bytes: cwnd * MSS,
        in_first_slow_start: false,
        last_loss_us: Some(0),
        srtt_us: 100_000,
        min_rtt_us: 100_000,
        ..Handoff::flow_start(&start(seed))
    });
    alg
}

fn report(now_us: u64, acked_bytes: u64, rtt_us: u64) -> Measurement {
    Measurement {
        now_us,
        acked_bytes,
        rtt_us,
        min_rtt_us: rtt_us,
        rate_outgoing_bytes_per_sec: 1_000_000,
        ..Measurement::default()
    }
}

/// A path of 50 segments' BDP and a 10-segment queue, one report per RTT: the window
/// trajectory over `steps` round trips.
fn run(cfg: &RlTcpConfig, seed: u64, steps: u64) -> Vec<u32> {
    let (bdp, buffer) = (50u64, 10u64);
    let mut alg = in_avoidance(cfg, seed, 20);
    let mut t = 0;
    let mut out = Vec::new();
    for _ in 0..steps {
        let w = u64::from(alg.cwnd_bytes()) / u64::from(MSS);
        let queue = w.saturating_sub(bdp);
        let rtt = 100_000 * (bdp + queue.min(buffer)) / bdp;
        t += rtt;
        alg.on_report(&Measurement {
            lost_pkts: queue.saturating_sub(buffer),
            ..report(t, w.min(bdp + buffer) * u64::from(MSS), rtt)
        });
        out.push(alg.cwnd_bytes());
    }
    out
}

#[test]
fn reward_bins_are_the_papers() {
    for (delta, r) in [
        (1.0, 10.0),
        (0.99, 2.0),
        (0.0, 2.0),
        (-0.5, -2.0),
        (-1.0, -2.0),
        (-1.01, -10.0),
    ] {
        assert!((reward(delta) - r).abs() < 1e-12, "{delta}");
    }
}

#[test]
fn the_learning_rate_decays_every_ten_updates() {
    let alg = RlTcp::new(&RlTcpConfig::default(), &start(1));
    assert!((alg.alpha(0) - 0.3).abs() < 1e-12);
    assert!((alg.alpha(9) - 0.3).abs() < 1e-12);
    assert!((alg.alpha(10) - 0.3 * 0.995).abs() < 1e-12);
    assert!((alg.alpha(205) - 0.3 * 0.995f64.powi(20)).abs() < 1e-12);
}

#[test]
fn an_action_is_spread_over_one_rtt_of_acks() {
    let mut f = in_avoidance(&RlTcpConfig::default(), 1, 20);
    f.action = 3; // +3 segments per RTT
    f.apply_action(10 * u64::from(MSS));
    assert_eq!(f.reno.state.cwnd, 21_500, "half a window of ACKs: half of +3");
    f.action = 0; // -1
    f.apply_action(u64::from(f.reno.state.cwnd));
    assert_eq!(f.reno.state.cwnd, 20_500);
    assert_eq!(f.reno.state.ssthresh, 20_000);
    f.apply_action(u64::from(f.reno.state.cwnd));
    assert_eq!(f.reno.state.cwnd, 19_500);
    assert_eq!(f.reno.state.ssthresh, 19_500, "a decrease stays in avoidance");
}

#[test]
fn the_same_seed_gives_the_same_flow_and_another_seed_another() {
    let cfg = RlTcpConfig::default();
    let a = run(&cfg, 7, 300);
    assert_eq!(a, run(&cfg, 7, 300));
    assert_ne!(a, run(&cfg, 8, 300));
}

#[test]
fn sarsa_credits_the_action_two_steps_back() {
    // No exploration. Report 1 opens step 1, reports 2, 3, 4 end steps 1, 2, 3. Throughput
    // never falls (U = 0 with B the largest throughput so far), so every reward is +2, and
    // after step 3 only Q(s_1, a_1) was updated: alpha (r_3 + gamma Q(s_2, a_2)) = 0.3 * 2.
    let mut alg = in_avoidance(&RlTcpConfig::default().epsilon(0.0), 3, 20);
    for k in 0..4u64 {
        alg.on_report(&report((k + 1) * 100_000, (1 << k) * u64::from(MSS), 100_000));
    }
    assert_eq!((alg.steps, alg.updates), (3, 1));
    let values: Vec<f64> = alg
        .q_table()
        .q_values()
        .filter(|v| *v != 0.0)
        .collect();
    assert_eq!(values.len(), 1, "{values:?}");
    assert!((values[0] - 0.6).abs() < 1e-9, "{values:?}");
}

#[test]
fn learning_avoids_the_loss_the_path_punishes() {
    // Over many round trips on the toy path, a learning flow's windows stay near the path's
    // capacity (50 + 10) rather than collapsing or running away.
    let w = run(&RlTcpConfig::default(), 5, 2000);
    let tail = &w[1000..];
    let mean = tail.iter().map(|x| f64::from(*x)).sum::<f64>() / tail.len() as f64
        / f64::from(MSS);
    assert!((20.0..=90.0).contains(&mean), "{mean}");
}

#[test]
fn shared_tables_collect_what_flows_learned() {
    let shared = Arc::new(Mutex::new(QTable::default()));
    let cfg = RlTcpConfig::default().sharing(shared.clone());
    run(&cfg, 1, 200);
    let after_one = shared.lock().unwrap().len();
    assert!(after_one > 0);
    // A second flow starts from it.
    let f = RlTcp::new(&cfg, &start(2));
    assert_eq!(f.q_table().len(), after_one);
}

#[test]
fn a_saved_table_warm_starts_a_flow() {
    let dir = std::env::temp_dir().join(format!("rltcp-q-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("q.json");
    let mut t = QTable::default();
    *t.entry([1, 1, 1, 1, 1]) = [1.0, 2.0, 3.0, 4.0];
    t.save(&path).unwrap();
    let cfg = RlTcpConfig::default().warm_start(&path).unwrap();
    assert_eq!(RlTcp::new(&cfg, &start(1)).q_table(), &t);
    std::fs::write(&path, "{}").unwrap();
    let e = RlTcpConfig::default().warm_start(&path).unwrap_err();
    assert!(e.to_string().contains("not a Q-table"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
