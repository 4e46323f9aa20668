//! The probe policy's kind model ([`ccp_selector::probe::kind`]): the label `gen-data --kind
//! probe` writes beside its counterfactual rows (`competitors.csv`: per condition, the kind of
//! the long-running cross traffic its flows under test share the path with), and `ccp-eval
//! train probe-kind`, which fits the classifier on those labels and the rows' features and
//! picks each kind's candidate from the rows' scores.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use ccp_selector::antelope::Mode;
use ccp_selector::probe::kind::{Classifier, NONE};
use ccp_selector::probe::{KindModel, KindSample, N_FEATURES};

use crate::probe::{ProbeMeta, read_dir};
use crate::scenario::{Condition, Scenario};

/// The labels' file in a `gen-data --kind probe` directory.
pub const LABEL_FILE: &str = "competitors.csv";

/// The kind of long-running cross traffic `cond`'s flows under test share the path with:
/// [`NONE`] when there is none or when a flow under test is finite (a web-like flow ends soon
/// after its probe, and a move then does not pay); else the cross traffic's scheme without its
/// `native-` prefix (`cubic`, `bbr`, ...), or `mix` when groups of several schemes run.
/// Finite cross flows (a size, web sizes, on/off periods) do not count.
pub fn competitors(scenario: &Scenario, cond: &Condition) -> String {
    let finite = |g: &crate::scenario::FlowGroup| {
        g.size_bytes.is_some() || g.web_sizes || g.on_off_s.is_some()
    };
    if scenario.flows_of(cond).iter().any(finite) {
        return NONE.to_string();
    }
    let mut kinds: Vec<&str> = scenario
        .cross_of(cond)
        .iter()
        .filter(|g| !finite(g) && g.count > 0)
        .filter_map(|g| g.scheme.as_deref())
        .map(|s| s.strip_prefix("native-").unwrap_or(s))
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    match kinds.as_slice() {
        [] => NONE.to_string(),
        [one] => (*one).to_string(),
        _ => "mix".to_string(),
    }
}

/// Writes `out/competitors.csv` for `scenario`'s conditions.
pub fn write_labels(scenario: &Scenario, out: &Path) -> Result<(), String> {
    let mut text = String::from("condition,competitors\n");
    for c in &scenario.conditions {
        let _ = writeln!(text, "{},{}", c.id, competitors(scenario, c));
    }
    let path = out.join(LABEL_FILE);
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads a `competitors.csv`: condition -> kind; a malformed line is an error naming it.
pub fn read_labels(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "{}: {e} (written by `ccp-eval gen-data --kind probe` since the kind model; re-run it)",
            path.display()
        )
    })?;
    let mut lines = text.lines();
    if lines.next() != Some("condition,competitors") {
        return Err(format!(
            "{}: not a labels file (header differs from `condition,competitors`)",
            path.display()
        ));
    }
    let mut out = BTreeMap::new();
    for (i, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        match line.split(',').collect::<Vec<_>>().as_slice() {
            [c, k] if !c.is_empty() && !k.is_empty() => {
                out.insert((*c).to_string(), (*k).to_string());
            }
            _ => {
                return Err(format!(
                    "{}:{}: not `condition,competitors`",
                    path.display(),
                    i + 2
                ));
            }
        }
    }
    Ok(out)
}

/// One default-mode flow of the counterfactual rows: its probe's features and each target's
/// score.
type Flow = ([f64; N_FEATURES], BTreeMap<String, f64>);

/// `train probe-kind DIR... --out DIR`: one sample per default-mode flow (condition, seed) of
/// every directory, labelled from its `competitors.csv`; every directory's window and starts
/// must be the first's; each kind's move chosen over shallow and deep queues apart from
/// `deep_from` (a `rtt_ratio_max`; `None`: one move per kind), the kinds told apart by
/// `classifier`. Returns a summary.
pub fn train(
    data: &[PathBuf],
    out: &Path,
    deep_from: Option<f64>,
    classifier: Classifier,
) -> Result<String, String> {
    let mut meta: Option<ProbeMeta> = None;
    let mut samples = Vec::new();
    for d in data {
        let rows = read_dir(d, &mut meta, "the first directory's")?;
        let labels = read_labels(&d.join(LABEL_FILE))?;
        let mut flows: BTreeMap<(&str, u64), Flow> = BTreeMap::new();
        for r in rows.iter().filter(|r| r.mode == Mode::Default) {
            let e = flows
                .entry((r.condition.as_str(), r.seed))
                .or_insert((r.features, BTreeMap::new()));
            e.1.insert(r.target.clone(), r.score);
        }
        for ((cond, _), (features, scores)) in flows {
            let kind = labels.get(cond).ok_or_else(|| {
                format!(
                    "{}: no label for condition `{cond}`",
                    d.join(LABEL_FILE).display()
                )
            })?;
            samples.push(KindSample {
                features,
                kind: kind.clone(),
                scores,
            });
        }
    }
    let meta = meta.ok_or("no data directory")?;
    let start = meta
        .starts
        .get(Mode::Default.name())
        .ok_or("no start for the default mode")?;
    let model = KindModel::train_with(&samples, start, meta.window, deep_from, classifier)
        .map_err(|e| e.to_string())?;
    model.save(out).map_err(|e| e.to_string())?;
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for s in &samples {
        *counts.entry(s.kind.as_str()).or_default() += 1;
    }
    let mut summary = format!("{} flows (", samples.len());
    for (i, (k, n)) in counts.iter().enumerate() {
        let _ = write!(summary, "{}{k} {n}", if i > 0 { ", " } else { "" });
    }
    let _ = write!(summary, "), start {start}; moves:");
    for (k, c) in model.moves() {
        let _ = write!(summary, " {k}->{c}");
    }
    if let Some(d) = model.deep_from() {
        let _ = write!(summary, "; over a deep queue (rtt_ratio_max >= {d}):");
        for (k, c) in model.deep_moves() {
            let _ = write!(summary, " {k}->{c}");
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCENARIO: &str = r#"
name = "kinds"
duration_s = 5
seeds = [1]

[[conditions]]
id = "alone"
bw_mbps = 10
rtt_ms = 20

[[conditions]]
id = "two-cubic"
bw_mbps = 10
rtt_ms = 20
cross = [{ scheme = "native-cubic", count = 2 }]

[[conditions]]
id = "cubic-and-bbr"
bw_mbps = 10
rtt_ms = 20
cross = [{ scheme = "native-cubic", count = 1 }, { scheme = "bbr", count = 1 }]

[[conditions]]
id = "web-cross"
bw_mbps = 10
rtt_ms = 20
cross = [{ scheme = "native-cubic", count = 5, sizes = "web" }, { scheme = "bbr", count = 1 }]

[[conditions]]
id = "finite-under-test"
bw_mbps = 10
rtt_ms = 20
flows = [{ count = 3, sizes = "web" }]
cross = [{ scheme = "native-cubic", count = 1 }]
"#;

    #[test]
    fn labels_name_the_long_running_cross_traffic() {
        let s = Scenario::parse("kinds.toml", SCENARIO, None).unwrap();
        let got: Vec<String> = s.conditions.iter().map(|c| competitors(&s, c)).collect();
        assert_eq!(got, ["none", "cubic", "mix", "bbr", "none"]);
        let dir = std::env::temp_dir().join(format!("ccp-kind-labels-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write_labels(&s, &dir).unwrap();
        let back = read_labels(&dir.join(LABEL_FILE)).unwrap();
        assert_eq!(back.get("two-cubic").map(String::as_str), Some("cubic"));
        assert_eq!(back.len(), 5);
        std::fs::write(dir.join(LABEL_FILE), "condition,competitors\nx\n").unwrap();
        let e = read_labels(&dir.join(LABEL_FILE)).unwrap_err();
        assert!(e.contains(":2:"), "{e}");
        std::fs::write(dir.join(LABEL_FILE), "cond,kind\n").unwrap();
        assert!(
            read_labels(&dir.join(LABEL_FILE))
                .unwrap_err()
                .contains("header")
        );
        let e = read_labels(&dir.join("missing.csv")).unwrap_err();
        assert!(e.contains("re-run"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
