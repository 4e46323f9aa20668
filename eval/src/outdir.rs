//! The files `ccp-eval` owns in an output directory (`--out`).
//!
//! `run` and `report` remove these before they write, so nothing of an earlier run into the
//! same directory (a plot of a condition or scheme the new run does not have, a `swaps.csv` of
//! a selector no longer run) is left beside the new report. Every other file is left alone:
//! notes, scripts or data a researcher keeps there stay untouched.
//!
//! Owned: the [`FILES`] in the directory itself, and every `*.svg` file in its [`PLOTS`]
//! directory (the directory itself and anything else in it stay).

use std::path::{Path, PathBuf};

/// Files directly in an output directory that the harness writes: `run` (results, series,
/// report, summary, the selector's swaps, explained decisions and time shares, and the temporary files results go
/// through) and `run iw-web` (its own tables, plots and report).
pub const FILES: &[&str] = &[
    "results.csv",
    "series.csv",
    "summary.json",
    "report.md",
    "swaps.csv",
    "decisions.csv",
    "selector.md",
    ".results.csv.tmp",
    ".series.csv.tmp",
    "summary.csv",
    "subnets.csv",
    "iw_timeline.csv",
    "iw_over_time.svg",
    "response_cdf.svg",
];

/// The plot directory inside an output directory; its `*.svg` files are the harness's.
pub const PLOTS: &str = "plots";

/// What a run leaves that `report` does not rewrite: the selector's swaps, its explained
/// decisions, its time shares and its per-condition plots (`plots/cca_*.svg`).
const RUN_ONLY: &[&str] = &["swaps.csv", "decisions.csv", "selector.md"];

/// Which owned files to remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clear {
    /// Every owned file: before `run`, and before `report` into a directory that is not one
    /// of its inputs.
    All,
    /// Every owned file but what belongs to the run whose results are being reported
    /// (`swaps.csv`, `selector.md` and `plots/cca_*.svg`): before `report` into one of its own input
    /// directories (the default `--out`).
    KeepRunOnly,
}

/// Removes the owned files from `dir` (which need not exist); returns the files removed. An
/// error names the file that could not be removed.
pub fn clear(dir: &Path, what: Clear) -> Result<Vec<PathBuf>, (PathBuf, std::io::Error)> {
    let keep = |name: &str, in_plots: bool| {
        what == Clear::KeepRunOnly
            && if in_plots {
                name.starts_with("cca_")
            } else {
                RUN_ONLY.contains(&name)
            }
    };
    let mut removed = Vec::new();
    for name in FILES.iter().filter(|n| !keep(n, false)) {
        remove(&dir.join(name), &mut removed)?;
    }
    let plots = dir.join(PLOTS);
    let entries = match std::fs::read_dir(&plots) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err((plots, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| (plots.clone(), e))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        let is_dir = entry.file_type().map_err(|e| (path.clone(), e))?.is_dir();
        if !is_dir
            && Path::new(&name)
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("svg"))
            && !keep(&name, true)
        {
            remove(&path, &mut removed)?;
        }
    }
    Ok(removed)
}

fn remove(path: &Path, removed: &mut Vec<PathBuf>) -> Result<(), (PathBuf, std::io::Error)> {
    match std::fs::remove_file(path) {
        Ok(()) => {
            removed.push(path.to_path_buf());
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err((path.to_path_buf(), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_files_go_and_foreign_files_stay() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("plots/mine")).unwrap();
        for f in [
            "results.csv",
            "swaps.csv",
            "selector.md",
            "notes.md",
            "plots/rank_cdf.svg",
            "plots/cca_c1.svg",
            "plots/photo.png",
            "plots/mine/keep.svg",
        ] {
            std::fs::write(d.join(f), "x").unwrap();
        }
        let removed = clear(d, Clear::KeepRunOnly).unwrap();
        assert_eq!(removed.len(), 2, "{removed:?}");
        for gone in ["results.csv", "plots/rank_cdf.svg"] {
            assert!(!d.join(gone).exists(), "{gone}");
        }
        for kept in ["swaps.csv", "selector.md", "plots/cca_c1.svg"] {
            assert!(d.join(kept).exists(), "{kept}");
        }
        clear(d, Clear::All).unwrap();
        for gone in ["swaps.csv", "selector.md", "plots/cca_c1.svg"] {
            assert!(!d.join(gone).exists(), "{gone}");
        }
        for kept in ["notes.md", "plots/photo.png", "plots/mine/keep.svg"] {
            assert!(d.join(kept).exists(), "{kept}");
        }
        assert!(clear(&d.join("absent"), Clear::All).unwrap().is_empty());
    }
}
