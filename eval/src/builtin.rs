//! The scenarios shipped with `ccp-eval` (the TOML files under `eval/scenarios/`, embedded).

use crate::scenario::{Scenario, ScenarioError};

/// (name, file text) of every built-in scenario.
pub const SCENARIOS: &[(&str, &str)] = &[
    ("quick", include_str!("../scenarios/quick.toml")),
    ("tcprl-288", include_str!("../scenarios/tcprl-288.toml")),
    (
        "wan-dcn-cellular",
        include_str!("../scenarios/wan-dcn-cellular.toml"),
    ),
    ("dynamic", include_str!("../scenarios/dynamic.toml")),
    ("calibrate", include_str!("../scenarios/calibrate.toml")),
    (
        "kernel-calibrate",
        include_str!("../scenarios/kernel-calibrate.toml"),
    ),
    (
        "calibrate-tcp",
        include_str!("../scenarios/calibrate-tcp.toml"),
    ),
    (
        "antelope-train",
        include_str!("../scenarios/antelope-train.toml"),
    ),
    ("tcprl-train", include_str!("../scenarios/tcprl-train.toml")),
    (
        "selection-bench",
        include_str!("../scenarios/selection-bench.toml"),
    ),
    (
        "selection-bench-test",
        include_str!("../scenarios/selection-bench-test.toml"),
    ),
    (
        "selection-bench-test2",
        include_str!("../scenarios/selection-bench-test2.toml"),
    ),
    (
        "selection-bench-test3",
        include_str!("../scenarios/selection-bench-test3.toml"),
    ),
    (
        "selection-val2",
        include_str!("../scenarios/selection-val2.toml"),
    ),
    (
        "selection-val3",
        include_str!("../scenarios/selection-val3.toml"),
    ),
    (
        "selection-val4",
        include_str!("../scenarios/selection-val4.toml"),
    ),
    (
        "selection-bench-test4",
        include_str!("../scenarios/selection-bench-test4.toml"),
    ),
    (
        "selection-bench-test5",
        include_str!("../scenarios/selection-bench-test5.toml"),
    ),
    (
        "selection-bench-test6",
        include_str!("../scenarios/selection-bench-test6.toml"),
    ),
    (
        "selection-bench-test7",
        include_str!("../scenarios/selection-bench-test7.toml"),
    ),
    (
        "selection-bench-test8",
        include_str!("../scenarios/selection-bench-test8.toml"),
    ),
    (
        "selection-bench-test9",
        include_str!("../scenarios/selection-bench-test9.toml"),
    ),
    (
        "selection-bench-test10",
        include_str!("../scenarios/selection-bench-test10.toml"),
    ),
    (
        "selection-bench-test11",
        include_str!("../scenarios/selection-bench-test11.toml"),
    ),
    (
        "selection-bench-test12",
        include_str!("../scenarios/selection-bench-test12.toml"),
    ),
    (
        "selection-bench-test13",
        include_str!("../scenarios/selection-bench-test13.toml"),
    ),
    (
        "selection-bench-test14",
        include_str!("../scenarios/selection-bench-test14.toml"),
    ),
    (
        "selection-recurring",
        include_str!("../scenarios/selection-recurring.toml"),
    ),
    (
        "selection-recurring-test",
        include_str!("../scenarios/selection-recurring-test.toml"),
    ),
    (
        "selection-train",
        include_str!("../scenarios/selection-train.toml"),
    ),
    (
        "selection-train2",
        include_str!("../scenarios/selection-train2.toml"),
    ),
    (
        "competition-train",
        include_str!("../scenarios/competition-train.toml"),
    ),
    (
        "competition-train2",
        include_str!("../scenarios/competition-train2.toml"),
    ),
    ("lone-train", include_str!("../scenarios/lone-train.toml")),
    (
        "selection-kernel",
        include_str!("../scenarios/selection-kernel.toml"),
    ),
    ("lptcp-train", include_str!("../scenarios/lptcp-train.toml")),
    ("arc-train", include_str!("../scenarios/arc-train.toml")),
    ("arc-paper", include_str!("../scenarios/arc-paper.toml")),
    ("arc-online", include_str!("../scenarios/arc-online.toml")),
    ("lptcp-paper", include_str!("../scenarios/lptcp-paper.toml")),
    ("rltcp-paper", include_str!("../scenarios/rltcp-paper.toml")),
    (
        "rltcp-paper-4flows",
        include_str!("../scenarios/rltcp-paper-4flows.toml"),
    ),
];

/// A built-in scenario by name. Trace files it names are read relative to `eval/scenarios/`
/// of this source tree (`../traces/...`), like the models of the learned selectors.
pub fn scenario(name: &str) -> Option<Result<Scenario, ScenarioError>> {
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    SCENARIOS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, text)| Scenario::parse(&format!("eval/scenarios/{n}.toml"), text, Some(&base)))
}

/// The first line of a built-in scenario's description.
pub fn description(text: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix("description = "))
        .map(|d| d.trim_matches('"').to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::RateSource;

    #[test]
    fn every_builtin_scenario_parses_and_names_known_schemes() {
        for (name, _) in SCENARIOS {
            let s = scenario(name).unwrap().unwrap();
            assert_eq!(&s.name, name);
            for scheme in s.named_schemes() {
                assert!(
                    crate::schemes::resolve(&scheme).is_some(),
                    "{name}: {scheme}"
                );
            }
        }
        assert_eq!(
            scenario("tcprl-288").unwrap().unwrap().conditions.len(),
            288
        );
    }

    /// TCP-RL's policy trains on `tcprl-train` and is measured on `tcprl-288` and `dynamic`:
    /// no rate, RTT or non-zero loss rate of the training grid is in either.
    #[test]
    fn tcprl_train_shares_no_rate_rtt_or_loss_with_its_test_scenarios() {
        let load = |n: &str| scenario(n).unwrap().unwrap();
        let train = load("tcprl-train");
        assert_eq!(train.conditions.len(), 196);
        let mut rates = Vec::new();
        let mut rtts = Vec::new();
        let mut losses = Vec::new();
        for s in [load("tcprl-288"), load("dynamic")] {
            for c in &s.conditions {
                if let RateSource::Constant(r) = c.rate {
                    rates.push(r);
                }
                rtts.push(c.rtt_ms);
                losses.push(c.loss);
                for p in &c.phases {
                    rates.extend(p.bw_mbps);
                    rtts.extend(p.rtt_ms);
                    losses.extend(p.loss);
                }
            }
        }
        for c in &train.conditions {
            let RateSource::Constant(r) = c.rate else {
                panic!("{}: a constant rate", c.id)
            };
            assert!(!rates.contains(&r), "{}: rate {r}", c.id);
            assert!(!rtts.contains(&c.rtt_ms), "{}: RTT {}", c.id, c.rtt_ms);
            assert!(c.loss == 0.0 || !losses.contains(&c.loss), "{}", c.id);
        }
    }
}
