//! `ccp-eval gen-data` and `ccp-eval train antelope`: Antelope's offline training loop.
//!
//! `gen-data` runs a scenario's conditions with `selector-explore` (flows start on Cubic and
//! switch to a random candidate at the end of a data unit with probability 0.3) and writes
//! every (features of unit t, candidate of unit t+1, reward of unit t+1 per mode) tuple to
//! `samples.csv`. `train antelope` fits one regressor per candidate and mode on those samples
//! and writes a versioned model set (`ccp_selector::antelope::model`).

use std::path::Path;
use std::sync::PoisonError;

use ccp_selector::antelope::{ModelSet, Sample, samples};

use crate::runner::{self, RunOptions};
use crate::scenario::Scenario;
use crate::selectors;

/// Runs `scenario` under `selector-explore` and writes `out/samples.csv`; returns the number
/// of samples.
pub fn gen_data(scenario: &Scenario, out: &Path, jobs: usize) -> Result<usize, String> {
    let opts = RunOptions {
        jobs,
        schemes: Some(vec![selectors::EXPLORE.to_string()]),
        progress: true,
        ..RunOptions::default()
    };
    let plan = runner::plan(scenario, &opts).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    selectors::gathered()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    let output = runner::run(scenario, &plan, &opts);
    if output.failed > 0 {
        return Err(format!("{} of {} runs failed", output.failed, output.runs));
    }
    let mut all: Vec<Sample> = std::mem::take(
        &mut *selectors::gathered()
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    // Runs finish in any order; sort so the file is the same for the same scenario.
    all.sort_by(|a, b| {
        a.next_cca
            .cmp(&b.next_cca)
            .then_with(|| {
                a.features
                    .partial_cmp(&b.features)
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
            .then_with(|| {
                a.rewards
                    .partial_cmp(&b.rewards)
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
    });
    let mut text = samples::header();
    for s in &all {
        text.push('\n');
        samples::write_line(&mut text, s);
    }
    text.push('\n');
    let path = out.join("samples.csv");
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(all.len())
}

/// Fits Antelope's models on `data/samples.csv` and writes them to `out`; returns a summary.
pub fn train_antelope(data: &Path, out: &Path) -> Result<String, String> {
    let path = if data.is_dir() {
        data.join("samples.csv")
    } else {
        data.to_path_buf()
    };
    let samples = samples::read(&path).map_err(|e| e.to_string())?;
    let set = ModelSet::train(&samples, 20).map_err(|e| e.to_string())?;
    set.save(out).map_err(|e| e.to_string())?;
    let mode = ccp_selector::antelope::Mode::Default;
    let models: Vec<String> = set
        .candidates(mode)
        .iter()
        .map(|c| format!("{c} ({})", set.samples(mode, c)))
        .collect();
    Ok(format!(
        "{} samples; models: {}",
        samples.len(),
        models.join(" ")
    ))
}
