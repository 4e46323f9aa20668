//! How fast a bottleneck drains: a constant rate or a mahimahi trace.

use std::path::Path;

use thiserror::Error;

/// The latest timestamp a trace may hold, ms (its nanoseconds must fit 64 bits).
pub const MAX_TRACE_MS: u64 = u64::MAX / 1_000_000;

/// Bytes one mahimahi delivery opportunity carries.
pub const TRACE_MTU_BYTES: u32 = 1500;

/// How fast the bottleneck drains.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkRate {
    /// A constant rate, bits per second.
    Constant {
        /// Bits per second.
        bps: u64,
    },
    /// A mahimahi trace: delivery opportunities (ms offsets), repeating with the trace period.
    Trace(Trace),
}

/// A mahimahi link trace: one line per 1500-byte delivery opportunity, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Opportunity times within one period, ns, non-decreasing.
    pub opportunities_ns: Vec<u64>,
    /// Period after which the trace repeats, ns (the last timestamp, at least 1 ms).
    pub period_ns: u64,
}

/// Why a trace could not be read.
#[derive(Debug, Error)]
pub enum TraceError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// A line is not a non-negative integer number of milliseconds.
    #[error("{path}:{line}: expected a timestamp in ms, found {text:?}")]
    BadLine {
        /// File.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The offending text.
        text: String,
    },
    /// Timestamps go backwards.
    #[error("{path}:{line}: timestamp {ms} is earlier than the previous one")]
    NotSorted {
        /// File.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The timestamp.
        ms: u64,
    },
    /// No opportunities at all.
    #[error("{path}: trace has no delivery opportunities")]
    Empty {
        /// File.
        path: String,
    },
}

impl Trace {
    /// Parses mahimahi trace text; `name` labels errors.
    pub fn parse(name: &str, text: &str) -> Result<Self, TraceError> {
        let mut ops = Vec::new();
        let mut last = 0;
        for (i, raw) in text.lines().enumerate() {
            let t = raw.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let ms: u64 = t.parse().map_err(|_| TraceError::BadLine {
                path: name.to_string(),
                line: i + 1,
                text: t.to_string(),
            })?;
            if ms < last {
                return Err(TraceError::NotSorted {
                    path: name.to_string(),
                    line: i + 1,
                    ms,
                });
            }
            last = ms;
            ops.push(
                ms.checked_mul(1_000_000)
                    .ok_or_else(|| TraceError::BadLine {
                        path: name.to_string(),
                        line: i + 1,
                        text: format!("{t} (more than {MAX_TRACE_MS} ms)"),
                    })?,
            );
        }
        if ops.is_empty() {
            return Err(TraceError::Empty {
                path: name.to_string(),
            });
        }
        let period_ns = last.max(1) * 1_000_000;
        Ok(Self {
            opportunities_ns: ops,
            period_ns,
        })
    }

    /// Reads a mahimahi trace file.
    pub fn load(path: &Path) -> Result<Self, TraceError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
            path: name.clone(),
            source,
        })?;
        Self::parse(&name, &text)
    }

    /// Mean rate over one period, bits per second (computed in 128 bits: a long trace's
    /// bits times 10^9 do not fit 64).
    pub fn mean_bps(&self) -> u64 {
        let bits = self.opportunities_ns.len() as u128 * u128::from(TRACE_MTU_BYTES) * 8;
        let bps = bits * 1_000_000_000 / u128::from(self.period_ns.max(1));
        u64::try_from(bps).unwrap_or(u64::MAX)
    }

    /// The first opportunity at or after `t_ns`, as an absolute time.
    pub fn next_opportunity(&self, t_ns: u64) -> u64 {
        self.at(self.first_at_or_after(t_ns))
    }

    /// The ordinal (counted from time 0 over repeated periods) of the first opportunity at or
    /// after `t_ns`. The last timestamp of a period and the first of the next can coincide
    /// (a trace "0 5 10" has two opportunities at 10 ms): both count.
    pub(crate) fn first_at_or_after(&self, t_ns: u64) -> u64 {
        let n = self.opportunities_ns.len() as u64;
        if n == 0 || self.period_ns == 0 {
            return u64::MAX;
        }
        let cycle = t_ns / self.period_ns;
        let offset = t_ns % self.period_ns;
        let i = self.opportunities_ns.partition_point(|&o| o < offset) as u64;
        let mut k = cycle.saturating_mul(n).saturating_add(i);
        while k > 0 && self.at(k - 1) >= t_ns {
            k -= 1;
        }
        k
    }

    /// The absolute time of opportunity number `k` (counted from time 0); `u64::MAX` for a
    /// trace with no opportunities.
    pub(crate) fn at(&self, k: u64) -> u64 {
        let n = self.opportunities_ns.len() as u64;
        if n == 0 {
            return u64::MAX;
        }
        let (cycle, i) = (k / n, (k % n) as usize);
        cycle
            .saturating_mul(self.period_ns)
            .saturating_add(self.opportunities_ns[i])
    }

    /// Opportunities in `[from_ns, to_ns)`.
    pub fn opportunities_between(&self, from_ns: u64, to_ns: u64) -> u64 {
        if to_ns <= from_ns {
            return 0;
        }
        self.first_at_or_after(to_ns) - self.first_at_or_after(from_ns)
    }

    /// Bits the trace can carry in `[from_ns, to_ns)`: one [`TRACE_MTU_BYTES`] packet per
    /// opportunity.
    pub fn capacity_bits_between(&self, from_ns: u64, to_ns: u64) -> u128 {
        u128::from(self.opportunities_between(from_ns, to_ns)) * u128::from(TRACE_MTU_BYTES) * 8
    }
}

impl LinkRate {
    /// Mean rate, bits per second.
    pub fn mean_bps(&self) -> u64 {
        match self {
            LinkRate::Constant { bps } => *bps,
            LinkRate::Trace(t) => t.mean_bps(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_parsing_and_wrapping() {
        let t = Trace::parse("t", "0\n0\n5\n# note\n10\n").expect("parse");
        assert_eq!(t.period_ns, 10_000_000);
        assert_eq!(t.next_opportunity(1), 5_000_000);
        assert_eq!(t.next_opportunity(10_000_001), 15_000_000);
        assert_eq!(t.mean_bps(), 4 * 1500 * 8 * 100);
        assert!(matches!(
            Trace::parse("f", "1\nx\n"),
            Err(TraceError::BadLine { line: 2, .. })
        ));
        assert!(matches!(
            Trace::parse("f", "5\n3\n"),
            Err(TraceError::NotSorted { line: 2, .. })
        ));
        assert!(matches!(
            Trace::parse("f", "\n"),
            Err(TraceError::Empty { .. })
        ));
        assert!(matches!(
            Trace::parse("f", "1\n18446744073709551\n"),
            Err(TraceError::BadLine { line: 2, .. })
        ));
    }
}
