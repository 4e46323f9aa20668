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
    (
        "selection-bench",
        include_str!("../scenarios/selection-bench.toml"),
    ),
    (
        "selection-bench-test",
        include_str!("../scenarios/selection-bench-test.toml"),
    ),
    (
        "selection-train",
        include_str!("../scenarios/selection-train.toml"),
    ),
    (
        "competition-train",
        include_str!("../scenarios/competition-train.toml"),
    ),
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
}
