//! The controller: flow records in, IW tables out (`PAPERS.md` §1.1 "Deployment": "a controller
//! recomputes the table every iteration").
//!
//! # Loop
//! - [`IwController::record`] takes one finished flow ([`FlowRecord`], TCP-RL Table III fields),
//!   validates it, finds its leaf in the group tree from the client address (unknown addresses:
//!   the root `All`) and adds it to its group's current iteration (per IW used) and, with
//!   grouping on, to its leaf's time bin.
//! - [`IwController::tick`] is called with the current (virtual) time. At every iteration
//!   boundary (default every 10 min) each group's bandit takes one step with the iteration's
//!   flows and chooses its next IW; at every grouping boundary (default daily) the grouping
//!   reruns on the bins of the period that just ended. Then a new [`IwTable`] is published.
//! - [`IwController::lookup`] / [`IwController::table`] / [`IwController::table_handle`] serve
//!   the IW at flow creation, synchronously.
//!
//! Nothing here reads a clock or spawns a thread: time is the `now_us` passed in, so the same
//! code runs in the simulator's virtual time and in real time. Iteration and grouping boundaries
//! are multiples of their period, starting with the first multiple after the first time seen.
//!
//! # Choices the paper leaves open
//! - Until the first grouping run (and always when grouping is off, i.e. "TCP-RL without
//!   grouping") every flow belongs to one group `All` that learns with its own bandit.
//! - A group that persists across a regrouping (same name) keeps its bandit; a new group starts
//!   from the initial arms; a group that disappears is dropped and its leaves follow the new
//!   grouping (or the standard IW).
//! - A group whose data vanishes (no flow in `stale_iterations` consecutive iterations, default
//!   3) is published with the standard IW until flows return; its bandit state is kept.
//! - The reward normalization of the grouping's bins uses the extremes over all flows; each
//!   bandit normalizes with its own group's extremes.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Arc;

use crate::bandit::{BanditConfig, DiscountedUcb, FlowStats, RewardScale};
use crate::geo::GeoDb;
use crate::grouping::{BinSample, GroupingConfig, group, leaf_path};
use crate::table::{IwTable, TableHandle};
use crate::{DEFAULT_IW_PKTS, DEFAULT_MAX_IW_PKTS};

/// Default learning iteration, µs (10 min, §1.1 "Parameters used").
pub const DEFAULT_ITERATION_US: u64 = 10 * 60 * 1_000_000;
/// Default number of flow-less iterations after which a group falls back to the standard IW.
pub const DEFAULT_STALE_ITERATIONS: u32 = 3;

/// Parameters of the controller.
#[derive(Debug, Clone, PartialEq)]
pub struct IwConfig {
    /// Per-group bandit parameters (its `max_iw_pkts` is replaced by [`IwConfig::max_iw_pkts`]).
    pub bandit: BanditConfig,
    /// User grouping; `None` runs one group for everyone ("TCP-RL without grouping").
    pub grouping: Option<GroupingConfig>,
    /// Learning iteration, µs (recommended 10 min).
    pub iteration_us: u64,
    /// The standard IW for unknown, unqualified and stale groups, packets (10).
    pub default_iw_pkts: u32,
    /// Largest IW ever published, packets (every IW lies in `[1, max_iw_pkts]`).
    pub max_iw_pkts: u32,
    /// Flow-less iterations after which a group is published with the standard IW.
    pub stale_iterations: u32,
    /// When the first grouping runs, µs after the start of its window (`None`: one grouping
    /// period, the default). Our addition: a shorter first window forms groups sooner; its
    /// qualification looks at the bins that window has.
    pub first_grouping_us: Option<u64>,
    /// Publish the standard IW for everyone until the first grouping has run (our addition;
    /// default `false`: the group `All` learns for everyone meanwhile). The first grouping
    /// then sees bins whose IW did not change, so its jitter measures the network alone, as
    /// grouping on logs of servers that ran the standard IW would.
    pub standard_iw_until_grouped: bool,
    /// A group that a regrouping creates starts from a copy of the bandit of the old group
    /// that covered most of its leaves (our addition; default `false`: from the initial arms).
    pub warm_start: bool,
}

impl Default for IwConfig {
    fn default() -> Self {
        Self {
            bandit: BanditConfig::default(),
            grouping: Some(GroupingConfig::default()),
            iteration_us: DEFAULT_ITERATION_US,
            default_iw_pkts: DEFAULT_IW_PKTS,
            max_iw_pkts: DEFAULT_MAX_IW_PKTS,
            stale_iterations: DEFAULT_STALE_ITERATIONS,
            first_grouping_us: None,
            standard_iw_until_grouped: false,
            warm_start: false,
        }
    }
}

/// An invalid configuration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A period (iteration, bin or grouping) is zero.
    #[error("`{0}` must be positive")]
    ZeroPeriod(&'static str),
    /// `max_iw_pkts` is zero or does not fit the table's 16-bit IWs.
    #[error("max_iw_pkts must be in [1, 65535], got {0}")]
    MaxIw(u32),
    /// A bandit parameter is out of range.
    #[error("bandit parameter `{name}` = {value} is out of range")]
    Bandit {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// The grouping jitter threshold is negative or NaN.
    #[error("grouping max_jitter = {0} is out of range")]
    Jitter(f64),
}

impl IwConfig {
    /// Checks every parameter.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.iteration_us == 0 {
            return Err(ConfigError::ZeroPeriod("iteration_us"));
        }
        if self.max_iw_pkts == 0 || self.max_iw_pkts > u32::from(u16::MAX) {
            return Err(ConfigError::MaxIw(self.max_iw_pkts));
        }
        let b = &self.bandit;
        let checks = [
            ("alpha", b.alpha, (0.0..=1.0).contains(&b.alpha)),
            ("xi", b.xi, b.xi > 0.0 && b.xi.is_finite()),
            ("gamma", b.gamma, b.gamma > 0.0 && b.gamma <= 1.0),
            (
                "reward_bound",
                b.reward_bound,
                b.reward_bound > 0.0 && b.reward_bound.is_finite(),
            ),
        ];
        for (name, value, ok) in checks {
            if !ok {
                return Err(ConfigError::Bandit { name, value });
            }
        }
        if let Some(g) = &self.grouping {
            if g.bin_us == 0 {
                return Err(ConfigError::ZeroPeriod("grouping.bin_us"));
            }
            if g.period_us == 0 {
                return Err(ConfigError::ZeroPeriod("grouping.period_us"));
            }
            if self.first_grouping_us == Some(0) {
                return Err(ConfigError::ZeroPeriod("first_grouping_us"));
            }
            if g.max_jitter.is_nan() || g.max_jitter < 0.0 {
                return Err(ConfigError::Jitter(g.max_jitter));
            }
        }
        Ok(())
    }
}

/// One finished flow, as logged by the connection manager (TCP-RL Table III).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowRecord {
    /// Client address (the features come from the geolocation database).
    pub client: Ipv4Addr,
    /// When the flow ended (last ACK), µs, on the controller's time line.
    pub end_us: u64,
    /// Bytes transferred.
    pub size_bytes: u64,
    /// Response time, first data sent to last ACK, µs.
    pub response_time_us: u64,
    /// Maximum segment size, bytes.
    pub mss_bytes: u32,
    /// Throughput = size / response time, bytes/s (finite, >= 0).
    pub throughput_bytes_per_sec: f64,
    /// Smoothed RTT at the end of the flow, µs (finite, > 0).
    pub srtt_us: f64,
    /// Loss rate in `[0, 1]`.
    pub loss_rate: f64,
    /// The IW the flow used, packets (>= 1).
    pub iw_pkts: u32,
}

impl FlowRecord {
    /// A record with throughput = size / response time, MSS 1448 and no loss.
    pub fn from_transfer(
        client: Ipv4Addr,
        end_us: u64,
        size_bytes: u64,
        response_time_us: u64,
        srtt_us: f64,
        iw_pkts: u32,
    ) -> Self {
        let throughput_bytes_per_sec = if response_time_us == 0 {
            f64::NAN
        } else {
            size_bytes as f64 * 1e6 / response_time_us as f64
        };
        Self {
            client,
            end_us,
            size_bytes,
            response_time_us,
            mss_bytes: 1448,
            throughput_bytes_per_sec,
            srtt_us,
            loss_rate: 0.0,
            iw_pkts,
        }
    }

    /// Checks the fields the reward and the statistics use.
    pub fn validate(&self) -> Result<(), RecordError> {
        let t = self.throughput_bytes_per_sec;
        if !t.is_finite() || t < 0.0 {
            return Err(RecordError::Throughput(t));
        }
        if !self.srtt_us.is_finite() || self.srtt_us <= 0.0 {
            return Err(RecordError::Rtt(self.srtt_us));
        }
        if !(0.0..=1.0).contains(&self.loss_rate) {
            return Err(RecordError::LossRate(self.loss_rate));
        }
        if self.iw_pkts == 0 {
            return Err(RecordError::ZeroIw);
        }
        Ok(())
    }
}

/// A flow record the controller refuses (it is counted, not stored).
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum RecordError {
    /// Throughput NaN, infinite or negative.
    #[error("throughput {0} bytes/s is not a finite non-negative number")]
    Throughput(f64),
    /// RTT NaN, infinite, zero or negative.
    #[error("srtt {0} us is not a finite positive number")]
    Rtt(f64),
    /// Loss rate outside `[0, 1]` (or NaN).
    #[error("loss rate {0} is not in [0, 1]")]
    LossRate(f64),
    /// IW of zero packets.
    #[error("initial window of 0 packets")]
    ZeroIw,
}

/// Counters of what the controller did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ControllerStats {
    /// Records accepted.
    pub accepted: u64,
    /// Records rejected for their throughput.
    pub rejected_throughput: u64,
    /// Records rejected for their RTT.
    pub rejected_rtt: u64,
    /// Records rejected for their loss rate.
    pub rejected_loss_rate: u64,
    /// Records rejected for a zero IW.
    pub rejected_iw: u64,
    /// Iterations ended (bandit steps offered to every group).
    pub iterations: u64,
    /// Grouping runs.
    pub regroupings: u64,
}

impl ControllerStats {
    /// All rejected records.
    pub fn rejected(&self) -> u64 {
        self.rejected_throughput + self.rejected_rtt + self.rejected_loss_rate + self.rejected_iw
    }
}

/// What one [`IwController::tick`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TickOutcome {
    /// Iteration boundaries crossed (0: nothing to do).
    pub iterations: u64,
    /// Whether the grouping reran.
    pub regrouped: bool,
}

/// A snapshot of one group, for reports and plots.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupInfo {
    /// The group name (`All` without grouping; else a path such as `All/Beijing/UNICOM/Others`).
    pub name: String,
    /// The IW published for it, packets.
    pub iw_pkts: u32,
    /// Its bandit's arms, packets.
    pub arms_pkts: Vec<u32>,
    /// Whether it is stale (published with the standard IW for lack of flows).
    pub stale: bool,
    /// Number of leaves of the tree it covers.
    pub leaves: usize,
    /// Whether it holds unknown addresses.
    pub includes_unknown: bool,
}

struct GroupState {
    name: String,
    bandit: DiscountedUcb,
    /// This iteration's flows, per IW used.
    iteration: Vec<(u32, FlowStats)>,
    idle_iterations: u32,
    leaves: usize,
    includes_unknown: bool,
}

impl GroupState {
    fn new(name: String, bandit: &BanditConfig) -> Self {
        Self {
            name,
            bandit: DiscountedUcb::new(bandit.clone()),
            iteration: Vec::new(),
            idle_iterations: 0,
            leaves: 0,
            includes_unknown: false,
        }
    }
}

/// TCP-RL's IW controller (see the module doc).
pub struct IwController {
    config: IwConfig,
    geo: Arc<GeoDb>,
    /// Leaf of each geolocation feature set.
    feature_leaf: Vec<u32>,
    /// Path below `All` of each leaf.
    leaf_paths: Vec<Vec<Arc<str>>>,
    groups: Vec<GroupState>,
    leaf_group: Vec<Option<usize>>,
    unknown_group: Option<usize>,
    /// Per-leaf time bins of the current grouping window (only leaves with flows).
    bins: HashMap<u32, Vec<FlowStats>>,
    unknown_bins: Vec<FlowStats>,
    scale: RewardScale,
    window_start_us: u64,
    /// Next iteration boundary (`None` until the first record or tick sets the time line).
    next_iteration_us: Option<u64>,
    next_grouping_us: u64,
    handle: TableHandle,
    stats: ControllerStats,
}

impl std::fmt::Debug for IwController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IwController")
            .field("groups", &self.groups.len())
            .field("leaves", &self.leaf_paths.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl IwController {
    /// A controller over the feature database `geo`. Publishes the standard IW for everyone
    /// until the first iteration ends.
    pub fn new(mut config: IwConfig, geo: Arc<GeoDb>) -> Result<Self, ConfigError> {
        config.validate()?;
        config.bandit.max_iw_pkts = config.max_iw_pkts;
        let levels = config
            .grouping
            .as_ref()
            .map_or_else(Vec::new, |g| g.levels.clone());
        let mut index: HashMap<Vec<Arc<str>>, u32> = HashMap::new();
        let mut leaf_paths = Vec::new();
        let mut feature_leaf = Vec::with_capacity(geo.feature_count());
        for f in geo.all_features() {
            let path = leaf_path(f, &levels);
            let id = *index.entry(path.clone()).or_insert_with(|| {
                leaf_paths.push(path);
                (leaf_paths.len() - 1) as u32
            });
            feature_leaf.push(id);
        }
        let mut all = GroupState::new("All".to_string(), &config.bandit);
        all.leaves = leaf_paths.len();
        all.includes_unknown = true;
        let table = IwTable::uniform(config.default_iw_pkts, config.max_iw_pkts);
        let n_bins = config.grouping.as_ref().map_or(0, GroupingConfig::bins);
        Ok(Self {
            leaf_group: vec![Some(0); leaf_paths.len()],
            unknown_group: Some(0),
            groups: vec![all],
            feature_leaf,
            leaf_paths,
            bins: HashMap::new(),
            unknown_bins: vec![FlowStats::default(); n_bins],
            scale: RewardScale::default(),
            window_start_us: 0,
            next_iteration_us: None,
            next_grouping_us: u64::MAX,
            handle: TableHandle::new(table),
            stats: ControllerStats::default(),
            config,
            geo,
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &IwConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> ControllerStats {
        self.stats
    }

    /// The IW for a new flow to `client`, packets, from the published table.
    pub fn lookup(&self, client: Ipv4Addr) -> u32 {
        self.handle.lookup(client)
    }

    /// The published table.
    pub fn table(&self) -> Arc<IwTable> {
        self.handle.load()
    }

    /// A handle that always sees the latest published table (for a datapath on another thread).
    pub fn table_handle(&self) -> TableHandle {
        self.handle.clone()
    }

    /// The name of the group `client` belongs to (`None`: the standard IW, no group).
    pub fn group_of(&self, client: Ipv4Addr) -> Option<&str> {
        self.group_index(client)
            .map(|g| self.groups[g].name.as_str())
    }

    /// A snapshot of every group.
    pub fn groups(&self) -> Vec<GroupInfo> {
        (0..self.groups.len())
            .map(|g| {
                let s = &self.groups[g];
                GroupInfo {
                    name: s.name.clone(),
                    iw_pkts: self.group_iw(g),
                    arms_pkts: s.bandit.arms().iter().map(|a| a.iw_pkts).collect(),
                    stale: self.is_stale(g),
                    leaves: s.leaves,
                    includes_unknown: s.includes_unknown,
                }
            })
            .collect()
    }

    fn leaf_of(&self, client: Ipv4Addr) -> Option<u32> {
        self.geo
            .lookup(client)
            .and_then(|f| self.feature_leaf.get(f.0 as usize).copied())
    }

    fn group_index(&self, client: Ipv4Addr) -> Option<usize> {
        match self.leaf_of(client) {
            Some(leaf) => self.leaf_group.get(leaf as usize).copied().flatten(),
            None => self.unknown_group,
        }
    }

    /// Anchors the iteration and grouping boundaries at the first time seen: the next multiples
    /// of their periods (so a real-time clock does not count the iterations since 1970).
    fn start(&mut self, now_us: u64) {
        if self.next_iteration_us.is_some() {
            return;
        }
        let iter_us = self.config.iteration_us;
        self.next_iteration_us = Some((now_us / iter_us).saturating_add(1).saturating_mul(iter_us));
        if let Some(g) = &self.config.grouping {
            self.window_start_us = now_us / g.period_us * g.period_us;
            let first = self.config.first_grouping_us.unwrap_or(g.period_us);
            self.next_grouping_us = self.window_start_us.saturating_add(first);
        }
    }

    /// Takes one finished flow. Bad records are rejected, counted and otherwise ignored.
    pub fn record(&mut self, flow: &FlowRecord) -> Result<(), RecordError> {
        if let Err(e) = flow.validate() {
            let s = &mut self.stats;
            match e {
                RecordError::Throughput(_) => s.rejected_throughput += 1,
                RecordError::Rtt(_) => s.rejected_rtt += 1,
                RecordError::LossRate(_) => s.rejected_loss_rate += 1,
                RecordError::ZeroIw => s.rejected_iw += 1,
            }
            return Err(e);
        }
        self.stats.accepted += 1;
        self.start(flow.end_us);
        let mut one = FlowStats::default();
        one.add(flow.throughput_bytes_per_sec, flow.srtt_us);
        let leaf = self.leaf_of(flow.client);
        let group = match leaf {
            Some(leaf) => self.leaf_group.get(leaf as usize).copied().flatten(),
            None => self.unknown_group,
        };
        if let Some(g) = group {
            let it = &mut self.groups[g].iteration;
            match it.iter_mut().find(|(iw, _)| *iw == flow.iw_pkts) {
                Some((_, s)) => s.merge(&one),
                None => it.push((flow.iw_pkts, one)),
            }
        }
        if let Some(g) = &self.config.grouping {
            self.scale.observe(&one);
            let n_bins = g.bins();
            let bin = (flow.end_us.saturating_sub(self.window_start_us) / g.bin_us.max(1))
                .min(n_bins as u64 - 1) as usize;
            let series = match leaf {
                Some(leaf) => self
                    .bins
                    .entry(leaf)
                    .or_insert_with(|| vec![FlowStats::default(); n_bins]),
                None => &mut self.unknown_bins,
            };
            if let Some(b) = series.get_mut(bin) {
                b.merge(&one);
            }
        }
        Ok(())
    }

    /// Advances to `now_us`: ends the iterations and grouping periods that have passed and
    /// publishes a new table if anything changed.
    pub fn tick(&mut self, now_us: u64) -> TickOutcome {
        self.start(now_us);
        let iter_us = self.config.iteration_us;
        let next = self.next_iteration_us.unwrap_or(u64::MAX);
        let mut out = TickOutcome::default();
        if now_us >= next {
            let crossed = (now_us - next) / iter_us + 1;
            self.end_iteration(crossed);
            self.next_iteration_us = Some(next.saturating_add(crossed.saturating_mul(iter_us)));
            out.iterations = crossed;
        }
        if let Some(g) = &self.config.grouping
            && now_us >= self.next_grouping_us
        {
            let period = g.period_us;
            let crossed = (now_us - self.next_grouping_us) / period + 1;
            let window_bins =
                (self.next_grouping_us.saturating_sub(self.window_start_us)).div_ceil(g.bin_us);
            self.regroup(usize::try_from(window_bins).unwrap_or(usize::MAX));
            self.window_start_us = self
                .next_grouping_us
                .saturating_add((crossed - 1).saturating_mul(period));
            self.next_grouping_us = self
                .next_grouping_us
                .saturating_add(crossed.saturating_mul(period));
            out.regrouped = true;
        }
        if out.iterations > 0 || out.regrouped {
            self.publish();
        }
        out
    }

    /// One bandit step per group; `crossed - 1` further flow-less iterations.
    fn end_iteration(&mut self, crossed: u64) {
        let extra = u32::try_from(crossed - 1).unwrap_or(u32::MAX);
        for g in &mut self.groups {
            let observed = std::mem::take(&mut g.iteration);
            if observed.iter().any(|(_, s)| s.count > 0) {
                g.bandit.step(&observed);
                g.idle_iterations = extra;
            } else {
                g.idle_iterations = g.idle_iterations.saturating_add(1).saturating_add(extra);
            }
        }
        self.stats.iterations += crossed;
    }

    /// Reruns the grouping on the current window's first `window_bins` bins and clears them.
    fn regroup(&mut self, window_bins: usize) {
        let Some(config) = &self.config.grouping else {
            return;
        };
        let alpha = self.config.bandit.alpha;
        let to_samples = |series: &[FlowStats]| -> Vec<BinSample> {
            series
                .iter()
                .take(window_bins)
                .map(|b| BinSample {
                    count: b.count,
                    reward_sum: if b.count == 0 {
                        0.0
                    } else {
                        b.count as f64
                            * self.scale.reward(
                                alpha,
                                b.sum_tput / b.count as f64,
                                b.sum_inv_rtt / b.count as f64,
                            )
                    },
                })
                .collect()
        };
        let n_bins = config.bins();
        // Leaves without flows get an empty series (no allocation): `group` counts its bins as
        // empty, so a day of 10-minute bins over 100k leaves stays small.
        let leaves: Vec<(Vec<Arc<str>>, Vec<BinSample>)> = self
            .leaf_paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let series = self
                    .bins
                    .get(&(i as u32))
                    .map_or_else(Vec::new, |s| to_samples(s));
                (p.clone(), series)
            })
            .collect();
        let unknown = to_samples(&self.unknown_bins);
        let result = group(&leaves, &unknown, config);
        // For a warm start: the old group covering most of each new group's leaves.
        let ancestors: Vec<Option<DiscountedUcb>> = result
            .groups
            .iter()
            .map(|found| {
                if !self.config.warm_start {
                    return None;
                }
                let mut votes: HashMap<usize, usize> = HashMap::new();
                for &l in &found.leaves {
                    if let Some(Some(g)) = self.leaf_group.get(l) {
                        *votes.entry(*g).or_default() += 1;
                    }
                }
                let best = votes.into_iter().max_by_key(|&(g, n)| (n, Reverse(g)));
                best.and_then(|(g, _)| self.groups.get(g))
                    .map(|g| g.bandit.clone())
            })
            .collect();
        let mut old: HashMap<String, GroupState> =
            self.groups.drain(..).map(|g| (g.name.clone(), g)).collect();
        for (found, ancestor) in result.groups.iter().zip(ancestors) {
            let mut state = old.remove(&found.name).unwrap_or_else(|| {
                let mut fresh = GroupState::new(found.name.clone(), &self.config.bandit);
                if let Some(b) = ancestor {
                    fresh.bandit = b;
                }
                fresh
            });
            state.leaves = found.leaves.len();
            state.includes_unknown = found.includes_unknown;
            self.groups.push(state);
        }
        self.leaf_group = result.leaf_group;
        self.unknown_group = result.unknown_group;
        self.bins.clear();
        self.unknown_bins = vec![FlowStats::default(); n_bins];
        self.stats.regroupings += 1;
    }

    fn is_stale(&self, g: usize) -> bool {
        self.groups[g].idle_iterations >= self.config.stale_iterations.max(1)
    }

    /// The IW published for group `g`, packets, in `[1, max_iw_pkts]`.
    fn group_iw(&self, g: usize) -> u32 {
        let before_grouping = self.config.grouping.is_some() && self.stats.regroupings == 0;
        let iw = if self.is_stale(g) || (self.config.standard_iw_until_grouped && before_grouping) {
            self.config.default_iw_pkts
        } else {
            self.groups[g].bandit.current_iw()
        };
        iw.clamp(1, self.config.max_iw_pkts)
    }

    /// Builds and publishes the table for the current groups and IWs.
    fn publish(&self) {
        let iws: Vec<u32> = (0..self.groups.len()).map(|g| self.group_iw(g)).collect();
        let default = self.config.default_iw_pkts;
        let ranges: Vec<(Ipv4Addr, Ipv4Addr, u32)> = self
            .geo
            .ranges()
            .map(|(s, e, f)| {
                let g = self
                    .feature_leaf
                    .get(f.0 as usize)
                    .and_then(|&leaf| self.leaf_group.get(leaf as usize).copied().flatten());
                (s, e, g.map_or(default, |g| iws[g]))
            })
            .collect();
        let table_default = self.unknown_group.map_or(default, |g| iws[g]);
        let max = self.config.max_iw_pkts;
        // The geolocation database has no overlapping ranges, so this cannot fail; if it ever
        // did, the previous table stays published.
        if let Ok(t) = IwTable::new(ranges, table_default, max) {
            self.handle.publish(Arc::new(t));
        }
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
