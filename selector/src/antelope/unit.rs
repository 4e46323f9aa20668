//! Antelope's data unit: the statistics of N contiguous ACKs (`PAPERS.md` §2, "Data unit").
//!
//! Reports arrive once per RTT (the suite's shared programs), so a unit is built from whole
//! reports: it closes on the first report that brings its ACK count to at least N. The ACK count
//! is the number of segments the reports acknowledge (in-order plus SACKed bytes over the MSS),
//! which is what a kernel hook counting one event per delayed-ACK-free segment would see.

/// The seven features Antelope computes per data unit, in model-input order.
pub const FEATURE_NAMES: [&str; 7] = [
    "avg_srtt_ms",
    "acks",
    "lost_pkts",
    "build_ms",
    "max_pacing_kbps",
    "send_rate_kbps",
    "min_delay_ms",
];

/// Version of the feature schema; model files name the version they were trained on.
pub const FEATURE_SCHEMA_VERSION: u32 = 1;

/// One finished data unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnitStats {
    /// Position of the unit in its flow (0 = first).
    pub index: u32,
    /// Average smoothed RTT over the unit, ms (weighted by ACKs).
    pub avg_srtt_ms: f64,
    /// Segments acknowledged in the unit.
    pub acks: f64,
    /// Packets newly detected lost in the unit (a timeout counts as one).
    pub lost_pkts: f64,
    /// Time taken to build the unit, ms.
    pub build_ms: f64,
    /// Largest delivery rate seen by the flow so far, kbit/s (Antelope's maximum pacing rate
    /// so far: our datapath's pacing rate is the algorithm's, not a measurement, so the peak
    /// delivery-rate sample stands in for it).
    pub max_pacing_kbps: f64,
    /// Average sending rate over the unit (acknowledged bits over the build time), kbit/s.
    pub send_rate_kbps: f64,
    /// Smallest RTT seen by the flow so far, ms.
    pub min_delay_ms: f64,
}

impl UnitStats {
    /// The model input, in [`FEATURE_NAMES`] order.
    pub fn features(&self) -> [f64; 7] {
        [
            self.avg_srtt_ms,
            self.acks,
            self.lost_pkts,
            self.build_ms,
            self.max_pacing_kbps,
            self.send_rate_kbps,
            self.min_delay_ms,
        ]
    }
}

/// Builds data units from a flow's reports.
#[derive(Debug, Clone)]
pub struct UnitBuilder {
    acks_per_unit: u64,
    mss_bytes: u64,
    next_index: u32,
    start_us: Option<u64>,
    acks: u64,
    acked_bytes: u64,
    lost: u64,
    srtt_weighted_us: f64,
    srtt_weight: f64,
    max_rate_bytes_per_sec: u64,
    min_rtt_us: u64,
}

impl UnitBuilder {
    /// Units of `acks_per_unit` ACKs (Antelope's N, default 20) of `mss_bytes` segments.
    pub fn new(acks_per_unit: u32, mss_bytes: u32) -> Self {
        Self {
            acks_per_unit: u64::from(acks_per_unit.max(1)),
            mss_bytes: u64::from(mss_bytes.max(1)),
            next_index: 0,
            start_us: None,
            acks: 0,
            acked_bytes: 0,
            lost: 0,
            srtt_weighted_us: 0.0,
            srtt_weight: 0.0,
            max_rate_bytes_per_sec: 0,
            min_rtt_us: 0,
        }
    }

    /// Adds one report; returns the unit it completes, if any. `interval_start_us` is when
    /// the report interval began (the previous report's time, or the flow's start), `srtt_us`
    /// the active candidate's smoothed RTT.
    pub fn push(
        &mut self,
        m: &ccp_algorithms::Measurement,
        interval_start_us: u64,
        srtt_us: u64,
    ) -> Option<UnitStats> {
        let start = *self.start_us.get_or_insert(interval_start_us);
        let bytes = m.acked_bytes.saturating_add(m.sacked_bytes);
        let acks = bytes.div_ceil(self.mss_bytes);
        self.acks = self.acks.saturating_add(acks);
        self.acked_bytes = self.acked_bytes.saturating_add(m.acked_bytes);
        self.lost = self
            .lost
            .saturating_add(m.lost_pkts)
            .saturating_add(u64::from(m.timeout));
        let srtt = if srtt_us > 0 { srtt_us } else { m.rtt_us };
        if srtt > 0 {
            // Weighted by ACKs; a report without ACKs still counts once.
            let w = acks.max(1) as f64;
            self.srtt_weighted_us += srtt as f64 * w;
            self.srtt_weight += w;
        }
        self.max_rate_bytes_per_sec = self
            .max_rate_bytes_per_sec
            .max(m.rate_incoming_bytes_per_sec);
        self.min_rtt_us = ccp_algorithms::rtt::lower_min(self.min_rtt_us, [m.min_rtt_us, m.rtt_us]);
        if self.acks < self.acks_per_unit {
            return None;
        }
        let build_us = m.now_us.saturating_sub(start).max(1);
        let weight = self.srtt_weight.max(1.0);
        let unit = UnitStats {
            index: self.next_index,
            avg_srtt_ms: self.srtt_weighted_us / weight / 1e3,
            acks: self.acks as f64,
            lost_pkts: self.lost as f64,
            build_ms: build_us as f64 / 1e3,
            max_pacing_kbps: self.max_rate_bytes_per_sec as f64 * 8.0 / 1e3,
            send_rate_kbps: self.acked_bytes as f64 * 8.0 / build_us as f64 * 1e3,
            min_delay_ms: self.min_rtt_us as f64 / 1e3,
        };
        self.next_index = self.next_index.saturating_add(1);
        self.start_us = Some(m.now_us);
        self.acks = 0;
        self.acked_bytes = 0;
        self.lost = 0;
        self.srtt_weighted_us = 0.0;
        self.srtt_weight = 0.0;
        Some(unit)
    }
}
