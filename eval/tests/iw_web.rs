//! The `iw-web` evaluation on its small workload: deterministic, and TCP-RL and TCP-RL+ beat
//! IW 10.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use ccp_eval::iw_web::{self, IwWebConfig, Policy, report};

#[test]
fn small_workload_is_deterministic_and_tcp_rl_beats_tcp_10() {
    let cfg = IwWebConfig::small();
    let a = iw_web::run(&cfg).unwrap();
    let b = iw_web::run(&cfg).unwrap();
    assert!(a.arrivals.len() > 500, "{} flows", a.arrivals.len());
    assert_eq!(a.arrivals, b.arrivals);
    for p in Policy::ALL {
        assert_eq!(a.runs_of(p), b.runs_of(p), "{}", p.name());
        assert_eq!(a.runs_of(p).len(), a.arrivals.len());
    }
    assert_eq!(a.iw_timeline, b.iw_timeline);
    assert_eq!(a.groups, b.groups);

    let sum = report::summary(&a);
    let mean = |p: Policy| sum.iter().find(|(q, _)| *q == p).unwrap().1.mean_ms;
    assert!(
        mean(Policy::Rl) < mean(Policy::Tcp10),
        "TCP-RL {} ms vs TCP-10 {} ms",
        mean(Policy::Rl),
        mean(Policy::Tcp10)
    );
    assert!(
        mean(Policy::RlPlus) < mean(Policy::Tcp10),
        "TCP-RL+ {} ms vs TCP-10 {} ms",
        mean(Policy::RlPlus),
        mean(Policy::Tcp10)
    );
    // Optimal is the best per cell on the same flows, so no static IW in its grid beats it.
    assert!(mean(Policy::Optimal) <= mean(Policy::Tcp10));
    assert!(mean(Policy::Optimal) <= mean(Policy::Tcp200));
    // Every IW stays in [1, 200].
    for p in Policy::ALL {
        assert!(a.runs_of(p).iter().all(|r| (1..=200).contains(&r.iw_pkts)));
    }

    // The report is written and has no NaN.
    let dir = tempfile::tempdir().unwrap();
    report::write(&a, dir.path(), 1.0).unwrap();
    for f in [
        "report.md",
        "summary.csv",
        "subnets.csv",
        "iw_timeline.csv",
        "iw_over_time.svg",
        "response_cdf.svg",
    ] {
        let text = std::fs::read_to_string(dir.path().join(f)).unwrap();
        assert!(!text.is_empty(), "{f}");
        assert!(!text.contains("NaN") && !text.contains("inf"), "{f}");
    }
}
