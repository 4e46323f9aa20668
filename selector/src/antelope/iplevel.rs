//! Antelope's IP-level prediction for flow start (`PAPERS.md` §2, "Stream-level vs IP-level
//! prediction"): per destination prefix (default /24), decayed counts of the candidates chosen
//! for its flows; every new choice multiplies all counts by alpha (0.9) and adds one to the
//! chosen candidate. A new flow starts on the most-chosen candidate, before any data unit.

use std::collections::HashMap;

/// Decayed choice counts per prefix.
#[derive(Debug, Clone)]
pub struct IpTable {
    prefix_len: u8,
    alpha: f64,
    max_prefixes: usize,
    counts: HashMap<u32, HashMap<&'static str, f64>>,
}

impl IpTable {
    /// Prefixes of `prefix_len` bits (0-32), decay `alpha` (0 < alpha < 1), at most
    /// `max_prefixes` prefixes remembered (new ones are not added past that).
    pub fn new(prefix_len: u8, alpha: f64, max_prefixes: usize) -> Self {
        Self {
            prefix_len: prefix_len.min(32),
            alpha: if alpha > 0.0 && alpha < 1.0 {
                alpha
            } else {
                0.9
            },
            max_prefixes,
            counts: HashMap::new(),
        }
    }

    fn key(&self, ip: u32) -> u32 {
        crate::policy::ip_prefix(ip, self.prefix_len)
    }

    /// Records that `candidate` was chosen for a flow to `ip`.
    pub fn record(&mut self, ip: u32, candidate: &'static str) {
        let key = self.key(ip);
        if !self.counts.contains_key(&key) && self.counts.len() >= self.max_prefixes {
            return;
        }
        let counts = self.counts.entry(key).or_default();
        for c in counts.values_mut() {
            *c *= self.alpha;
        }
        *counts.entry(candidate).or_insert(0.0) += 1.0;
    }

    /// The most-chosen candidate for `ip`'s prefix, if any was recorded (ties: the name that
    /// sorts first, so the answer is deterministic).
    pub fn predict(&self, ip: u32) -> Option<&'static str> {
        self.counts.get(&self.key(ip)).and_then(|c| {
            c.iter()
                .max_by(|a, b| a.1.total_cmp(b.1).then_with(|| b.0.cmp(a.0)))
                .map(|(n, _)| *n)
        })
    }

    /// The decayed count of `candidate` for `ip`'s prefix.
    pub fn count(&self, ip: u32, candidate: &str) -> f64 {
        self.counts
            .get(&self.key(ip))
            .and_then(|c| c.get(candidate))
            .copied()
            .unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_decay_by_alpha_and_the_majority_wins() {
        let mut t = IpTable::new(24, 0.9, 100);
        let a = 0x0A00_0001; // 10.0.0.1
        t.record(a, "cubic");
        t.record(a + 1, "bbr"); // same /24
        assert!((t.count(a, "cubic") - 0.9).abs() < 1e-12);
        assert!((t.count(a, "bbr") - 1.0).abs() < 1e-12);
        assert_eq!(t.predict(a + 7), Some("bbr"));
        t.record(a, "cubic");
        // cubic: 0.9 * 0.9 + 1 = 1.81; bbr: 0.9.
        assert!((t.count(a, "cubic") - 1.81).abs() < 1e-12);
        assert_eq!(t.predict(a), Some("cubic"));
        // Another /24 knows nothing.
        assert_eq!(t.predict(0x0A00_0101), None);
    }

    #[test]
    fn the_table_is_bounded() {
        let mut t = IpTable::new(32, 0.9, 2);
        for ip in 0..5 {
            t.record(ip, "cubic");
        }
        assert_eq!(t.predict(4), None);
        assert_eq!(t.predict(1), Some("cubic"));
    }
}
