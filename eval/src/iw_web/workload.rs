//! The synthetic trace: a user population across provinces, ISPs and subnets, each subnet with
//! its own slowly drifting path, web-search flow sizes and Poisson arrivals (TCP-RL §VII-B's
//! trace-driven setting; `PAPERS.md` §1.1).
//!
//! # Population
//! [`iw_controller::GeoDb::synthetic`] gives the subnets (`P{p}-ISP{i}-S{s}`, one IP range
//! each). Every subnet's path is drawn from its province and its ISP, then perturbed per subnet,
//! so that groups differ at every level of the tree:
//! - **Province** `p` sets the distance: one-way delay `PROVINCE_DELAY_MS[p % 3]` (near, middle,
//!   far), times a per-subnet factor uniform in [0.8, 1.25].
//! - **ISP** `i` sets the access technology ([`ISP_CLASSES`], by `i % 3`): fibre (fast, buffer of
//!   one BDP), DSL (slower, deep bufferbloated buffer) or mobile (slow, extra delay, *small*
//!   buffer of 20-50 packets, where a large IW bursts and loses packets). Rates get a per-subnet
//!   lognormal factor (sigma 0.3).
//! - **Volume**: a fraction [`PopulationSpec::light_fraction`] of subnets are *light* (few
//!   flows, so they cannot qualify for a group of their own and end in an `Others`); the rest
//!   are *heavy*. Within a subnet, arrivals are Poisson at a constant rate.
//!
//! # Drift
//! A diurnal load `L(t) = 0.5 + 0.5 sin(2 pi t / 24 h + phi)` with a per-subnet phase `phi`
//! (provinces in different time zones of load, subnets a little apart) cuts the rate by up to
//! 30 % and adds up to 20 % to the delay: `rate(t) = rate0 (1 - 0.3 L)`, `delay(t) =
//! delay0 (1 + 0.2 L)`. Paths are piecewise constant per time bin (evaluated at the bin's
//! middle), which is what makes "the best IW per group and time bin" (Optimal) well defined.
//! The drift per 10-minute bin is at most about 1.3 % of the rate: slow, as the bandit assumes.
//!
//! # Flow sizes
//! A two-component lognormal mix, clipped to [1 KB, 3 MB] and rounded up to whole 1448-byte
//! segments: 75 % "page" flows (median 25 KB, sigma 1.0) and 25 % "object" flows (median
//! 250 KB, sigma 0.9). Mean about 120 KB and about 72 % under 100 KB, matching TCP-RL's search
//! service (mean ~120 KB, 70 % under 100 KB); the unit tests check both.

use std::net::Ipv4Addr;

use ccp_datapath::sim::rng::Rng;
use iw_controller::GeoDb;
use iw_controller::geo::SyntheticGeo;

use super::flowsim::{MSS_BYTES, Path};

/// One-way propagation delay by province class, ms (near, middle, far).
pub const PROVINCE_DELAY_MS: [f64; 3] = [10.0, 25.0, 50.0];

/// An access technology (by ISP index modulo 3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IspClass {
    /// Name in reports.
    pub name: &'static str,
    /// Median bottleneck rate, Mbit/s.
    pub rate_mbps: f64,
    /// Extra one-way delay of the access network, ms.
    pub extra_delay_ms: f64,
    /// Buffer as a multiple of the BDP (`None`: a fixed small buffer, see `small_buffer_pkts`).
    pub buffer_bdp: Option<f64>,
    /// Small buffer range, packets (used when `buffer_bdp` is `None`).
    pub small_buffer_pkts: (u32, u32),
}

/// Fibre, DSL and mobile.
pub const ISP_CLASSES: [IspClass; 3] = [
    IspClass {
        name: "fibre",
        rate_mbps: 40.0,
        extra_delay_ms: 1.0,
        buffer_bdp: Some(1.0),
        small_buffer_pkts: (0, 0),
    },
    IspClass {
        name: "dsl",
        rate_mbps: 12.0,
        extra_delay_ms: 5.0,
        buffer_bdp: Some(3.0),
        small_buffer_pkts: (0, 0),
    },
    IspClass {
        name: "mobile",
        rate_mbps: 8.0,
        extra_delay_ms: 20.0,
        buffer_bdp: None,
        small_buffer_pkts: (20, 50),
    },
];

/// One subnet of the population.
#[derive(Debug, Clone, PartialEq)]
pub struct Subnet {
    /// Subnet name (as in the geolocation database).
    pub name: String,
    /// Province name.
    pub province: String,
    /// ISP name.
    pub isp: String,
    /// Access technology.
    pub class: &'static str,
    /// First and last address of its range.
    pub range: (Ipv4Addr, Ipv4Addr),
    /// Rate without load, bits/s.
    pub base_rate_bps: f64,
    /// One-way delay without load, µs.
    pub base_delay_us: f64,
    /// Drop-tail buffer, packets.
    pub buffer_pkts: u32,
    /// Phase of the diurnal load, radians.
    pub phase: f64,
    /// Mean arrivals per time bin.
    pub flows_per_bin: f64,
    /// Whether it is one of the light subnets.
    pub light: bool,
}

/// Diurnal period, µs.
const DAY_US: f64 = 24.0 * 3600.0 * 1e6;

impl Subnet {
    /// The path during bin `bin` of length `bin_us` (evaluated at the bin's middle).
    pub fn path(&self, bin: u64, bin_us: u64) -> Path {
        let t = (bin as f64 + 0.5) * bin_us as f64;
        let load = 0.5 + 0.5 * (2.0 * std::f64::consts::PI * t / DAY_US + self.phase).sin();
        Path {
            rate_bps: (self.base_rate_bps * (1.0 - 0.3 * load)).round().max(1e5) as u64,
            one_way_delay_us: (self.base_delay_us * (1.0 + 0.2 * load)).round().max(1.0) as u64,
            buffer_pkts: self.buffer_pkts,
        }
    }
}

/// Parameters of the population.
#[derive(Debug, Clone, PartialEq)]
pub struct PopulationSpec {
    /// Provinces x ISPs x subnets.
    pub provinces: u32,
    /// ISPs per province.
    pub isps_per_province: u32,
    /// Subnets per ISP.
    pub subnets_per_isp: u32,
    /// Mean arrivals per bin of a heavy subnet.
    pub heavy_flows_per_bin: f64,
    /// Mean arrivals per bin of a light subnet.
    pub light_flows_per_bin: f64,
    /// Fraction of light subnets.
    pub light_fraction: f64,
    /// Seed.
    pub seed: u64,
}

fn normal(rng: &mut Rng) -> f64 {
    let u1 = rng.next_f64().max(1e-300);
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

fn uniform(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * rng.next_f64()
}

/// The geolocation database and the subnets, in database order.
pub fn population(spec: &PopulationSpec) -> (GeoDb, Vec<Subnet>) {
    let geo = GeoDb::synthetic(&SyntheticGeo {
        provinces: spec.provinces,
        isps_per_province: spec.isps_per_province,
        subnets_per_isp: spec.subnets_per_isp,
        range_len: (256, 1024),
        gap: (0, 64),
        first_address: Ipv4Addr::new(10, 0, 0, 0),
        seed: spec.seed,
    });
    let mut rng = Rng::derive(spec.seed, 0x1_0001);
    let mut subnets = Vec::new();
    for (start, end, id) in geo.ranges() {
        let Some(f) = geo.features(id) else { continue };
        let p: usize = f.province.trim_start_matches('P').parse().unwrap_or(0);
        let i: usize = f.isp.trim_start_matches("ISP").parse().unwrap_or(0);
        let class = ISP_CLASSES[i % ISP_CLASSES.len()];
        let rate_bps = class.rate_mbps * 1e6 * (0.3 * normal(&mut rng)).exp();
        let delay_ms = (PROVINCE_DELAY_MS[p % PROVINCE_DELAY_MS.len()] + class.extra_delay_ms)
            * uniform(&mut rng, 0.8, 1.25);
        let buffer_pkts = if let Some(k) = class.buffer_bdp {
            let bdp_pkts = rate_bps * 2.0 * delay_ms / 1e3 / 8.0 / f64::from(MSS_BYTES);
            (k * bdp_pkts * uniform(&mut rng, 0.7, 1.3))
                .round()
                .max(10.0) as u32
        } else {
            let (lo, hi) = class.small_buffer_pkts;
            lo + (rng.next_u64() % u64::from(hi - lo + 1)) as u32
        };
        let phase = p as f64 * 2.0 + uniform(&mut rng, -0.3, 0.3);
        let light = rng.next_f64() < spec.light_fraction;
        let mean = if light {
            spec.light_flows_per_bin
        } else {
            spec.heavy_flows_per_bin
        };
        subnets.push(Subnet {
            name: f.subnet.to_string(),
            province: f.province.to_string(),
            isp: f.isp.to_string(),
            class: class.name,
            range: (start, end),
            base_rate_bps: rate_bps,
            base_delay_us: delay_ms * 1e3,
            buffer_pkts,
            phase,
            flows_per_bin: mean * uniform(&mut rng, 0.8, 1.2),
            light,
        });
    }
    (geo, subnets)
}

/// Share of "page" flows in the size mix.
const PAGE_SHARE: f64 = 0.75;
/// Median of page flows, bytes, and log-space sigma.
const PAGE: (f64, f64) = (25_000.0, 1.0);
/// Median of object flows, bytes, and log-space sigma.
const OBJECT: (f64, f64) = (250_000.0, 0.9);
/// Clip range of flow sizes, bytes.
const SIZE_RANGE: (f64, f64) = (1_000.0, 3_000_000.0);

/// One flow size in whole segments (see the module doc).
pub fn flow_size_pkts(rng: &mut Rng) -> u32 {
    let (median, sigma) = if rng.next_f64() < PAGE_SHARE {
        PAGE
    } else {
        OBJECT
    };
    let bytes = (median * (sigma * normal(rng)).exp()).clamp(SIZE_RANGE.0, SIZE_RANGE.1);
    (bytes / f64::from(MSS_BYTES)).ceil().max(1.0) as u32
}

/// One flow of the trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrival {
    /// Start time, µs since the start of the trace.
    pub start_us: u64,
    /// Subnet index.
    pub subnet: usize,
    /// Client address (uniform in the subnet's range).
    pub client: Ipv4Addr,
    /// Size, segments.
    pub pkts: u32,
}

/// Poisson arrivals of every subnet over `duration_us`, sorted by start time.
pub fn arrivals(subnets: &[Subnet], duration_us: u64, bin_us: u64, seed: u64) -> Vec<Arrival> {
    let mut out = Vec::new();
    for (k, s) in subnets.iter().enumerate() {
        let mut rng = Rng::derive(seed, 0x2_0000 + k as u64);
        let rate_per_us = s.flows_per_bin / bin_us.max(1) as f64;
        if rate_per_us <= 0.0 {
            continue;
        }
        let (lo, hi) = (u32::from(s.range.0), u32::from(s.range.1));
        let mut t = 0.0;
        loop {
            t += -(1.0 - rng.next_f64()).ln() / rate_per_us;
            if t >= duration_us as f64 {
                break;
            }
            let span = u64::from(hi - lo) + 1;
            let client = Ipv4Addr::from(lo + (rng.next_u64() % span) as u32);
            out.push(Arrival {
                start_us: t as u64,
                subnet: k,
                client,
                pkts: flow_size_pkts(&mut rng),
            });
        }
    }
    out.sort_by_key(|a| (a.start_us, a.subnet));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_sizes_look_like_web_search() {
        let mut rng = Rng::new(7);
        let n = 200_000;
        let sizes: Vec<f64> = (0..n)
            .map(|_| f64::from(flow_size_pkts(&mut rng) * MSS_BYTES))
            .collect();
        let mean = sizes.iter().sum::<f64>() / f64::from(n);
        let under = sizes.iter().filter(|&&b| b < 100_000.0).count() as f64 / f64::from(n);
        assert!((105_000.0..=135_000.0).contains(&mean), "mean {mean}");
        assert!((0.65..=0.78).contains(&under), "under 100 KB: {under}");
        assert!(sizes.iter().all(|b| (1000.0..=3_001_000.0).contains(b)));
    }

    fn spec() -> PopulationSpec {
        PopulationSpec {
            provinces: 3,
            isps_per_province: 3,
            subnets_per_isp: 2,
            heavy_flows_per_bin: 100.0,
            light_flows_per_bin: 10.0,
            light_fraction: 0.3,
            seed: 3,
        }
    }

    #[test]
    fn population_is_seeded_and_groups_differ() {
        let (geo, a) = population(&spec());
        let (_, b) = population(&spec());
        assert_eq!(a, b);
        assert_eq!(a.len(), 18);
        assert_eq!(geo.len(), 18);
        // Every subnet's addresses map back to it.
        for s in &a {
            let id = geo.lookup(s.range.0).and_then(|id| geo.features(id));
            assert_eq!(id.map(|f| f.subnet.to_string()), Some(s.name.clone()));
        }
        // Mobile subnets have small buffers; fibre ones are faster than mobile ones on average.
        let mean_rate = |c: &str| {
            let v: Vec<f64> = a
                .iter()
                .filter(|s| s.class == c)
                .map(|s| s.base_rate_bps)
                .collect();
            v.iter().sum::<f64>() / v.len() as f64
        };
        assert!(mean_rate("fibre") > 2.0 * mean_rate("mobile"));
        assert!(
            a.iter()
                .filter(|s| s.class == "mobile")
                .all(|s| (20..=50).contains(&s.buffer_pkts))
        );
        // Far provinces have longer delays.
        let d = |p: &str| {
            a.iter()
                .filter(|s| s.province == p)
                .map(|s| s.base_delay_us)
                .sum::<f64>()
        };
        assert!(d("P2") > d("P0"));
        // Light and heavy subnets both exist.
        assert!(a.iter().any(|s| s.light) && a.iter().any(|s| !s.light));
    }

    #[test]
    fn paths_drift_slowly() {
        let (_, subnets) = population(&spec());
        let bin = 600_000_000;
        for s in &subnets {
            for k in 0..72 {
                let (p, q) = (s.path(k, bin), s.path(k + 1, bin));
                let r = (p.rate_bps as f64 - q.rate_bps as f64).abs() / p.rate_bps as f64;
                assert!(r < 0.02, "{r}");
                assert_eq!(p.buffer_pkts, q.buffer_pkts);
            }
        }
    }

    #[test]
    fn arrivals_are_poisson_sorted_and_in_range() {
        let (_, subnets) = population(&spec());
        let bin = 600_000_000;
        let a = arrivals(&subnets, 12 * bin, bin, 5);
        assert!(a.windows(2).all(|w| w[0].start_us <= w[1].start_us));
        let expected: f64 = subnets.iter().map(|s| s.flows_per_bin * 12.0).sum();
        let n = a.len() as f64;
        assert!(
            (n - expected).abs() < 4.0 * expected.sqrt(),
            "{n} vs {expected}"
        );
        for x in &a {
            let s = &subnets[x.subnet];
            assert!(x.client >= s.range.0 && x.client <= s.range.1);
        }
        assert_eq!(a, arrivals(&subnets, 12 * bin, bin, 5));
    }
}
