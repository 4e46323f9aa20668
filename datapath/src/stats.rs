//! Summary statistics shared by the datapaths, the harness (`ccp-eval`), the agent's kernel
//! bridge and the benches: one percentile rule for every latency, RTT and response-time summary.
//!
//! The rule is *nearest rank*: the `per_mille` quantile of `n` values is the value of rank
//! `ceil(n * per_mille / 1000)` in ascending order (1-based, at least 1), so it is always one of
//! the samples, never an interpolation. Quantiles are given one way, in integer per-mille (`500`
//! the median, `950` p95, `999` p99.9; above `1000` means `1000`), so no float rounding moves a
//! rank.

/// The 0-based index of the nearest-rank `per_mille` quantile among `len` ascending values;
/// `None` when there are none.
pub fn rank_index(len: usize, per_mille: u32) -> Option<usize> {
    if len == 0 {
        return None;
    }
    let rank = (len as u128 * u128::from(per_mille.min(1000))).div_ceil(1000);
    Some(usize::try_from(rank).unwrap_or(len).clamp(1, len) - 1)
}

/// The nearest-rank `per_mille` quantile of ascending `sorted` values; `None` when empty.
pub fn percentile<T: Copy>(sorted: &[T], per_mille: u32) -> Option<T> {
    sorted.get(rank_index(sorted.len(), per_mille)?).copied()
}

/// The nearest-rank `per_mille` quantile of `samples` in any order, found by selection (linear
/// time; `samples` is reordered); `None` when empty. The same value as [`percentile`] of the
/// samples sorted.
pub fn percentile_unsorted<T: Copy + Ord>(samples: &mut [T], per_mille: u32) -> Option<T> {
    let k = rank_index(samples.len(), per_mille)?;
    Some(*samples.select_nth_unstable(k).1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_is_a_sample_of_rank_ceil_n_p() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&v, 500), Some(50));
        assert_eq!(percentile(&v, 950), Some(95));
        assert_eq!(percentile(&v, 990), Some(99));
        assert_eq!(percentile(&v, 1000), Some(100));
        assert_eq!(percentile(&v, 5000), Some(100));
        assert_eq!(percentile(&v, 0), Some(1));
        assert_eq!(percentile(&[7_u64], 950), Some(7));
        assert_eq!(percentile::<u32>(&[], 500), None);
        // 3 values: p50 is rank 2, p90 rank 3 (ceil 2.7), p10 rank 1.
        assert_eq!(percentile(&[1.0, 2.0, 3.0], 500), Some(2.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0], 900), Some(3.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0], 100), Some(1.0));
    }

    #[test]
    fn unsorted_selects_what_sorted_reads() {
        let mut v: Vec<u32> = (0..1000).map(|i| (i * 7919) % 1009).collect();
        let mut sorted = v.clone();
        sorted.sort_unstable();
        for p in [0, 1, 10, 100, 500, 800, 950, 990, 999, 1000] {
            assert_eq!(
                percentile_unsorted(&mut v, p),
                percentile(&sorted, p),
                "{p}"
            );
        }
        assert_eq!(percentile_unsorted::<u32>(&mut [], 500), None);
    }
}
