//! The bottleneck: a drop-tail FIFO drained at a constant rate or by a mahimahi trace, with
//! optional random loss on entry.

use std::collections::VecDeque;
use std::path::Path;

use thiserror::Error;

use super::rng::Rng;

/// Bytes one mahimahi delivery opportunity carries.
pub const TRACE_MTU_BYTES: u32 = 1500;

/// How fast the bottleneck drains.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkRate {
    /// A constant rate, bits per second.
    Constant {
        /// Bits per second.
        bps: u64,
    },
    /// A mahimahi trace: delivery opportunities (ms offsets), repeating with the trace period.
    Trace(Trace),
}

/// A mahimahi link trace: one line per 1500-byte delivery opportunity, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Opportunity times within one period, ns, non-decreasing.
    pub opportunities_ns: Vec<u64>,
    /// Period after which the trace repeats, ns (the last timestamp, at least 1 ms).
    pub period_ns: u64,
}

/// Why a trace could not be read.
#[derive(Debug, Error)]
pub enum TraceError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// A line is not a non-negative integer number of milliseconds.
    #[error("{path}:{line}: expected a timestamp in ms, found {text:?}")]
    BadLine {
        /// File.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The offending text.
        text: String,
    },
    /// Timestamps go backwards.
    #[error("{path}:{line}: timestamp {ms} is earlier than the previous one")]
    NotSorted {
        /// File.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The timestamp.
        ms: u64,
    },
    /// No opportunities at all.
    #[error("{path}: trace has no delivery opportunities")]
    Empty {
        /// File.
        path: String,
    },
}

impl Trace {
    /// Parses mahimahi trace text; `name` labels errors.
    pub fn parse(name: &str, text: &str) -> Result<Self, TraceError> {
        let mut ops = Vec::new();
        let mut last = 0;
        for (i, raw) in text.lines().enumerate() {
            let t = raw.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let ms: u64 = t.parse().map_err(|_| TraceError::BadLine {
                path: name.to_string(),
                line: i + 1,
                text: t.to_string(),
            })?;
            if ms < last {
                return Err(TraceError::NotSorted {
                    path: name.to_string(),
                    line: i + 1,
                    ms,
                });
            }
            last = ms;
            ops.push(ms * 1_000_000);
        }
        if ops.is_empty() {
            return Err(TraceError::Empty {
                path: name.to_string(),
            });
        }
        let period_ns = last.max(1) * 1_000_000;
        Ok(Self {
            opportunities_ns: ops,
            period_ns,
        })
    }

    /// Reads a mahimahi trace file.
    pub fn load(path: &Path) -> Result<Self, TraceError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
            path: name.clone(),
            source,
        })?;
        Self::parse(&name, &text)
    }

    /// Mean rate over one period, bits per second.
    pub fn mean_bps(&self) -> u64 {
        self.opportunities_ns.len() as u64 * u64::from(TRACE_MTU_BYTES) * 8 * 1_000_000_000
            / self.period_ns
    }

    /// The first opportunity at or after `t_ns`, as an absolute time.
    pub fn next_opportunity(&self, t_ns: u64) -> u64 {
        let cycle = t_ns / self.period_ns;
        let offset = t_ns % self.period_ns;
        let i = self.opportunities_ns.partition_point(|&o| o < offset);
        if let Some(&o) = self.opportunities_ns.get(i) {
            cycle * self.period_ns + o
        } else {
            (cycle + 1) * self.period_ns + self.opportunities_ns[0]
        }
    }
}

impl LinkRate {
    /// Mean rate, bits per second.
    pub fn mean_bps(&self) -> u64 {
        match self {
            LinkRate::Constant { bps } => *bps,
            LinkRate::Trace(t) => t.mean_bps(),
        }
    }
}

/// Bytes a segment occupies on the wire beyond its payload: IPv4 (20) + TCP with timestamps
/// (32) + Ethernet header (14). A constant-rate link serializes, and a buffer holds, the whole
/// frame, as the kernel's `htb`/`bfifo` do (`docs/calibration.md`): a 10 Mbit/s link carries
/// at most 10 * 1448 / 1514 = 9.56 Mbit/s of TCP payload. A trace opportunity carries one
/// full-size packet whatever its size (mahimahi's rule).
pub const WIRE_OVERHEAD_BYTES: u32 = 66;

/// A packet as the link sees it: who sent it and how big it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkPacket {
    /// Flow index.
    pub flow: usize,
    /// Packet number within the flow.
    pub pn: u64,
    /// Size on the wire (payload and [`WIRE_OVERHEAD_BYTES`]), bytes.
    pub bytes: u32,
    /// When it entered the queue, ns.
    pub enqueued_ns: u64,
}

/// What happened to a packet offered to the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Queued.
    Queued,
    /// Dropped: the buffer was full.
    TailDrop,
    /// Dropped: random loss.
    RandomLoss,
}

/// The bottleneck queue and server.
#[derive(Debug)]
pub struct Bottleneck {
    rate: LinkRate,
    capacity_bytes: u64,
    loss: f64,
    rng: Rng,
    queue: VecDeque<LinkPacket>,
    queued_bytes: u64,
    busy: bool,
}

impl Bottleneck {
    /// A bottleneck draining at `rate` with a `capacity_bytes` drop-tail buffer and random
    /// loss probability `loss` on entry.
    pub fn new(rate: LinkRate, capacity_bytes: u64, loss: f64, rng: Rng) -> Self {
        Self {
            rate,
            capacity_bytes,
            loss,
            rng,
            queue: VecDeque::new(),
            queued_bytes: 0,
            busy: false,
        }
    }

    /// Changes the drain rate; the packet in service finishes at the old rate.
    pub fn set_rate(&mut self, rate: LinkRate) {
        self.rate = rate;
    }

    /// Changes the random loss probability.
    pub fn set_loss(&mut self, loss: f64) {
        self.loss = loss;
    }

    /// Changes the buffer size; packets already queued stay.
    pub fn set_capacity(&mut self, capacity_bytes: u64) {
        self.capacity_bytes = capacity_bytes;
    }

    /// Bytes waiting (including the packet in service).
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }

    /// Offers a packet. Returns the admission result and, if the server was idle, the time at
    /// which this packet's service ends (the caller schedules [`Bottleneck::depart`] then).
    pub fn offer(&mut self, p: LinkPacket, now_ns: u64) -> (Admit, Option<u64>) {
        if self.rng.chance(self.loss) {
            return (Admit::RandomLoss, None);
        }
        if self.queued_bytes + u64::from(p.bytes) > self.capacity_bytes {
            return (Admit::TailDrop, None);
        }
        self.queued_bytes += u64::from(p.bytes);
        self.queue.push_back(p);
        if self.busy {
            return (Admit::Queued, None);
        }
        self.busy = true;
        (Admit::Queued, Some(self.service_end(p.bytes, now_ns)))
    }

    fn service_end(&self, bytes: u32, now_ns: u64) -> u64 {
        match &self.rate {
            LinkRate::Constant { bps } => {
                now_ns + (u128::from(bytes) * 8 * 1_000_000_000 / u128::from((*bps).max(1))) as u64
            }
            LinkRate::Trace(t) => t.next_opportunity(now_ns),
        }
    }

    /// The packet in service leaves. Returns it and, if another is waiting, when that one's
    /// service ends.
    pub fn depart(&mut self, now_ns: u64) -> (Option<LinkPacket>, Option<u64>) {
        let p = self.queue.pop_front();
        if let Some(p) = p {
            self.queued_bytes -= u64::from(p.bytes);
        }
        if let Some(next) = self.queue.front() {
            // A trace opportunity is consumed by the departing packet; the next one needs a
            // later opportunity.
            let from = if matches!(self.rate, LinkRate::Trace(_)) {
                now_ns + 1
            } else {
                now_ns
            };
            (p, Some(self.service_end(next.bytes, from)))
        } else {
            self.busy = false;
            (p, None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_parsing_and_wrapping() {
        let t = Trace::parse("t", "0\n0\n5\n# note\n10\n").expect("parse");
        assert_eq!(t.period_ns, 10_000_000);
        assert_eq!(t.next_opportunity(1), 5_000_000);
        assert_eq!(t.next_opportunity(10_000_001), 15_000_000);
        assert_eq!(t.mean_bps(), 4 * 1500 * 8 * 100);
        assert!(matches!(
            Trace::parse("f", "1\nx\n"),
            Err(TraceError::BadLine { line: 2, .. })
        ));
        assert!(matches!(
            Trace::parse("f", "5\n3\n"),
            Err(TraceError::NotSorted { line: 2, .. })
        ));
        assert!(matches!(
            Trace::parse("f", "\n"),
            Err(TraceError::Empty { .. })
        ));
    }

    #[test]
    fn constant_rate_service_and_tail_drop() {
        let mut b = Bottleneck::new(
            LinkRate::Constant { bps: 12_000_000 },
            3000,
            0.0,
            Rng::new(1),
        );
        let p = |pn| LinkPacket {
            flow: 0,
            pn,
            bytes: 1500,
            enqueued_ns: 0,
        };
        assert_eq!(b.offer(p(0), 0), (Admit::Queued, Some(1_000_000)));
        assert_eq!(b.offer(p(1), 0), (Admit::Queued, None));
        assert_eq!(b.offer(p(2), 0).0, Admit::TailDrop);
        let (gone, next) = b.depart(1_000_000);
        assert_eq!(gone.map(|g| g.pn), Some(0));
        assert_eq!(next, Some(2_000_000));
    }
}
