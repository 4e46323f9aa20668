//! The initial-window (IW) controller: TCP-RL's group-based discounted-UCB bandit
//! (Nie et al., IEEE JSAC 2019, §IV; our summary is `PAPERS.md` §1.1; issue 6).
//!
//! A short flow ends in slow start before any measurement of it exists, so its IW is learned
//! across flows per *user group*: clients grouped by network features (province, ISP, subnet),
//! one non-stationary bandit per group choosing the IW, and a compact table that a datapath
//! consults synchronously when a flow is created.
//!
//! # Where things live (start with [`controller`])
//! - [`controller`]: [`IwController`] ties it together. `record(&FlowRecord)` takes finished
//!   flows (TCP-RL Table III fields), `tick(now_us)` ends learning iterations (bandit steps) and
//!   grouping periods, `lookup(ip)` / `table()` / `table_handle()` serve the IW. Sans-IO: virtual
//!   time comes in as `now_us`, no clock is read, no thread is spawned.
//! - [`bandit`]: discounted UCB (Garivier & Moulines) with TCP-RL's reward and its exact
//!   renormalization; the default discount `gamma` and what a step is are documented there.
//! - [`sliding`]: the sliding decision space rule.
//! - [`grouping`]: the user-group tree, time bins, qualification (`S_min`, jitter `T`) and the
//!   bottom-up merge with `Others` nodes (TCP-RL Fig. 4 is a unit test).
//! - [`geo`]: the network-feature database (CSV, O(log n) lookups, a seeded synthetic generator).
//! - [`table`]: the immutable IP-range -> IW table and its atomically swapped handle
//!   (benchmark: `cargo bench -p iw-controller --bench lookup`).
//!
//! # Followed from the paper
//! Every equation of §1.1: discounted counts and means, the padding `2B sqrt(xi ln n / N)`,
//! each arm played once first, the reward `alpha tput/tput_max + (1-alpha) rtt_min/rtt` with
//! history extremes, the sliding rule (best = highest mean then smallest padding), the grouping
//! qualification and procedure, the standard IW 10 for unqualified root `Others`, and the
//! defaults alpha 0.8, xi 0.1, arms [5, 10, 15, 20], Delta 5, iteration 10 min, bin 10 min,
//! `S_min` 100, `T` 0.1.
//!
//! # Left out or decided here
//! - The discount `gamma` (not given by the paper): 0.95, see [`bandit`].
//! - IWs are bounded to `[1, max_iw_pkts]` (default [`DEFAULT_MAX_IW_PKTS`]); the paper has no
//!   bound. Groups without flows for a few iterations, unknown addresses outside a qualified
//!   root `Others`, and unqualified flows get [`DEFAULT_IW_PKTS`].
//! - Per-socket congestion-control choice (TCP-RL's long-flow part, §1.2) is not here; the
//!   proxy's `SetParm(fd, iw, cc)` is the datapath's business: it reads the IW from the table.
//! - Until the first grouping run, and with grouping off, one group `All` learns for everyone.
//! - Flow records are not persisted: the controller keeps only the running sums it needs.
//!
//! # Our additions (off by default; the `iw-web` evaluation reports them as TCP-RL+)
//! - [`bandit::BanditConfig::max_step_multiplier`]: consecutive slides in one direction
//!   double the step, up to a cap.
//! - [`IwConfig::first_grouping_us`]: an earlier first grouping, on the bins it has.
//! - [`IwConfig::standard_iw_until_grouped`]: the standard IW until the first grouping (no
//!   pooled `All` bandit meanwhile), so the first grouping's jitter test sees a fixed IW.

pub mod bandit;
pub mod controller;
pub mod geo;
pub mod grouping;
pub mod sliding;
pub mod table;

pub use controller::{FlowRecord, IwConfig, IwController};
pub use geo::GeoDb;
pub use table::{IwTable, TableHandle};

/// The standard initial window (RFC 6928), packets: unknown, unqualified and stale groups get it.
pub const DEFAULT_IW_PKTS: u32 = 10;
/// Default largest IW the controller may choose, packets (TCP-RL's TCP-200 baseline uses 200).
pub const DEFAULT_MAX_IW_PKTS: u32 = 200;
