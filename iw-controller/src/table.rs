//! The IW table: the compact address-range -> IW map that the controller publishes and a
//! datapath consults synchronously when a flow is created (`PAPERS.md` §1.1 "Deployment": the
//! connection manager looks up the client IP in an IW table before sending).
//!
//! An [`IwTable`] is immutable: sorted, non-overlapping inclusive ranges kept as a struct of
//! arrays (`u32` starts, `u32` ends, `u16` IWs), adjacent ranges with the same IW merged and
//! ranges equal to the default dropped, plus the default IW for every other address. A prefix is
//! a range, so ranges are at least as compact as a prefix table for the geolocation ranges the
//! groups are made of. A lookup is one binary search over the starts (benchmarked in
//! `benches/lookup.rs` on ~100k ranges) and always returns an IW in `[1, max_iw]`.
//!
//! Publication: [`TableHandle`] is an `Arc<RwLock<Arc<IwTable>>>` (std only). The controller
//! builds a new table off to the side and swaps the `Arc` under a short write lock; readers either
//! take a snapshot ([`TableHandle::load`], one uncontended read lock and an `Arc` clone) and look
//! up in it as often as they like, or call [`TableHandle::lookup`] per flow. Writes happen once
//! per learning iteration (minutes), so the lock is effectively never contended. A poisoned lock
//! (a writer panicked) still holds a complete table, because the swap is a single assignment;
//! readers take it rather than fail.

use std::net::Ipv4Addr;
use std::sync::{Arc, PoisonError, RwLock};

/// An immutable IP-range -> IW table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IwTable {
    starts: Vec<u32>,
    ends: Vec<u32>,
    iws: Vec<u16>,
    default_iw: u16,
    max_iw: u16,
}

/// A table that cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// `start > end`.
    #[error("range {start}-{end} is inverted")]
    Inverted {
        /// Range start.
        start: Ipv4Addr,
        /// Range end.
        end: Ipv4Addr,
    },
    /// Two ranges share an address.
    #[error("range starting at {start} overlaps the previous range")]
    Overlap {
        /// Start of the later range.
        start: Ipv4Addr,
    },
}

/// Clamps an IW to `[1, max]` and to the table's `u16` storage.
fn clamp_iw(iw_pkts: u32, max_iw: u16) -> u16 {
    iw_pkts.clamp(1, u32::from(max_iw.max(1))) as u16
}

impl IwTable {
    /// A table with no ranges: every address gets `default_iw_pkts` (clamped to `[1, max]`;
    /// `max_iw_pkts` is capped at `u16::MAX`).
    pub fn uniform(default_iw_pkts: u32, max_iw_pkts: u32) -> Self {
        let max_iw = max_iw_pkts.clamp(1, u32::from(u16::MAX)) as u16;
        Self {
            starts: Vec::new(),
            ends: Vec::new(),
            iws: Vec::new(),
            default_iw: clamp_iw(default_iw_pkts, max_iw),
            max_iw,
        }
    }

    /// Builds a table from `(start, end inclusive, iw)` ranges in any order. IWs are clamped to
    /// `[1, max_iw_pkts]`; inverted or overlapping ranges are an error.
    pub fn new(
        mut ranges: Vec<(Ipv4Addr, Ipv4Addr, u32)>,
        default_iw_pkts: u32,
        max_iw_pkts: u32,
    ) -> Result<Self, TableError> {
        let mut t = Self::uniform(default_iw_pkts, max_iw_pkts);
        ranges.sort_unstable_by_key(|r| u32::from(r.0));
        let mut last_end: Option<u32> = None;
        for (start, end, iw) in ranges {
            let (s, e) = (u32::from(start), u32::from(end));
            if s > e {
                return Err(TableError::Inverted { start, end });
            }
            if last_end.is_some_and(|le| s <= le) {
                return Err(TableError::Overlap { start });
            }
            last_end = Some(e);
            t.push(s, e, clamp_iw(iw, t.max_iw));
        }
        Ok(t)
    }

    /// Appends a range after the last one, merging with it when adjacent with the same IW and
    /// dropping it when its IW is the default.
    fn push(&mut self, s: u32, e: u32, iw: u16) {
        if iw == self.default_iw {
            return;
        }
        if let (Some(last_e), Some(&last_iw)) = (self.ends.last_mut(), self.iws.last())
            && last_iw == iw
            && last_e.checked_add(1) == Some(s)
        {
            *last_e = e;
            return;
        }
        self.starts.push(s);
        self.ends.push(e);
        self.iws.push(iw);
    }

    /// The IW for a new flow to `ip`, packets, in `[1, max_iw]`.
    #[inline]
    pub fn lookup(&self, ip: Ipv4Addr) -> u32 {
        let ip = u32::from(ip);
        let i = self.starts.partition_point(|&s| s <= ip);
        match i.checked_sub(1) {
            Some(i) if self.ends[i] >= ip => u32::from(self.iws[i]),
            _ => u32::from(self.default_iw),
        }
    }

    /// The IW of addresses in no range, packets.
    pub fn default_iw(&self) -> u32 {
        u32::from(self.default_iw)
    }

    /// The largest IW the table may hold, packets.
    pub fn max_iw(&self) -> u32 {
        u32::from(self.max_iw)
    }

    /// Number of ranges after compaction.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Whether every address gets the default IW.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// The ranges after compaction: (start, end inclusive, IW).
    pub fn ranges(&self) -> impl Iterator<Item = (Ipv4Addr, Ipv4Addr, u32)> + '_ {
        (0..self.starts.len()).map(|i| {
            (
                Ipv4Addr::from(self.starts[i]),
                Ipv4Addr::from(self.ends[i]),
                u32::from(self.iws[i]),
            )
        })
    }
}

/// A shared, atomically replaced [`IwTable`] (clone it to hand it to a datapath).
#[derive(Debug, Clone)]
pub struct TableHandle {
    inner: Arc<RwLock<Arc<IwTable>>>,
}

impl TableHandle {
    /// A handle publishing `table`.
    pub fn new(table: IwTable) -> Self {
        Self {
            inner: Arc::new(RwLock::new(Arc::new(table))),
        }
    }

    /// A snapshot of the current table.
    pub fn load(&self) -> Arc<IwTable> {
        Arc::clone(&self.inner.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Looks `ip` up in the current table.
    #[inline]
    pub fn lookup(&self, ip: Ipv4Addr) -> u32 {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .lookup(ip)
    }

    /// Replaces the current table (readers see the old or the new one, never a mix).
    pub fn publish(&self, table: Arc<IwTable>) {
        *self.inner.write().unwrap_or_else(PoisonError::into_inner) = table;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(a: [u8; 4]) -> Ipv4Addr {
        Ipv4Addr::from(a)
    }

    #[test]
    fn lookup_respects_inclusive_boundaries_and_default() {
        let t = IwTable::new(
            vec![
                (ip([10, 0, 1, 0]), ip([10, 0, 1, 255]), 30),
                (ip([10, 0, 0, 0]), ip([10, 0, 0, 255]), 20),
                (ip([10, 0, 3, 0]), ip([10, 0, 3, 0]), 7),
            ],
            10,
            100,
        )
        .unwrap();
        assert_eq!(t.lookup(ip([9, 255, 255, 255])), 10);
        assert_eq!(t.lookup(ip([10, 0, 0, 0])), 20);
        assert_eq!(t.lookup(ip([10, 0, 0, 255])), 20);
        assert_eq!(t.lookup(ip([10, 0, 1, 0])), 30);
        assert_eq!(t.lookup(ip([10, 0, 1, 255])), 30);
        assert_eq!(t.lookup(ip([10, 0, 2, 0])), 10);
        assert_eq!(t.lookup(ip([10, 0, 3, 0])), 7);
        assert_eq!(t.lookup(ip([10, 0, 3, 1])), 10);
        assert_eq!(t.lookup(ip([0, 0, 0, 0])), 10);
        assert_eq!(t.lookup(ip([255, 255, 255, 255])), 10);
    }

    #[test]
    fn extreme_addresses_are_covered() {
        let t = IwTable::new(
            vec![
                (ip([0, 0, 0, 0]), ip([0, 0, 0, 0]), 3),
                (ip([255, 255, 255, 255]), ip([255, 255, 255, 255]), 4),
            ],
            10,
            100,
        )
        .unwrap();
        assert_eq!(t.lookup(ip([0, 0, 0, 0])), 3);
        assert_eq!(t.lookup(ip([0, 0, 0, 1])), 10);
        assert_eq!(t.lookup(ip([255, 255, 255, 255])), 4);
    }

    #[test]
    fn iws_are_clamped_to_one_and_max() {
        let t = IwTable::new(
            vec![
                (ip([1, 0, 0, 0]), ip([1, 0, 0, 9]), 0),
                (ip([2, 0, 0, 0]), ip([2, 0, 0, 9]), 5000),
            ],
            0,
            64,
        )
        .unwrap();
        assert_eq!(t.lookup(ip([1, 0, 0, 5])), 1);
        assert_eq!(t.lookup(ip([2, 0, 0, 5])), 64);
        assert_eq!(t.default_iw(), 1);
        assert_eq!(IwTable::uniform(500, 100).lookup(ip([1, 2, 3, 4])), 100);
    }

    #[test]
    fn adjacent_equal_ranges_merge_and_default_ranges_drop() {
        let t = IwTable::new(
            vec![
                (ip([1, 0, 0, 0]), ip([1, 0, 0, 9]), 20),
                (ip([1, 0, 0, 10]), ip([1, 0, 0, 19]), 20),
                (ip([1, 0, 0, 20]), ip([1, 0, 0, 29]), 10),
                (ip([1, 0, 0, 31]), ip([1, 0, 0, 39]), 20),
            ],
            10,
            100,
        )
        .unwrap();
        let ranges: Vec<_> = t.ranges().collect();
        assert_eq!(
            ranges,
            vec![
                (ip([1, 0, 0, 0]), ip([1, 0, 0, 19]), 20),
                (ip([1, 0, 0, 31]), ip([1, 0, 0, 39]), 20),
            ]
        );
    }

    #[test]
    fn bad_ranges_are_rejected() {
        assert!(matches!(
            IwTable::new(vec![(ip([1, 0, 0, 9]), ip([1, 0, 0, 0]), 20)], 10, 100),
            Err(TableError::Inverted { .. })
        ));
        assert!(matches!(
            IwTable::new(
                vec![
                    (ip([1, 0, 0, 0]), ip([1, 0, 0, 9]), 20),
                    (ip([1, 0, 0, 9]), ip([1, 0, 0, 19]), 30)
                ],
                10,
                100
            ),
            Err(TableError::Overlap { .. })
        ));
    }

    #[test]
    fn handle_swaps_tables_atomically() {
        let h = TableHandle::new(IwTable::uniform(10, 100));
        let before = h.load();
        let reader = h.clone();
        h.publish(Arc::new(IwTable::uniform(25, 100)));
        assert_eq!(before.lookup(ip([1, 2, 3, 4])), 10);
        assert_eq!(reader.lookup(ip([1, 2, 3, 4])), 25);
        let t = std::thread::spawn(move || reader.lookup(ip([1, 2, 3, 4])));
        assert_eq!(t.join().unwrap(), 25);
    }
}
