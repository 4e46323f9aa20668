//! Bottom-up user grouping over network features (`PAPERS.md` §1.1 "User grouping").
//!
//! # Model
//! Flows are placed in a tree by their network features, `All -> province -> ISP -> subnet` by
//! default ([`Level`]; any order or subset is allowed). Time is cut into bins (default 10 min);
//! per bin a node has a sample count and a mean reward `X_s`. A node *qualifies* for RL when
//!
//! - every bin holds at least `S_min` samples (default 100), and
//! - its jitter `J = (sum_{s=2..n} |X_s - X_{s-1}| / X_s) / (n - 1)` is at most `T` (default 0.1).
//!
//! The procedure ([`group`]): (1) qualifying leaves are groups; (2) non-qualifying sibling leaves
//! merge into an `Others` node under their parent, which becomes a group if it qualifies; (3) an
//! `Others` that does not qualify merges with the failed `Others` of its parent's siblings into an
//! `Others` under the grandparent; (4) repeat up to the root. Flows in an unqualified root
//! `Others` get the standard IW (10). Merging a set of nodes adds their per-bin counts and reward
//! sums, so `X_s` of a merged node is the mean over all its flows in bin `s`.
//!
//! # Choices the paper leaves open
//! - Flows of addresses in no geolocation range ("unknown") belong to the root `All` itself: they
//!   join the root's `Others`.
//! - A single bin has no jitter (`J = 0`); a bin whose mean reward is 0 makes `J` infinite (the
//!   relative change is undefined), so the node does not qualify.
//! - Leaves with no samples take part like any other (they fail and merge into `Others`), so
//!   every leaf of the geolocation database ends up in exactly one group or in the default.
//!
//! Group names are the node path joined by `/`, from `All`: `All/Beijing/CMNET/S1`,
//! `All/Beijing/UNICOM/Others`, `All/Others`.

use std::sync::Arc;

use crate::geo::NetFeatures;

/// Default minimum samples per bin, `S_min` (§1.1 "Parameters used").
pub const DEFAULT_MIN_SAMPLES: u64 = 100;
/// Default jitter threshold `T` (§1.1 "Parameters used").
pub const DEFAULT_MAX_JITTER: f64 = 0.1;
/// Default bin length, µs (10 min, §1.1 "Parameters used").
pub const DEFAULT_BIN_US: u64 = 10 * 60 * 1_000_000;
/// Default grouping period, µs (one day: "grouping runs on a long period (days/weeks)").
pub const DEFAULT_GROUPING_PERIOD_US: u64 = 24 * 60 * 60 * 1_000_000;

/// One level of the group tree below `All`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// The province.
    Province,
    /// The ISP.
    Isp,
    /// The subnet (IP range).
    Subnet,
}

impl Level {
    /// The name of `features` at this level.
    pub fn name(self, features: &NetFeatures) -> &Arc<str> {
        match self {
            Level::Province => &features.province,
            Level::Isp => &features.isp,
            Level::Subnet => &features.subnet,
        }
    }
}

/// The path of `features` below `All` for the hierarchy `levels`.
pub fn leaf_path(features: &NetFeatures, levels: &[Level]) -> Vec<Arc<str>> {
    levels
        .iter()
        .map(|l| Arc::clone(l.name(features)))
        .collect()
}

/// Parameters of the grouping.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupingConfig {
    /// The tree levels below `All`, coarse to fine (default province, ISP, subnet).
    pub levels: Vec<Level>,
    /// Bin length, µs (default 10 min).
    pub bin_us: u64,
    /// How often the grouping reruns, µs; it looks at the bins of the period that just ended
    /// (default one day; a multiple of `bin_us` is recommended).
    pub period_us: u64,
    /// `S_min`: minimum samples in every bin (default 100).
    pub min_samples: u64,
    /// `T`: largest jitter that qualifies (default 0.1).
    pub max_jitter: f64,
}

impl Default for GroupingConfig {
    fn default() -> Self {
        Self {
            levels: vec![Level::Province, Level::Isp, Level::Subnet],
            bin_us: DEFAULT_BIN_US,
            period_us: DEFAULT_GROUPING_PERIOD_US,
            min_samples: DEFAULT_MIN_SAMPLES,
            max_jitter: DEFAULT_MAX_JITTER,
        }
    }
}

impl GroupingConfig {
    /// Number of bins in one grouping period (at least 1).
    pub fn bins(&self) -> usize {
        self.period_us.div_ceil(self.bin_us.max(1)).max(1) as usize
    }
}

/// Samples of one node in one time bin.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BinSample {
    /// Number of flows.
    pub count: u64,
    /// Sum of their rewards.
    pub reward_sum: f64,
}

/// Element-wise sum of two series (the shorter is padded with empty bins).
fn merge_into(into: &mut Vec<BinSample>, other: &[BinSample]) {
    if into.len() < other.len() {
        into.resize(other.len(), BinSample::default());
    }
    for (a, b) in into.iter_mut().zip(other) {
        a.count += b.count;
        a.reward_sum += b.reward_sum;
    }
}

/// `J = (sum_{s=2..n} |X_s - X_{s-1}| / X_s) / (n - 1)` over the per-bin mean rewards; 0 for
/// fewer than two bins, infinite if a bin is empty or has mean reward <= 0.
pub fn jitter(series: &[BinSample]) -> f64 {
    if series.len() < 2 {
        return 0.0;
    }
    let mut means = Vec::with_capacity(series.len());
    for b in series {
        if b.count == 0 {
            return f64::INFINITY;
        }
        means.push(b.reward_sum / b.count as f64);
    }
    let mut sum = 0.0;
    for w in means.windows(2) {
        if w[1] <= 0.0 || !w[1].is_finite() {
            return f64::INFINITY;
        }
        sum += (w[1] - w[0]).abs() / w[1];
    }
    sum / (means.len() - 1) as f64
}

/// Whether a node with this series qualifies for RL: every bin has `>= min_samples` samples
/// and the jitter is at most `max_jitter`. An empty series does not qualify.
pub fn qualifies(series: &[BinSample], config: &GroupingConfig) -> bool {
    qualifies_over(series, series.len(), config)
}

/// [`qualifies`] over `n_bins` bins, the missing tail of a shorter series counting as empty.
fn qualifies_over(series: &[BinSample], n_bins: usize, config: &GroupingConfig) -> bool {
    n_bins > 0
        && series.len() >= n_bins
        && series.iter().all(|b| b.count >= config.min_samples.max(1))
        && jitter(series) <= config.max_jitter
}

/// One group found by [`group`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The node path joined by `/` (e.g. `All/Beijing/UNICOM/Others`).
    pub name: String,
    /// Indices of the input leaves it covers.
    pub leaves: Vec<usize>,
    /// Whether it covers the flows of unknown addresses (only `All/Others` can).
    pub includes_unknown: bool,
}

/// The result of a grouping run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grouping {
    /// The groups, in tree order (depth first, children sorted by name).
    pub groups: Vec<Group>,
    /// For each input leaf, the index of its group (`None`: the standard IW).
    pub leaf_group: Vec<Option<usize>>,
    /// The group of unknown addresses (`None`: the standard IW).
    pub unknown_group: Option<usize>,
}

/// A failed `Others` waiting to merge one level up.
struct Pending {
    leaves: Vec<usize>,
    series: Vec<BinSample>,
}

/// Runs the bottom-up procedure of the module doc.
///
/// `leaves[i]` is a leaf's path below `All` (all of the same length, the number of levels) and
/// its per-bin samples; `unknown` the per-bin samples of unknown addresses. Leaves with the same
/// path are one leaf. The number of bins is the longest series given; a shorter series (e.g.
/// empty, for a leaf without flows) has empty bins at its end.
pub fn group(
    leaves: &[(Vec<Arc<str>>, Vec<BinSample>)],
    unknown: &[BinSample],
    config: &GroupingConfig,
) -> Grouping {
    let mut order: Vec<usize> = (0..leaves.len()).collect();
    order.sort_by(|&a, &b| leaves[a].0.cmp(&leaves[b].0));
    let mut out = Grouping {
        groups: Vec::new(),
        leaf_group: vec![None; leaves.len()],
        unknown_group: None,
    };
    let n_bins = leaves
        .iter()
        .map(|l| l.1.len())
        .chain([unknown.len()])
        .max()
        .unwrap_or(0);
    let ctx = Ctx {
        leaves,
        n_bins,
        config,
    };
    let mut path = vec!["All".to_string()];
    let pending = visit(&ctx, &order, 0, &mut path, &mut out);
    // The root's Others: failed Others from below plus unknown addresses.
    let mut members = Vec::new();
    let mut series = unknown.to_vec();
    if let Some(p) = pending {
        members = p.leaves;
        merge_into(&mut series, &p.series);
    }
    if qualifies_over(&series, n_bins, config) {
        let g = out.groups.len();
        for &l in &members {
            out.leaf_group[l] = Some(g);
        }
        out.unknown_group = Some(g);
        out.groups.push(Group {
            name: "All/Others".to_string(),
            leaves: members,
            includes_unknown: true,
        });
    }
    out
}

/// What every level of the recursion needs.
struct Ctx<'a> {
    leaves: &'a [(Vec<Arc<str>>, Vec<BinSample>)],
    n_bins: usize,
    config: &'a GroupingConfig,
}

impl Ctx<'_> {
    fn qualifies(&self, series: &[BinSample]) -> bool {
        qualifies_over(series, self.n_bins, self.config)
    }
}

/// Processes the node at `depth` whose leaves are `idx` (sorted by path); returns its failed
/// `Others` (or the failed leaf itself) for the parent to merge.
fn visit(
    ctx: &Ctx<'_>,
    idx: &[usize],
    depth: usize,
    path: &mut Vec<String>,
    out: &mut Grouping,
) -> Option<Pending> {
    let leaves = ctx.leaves;
    let leaf_depth = idx.first().map_or(0, |&i| leaves[i].0.len());
    if depth >= leaf_depth {
        // A leaf (possibly several inputs with the same path).
        let mut series = Vec::new();
        for &i in idx {
            merge_into(&mut series, &leaves[i].1);
        }
        let members = idx.to_vec();
        if depth > 0 && ctx.qualifies(&series) {
            push_group(out, path.join("/"), members);
            return None;
        }
        return Some(Pending {
            leaves: members,
            series,
        });
    }
    // Children: runs of equal path[depth].
    let mut failed: Vec<Pending> = Vec::new();
    let mut start = 0;
    while start < idx.len() {
        let name = &leaves[idx[start]].0[depth];
        let mut end = start + 1;
        while end < idx.len() && &leaves[idx[end]].0[depth] == name {
            end += 1;
        }
        path.push(name.to_string());
        if let Some(p) = visit(ctx, &idx[start..end], depth + 1, path, out) {
            failed.push(p);
        }
        path.pop();
        start = end;
    }
    if failed.is_empty() {
        return None;
    }
    let mut others = Pending {
        leaves: Vec::new(),
        series: Vec::new(),
    };
    for p in failed {
        others.leaves.extend(p.leaves);
        merge_into(&mut others.series, &p.series);
    }
    if depth == 0 {
        // The root's Others is decided by the caller (it also holds unknown addresses).
        return Some(others);
    }
    if ctx.qualifies(&others.series) {
        push_group(out, format!("{}/Others", path.join("/")), others.leaves);
        return None;
    }
    Some(others)
}

fn push_group(out: &mut Grouping, name: String, leaves: Vec<usize>) {
    let g = out.groups.len();
    for &l in &leaves {
        out.leaf_group[l] = Some(g);
    }
    out.groups.push(Group {
        name,
        leaves,
        includes_unknown: false,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bins(counts_rewards: &[(u64, f64)]) -> Vec<BinSample> {
        counts_rewards
            .iter()
            .map(|&(count, mean)| BinSample {
                count,
                reward_sum: count as f64 * mean,
            })
            .collect()
    }

    fn steady(count: u64, n: usize) -> Vec<BinSample> {
        bins(&vec![(count, 0.5); n])
    }

    fn path(p: &[&str]) -> Vec<Arc<str>> {
        p.iter().map(|s| Arc::from(*s)).collect()
    }

    /// §1.1 jitter, by hand: X = [1.0, 0.5, 1.0] -> (0.5/0.5 + 0.5/1.0) / 2 = 0.75.
    #[test]
    fn jitter_matches_hand_computation() {
        let s = bins(&[(10, 1.0), (10, 0.5), (10, 1.0)]);
        assert!((jitter(&s) - 0.75).abs() < 1e-12);
        assert!(jitter(&bins(&[(10, 0.4)])).abs() < 1e-12);
        assert!(jitter(&bins(&[(10, 0.4), (10, 0.0)])).is_infinite());
        assert!(jitter(&bins(&[(10, 0.4), (0, 0.0)])).is_infinite());
    }

    /// §1.1 "enough samples": every bin, not the total.
    #[test]
    fn qualification_needs_every_bin_and_low_jitter() {
        let c = GroupingConfig::default();
        assert!(qualifies(&steady(100, 6), &c));
        let mut one_short = steady(100, 6);
        one_short[3].count = 99;
        one_short[3].reward_sum = 99.0 * 0.5;
        assert!(!qualifies(&one_short, &c));
        assert!(!qualifies(&bins(&[(500, 0.5), (500, 0.6), (500, 0.5)]), &c));
        assert!(qualifies(
            &bins(&[(500, 0.50), (500, 0.52), (500, 0.50)]),
            &c
        ));
        assert!(!qualifies(&[], &c));
    }

    /// TCP-RL Fig. 4 (§1.1 "Worked example"): one province, Beijing; CMNET {S1, S2}, UNICOM
    /// {S3, S4, S5}, CHINANET {S6, S7, S8}. S1, S3, S6 have 100 steady samples per bin and
    /// qualify; S4 and S5 have 50 each, so UNICOM/Others (100) qualifies; S2 (40) fails alone and
    /// as CMNET/Others, S7 and S8 (30 each) fail alone and as CHINANET/Others (60); these two
    /// Others merge into Beijing/Others (40 + 60 = 100 per bin), which qualifies.
    #[test]
    fn fig4_worked_example_gives_the_papers_groups() {
        let n = 6;
        let leaves = vec![
            (path(&["Beijing", "CMNET", "S1"]), steady(100, n)),
            (path(&["Beijing", "CMNET", "S2"]), steady(40, n)),
            (path(&["Beijing", "UNICOM", "S3"]), steady(100, n)),
            (path(&["Beijing", "UNICOM", "S4"]), steady(50, n)),
            (path(&["Beijing", "UNICOM", "S5"]), steady(50, n)),
            (path(&["Beijing", "CHINANET", "S6"]), steady(100, n)),
            (path(&["Beijing", "CHINANET", "S7"]), steady(30, n)),
            (path(&["Beijing", "CHINANET", "S8"]), steady(30, n)),
        ];
        let g = group(&leaves, &[], &GroupingConfig::default());
        let mut names: Vec<&str> = g.groups.iter().map(|g| g.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            vec![
                "All/Beijing/CHINANET/S6",
                "All/Beijing/CMNET/S1",
                "All/Beijing/Others",
                "All/Beijing/UNICOM/Others",
                "All/Beijing/UNICOM/S3",
            ]
        );
        let group_of = |leaf: usize| g.leaf_group[leaf].map(|i| g.groups[i].name.as_str());
        assert_eq!(group_of(0), Some("All/Beijing/CMNET/S1"));
        assert_eq!(group_of(1), Some("All/Beijing/Others"));
        assert_eq!(group_of(3), Some("All/Beijing/UNICOM/Others"));
        assert_eq!(group_of(4), Some("All/Beijing/UNICOM/Others"));
        assert_eq!(group_of(6), Some("All/Beijing/Others"));
        assert_eq!(group_of(7), Some("All/Beijing/Others"));
        // Nothing reached the root, and unknown addresses have no group: standard IW.
        assert_eq!(g.unknown_group, None);
    }

    /// §1.1 step (4): an unqualified root Others leaves its flows on the standard IW; a
    /// qualified one is a group that also takes unknown addresses.
    #[test]
    fn root_others_takes_unknown_addresses_or_falls_to_default() {
        let n = 3;
        let leaves = vec![
            (path(&["P1", "I1", "S1"]), steady(60, n)),
            (path(&["P2", "I1", "S2"]), steady(20, n)),
        ];
        let c = GroupingConfig::default();
        let g = group(&leaves, &[], &c);
        assert!(g.groups.is_empty());
        assert_eq!(g.leaf_group, vec![None, None]);
        let g = group(&leaves, &steady(20, n), &c);
        assert_eq!(g.groups.len(), 1);
        assert_eq!(g.groups[0].name, "All/Others");
        assert!(g.groups[0].includes_unknown);
        assert_eq!(g.leaf_group, vec![Some(0), Some(0)]);
        assert_eq!(g.unknown_group, Some(0));
    }

    /// A leaf without flows may come with an empty series; a merged node still needs every bin.
    #[test]
    fn short_series_count_as_empty_bins() {
        let leaves = vec![
            (path(&["P", "I", "A"]), steady(100, 3)),
            (path(&["P", "I", "B"]), Vec::new()),
            (path(&["P", "I", "C"]), steady(100, 2)),
        ];
        let g = group(&leaves, &[], &GroupingConfig::default());
        let names: Vec<&str> = g.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, vec!["All/P/I/A"]);
        assert_eq!(g.leaf_group, vec![Some(0), None, None]);
    }

    /// A jittery leaf fails even with plenty of samples and merges upward.
    #[test]
    fn jittery_leaf_merges_into_others() {
        let leaves = vec![
            (path(&["P", "I", "A"]), steady(200, 4)),
            (
                path(&["P", "I", "B"]),
                bins(&[(200, 0.2), (200, 0.8), (200, 0.2), (200, 0.8)]),
            ),
        ];
        let g = group(&leaves, &[], &GroupingConfig::default());
        let names: Vec<&str> = g.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, vec!["All/P/I/A"]);
        assert_eq!(g.leaf_group[1], None);
    }

    /// The hierarchy is configurable: province -> ISP only.
    #[test]
    fn two_level_hierarchy() {
        let f = NetFeatures::new("S1", "CMNET", "Beijing");
        let levels = [Level::Province, Level::Isp];
        assert_eq!(leaf_path(&f, &levels), path(&["Beijing", "CMNET"]));
        let leaves = vec![
            (leaf_path(&f, &levels), steady(100, 2)),
            (path(&["Beijing", "UNICOM"]), steady(10, 2)),
        ];
        let g = group(&leaves, &[], &GroupingConfig::default());
        assert_eq!(g.groups.len(), 1);
        assert_eq!(g.groups[0].name, "All/Beijing/CMNET");
    }
}
