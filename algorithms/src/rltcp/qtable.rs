//! RL-TCP's Q-table, its state discretization, and its file (a saved table warm-starts flows).
//!
//! File (JSON): `{"format": "ccp-rltcp-qtable", "version": 1, "levels": [20, 20, 20, 20, 20],
//! "actions": [-1, 0, 1, 3], "entries": [{"state": [3, 7, 0, 9, 12], "q": [0.0, 1.2, -0.4, 0.0]}]}`.
//! A table of another format, version, discretization or action set, a state level out of
//! range or a non-finite value is refused with a [`QTableError`] saying what and where.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The `format` a Q-table file names.
pub const FORMAT: &str = "ccp-rltcp-qtable";
/// The version of the file layout and of the discretization ([`discretize`]).
pub const FORMAT_VERSION: u32 = 1;

/// Window changes per RTT, segments (the paper's action set).
pub const ACTIONS: [i32; 4] = [-1, 0, 1, 3];
/// Index of the "keep" action (what `NewReno`'s recovery does).
pub const KEEP: usize = 1;

/// Levels of each state variable: ACK inter-arrival EWMA, send-interval EWMA, RTT / `RTT_min`,
/// ssthresh, cwnd (the paper: "10-20 levels" each).
pub const LEVELS: [u8; 5] = [20, 20, 20, 20, 20];

/// A discretized state.
pub type State = [u8; 5];

/// What [`discretize`] reads.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Observation {
    /// EWMA of the time between acknowledged segments, µs.
    pub ack_interval_us: f64,
    /// EWMA of the time between sent segments, µs.
    pub send_interval_us: f64,
    /// Latest RTT over the minimum.
    pub rtt_ratio: f64,
    /// Slow-start threshold, segments.
    pub ssthresh_pkts: f64,
    /// Window, segments.
    pub cwnd_pkts: f64,
}

/// Half-octave levels of `x / base`: level k holds `[base 2^(k/2), base 2^((k+1)/2))`; below
/// the base is level 0 and above the top level is the top level.
fn half_octaves(x: f64, base: f64, levels: u8) -> u8 {
    if !(x.is_finite() && x > base) {
        return if x.is_infinite() && x > 0.0 {
            levels - 1
        } else {
            0
        };
    }
    let k = (2.0 * (x / base).log2()).floor();
    k.clamp(0.0, f64::from(levels - 1)) as u8
}

/// The state of an observation:
/// - ACK and send intervals: half-octaves from 10 µs (the top level from about 5 ms);
/// - RTT / `RTT_min`: steps of 0.05 from 1.0 (the top level from 1.95);
/// - ssthresh and cwnd: half-octaves from 2 segments (the top level from about 1,450).
pub fn discretize(o: &Observation) -> State {
    let ratio = if o.rtt_ratio.is_finite() {
        ((o.rtt_ratio - 1.0) / 0.05).floor().clamp(0.0, f64::from(LEVELS[2] - 1)) as u8
    } else {
        0
    };
    [
        half_octaves(o.ack_interval_us, 10.0, LEVELS[0]),
        half_octaves(o.send_interval_us, 10.0, LEVELS[1]),
        ratio,
        half_octaves(o.ssthresh_pkts, 2.0, LEVELS[3]),
        half_octaves(o.cwnd_pkts, 2.0, LEVELS[4]),
    ]
}

/// Why a Q-table file cannot be used.
#[derive(Debug, Error)]
pub enum QTableError {
    /// The file could not be read or written.
    #[error("RL-TCP Q-table {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Not a Q-table, or made for another discretization or action set.
    #[error("RL-TCP Q-table {path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        reason: String,
    },
}

#[derive(Debug, Serialize, Deserialize)]
struct File {
    format: String,
    version: u32,
    levels: Vec<u8>,
    actions: Vec<i32>,
    entries: Vec<Entry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    state: Vec<u8>,
    q: Vec<f64>,
}

/// Action values per visited state (unvisited states are all 0).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QTable {
    q: HashMap<State, [f64; 4]>,
}

impl QTable {
    /// The values of `s`'s actions.
    pub fn get(&self, s: &State) -> [f64; 4] {
        self.q.get(s).copied().unwrap_or_default()
    }

    /// Mutable values of `s`'s actions (created at 0).
    pub fn entry(&mut self, s: State) -> &mut [f64; 4] {
        self.q.entry(s).or_default()
    }

    /// Every stored action value.
    pub fn q_values(&self) -> impl Iterator<Item = f64> + '_ {
        self.q.values().flat_map(|q| q.iter().copied())
    }

    /// Visited states.
    pub fn len(&self) -> usize {
        self.q.len()
    }

    /// Whether no state was visited.
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Takes `other`'s entries over this table's.
    pub fn merge_from(&mut self, other: &QTable) {
        for (s, q) in &other.q {
            self.q.insert(*s, *q);
        }
    }

    /// The file text, states sorted (the same table always writes the same text).
    pub fn to_json(&self) -> String {
        let mut entries: Vec<(&State, &[f64; 4])> = self.q.iter().collect();
        entries.sort_by_key(|(s, _)| **s);
        let file = File {
            format: FORMAT.into(),
            version: FORMAT_VERSION,
            levels: LEVELS.to_vec(),
            actions: ACTIONS.to_vec(),
            entries: entries
                .into_iter()
                .map(|(s, q)| Entry {
                    state: s.to_vec(),
                    q: q.to_vec(),
                })
                .collect(),
        };
        serde_json::to_string(&file).unwrap_or_default()
    }

    /// Writes the table to `path`.
    pub fn save(&self, path: &Path) -> Result<(), QTableError> {
        std::fs::write(path, self.to_json()).map_err(|source| QTableError::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Reads and validates a table file.
    pub fn load(path: &Path) -> Result<Self, QTableError> {
        let text = std::fs::read_to_string(path).map_err(|source| QTableError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses and validates a table file's text (`path` names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Self, QTableError> {
        let invalid = |reason: String| QTableError::Invalid {
            path: path.to_path_buf(),
            reason,
        };
        let file: File = serde_json::from_str(text)
            .map_err(|e| invalid(format!("not a Q-table file: {e}")))?;
        if file.format != FORMAT || file.version != FORMAT_VERSION {
            return Err(invalid(format!(
                "format {} version {}, this build reads {FORMAT} version {FORMAT_VERSION}",
                file.format, file.version
            )));
        }
        if file.levels != LEVELS || file.actions != ACTIONS {
            return Err(invalid(format!(
                "made for levels {:?} and actions {:?}, this build has {LEVELS:?} and {ACTIONS:?}",
                file.levels, file.actions
            )));
        }
        let mut q = HashMap::with_capacity(file.entries.len());
        for (i, e) in file.entries.iter().enumerate() {
            let state: State = e
                .state
                .as_slice()
                .try_into()
                .map_err(|_| invalid(format!("entry {i}: state of {} levels, not 5", e.state.len())))?;
            if let Some(k) = (0..5).find(|&k| state[k] >= LEVELS[k]) {
                return Err(invalid(format!(
                    "entry {i}: state variable {k} at level {} of {}",
                    state[k], LEVELS[k]
                )));
            }
            let values: [f64; 4] = e
                .q
                .as_slice()
                .try_into()
                .map_err(|_| invalid(format!("entry {i}: {} values, not 4", e.q.len())))?;
            if values.iter().any(|v| !v.is_finite()) {
                return Err(invalid(format!("entry {i}: a value is not finite")));
            }
            if q.insert(state, values).is_some() {
                return Err(invalid(format!("entry {i}: state {state:?} twice")));
            }
        }
        Ok(Self { q })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discretization_levels() {
        let s = discretize(&Observation {
            ack_interval_us: 1160.0,
            send_interval_us: 5.0,
            rtt_ratio: 1.12,
            ssthresh_pkts: f64::INFINITY,
            cwnd_pkts: 150.0,
        });
        // 1160 / 10 = 116 = 2^6.86: half-octave 13; 1.12: step 2; 150 / 2 = 2^6.23: 12.
        assert_eq!(s, [13, 0, 2, 19, 12]);
        let s = discretize(&Observation {
            ack_interval_us: f64::NAN,
            rtt_ratio: 50.0,
            cwnd_pkts: 1e9,
            ..Observation::default()
        });
        assert_eq!(s, [0, 0, 19, 0, 19]);
    }

    #[test]
    fn a_table_round_trips_and_bad_files_say_why() {
        let mut t = QTable::default();
        *t.entry([1, 2, 3, 4, 5]) = [0.5, -1.0, 2.0, 0.0];
        let text = t.to_json();
        assert_eq!(QTable::parse(Path::new("q.json"), &text).unwrap(), t);
        let bad = |text: &str| {
            QTable::parse(Path::new("q.json"), text)
                .unwrap_err()
                .to_string()
        };
        assert!(bad("[]").contains("not a Q-table file"));
        assert!(bad(&text.replace("[-1,0,1,3]", "[-1,0,1,2]")).contains("actions"));
        assert!(bad(&text.replace("[1,2,3,4,5]", "[1,2,3,4,25]")).contains("state variable 4 at level 25"));
        assert!(bad(&text.replace("[1,2,3,4,5]", "[1,2,3]")).contains("state of 3 levels"));
        let e = QTable::load(Path::new("/nonexistent/q.json")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/q.json"));
    }
}
