//! The shared vocabulary of the suite: the sans-IO [`Algorithm`] trait, what goes in
//! ([`Measurement`], [`Handoff`], [`FlowStart`]), what comes out ([`Control`]), and the
//! config-is-the-factory trait [`AlgorithmConfig`] (DESIGN.md §3.1).
//!
//! An algorithm never reads a clock, owns no IPC handle and draws randomness only from the seed
//! in [`FlowStart`]: time arrives in [`Measurement::now_us`] and [`Handoff::now_us`]. The same
//! state machine therefore runs in the simulator, against a kernel, and under the selector.
//!
//! This module is the leaf of the crate: it imports nothing from the rest of it. The programs
//! themselves, their registration and decoders are in [`crate::programs`], which builds on it.

/// A pacing rate as the datapath understands it.
///
/// The datapath ignores `Rate = 0` (it does not mean "unpaced"), so clearing pacing is said
/// explicitly with the largest rate, [`Pacing::UNPACED_RATE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacing {
    /// No pacing: sent to the datapath as `Rate = u32::MAX`.
    Unpaced,
    /// Pace at this many bytes per second (1 ..= `u32::MAX - 1`).
    BytesPerSec(u32),
}

impl Pacing {
    /// The `Rate` value that means "unpaced" (the datapath's `+infinity`).
    pub const UNPACED_RATE: u32 = u32::MAX;

    /// The value of the datapath's `Rate` register; never 0 (a 0 rate would be ignored).
    pub fn datapath_rate(self) -> u32 {
        match self {
            Self::Unpaced => Self::UNPACED_RATE,
            Self::BytesPerSec(r) => r.max(1),
        }
    }

    /// Reads a datapath rate back: 0 and `u32::MAX` both mean unpaced.
    pub fn from_datapath_rate(rate: u64) -> Self {
        match u32::try_from(rate) {
            Ok(0 | Self::UNPACED_RATE) | Err(_) => Self::Unpaced,
            Ok(r) => Self::BytesPerSec(r),
        }
    }
}

/// What the adapter knows when a flow starts (portus `DatapathInfo`, plus a seed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowStart {
    /// The datapath's socket id.
    pub sock_id: u32,
    /// Maximum segment size, bytes. Any `u32` is accepted: 0 (which no datapath should send)
    /// counts as 1 byte, so nothing divides by zero, and windows of at least 2 MSS saturate at
    /// `u32::MAX` bytes when 2 MSS does not fit. (The agent drops a CREATE whose MSS is 0 or
    /// above 65535 before any algorithm sees it; these rules keep the algorithms total anyway.)
    pub mss_bytes: u32,
    /// The datapath's initial window, bytes.
    pub init_cwnd_bytes: u32,
    /// Seed for any randomness the algorithm needs (its only source of it, through
    /// [`SplitMix64`]).
    pub seed: u64,
}

/// The suite's seeded generator, `SplitMix64` (Steele, Lea & Flood, OOPSLA 2014): the one copy
/// that algorithms (from [`FlowStart::seed`]), the IW controller's synthetic data and the tests
/// draw from, so a seed gives the same stream on every machine with no dependency.
///
/// (`ccp_datapath::sim::rng` seeds its own `xoshiro256++` with the same `SplitMix64` steps: the
/// datapath cannot depend on this crate, whose tests depend on it.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The increment of the state per draw (2^64 / golden ratio, odd).
    pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

    /// A generator whose state is `seed`; the first draw mixes `seed + GAMMA`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(Self::GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`: the top 53 bits of [`Self::next_u64`].
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Everything the next algorithm needs to continue a flow without restarting it
/// (algorithm-agnostic; DESIGN.md §3.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Handoff {
    /// When the handoff happens, µs on the datapath's clock (as in [`Measurement::now_us`]).
    pub now_us: u64,
    /// Congestion window, bytes.
    pub cwnd_bytes: u32,
    /// Slow-start threshold, bytes (`u32::MAX`: none yet).
    pub ssthresh_bytes: u32,
    /// Pacing rate.
    pub pacing: Pacing,
    /// Smoothed RTT, µs (0: no sample yet).
    pub srtt_us: u64,
    /// Minimum RTT seen, µs (0: no sample yet).
    pub min_rtt_us: u64,
    /// Delivery-rate estimate, bytes/s (0: none).
    pub delivery_rate_bytes_per_sec: u64,
    /// Time of the most recent loss or timeout, µs (`None`: no loss seen).
    pub last_loss_us: Option<u64>,
    /// Whether the flow is still in its first slow start (no loss has ended it yet).
    pub in_first_slow_start: bool,
}

impl Handoff {
    /// The state of a brand-new flow: the initial window, unpaced, nothing measured.
    pub fn flow_start(start: &FlowStart) -> Self {
        Self {
            now_us: 0,
            cwnd_bytes: start
                .init_cwnd_bytes
                .max(start.mss_bytes.max(1).saturating_mul(2)),
            ssthresh_bytes: u32::MAX,
            pacing: Pacing::Unpaced,
            srtt_us: 0,
            min_rtt_us: 0,
            delivery_rate_bytes_per_sec: 0,
            last_loss_us: None,
            in_first_slow_start: true,
        }
    }
}

/// A named datapath program (DESIGN.md §3.3); the library of them, their registration and
/// their typed decoder ([`ProgramSpec::decode`]) are in [`crate::programs`].
#[derive(Debug, PartialEq, Eq)]
pub struct ProgramSpec {
    /// Name portus registers it under (global across the suite).
    pub name: &'static str,
    /// Source in the CCP datapath language.
    pub source: &'static str,
}

/// One report from the datapath, decoded into typed fields (see [`crate::programs`]).
///
/// Sums are over the report interval; "last" values are the latest ACK's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Measurement {
    /// Datapath time of the last ACK in the interval, µs.
    pub now_us: u64,
    /// In-order bytes newly acknowledged.
    pub acked_bytes: u64,
    /// Out-of-order (SACKed) bytes.
    pub sacked_bytes: u64,
    /// Packets newly detected lost.
    pub lost_pkts: u64,
    /// A retransmission timeout happened in the interval.
    pub timeout: bool,
    /// Latest RTT sample, µs (0: none yet).
    pub rtt_us: u64,
    /// Smallest RTT sample in the interval, µs (0: none in the interval).
    pub min_rtt_us: u64,
    /// Largest delivery-rate sample in the interval, bytes/s (0: none).
    pub rate_incoming_bytes_per_sec: u64,
    /// Latest sending-rate sample, bytes/s (0: none).
    pub rate_outgoing_bytes_per_sec: u64,
    /// Bytes in flight at the last ACK.
    pub inflight_bytes: u64,
    /// The datapath's window at the last ACK, bytes.
    pub cwnd_bytes: u64,
}

impl Measurement {
    /// Whether the interval saw a loss or a timeout.
    pub fn congestion(&self) -> bool {
        self.timeout || self.lost_pkts > 0
    }
}

/// A switch to another datapath program, with initial values of its control registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramSwitch {
    /// The program (one of the algorithm's [`Algorithm::programs`]).
    pub program: &'static ProgramSpec,
    /// Control-register values to install with it (besides `Cwnd` and `Rate`).
    pub fields: Vec<(&'static str, u32)>,
}

/// What an algorithm asks of the datapath after an event. All parts are optional; the
/// default is "nothing". `Cwnd` and `Rate` travel inside the program change when there is one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Control {
    /// New congestion window, bytes.
    pub cwnd_bytes: Option<u32>,
    /// New pacing rate.
    pub pacing: Option<Pacing>,
    /// Switch to another program.
    pub program: Option<ProgramSwitch>,
}

impl Control {
    /// Do nothing.
    pub fn none() -> Self {
        Self::default()
    }

    /// Set the window only.
    pub fn cwnd(cwnd_bytes: u32) -> Self {
        Self {
            cwnd_bytes: Some(cwnd_bytes),
            ..Self::default()
        }
    }

    /// Adds a pacing rate.
    #[must_use]
    pub fn with_pacing(mut self, pacing: Pacing) -> Self {
        self.pacing = Some(pacing);
        self
    }

    /// Adds a program switch.
    #[must_use]
    pub fn with_program(mut self, program: &'static ProgramSpec) -> Self {
        self.program = Some(ProgramSwitch {
            program,
            fields: Vec::new(),
        });
        self
    }

    /// Whether there is nothing to send.
    pub fn is_none(&self) -> bool {
        self.cwnd_bytes.is_none() && self.pacing.is_none() && self.program.is_none()
    }
}

/// One congestion control algorithm's per-flow state machine (sans-IO; DESIGN.md §3.1).
pub trait Algorithm: Send {
    /// Name the algorithm is registered under (portus `CongAlg::name`, scheme name).
    fn name(&self) -> &'static str;

    /// Programs this algorithm may install; the first is installed at activation unless the
    /// activation's [`Control`] names another. Names are global across the suite.
    fn programs(&self) -> &'static [&'static ProgramSpec];

    /// Takes over a flow: at flow start ([`Handoff::flow_start`]) or from another algorithm.
    fn activate(&mut self, handoff: &Handoff) -> Control;

    /// One report from the datapath.
    fn on_report(&mut self, report: &Measurement) -> Control;

    /// What the next algorithm needs to continue this flow.
    fn handoff(&self) -> Handoff;

    /// Current congestion window, bytes.
    fn cwnd_bytes(&self) -> u32 {
        self.handoff().cwnd_bytes
    }
}

/// An algorithm's configuration, which is also its factory (quinn's `ControllerFactory`).
pub trait AlgorithmConfig: Send + Sync + 'static {
    /// Name the algorithm is registered under; portus picks the algorithm by this name.
    const NAME: &'static str;

    /// Every program the algorithm may install (registered with portus by the adapter).
    fn programs(&self) -> &'static [&'static ProgramSpec];

    /// Whether flows of this config can run as meant, or why not (e.g. a learned model that
    /// is missing or malformed). Tools check it before starting flows (`ccp-eval run`,
    /// `ccp-agent --alg`); by default there is nothing to check.
    fn ready(&self) -> Result<(), String> {
        Ok(())
    }

    /// A fresh per-flow state machine; call [`Algorithm::activate`] before the first report.
    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm>;
}

/// The object-safe face of [`AlgorithmConfig`], for callers (the selector) that hold several
/// configs at once.
pub trait DynAlgorithmConfig: Send + Sync {
    /// See [`AlgorithmConfig::NAME`].
    fn name(&self) -> &'static str;
    /// See [`AlgorithmConfig::programs`].
    fn programs(&self) -> &'static [&'static ProgramSpec];
    /// See [`AlgorithmConfig::ready`] (nothing to check by default).
    fn ready(&self) -> Result<(), String> {
        Ok(())
    }
    /// See [`AlgorithmConfig::build`].
    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm>;
}

impl<C: AlgorithmConfig> DynAlgorithmConfig for C {
    fn name(&self) -> &'static str {
        C::NAME
    }
    fn programs(&self) -> &'static [&'static ProgramSpec] {
        AlgorithmConfig::programs(self)
    }
    fn ready(&self) -> Result<(), String> {
        AlgorithmConfig::ready(self)
    }
    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        AlgorithmConfig::build(self, start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference outputs of `SplitMix64` (Vigna's `splitmix64.c`) for seeds 0 and 42.
    #[test]
    fn splitmix64_matches_the_reference_stream() {
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
        assert_eq!(SplitMix64::new(42).next_u64(), 0xBDD7_3226_2FEB_6E95);
        let x = SplitMix64::new(7).next_f64();
        assert!((0.0..1.0).contains(&x));
    }

    #[test]
    fn unpaced_is_the_maximum_rate_never_zero() {
        assert_eq!(Pacing::Unpaced.datapath_rate(), u32::MAX);
        assert_eq!(Pacing::BytesPerSec(0).datapath_rate(), 1);
        assert_eq!(Pacing::from_datapath_rate(0), Pacing::Unpaced);
        assert_eq!(Pacing::from_datapath_rate(u64::MAX), Pacing::Unpaced);
        assert_eq!(Pacing::from_datapath_rate(5), Pacing::BytesPerSec(5));
    }

    #[test]
    fn a_new_flow_is_in_its_first_slow_start_with_at_least_two_segments() {
        let h = Handoff::flow_start(&FlowStart {
            sock_id: 1,
            mss_bytes: 1000,
            init_cwnd_bytes: 0,
            seed: 0,
        });
        assert!(h.in_first_slow_start);
        assert_eq!(h.cwnd_bytes, 2000);
    }

    /// Before this fix, `2 * mss` overflowed for an MSS of 2^31 or more (a panic in debug
    /// builds, a tiny window in release).
    #[test]
    fn two_segments_saturate_for_any_mss_and_zero_counts_as_one_byte() {
        let start = |mss_bytes| FlowStart {
            sock_id: 1,
            mss_bytes,
            init_cwnd_bytes: 0,
            seed: 0,
        };
        assert_eq!(Handoff::flow_start(&start(0)).cwnd_bytes, 2);
        assert_eq!(Handoff::flow_start(&start(1 << 31)).cwnd_bytes, u32::MAX);
        assert_eq!(Handoff::flow_start(&start(u32::MAX)).cwnd_bytes, u32::MAX);
    }
}
