//! Training tuples (`features_t`, candidate used in t+1, `reward_{t+1}` per mode) and their CSV
//! form, written by `ccp-eval gen-data` and by the online learner, read by `ccp-eval train`.

use std::fmt::Write as _;
use std::path::Path;

use super::reward::Mode;
use super::unit::FEATURE_NAMES;

/// One training tuple.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Features of unit t, in [`FEATURE_NAMES`] order.
    pub features: [f64; 7],
    /// The candidate that ran unit t+1.
    pub next_cca: String,
    /// Reward of unit t+1 under each mode, in [`Mode::ALL`] order.
    pub rewards: [f64; 3],
}

/// The CSV header.
pub fn header() -> String {
    let mut h: Vec<String> = FEATURE_NAMES.iter().map(|s| (*s).to_string()).collect();
    h.push("next_cca".into());
    h.extend(Mode::ALL.iter().map(|m| format!("reward_{}", m.name())));
    h.join(",")
}

/// Appends one CSV line (no newline) for `s`.
pub fn write_line(out: &mut String, s: &Sample) {
    for v in s.features {
        let _ = write!(out, "{v},");
    }
    out.push_str(&s.next_cca);
    for r in s.rewards {
        let _ = write!(out, ",{r}");
    }
}

/// A malformed samples file.
#[derive(Debug, thiserror::Error)]
pub enum SamplesError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not a sample.
    #[error("{path}:{line}: {msg}")]
    Line {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        msg: String,
    },
}

/// Reads a samples CSV written with [`header`] and [`write_line`].
pub fn read(path: &Path) -> Result<Vec<Sample>, SamplesError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| SamplesError::Io {
        path: p.clone(),
        source,
    })?;
    let mut lines = text.lines().enumerate();
    let expected = header();
    match lines.next() {
        Some((_, h)) if h.trim() == expected => {}
        _ => {
            return Err(SamplesError::Line {
                path: p,
                line: 1,
                msg: format!("header must be `{expected}`"),
            });
        }
    }
    let mut out = Vec::new();
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |msg: String| SamplesError::Line {
            path: p.clone(),
            line: i + 1,
            msg,
        };
        let cols: Vec<&str> = line.split(',').collect();
        if cols.len() != 11 {
            return Err(bad(format!("{} columns, expected 11", cols.len())));
        }
        let num = |k: usize| -> Result<f64, SamplesError> {
            cols[k]
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| bad(format!("column {} is not a finite number", k + 1)))
        };
        let mut features = [0.0; 7];
        for (k, f) in features.iter_mut().enumerate() {
            *f = num(k)?;
        }
        let next_cca = cols[7].trim().to_string();
        if next_cca.is_empty() {
            return Err(bad("empty candidate name".into()));
        }
        out.push(Sample {
            features,
            next_cca,
            rewards: [num(8)?, num(9)?, num(10)?],
        });
    }
    Ok(out)
}
