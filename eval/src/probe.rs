//! `ccp-eval gen-data --kind probe` and `ccp-eval train probe`: the training data and models of
//! the probe policy (`ccp_selector::probe`, scheme `selector-probe`).
//!
//! `gen-data --kind probe` runs a scenario
//! 1. with every candidate alone: each preference mode's start candidate is the one with the
//!    best mean score under that mode's objective (unless `--starts` names them, so that
//!    several training scenarios share one start);
//! 2. once per (start, candidate) with `selector-probe-explore`: every flow starts on the
//!    start candidate, probes for the probe window, records its features and switches to the
//!    candidate (the start itself: it stays). Up to the probe's end the runs of one start are
//!    identical (same path, seed and candidate); after it they differ only by the switch.
//!
//! It writes `probe.csv` (condition, seed, mode, start, target, the flow's score under the
//! mode's objective, the features of the run's first probe) and `probe.json` (the window and
//! the starts). `train probe DIR... --out MODELS` turns each row into a gain (its score minus
//! the score of the run of the same condition, seed and start that stayed) and fits
//! `ccp_selector::probe::ProbeModels`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::PoisonError;

use ccp_selector::antelope::Mode;
use ccp_selector::probe::{FEATURE_NAMES, N_FEATURES, ProbeModels, ProbeSample, ProbeWindow};
use serde::{Deserialize, Serialize};

use crate::runner;
use crate::scenario::Scenario;
use crate::selectors::{self, ProbeForce};
use crate::training::{options, run_labels};

/// The rows' file.
pub const DATA_FILE: &str = "probe.csv";
/// The window and starts of the data.
pub const META_FILE: &str = "probe.json";

/// What one `gen-data --kind probe` used: every directory trained together must agree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeMeta {
    /// The probe window.
    pub window: ProbeWindow,
    /// Mode name -> start candidate.
    pub starts: BTreeMap<String, String>,
}

/// One row of `probe.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeRow {
    /// Condition id.
    pub condition: String,
    /// Seed.
    pub seed: u64,
    /// Mode (of the score and the start).
    pub mode: Mode,
    /// Start candidate.
    pub start: String,
    /// Candidate switched to after the probe.
    pub target: String,
    /// Mean score of the run's flows under test under the mode's objective.
    pub score: f64,
    /// The probe's features.
    pub features: [f64; N_FEATURES],
}

/// Mode -> start candidate, as names.
fn names(starts: &BTreeMap<Mode, String>) -> BTreeMap<String, String> {
    starts
        .iter()
        .map(|(m, c)| (m.name().to_string(), c.clone()))
        .collect()
}

impl ProbeMeta {
    /// The starts by preference mode (an unknown mode name is an error).
    pub fn starts_by_mode(&self) -> Result<BTreeMap<Mode, String>, String> {
        self.starts
            .iter()
            .map(|(m, c)| {
                Mode::parse(m)
                    .map(|m| (m, c.clone()))
                    .ok_or_else(|| format!("unknown mode `{m}`"))
            })
            .collect()
    }
}

/// Reads the starts of an earlier `gen-data --kind probe` (its directory or its `probe.json`).
pub fn read_meta(path: &Path) -> Result<ProbeMeta, String> {
    let file = if path.is_dir() {
        path.join(META_FILE)
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let meta: ProbeMeta =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    meta.starts_by_mode()
        .map_err(|e| format!("{}: {e}", file.display()))?;
    if !meta.starts.contains_key(Mode::Default.name()) {
        return Err(format!("{}: no start for the default mode", file.display()));
    }
    Ok(meta)
}

/// Runs `scenario` as the module doc says and writes `out/probe.csv` and `out/probe.json`;
/// `starts` (from another scenario's `probe.json`) fixes the start candidates. Returns the rows
/// written.
pub fn gen_data(
    scenario: &Scenario,
    out: &Path,
    jobs: usize,
    window: ProbeWindow,
    starts: Option<BTreeMap<Mode, String>>,
) -> Result<usize, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let candidates: Vec<String> = selectors::candidate_names()
        .into_iter()
        .map(String::from)
        .collect();
    let starts = if let Some(s) = starts {
        s
    } else {
        let opts = options(jobs, candidates.clone());
        let plan = runner::plan(scenario, &opts).map_err(|e| e.to_string())?;
        let output = runner::run(scenario, &plan, &opts);
        if output.failed > 0 {
            return Err(format!("{} of {} runs failed", output.failed, output.runs));
        }
        best_starts(&run_labels(scenario, &output.rows), &candidates)?
    };
    let mut by_start: BTreeMap<&str, Vec<Mode>> = BTreeMap::new();
    for (m, c) in &starts {
        by_start.entry(c.as_str()).or_default().push(*m);
    }
    let opts = options(jobs, vec![selectors::PROBE_EXPLORE.to_string()]);
    let plan = runner::plan(scenario, &opts).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for (start, modes) in by_start {
        for target in &candidates {
            selectors::set_probe_force(Some(ProbeForce {
                window,
                start: start.to_string(),
                target: target.clone(),
            }));
            selectors::gathered_probes()
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
            let output = runner::run(scenario, &plan, &opts);
            selectors::set_probe_force(None);
            if output.failed > 0 {
                return Err(format!("{} of {} runs failed", output.failed, output.runs));
            }
            let labels = run_labels(scenario, &output.rows);
            // The run's first probe (a run of several selector flows, e.g. web-like flows:
            // the one that ended its probe first).
            let mut first: HashMap<(String, u64), (u64, [f64; N_FEATURES])> = HashMap::new();
            for (cond, seed, p) in std::mem::take(
                &mut *selectors::gathered_probes()
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            ) {
                let e = first.entry((cond, seed)).or_insert((p.at_us, p.features));
                if (p.at_us, p.features) < *e {
                    *e = (p.at_us, p.features);
                }
            }
            for ((cond, seed, _), score) in &labels {
                let Some((_, features)) = first.get(&(cond.clone(), *seed)) else {
                    continue; // no flow lived past its probe
                };
                for &mode in &modes {
                    rows.push(ProbeRow {
                        condition: cond.clone(),
                        seed: *seed,
                        mode,
                        start: start.to_string(),
                        target: target.clone(),
                        score: score[mode as usize],
                        features: *features,
                    });
                }
            }
        }
    }
    rows.sort_by(|a, b| {
        (&a.condition, a.seed, a.mode, &a.target).cmp(&(&b.condition, b.seed, b.mode, &b.target))
    });
    write_rows(&out.join(DATA_FILE), &rows)?;
    let meta = ProbeMeta {
        window,
        starts: names(&starts),
    };
    let path = out.join(META_FILE);
    let text = serde_json::to_string_pretty(&meta).map_err(|e| e.to_string())?;
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(rows.len())
}

/// Per mode, the candidate with the best mean label over the runs where every candidate ran.
fn best_starts(
    labels: &HashMap<(String, u64, String), [f64; 3]>,
    candidates: &[String],
) -> Result<BTreeMap<Mode, String>, String> {
    let mut runs: BTreeMap<(&str, u64), usize> = BTreeMap::new();
    for (c, s, _) in labels.keys() {
        *runs.entry((c.as_str(), *s)).or_default() += 1;
    }
    let complete: Vec<(&str, u64)> = runs
        .into_iter()
        .filter(|(_, n)| *n == candidates.len())
        .map(|(k, _)| k)
        .collect();
    if complete.is_empty() {
        return Err("no condition where every candidate finished a run".into());
    }
    let mut starts = BTreeMap::new();
    for mode in Mode::ALL {
        let mean = |cand: &String| {
            complete
                .iter()
                .filter_map(|(c, s)| labels.get(&(c.to_string(), *s, cand.clone())))
                .map(|v| v[mode as usize])
                .sum::<f64>()
        };
        let best = candidates
            .iter()
            .max_by(|a, b| mean(a).total_cmp(&mean(b)))
            .ok_or("no candidates")?;
        starts.insert(mode, best.clone());
    }
    Ok(starts)
}

fn header() -> String {
    let mut h = "condition,seed,mode,start,target,score".to_string();
    for f in FEATURE_NAMES {
        let _ = write!(h, ",{f}");
    }
    h
}

fn write_rows(path: &Path, rows: &[ProbeRow]) -> Result<(), String> {
    let mut text = header();
    text.push('\n');
    for r in rows {
        let _ = write!(
            text,
            "{},{},{},{},{},{}",
            r.condition,
            r.seed,
            r.mode.name(),
            r.start,
            r.target,
            r.score
        );
        for v in r.features {
            let _ = write!(text, ",{v}");
        }
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads `probe.csv`; a malformed line is an error naming the file and line.
pub fn read_rows(path: &Path) -> Result<Vec<ProbeRow>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines();
    if lines.next() != Some(header().as_str()) {
        return Err(format!(
            "{}: not a probe data file (header differs from `{}`)",
            path.display(),
            header()
        ));
    }
    let mut rows = Vec::new();
    for (i, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let bad = |what: &str| format!("{}:{}: {what}", path.display(), i + 2);
        let cols: Vec<&str> = line.split(',').collect();
        if cols.len() != 6 + N_FEATURES {
            return Err(bad(&format!(
                "{} columns, expected {}",
                cols.len(),
                6 + N_FEATURES
            )));
        }
        let num = |s: &str| {
            s.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| bad(&format!("`{s}` is not a finite number")))
        };
        let mut features = [0.0; N_FEATURES];
        for (f, s) in features.iter_mut().zip(&cols[6..]) {
            *f = num(s)?;
        }
        rows.push(ProbeRow {
            condition: cols[0].to_string(),
            seed: cols[1].parse().map_err(|_| bad("seed"))?,
            mode: Mode::parse(cols[2]).ok_or_else(|| bad(&format!("mode `{}`", cols[2])))?,
            start: cols[3].to_string(),
            target: cols[4].to_string(),
            score: num(cols[5])?,
            features,
        });
    }
    Ok(rows)
}

/// The gains of `rows`: each row's score minus the score of the row of the same condition,
/// seed and mode that stayed on the start; rows without that twin are dropped.
pub fn gains(rows: &[ProbeRow]) -> Vec<ProbeSample> {
    let stay: HashMap<(&str, u64, Mode), f64> = rows
        .iter()
        .filter(|r| r.target == r.start)
        .map(|r| ((r.condition.as_str(), r.seed, r.mode), r.score))
        .collect();
    rows.iter()
        .filter_map(|r| {
            let base = stay.get(&(r.condition.as_str(), r.seed, r.mode))?;
            Some(ProbeSample {
                mode: r.mode,
                target: r.target.clone(),
                features: r.features,
                gain: r.score - base,
                path: r.condition.clone(),
            })
        })
        .collect()
}

/// `train probe DIR... --out MODELS [--bags N]`: fits the probe models, `bags` boosters per
/// (mode, candidate), on every directory's rows (their windows and starts must agree) and
/// writes them; returns a summary.
pub fn train(data: &[PathBuf], out: &Path, bags: usize) -> Result<String, String> {
    let mut meta: Option<ProbeMeta> = None;
    let mut samples = Vec::new();
    for d in data {
        let m = read_meta(d)?;
        if let Some(first) = &meta
            && *first != m
        {
            return Err(format!(
                "{}: window or starts differ from the first directory's (use gen-data --starts)",
                d.display()
            ));
        }
        meta = Some(m);
        let rows = read_rows(&d.join(DATA_FILE))?;
        samples.extend(gains(&rows));
    }
    let meta = meta.ok_or("no data directory")?;
    let starts = meta.starts_by_mode()?;
    let models = ProbeModels::train_bags(&samples, meta.window, starts.clone(), bags)
        .map_err(|e| e.to_string())?;
    models.save(out).map_err(|e| e.to_string())?;
    let mut summary = format!("{} samples, bags: {}; starts", samples.len(), models.bags());
    for (m, c) in &starts {
        let _ = write!(summary, " {}={c}", m.name());
    }
    let _ = write!(
        summary,
        "; default-mode models: {}",
        models.candidates(Mode::Default).join(" ")
    );
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cond: &str, mode: Mode, target: &str, score: f64) -> ProbeRow {
        ProbeRow {
            condition: cond.into(),
            seed: 1,
            mode,
            start: "bbr".into(),
            target: target.into(),
            score,
            features: [1.5; N_FEATURES],
        }
    }

    #[test]
    fn rows_survive_the_file_and_become_gains_over_staying() {
        let rows = vec![
            row("a", Mode::Default, "bbr", -1.0),
            row("a", Mode::Default, "copa", -0.7),
            row("a", Mode::Delay, "bbr", -5.0),
            row("a", Mode::Delay, "vegas", -5.5),
            // No stay run for b: dropped.
            row("b", Mode::Default, "copa", -0.1),
        ];
        let dir = std::env::temp_dir().join(format!("ccp-probe-rows-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(DATA_FILE);
        write_rows(&path, &rows).unwrap();
        assert_eq!(read_rows(&path).unwrap(), rows);
        let g = gains(&rows);
        assert_eq!(g.len(), 4);
        let copa = g.iter().find(|s| s.target == "copa").unwrap();
        assert!((copa.gain - 0.3).abs() < 1e-12);
        let vegas = g.iter().find(|s| s.target == "vegas").unwrap();
        assert!((vegas.gain + 0.5).abs() < 1e-12);
        assert!(
            g.iter()
                .filter(|s| s.target == "bbr")
                .all(|s| s.gain == 0.0)
        );
        // Malformed files are refused with the line.
        std::fs::write(&path, format!("{}\na,1,default,bbr,bbr,x", header())).unwrap();
        let e = read_rows(&path).unwrap_err();
        assert!(e.contains(":2:"), "{e}");
        std::fs::write(&path, "condition,seed\n").unwrap();
        assert!(
            read_rows(&path)
                .unwrap_err()
                .contains("not a probe data file")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_start_is_the_best_mean_of_the_complete_runs() {
        let c = ["bbr".to_string(), "copa".to_string()];
        let mut l = HashMap::new();
        l.insert(("a".into(), 1, "bbr".into()), [-1.0, -6.0, 1.0]);
        l.insert(("a".into(), 1, "copa".into()), [-0.5, -7.0, 0.5]);
        // Incomplete: ignored.
        l.insert(("b".into(), 1, "bbr".into()), [-9.0, -9.0, -9.0]);
        let s = best_starts(&l, &c).unwrap();
        assert_eq!(s[&Mode::Default], "copa");
        assert_eq!(s[&Mode::Delay], "bbr");
        assert_eq!(s[&Mode::Throughput], "bbr");
        assert!(best_starts(&HashMap::new(), &c).is_err());
    }
}
