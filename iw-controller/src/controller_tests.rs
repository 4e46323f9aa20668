//! Controller tests: the record/tick/lookup loop, bad input, fallbacks and bounds.

use super::*;
use crate::geo::SyntheticGeo;
use ccp_algorithms::api::SplitMix64;

const SEC: u64 = 1_000_000;

/// Two provinces x two ISPs x two subnets, ranges of 256 addresses from 1.0.0.0, no gaps.
fn small_geo() -> Arc<GeoDb> {
    Arc::new(GeoDb::synthetic(&SyntheticGeo {
        provinces: 2,
        isps_per_province: 2,
        subnets_per_isp: 2,
        range_len: (256, 256),
        gap: (0, 0),
        ..SyntheticGeo::default()
    }))
}

/// The `k`-th subnet's first address + `host`.
fn addr(geo: &GeoDb, k: usize, host: u32) -> Ipv4Addr {
    let (s, _, _) = geo.ranges().nth(k).unwrap();
    Ipv4Addr::from(u32::from(s) + host)
}

/// A network whose reward peaks at IW 30: throughput grows to 30, RTT grows past it.
fn flow(rng: &mut SplitMix64, client: Ipv4Addr, end_us: u64, iw: u32) -> FlowRecord {
    let x = (f64::from(iw) - 30.0) / 10.0;
    let tput = 1e6 * (-x * x).exp() * (0.9 + 0.2 * rng.next_f64());
    let rtt =
        50_000.0 * (1.0 + (f64::from(iw) - 30.0).max(0.0) / 10.0) * (0.95 + 0.1 * rng.next_f64());
    FlowRecord {
        throughput_bytes_per_sec: tput,
        ..FlowRecord::from_transfer(client, end_us, 100_000, 100_000, rtt, iw)
    }
}

fn no_grouping() -> IwConfig {
    IwConfig {
        grouping: None,
        iteration_us: SEC,
        ..IwConfig::default()
    }
}

#[test]
fn publishes_the_standard_iw_before_any_iteration() {
    let geo = small_geo();
    let c = IwController::new(IwConfig::default(), Arc::clone(&geo)).unwrap();
    assert_eq!(c.lookup(addr(&geo, 0, 1)), 10);
    assert_eq!(c.lookup(Ipv4Addr::new(200, 0, 0, 1)), 10);
    assert_eq!(c.group_of(addr(&geo, 0, 1)), Some("All"));
}

/// End to end without grouping: flows in, one bandit step per iteration, tables out; the IW
/// served at flow creation follows the bandit to the reward peak at 30.
#[test]
fn without_grouping_the_served_iw_converges_to_30() {
    let geo = small_geo();
    let mut c = IwController::new(no_grouping(), Arc::clone(&geo)).unwrap();
    let mut rng = SplitMix64::new(3);
    let mut served = Vec::new();
    for it in 0..120u64 {
        for k in 0..20u32 {
            let client = addr(&geo, (k % 8) as usize, k);
            let iw = c.lookup(client);
            let end = it * SEC + u64::from(k) * 1000;
            c.record(&flow(&mut rng, client, end, iw)).unwrap();
        }
        let out = c.tick((it + 1) * SEC);
        assert_eq!(out.iterations, 1);
        if it >= 60 {
            served.push(c.lookup(addr(&geo, 0, 0)));
        }
    }
    // 30 is the IW served most. With the paper's xi = 0.1 and gamma = 0.95 the discounted
    // history holds ~20 steps, so the padding keeps exploring the neighbours (~45 % at 30 here).
    let mut counts = std::collections::BTreeMap::<u32, usize>::new();
    for &iw in &served {
        *counts.entry(iw).or_default() += 1;
    }
    let (mode, n) = counts.iter().max_by_key(|(_, n)| **n).unwrap();
    assert_eq!(*mode, 30, "{counts:?}");
    assert!(*n * 100 >= served.len() * 35, "{counts:?}");
    assert_eq!(c.stats().iterations, 120);
    assert!(c.groups()[0].arms_pkts.contains(&30));
}

#[test]
fn bad_records_are_rejected_and_counted() {
    let geo = small_geo();
    let mut c = IwController::new(IwConfig::default(), Arc::clone(&geo)).unwrap();
    let ok = FlowRecord::from_transfer(addr(&geo, 0, 0), 0, 1000, 1000, 10_000.0, 10);
    assert_eq!(c.record(&ok), Ok(()));
    let bad = [
        FlowRecord {
            throughput_bytes_per_sec: f64::NAN,
            ..ok
        },
        FlowRecord {
            throughput_bytes_per_sec: -1.0,
            ..ok
        },
        FlowRecord::from_transfer(addr(&geo, 0, 0), 0, 1000, 0, 10_000.0, 10),
        FlowRecord { srtt_us: 0.0, ..ok },
        FlowRecord {
            srtt_us: -5.0,
            ..ok
        },
        FlowRecord {
            srtt_us: f64::INFINITY,
            ..ok
        },
        FlowRecord {
            loss_rate: 1.5,
            ..ok
        },
        FlowRecord {
            loss_rate: f64::NAN,
            ..ok
        },
        FlowRecord { iw_pkts: 0, ..ok },
    ];
    for b in &bad {
        assert!(c.record(b).is_err(), "{b:?}");
    }
    let s = c.stats();
    assert_eq!(s.accepted, 1);
    assert_eq!(s.rejected(), bad.len() as u64);
    assert_eq!(
        (
            s.rejected_throughput,
            s.rejected_rtt,
            s.rejected_loss_rate,
            s.rejected_iw
        ),
        (3, 3, 2, 1)
    );
    // Nothing bad reached the bandit.
    c.tick(DEFAULT_ITERATION_US);
    assert!(c.groups()[0].arms_pkts.len() == 4);
}

/// A group whose data vanishes falls back to the standard IW and resumes when flows return.
#[test]
fn vanished_group_falls_back_to_iw_10() {
    let geo = small_geo();
    let mut c = IwController::new(no_grouping(), Arc::clone(&geo)).unwrap();
    let mut rng = SplitMix64::new(1);
    let client = addr(&geo, 2, 7);
    for it in 0..3u64 {
        let iw = c.lookup(client);
        c.record(&flow(&mut rng, client, it * SEC, iw)).unwrap();
        c.tick((it + 1) * SEC);
    }
    let learned = c.lookup(client);
    assert_eq!(learned, 20, "first-play order 5, 10, 15, then 20");
    c.tick(5 * SEC);
    assert_eq!(c.lookup(client), 20, "two idle iterations: not stale yet");
    c.tick(6 * SEC);
    assert_eq!(c.lookup(client), 10, "three idle iterations: standard IW");
    assert!(c.groups()[0].stale);
    // A jump far ahead counts every skipped iteration at once.
    c.record(&flow(&mut rng, client, 6 * SEC, 10)).unwrap();
    c.tick(7 * SEC);
    assert_eq!(c.lookup(client), 20, "flows are back");
    assert_eq!(c.tick(1000 * SEC).iterations, 993);
    assert_eq!(c.lookup(client), 10);
}

/// The IW never leaves [1, max]: arms above the maximum are clamped and slides stop there.
#[test]
fn iw_stays_within_one_and_max() {
    let geo = small_geo();
    let config = IwConfig {
        max_iw_pkts: 12,
        ..no_grouping()
    };
    let mut c = IwController::new(config, Arc::clone(&geo)).unwrap();
    let mut rng = SplitMix64::new(9);
    for it in 0..40u64 {
        let client = addr(&geo, 1, 1);
        let iw = c.lookup(client);
        assert!((1..=12).contains(&iw), "{iw}");
        c.record(&flow(&mut rng, client, it * SEC, iw)).unwrap();
        c.tick((it + 1) * SEC);
    }
    assert!(
        c.groups()[0]
            .arms_pkts
            .iter()
            .all(|&a| (1..=12).contains(&a))
    );
    assert!(c.table().ranges().all(|(_, _, iw)| (1..=12).contains(&iw)));
}

/// With grouping: after the first grouping period, a busy steady subnet is its own group with its
/// own bandit; the quiet subnets and unknown addresses fall to the standard IW.
#[test]
fn grouping_gives_busy_subnets_their_own_bandit() {
    let geo = small_geo();
    let config = IwConfig {
        iteration_us: SEC,
        grouping: Some(GroupingConfig {
            bin_us: SEC,
            period_us: 4 * SEC,
            min_samples: 20,
            ..GroupingConfig::default()
        }),
        ..IwConfig::default()
    };
    let mut c = IwController::new(config, Arc::clone(&geo)).unwrap();
    let mut rng = SplitMix64::new(5);
    let busy = addr(&geo, 3, 9);
    let quiet = addr(&geo, 6, 9);
    let unknown = Ipv4Addr::new(200, 1, 2, 3);
    let mut regrouped_at = None;
    for it in 0..8u64 {
        for k in 0..30u64 {
            let end = it * SEC + k * 1000;
            // Constant IW within a bin gives a steady reward; the busy subnet gets 30 per bin.
            c.record(&flow(&mut rng, busy, end, 10)).unwrap();
            if k < 3 {
                c.record(&flow(&mut rng, quiet, end, 10)).unwrap();
                c.record(&flow(&mut rng, unknown, end, 10)).unwrap();
            }
        }
        if c.tick((it + 1) * SEC).regrouped {
            regrouped_at.get_or_insert(it + 1);
        }
    }
    assert_eq!(regrouped_at, Some(4));
    assert_eq!(c.stats().regroupings, 2);
    let name = c.group_of(busy).unwrap().to_string();
    assert_eq!(name, "All/P0/ISP1/P0-ISP1-S1");
    assert_eq!(c.group_of(quiet), None);
    assert_eq!(c.group_of(unknown), None);
    assert_eq!(c.lookup(quiet), 10);
    assert_eq!(c.lookup(unknown), 10);
    // The busy group's bandit went through the first-play order, not the standard IW.
    let info = c.groups();
    assert_eq!(info.len(), 1);
    assert_eq!(c.lookup(busy), info[0].iw_pkts);
    assert_ne!(info[0].iw_pkts, 10);
    // The busy subnet goes quiet: stale after three empty iterations, gone after the regrouping.
    for it in 8..12u64 {
        c.record(&flow(&mut rng, quiet, it * SEC, 10)).unwrap();
        c.tick((it + 1) * SEC);
        if it == 10 {
            assert!(c.groups()[0].stale);
            assert_eq!(c.lookup(busy), 10);
        }
    }
    assert_eq!(c.stats().regroupings, 3);
    assert_eq!(c.group_of(busy), None);
    assert!(c.groups().is_empty());
    assert_eq!(c.lookup(busy), 10);
    assert!(c.table().is_empty());
}

#[test]
fn invalid_configs_are_rejected() {
    let geo = small_geo();
    let bad = [
        IwConfig {
            iteration_us: 0,
            ..IwConfig::default()
        },
        IwConfig {
            max_iw_pkts: 0,
            ..IwConfig::default()
        },
        IwConfig {
            bandit: BanditConfig {
                gamma: 0.0,
                ..BanditConfig::default()
            },
            ..IwConfig::default()
        },
        IwConfig {
            bandit: BanditConfig {
                alpha: f64::NAN,
                ..BanditConfig::default()
            },
            ..IwConfig::default()
        },
        IwConfig {
            grouping: Some(GroupingConfig {
                bin_us: 0,
                ..GroupingConfig::default()
            }),
            ..IwConfig::default()
        },
    ];
    for config in bad {
        assert!(IwController::new(config, Arc::clone(&geo)).is_err());
    }
}

/// Our additions: the standard IW for everyone until the first grouping, which runs after
/// `first_grouping_us` on the bins that far, and then the group's own bandit.
#[test]
fn standard_iw_until_an_early_first_grouping() {
    let geo = small_geo();
    let config = IwConfig {
        iteration_us: SEC,
        grouping: Some(GroupingConfig {
            bin_us: SEC,
            period_us: 6 * SEC,
            min_samples: 20,
            ..GroupingConfig::default()
        }),
        first_grouping_us: Some(2 * SEC),
        standard_iw_until_grouped: true,
        ..IwConfig::default()
    };
    let mut c = IwController::new(config, Arc::clone(&geo)).unwrap();
    let mut rng = SplitMix64::new(7);
    let busy = addr(&geo, 3, 9);
    let mut regrouped = Vec::new();
    for it in 0..7u64 {
        match it {
            0 | 1 => assert_eq!(c.lookup(busy), 10, "standard IW before the grouping"),
            2 => assert_eq!(c.lookup(busy), 5, "the group's first arm after it"),
            _ => {}
        }
        for k in 0..30u64 {
            let iw = c.lookup(busy);
            c.record(&flow(&mut rng, busy, it * SEC + k * 1000, iw))
                .unwrap();
        }
        if c.tick((it + 1) * SEC).regrouped {
            regrouped.push(it + 1);
        }
    }
    // First at 2 s on its two bins (both full); the next one a period later, at 8 s.
    assert_eq!(regrouped, vec![2]);
    assert_eq!(c.group_of(busy), Some("All/P0/ISP1/P0-ISP1-S1"));
}

/// Our `warm_start`: a group the grouping creates takes a copy of the bandit of the old group
/// that covered its leaves (here `All`), instead of the initial arms.
#[test]
fn warm_start_copies_the_covering_groups_bandit() {
    let run = |warm_start: bool| {
        let geo = small_geo();
        let config = IwConfig {
            iteration_us: SEC,
            grouping: Some(GroupingConfig {
                bin_us: SEC,
                period_us: 8 * SEC,
                min_samples: 20,
                max_jitter: 10.0,
                ..GroupingConfig::default()
            }),
            warm_start,
            ..IwConfig::default()
        };
        let mut c = IwController::new(config, Arc::clone(&geo)).unwrap();
        let mut rng = SplitMix64::new(3);
        let busy = addr(&geo, 3, 9);
        let mut before = Vec::new();
        for it in 0..8u64 {
            for k in 0..30u64 {
                let iw = c.lookup(busy);
                c.record(&flow(&mut rng, busy, it * SEC + k * 1000, iw))
                    .unwrap();
            }
            before = c.groups()[0].arms_pkts.clone();
            c.tick((it + 1) * SEC);
        }
        assert_eq!(c.stats().regroupings, 1);
        let g = c.groups();
        assert_eq!(g[0].name, "All/P0/ISP1/P0-ISP1-S1");
        (before, g[0].arms_pkts.clone())
    };
    let (all_arms, warm) = run(true);
    let (_, cold) = run(false);
    assert_ne!(
        all_arms,
        vec![5, 10, 15, 20],
        "All's arms slid during the first period"
    );
    assert_eq!(warm.len(), 4);
    assert_ne!(warm, vec![5, 10, 15, 20], "warm: {warm:?}");
    assert_eq!(cold, vec![5, 10, 15, 20]);
}
