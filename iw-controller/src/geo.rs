//! The network-feature database: IPv4 range -> (subnet, ISP, province) (`PAPERS.md` §1.1 "User
//! grouping": "features from a geolocation database by client IP ... each IP in exactly one
//! record").
//!
//! # CSV format
//! One header line, then one range per line; `#` starts a comment line:
//!
//! ```text
//! start,end,subnet,isp,province
//! 1.0.0.0,1.0.0.255,BJ-CMNET-1,CMNET,Beijing
//! 1.0.1.0,1.0.3.255,BJ-UNICOM-1,UNICOM,Beijing
//! ```
//!
//! `start` and `end` are dotted IPv4 addresses, both inclusive, `start <= end`. Ranges may come in
//! any order but must not overlap. Names are trimmed and must not be empty. Several ranges may
//! carry the same (subnet, ISP, province): they are one feature set. Errors name the line.
//!
//! Lookups are a binary search over the sorted range starts, O(log n). An address in no range
//! has no features; the controller puts it under the root `All` of the group tree.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Read;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;

use ccp_algorithms::api::SplitMix64;

/// The expected header, in order.
pub const CSV_HEADER: [&str; 5] = ["start", "end", "subnet", "isp", "province"];

/// The features of one client network.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NetFeatures {
    /// Subnet name (the finest level).
    pub subnet: Arc<str>,
    /// Internet service provider.
    pub isp: Arc<str>,
    /// Province (the coarsest level below `All`).
    pub province: Arc<str>,
}

impl NetFeatures {
    /// Features from three names.
    pub fn new(subnet: &str, isp: &str, province: &str) -> Self {
        Self {
            subnet: subnet.into(),
            isp: isp.into(),
            province: province.into(),
        }
    }
}

/// Index of a feature set in a [`GeoDb`] (dense, `0..GeoDb::feature_count()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FeatureId(pub u32);

/// A malformed feature database.
#[derive(Debug, thiserror::Error)]
pub enum GeoError {
    /// The file could not be read.
    #[error("reading the feature CSV: {0}")]
    Io(#[from] std::io::Error),
    /// The CSV layer failed (e.g. invalid UTF-8).
    #[error("line {line}: {source}")]
    Csv {
        /// 1-based line number.
        line: u64,
        /// The parser's error.
        source: csv::Error,
    },
    /// The header is not `start,end,subnet,isp,province`.
    #[error("line 1: header must be `start,end,subnet,isp,province`, found `{found}`")]
    BadHeader {
        /// The header found.
        found: String,
    },
    /// A line has the wrong number of fields.
    #[error("line {line}: expected 5 fields (start,end,subnet,isp,province), found {found}")]
    FieldCount {
        /// 1-based line number.
        line: u64,
        /// Fields found.
        found: usize,
    },
    /// A field is not a dotted IPv4 address.
    #[error("line {line}: column `{column}`: bad IPv4 address {value:?}")]
    BadIp {
        /// 1-based line number.
        line: u64,
        /// `start` or `end`.
        column: &'static str,
        /// The text found.
        value: String,
    },
    /// A name field is empty.
    #[error("line {line}: column `{column}` is empty")]
    EmptyField {
        /// 1-based line number.
        line: u64,
        /// The column.
        column: &'static str,
    },
    /// `start > end`.
    #[error("line {line}: range start {start} is after its end {end}")]
    Inverted {
        /// 1-based line number.
        line: u64,
        /// Range start.
        start: Ipv4Addr,
        /// Range end.
        end: Ipv4Addr,
    },
    /// Two ranges share an address.
    #[error("line {line}: range {start}-{end} overlaps the range on line {other_line}")]
    Overlap {
        /// 1-based line number of the later of the two lines.
        line: u64,
        /// 1-based line number of the other range.
        other_line: u64,
        /// Start of the range on `line`.
        start: Ipv4Addr,
        /// End of the range on `line`.
        end: Ipv4Addr,
    },
    /// More ranges or feature sets than fit in a `u32` index.
    #[error("too many ranges")]
    TooLarge,
}

/// One input range: start, end (inclusive), features, source line (for error messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeoRecord {
    /// First address.
    pub start: Ipv4Addr,
    /// Last address (inclusive).
    pub end: Ipv4Addr,
    /// The network's features.
    pub features: NetFeatures,
    /// 1-based line number it came from.
    pub line: u64,
}

/// The database: sorted, non-overlapping ranges (struct of arrays for cache-friendly search).
#[derive(Debug, Clone, Default)]
pub struct GeoDb {
    starts: Vec<u32>,
    ends: Vec<u32>,
    ids: Vec<FeatureId>,
    features: Vec<NetFeatures>,
}

impl GeoDb {
    /// Reads the CSV format of the module doc from a file.
    pub fn from_csv_path(path: impl AsRef<Path>) -> Result<Self, GeoError> {
        Self::from_csv_reader(std::fs::File::open(path)?)
    }

    /// Reads the CSV format of the module doc.
    pub fn from_csv_reader(reader: impl Read) -> Result<Self, GeoError> {
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(true)
            .comment(Some(b'#'))
            .from_reader(reader);
        let header = rdr
            .headers()
            .map_err(|source| GeoError::Csv { line: 1, source })?;
        let ok = header.len() == CSV_HEADER.len()
            && header
                .iter()
                .zip(CSV_HEADER)
                .all(|(h, e)| h.trim().eq_ignore_ascii_case(e));
        if !ok {
            return Err(GeoError::BadHeader {
                found: header.iter().collect::<Vec<_>>().join(","),
            });
        }
        let mut records = Vec::new();
        for row in rdr.records() {
            let row = row.map_err(|source| GeoError::Csv {
                line: source.position().map_or(0, csv::Position::line),
                source,
            })?;
            let line = row.position().map_or(0, csv::Position::line);
            if row.len() != CSV_HEADER.len() {
                return Err(GeoError::FieldCount {
                    line,
                    found: row.len(),
                });
            }
            let ip = |i: usize, column: &'static str| {
                row[i]
                    .trim()
                    .parse::<Ipv4Addr>()
                    .map_err(|_| GeoError::BadIp {
                        line,
                        column,
                        value: row[i].to_string(),
                    })
            };
            let name = |i: usize, column: &'static str| {
                let s = row[i].trim();
                if s.is_empty() {
                    Err(GeoError::EmptyField { line, column })
                } else {
                    Ok(s)
                }
            };
            records.push(GeoRecord {
                start: ip(0, "start")?,
                end: ip(1, "end")?,
                features: NetFeatures::new(
                    name(2, "subnet")?,
                    name(3, "isp")?,
                    name(4, "province")?,
                ),
                line,
            });
        }
        Self::from_records(records)
    }

    /// Builds the database from records, rejecting inverted and overlapping ranges.
    pub fn from_records(mut records: Vec<GeoRecord>) -> Result<Self, GeoError> {
        for r in &records {
            if r.start > r.end {
                return Err(GeoError::Inverted {
                    line: r.line,
                    start: r.start,
                    end: r.end,
                });
            }
        }
        records.sort_by_key(|r| (u32::from(r.start), r.line));
        for w in records.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            if b.start <= a.end {
                let (later, earlier) = if a.line > b.line { (a, b) } else { (b, a) };
                return Err(GeoError::Overlap {
                    line: later.line,
                    other_line: earlier.line,
                    start: later.start,
                    end: later.end,
                });
            }
        }
        let mut db = GeoDb::default();
        let mut interned: HashMap<NetFeatures, FeatureId> = HashMap::new();
        for r in records {
            let next = FeatureId(u32::try_from(db.features.len()).map_err(|_| GeoError::TooLarge)?);
            let id = *interned.entry(r.features.clone()).or_insert_with(|| {
                db.features.push(r.features);
                next
            });
            db.starts.push(u32::from(r.start));
            db.ends.push(u32::from(r.end));
            db.ids.push(id);
        }
        Ok(db)
    }

    /// The features of the range holding `ip` (`None`: in no range, i.e. the root `All`).
    pub fn lookup(&self, ip: Ipv4Addr) -> Option<FeatureId> {
        let ip = u32::from(ip);
        let i = self.starts.partition_point(|&s| s <= ip);
        let i = i.checked_sub(1)?;
        (self.ends[i] >= ip).then_some(self.ids[i])
    }

    /// The features of an id (`None` for an id not from this database).
    pub fn features(&self, id: FeatureId) -> Option<&NetFeatures> {
        self.features.get(id.0 as usize)
    }

    /// Number of distinct feature sets.
    pub fn feature_count(&self) -> usize {
        self.features.len()
    }

    /// All feature sets, indexed by [`FeatureId`].
    pub fn all_features(&self) -> &[NetFeatures] {
        &self.features
    }

    /// Number of ranges.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Whether the database has no range.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// The ranges in address order: (start, end inclusive, features).
    pub fn ranges(&self) -> impl Iterator<Item = (Ipv4Addr, Ipv4Addr, FeatureId)> + '_ {
        (0..self.starts.len()).map(|i| {
            (
                Ipv4Addr::from(self.starts[i]),
                Ipv4Addr::from(self.ends[i]),
                self.ids[i],
            )
        })
    }

    /// The database in the CSV format of the module doc (round-trips through
    /// [`GeoDb::from_csv_reader`]).
    pub fn to_csv(&self) -> String {
        let mut out = CSV_HEADER.join(",");
        out.push('\n');
        for (s, e, id) in self.ranges() {
            let f = &self.features[id.0 as usize];
            // Writing to a String cannot fail.
            let _ = writeln!(out, "{s},{e},{},{},{}", f.subnet, f.isp, f.province);
        }
        out
    }

    /// A seeded synthetic database: provinces x ISPs x subnets, each subnet one range of random
    /// length, separated by random gaps (addresses in no range). Stops early rather than wrap
    /// past 255.255.255.255.
    pub fn synthetic(spec: &SyntheticGeo) -> Self {
        let mut rng = SplitMix64::new(spec.seed);
        let mut db = GeoDb::default();
        let mut next = u64::from(u32::from(spec.first_address));
        'all: for p in 0..spec.provinces {
            for i in 0..spec.isps_per_province {
                for s in 0..spec.subnets_per_isp {
                    let len = range_u32(&mut rng, spec.range_len.0.max(1), spec.range_len.1.max(1));
                    let gap = range_u32(&mut rng, spec.gap.0, spec.gap.1);
                    let start = next + u64::from(gap);
                    let end = start + u64::from(len) - 1;
                    let (Ok(start32), Ok(end32), Ok(id)) = (
                        u32::try_from(start),
                        u32::try_from(end),
                        u32::try_from(db.features.len()),
                    ) else {
                        break 'all;
                    };
                    db.features.push(NetFeatures::new(
                        &format!("P{p}-ISP{i}-S{s}"),
                        &format!("ISP{i}"),
                        &format!("P{p}"),
                    ));
                    db.starts.push(start32);
                    db.ends.push(end32);
                    db.ids.push(FeatureId(id));
                    next = end + 1;
                }
            }
        }
        db
    }
}

/// Uniform in `[lo, hi]` (inclusive; `lo` if `hi <= lo`), by modulo.
fn range_u32(rng: &mut SplitMix64, lo: u32, hi: u32) -> u32 {
    if hi <= lo {
        return lo;
    }
    lo + (rng.next_u64() % (u64::from(hi - lo) + 1)) as u32
}

/// Parameters of [`GeoDb::synthetic`]. Names: provinces `P{p}`, ISPs `ISP{i}` (the same ISP
/// names in every province, as real national ISPs), subnets `P{p}-ISP{i}-S{s}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntheticGeo {
    /// Number of provinces.
    pub provinces: u32,
    /// ISPs per province.
    pub isps_per_province: u32,
    /// Subnets per (province, ISP).
    pub subnets_per_isp: u32,
    /// Range length, addresses, inclusive bounds (at least 1).
    pub range_len: (u32, u32),
    /// Gap before each range, addresses, inclusive bounds.
    pub gap: (u32, u32),
    /// First address used.
    pub first_address: Ipv4Addr,
    /// Generator seed (of a [`SplitMix64`]).
    pub seed: u64,
}

impl Default for SyntheticGeo {
    fn default() -> Self {
        Self {
            provinces: 4,
            isps_per_province: 3,
            subnets_per_isp: 4,
            range_len: (256, 4096),
            gap: (0, 256),
            first_address: Ipv4Addr::new(1, 0, 0, 0),
            seed: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<GeoDb, GeoError> {
        GeoDb::from_csv_reader(text.as_bytes())
    }

    const GOOD: &str = "start,end,subnet,isp,province\n\
        10.0.1.0,10.0.1.255,S2,CMNET,Beijing\n\
        # a comment\n\
        10.0.0.0,10.0.0.255,S1,CMNET,Beijing\n\
        10.0.2.0,10.0.2.9,S3,UNICOM,Beijing\n\
        10.0.3.0,10.0.3.9,S3,UNICOM,Beijing\n";

    #[test]
    fn lookups_hit_inclusive_boundaries_and_miss_gaps() {
        let db = parse(GOOD).unwrap();
        assert_eq!(db.len(), 4);
        assert_eq!(db.feature_count(), 3);
        let name = |ip: [u8; 4]| {
            db.lookup(Ipv4Addr::from(ip))
                .map(|id| db.features(id).unwrap().subnet.to_string())
        };
        assert_eq!(name([10, 0, 0, 0]).as_deref(), Some("S1"));
        assert_eq!(name([10, 0, 0, 255]).as_deref(), Some("S1"));
        assert_eq!(name([10, 0, 1, 0]).as_deref(), Some("S2"));
        assert_eq!(name([10, 0, 2, 9]).as_deref(), Some("S3"));
        assert_eq!(name([10, 0, 2, 10]), None);
        assert_eq!(name([10, 0, 3, 5]).as_deref(), Some("S3"));
        assert_eq!(name([9, 255, 255, 255]), None);
        assert_eq!(name([10, 0, 3, 10]), None);
        // Two ranges of the same subnet share one feature id.
        assert_eq!(
            db.lookup(Ipv4Addr::new(10, 0, 2, 0)),
            db.lookup(Ipv4Addr::new(10, 0, 3, 0))
        );
    }

    #[test]
    fn overlapping_ranges_are_rejected_with_both_lines() {
        let text = "start,end,subnet,isp,province\n\
            10.0.0.0,10.0.0.255,S1,CMNET,Beijing\n\
            10.0.2.0,10.0.2.255,S3,UNICOM,Beijing\n\
            10.0.0.255,10.0.1.3,S2,CMNET,Beijing\n";
        match parse(text) {
            Err(GeoError::Overlap {
                line, other_line, ..
            }) => assert_eq!((line, other_line), (4, 2)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_ips_are_rejected_with_the_line() {
        let text = "start,end,subnet,isp,province\n\
            10.0.0.0,10.0.0.255,S1,CMNET,Beijing\n\
            10.0.1.0,10.0.1.256,S2,CMNET,Beijing\n";
        let err = parse(text).unwrap_err();
        assert!(
            matches!(
                err,
                GeoError::BadIp {
                    line: 3,
                    column: "end",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().starts_with("line 3:"), "{err}");
        let text = "start,end,subnet,isp,province\nhello,10.0.1.255,S2,CMNET,Beijing\n";
        assert!(matches!(
            parse(text),
            Err(GeoError::BadIp {
                line: 2,
                column: "start",
                ..
            })
        ));
    }

    #[test]
    fn other_malformed_lines_are_rejected_with_the_line() {
        let head = "start,end,subnet,isp,province\n";
        let inverted = format!("{head}10.0.0.9,10.0.0.1,S1,CMNET,Beijing\n");
        assert!(matches!(
            parse(&inverted),
            Err(GeoError::Inverted { line: 2, .. })
        ));
        let short = format!("{head}10.0.0.0,10.0.0.1,S1,CMNET\n");
        assert!(matches!(
            parse(&short),
            Err(GeoError::FieldCount { line: 2, found: 4 })
        ));
        let empty = format!("{head}10.0.0.0,10.0.0.1,S1, ,Beijing\n");
        assert!(matches!(
            parse(&empty),
            Err(GeoError::EmptyField {
                line: 2,
                column: "isp"
            })
        ));
        assert!(matches!(
            parse("end,start,subnet,isp,province\n"),
            Err(GeoError::BadHeader { .. })
        ));
    }

    #[test]
    fn synthetic_is_seeded_and_round_trips_through_csv() {
        let spec = SyntheticGeo::default();
        let a = GeoDb::synthetic(&spec);
        let b = GeoDb::synthetic(&spec);
        assert_eq!(a.len(), 4 * 3 * 4);
        assert_eq!(a.to_csv(), b.to_csv());
        let c = GeoDb::synthetic(&SyntheticGeo { seed: 2, ..spec });
        assert_ne!(a.to_csv(), c.to_csv());
        let back = parse(&a.to_csv()).unwrap();
        assert_eq!(back.to_csv(), a.to_csv());
        for (s, e, id) in a.ranges() {
            assert_eq!(a.lookup(s), Some(id));
            assert_eq!(a.lookup(e), Some(id));
        }
    }
}
