//! The bottleneck: a drop-tail FIFO drained at a constant rate or by a mahimahi trace, with
//! optional random loss on entry.
//!
//! A constant-rate link either serializes every frame at the rate (no burst: a frame reaching
//! an idle link still takes `size / rate` to leave) or, with a token burst
//! ([`Bottleneck::set_burst`], the default in the simulator, see [`htb_burst_bytes`]), shapes
//! like the testbed's `htb` class: tokens accrue at the rate up to the burst; the frame at the
//! head leaves at once when the tokens are not negative and is charged its size (so the
//! tokens may go below zero by one frame, as `htb_charge_class` does); otherwise it waits
//! until they are back at zero. Frames that have left the FIFO no longer count against the
//! buffer (`bfifo` holds only frames not yet dequeued). After an idle period a burst of about
//! `burst` bytes leaves at once; a backlogged link still drains at exactly the rate.

use std::collections::VecDeque;

use super::rng::Rng;
pub use crate::netem::{LinkRate, MAX_TRACE_MS, TRACE_MTU_BYTES, Trace, TraceError};

/// Bytes a segment occupies on the wire beyond its payload: IPv4 (20) + TCP with timestamps
/// (32) + Ethernet header (14). A constant-rate link serializes, and a buffer holds, the whole
/// frame, as the kernel's `htb`/`bfifo` do (`docs/calibration.md`): a 10 Mbit/s link carries
/// at most 10 * 1448 / 1514 = 9.56 Mbit/s of TCP payload. A trace opportunity carries one
/// full-size packet whatever its size (mahimahi's rule).
pub const WIRE_OVERHEAD_BYTES: u32 = 66;

/// Largest Ethernet frame of the testbed (1500-byte MTU and the 14-byte header), bytes.
pub const MAX_FRAME_BYTES: u64 = 1514;

/// The token bucket depth of the testbed's `htb` class at `rate_bps` (`kernel::testbed`'s
/// `qdisc.rs`): one millisecond at the rate, at least two full frames, bytes.
pub fn htb_burst_bytes(rate_bps: u64) -> u64 {
    (rate_bps / 8 / 1000).max(2 * MAX_FRAME_BYTES)
}

/// A packet as the link sees it: who sent it and how big it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkPacket {
    /// Flow index.
    pub flow: usize,
    /// Packet number within the flow.
    pub pn: u64,
    /// Segment of the flow's byte stream it carries.
    pub seg: u64,
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
    /// Bytes counted against the buffer.
    queued_bytes: u64,
    busy: bool,
    /// Trace links: the ordinal of the first opportunity not yet used (or passed by). Each
    /// opportunity carries one packet, so opportunities that share a millisecond (mahimahi
    /// repeats a timestamp once per packet it can carry then) each carry their own.
    next_opportunity: u64,
    /// Token mode: the shaper's state.
    bucket: Option<TokenBucket>,
}

/// A constant-rate link's `htb`-like token bucket and the departure time of every queued
/// packet (computed on entry: a FIFO's departures do not depend on later arrivals).
#[derive(Debug)]
struct TokenBucket {
    /// Depth, bytes.
    burst_bytes: u64,
    /// Tokens after the last charge, in bit-nanoseconds (bytes x 8 x 10^9; one nanosecond
    /// adds `bps`).
    tokens: i128,
    /// When `tokens` was last brought up to date, ns.
    tokens_at_ns: u64,
    /// Departure times of the queued packets, in queue order.
    deps: VecDeque<u64>,
    /// Packets at the head of the queue that have left the FIFO already (they no longer count
    /// against the buffer) but whose departure event has not been processed yet.
    released: usize,
}

const BIT_NS_PER_BYTE: i128 = 8_000_000_000;

impl TokenBucket {
    /// Charges a `bytes` frame that may leave from `from_ns` on at `bps`; returns when it
    /// leaves.
    fn charge(&mut self, bytes: u32, from_ns: u64, bps: u64) -> u64 {
        let bps = i128::from(bps.max(1));
        let cap = i128::from(self.burst_bytes) * BIT_NS_PER_BYTE;
        let from = from_ns.max(self.tokens_at_ns);
        let elapsed = i128::from(from - self.tokens_at_ns);
        let mut tokens = (self.tokens + elapsed * bps).min(cap);
        let mut at = from;
        if tokens < 0 {
            // Wait until the tokens are back at zero.
            let wait = (-tokens + bps - 1) / bps;
            at += wait as u64;
            tokens += wait * bps;
        }
        self.tokens = tokens - i128::from(bytes) * BIT_NS_PER_BYTE;
        self.tokens_at_ns = at;
        at
    }
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
            next_opportunity: 0,
            bucket: None,
        }
    }

    /// Shapes a constant-rate link with a token bucket of `burst_bytes` (0: plain
    /// serialization), full at the start. Call before the first packet. Trace links ignore
    /// it.
    pub fn set_burst(&mut self, burst_bytes: u64) {
        self.bucket = (burst_bytes > 0).then(|| TokenBucket {
            burst_bytes,
            tokens: i128::from(burst_bytes) * BIT_NS_PER_BYTE,
            tokens_at_ns: 0,
            deps: VecDeque::new(),
            released: 0,
        });
    }

    fn token_bps(&self) -> Option<u64> {
        match (&self.rate, &self.bucket) {
            (LinkRate::Constant { bps }, Some(_)) => Some(*bps),
            _ => None,
        }
    }

    /// Changes the drain rate; the packet in service finishes at the old rate. A new trace
    /// is replayed on the simulation's clock (its opportunities before now are passed by).
    /// With a token bucket, queued packets not yet released leave at the new rate from now
    /// on (the bucket empty, as it is on a backlogged link); a change to a trace ends the
    /// token bucket.
    pub fn set_rate(&mut self, rate: LinkRate, now_ns: u64) {
        self.rate = rate;
        self.next_opportunity = 0;
        let Some(bps) = self.token_bps() else {
            // A trace ends token mode: released packets count against the buffer again.
            if let Some(b) = self.bucket.take() {
                for p in self.queue.iter().take(b.released) {
                    self.queued_bytes += u64::from(p.bytes);
                }
            }
            return;
        };
        self.release(now_ns);
        let Some(b) = self.bucket.as_mut() else {
            return;
        };
        // The head's departure event is already scheduled: it keeps its time.
        let first = b.released.max(1);
        if first >= b.deps.len() {
            return;
        }
        b.tokens = 0;
        b.tokens_at_ns = now_ns.max(b.deps[first - 1]);
        for i in first..b.deps.len() {
            let from = b.deps[i - 1];
            b.deps[i] = b.charge(self.queue[i].bytes, from, bps);
        }
    }

    /// Changes the random loss probability.
    pub fn set_loss(&mut self, loss: f64) {
        self.loss = loss;
    }

    /// Changes the buffer size; packets already queued stay.
    pub fn set_capacity(&mut self, capacity_bytes: u64) {
        self.capacity_bytes = capacity_bytes;
    }

    /// Bytes waiting (including the packet in service; with a token bucket, only packets
    /// still in the FIFO).
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }

    /// Token mode: packets whose departure time has come leave the FIFO.
    fn release(&mut self, now_ns: u64) {
        if let Some(b) = self.bucket.as_mut() {
            while b.released < b.deps.len() && b.deps[b.released] <= now_ns {
                self.queued_bytes -= u64::from(self.queue[b.released].bytes);
                b.released += 1;
            }
        }
    }

    /// Offers a packet. Returns the admission result and, if the server was idle, the time at
    /// which this packet's service ends (the caller schedules [`Bottleneck::depart`] then).
    pub fn offer(&mut self, p: LinkPacket, now_ns: u64) -> (Admit, Option<u64>) {
        if self.rng.chance(self.loss) {
            return (Admit::RandomLoss, None);
        }
        self.release(now_ns);
        if self.queued_bytes + u64::from(p.bytes) > self.capacity_bytes {
            return (Admit::TailDrop, None);
        }
        self.queued_bytes += u64::from(p.bytes);
        self.queue.push_back(p);
        if let Some(bps) = self.token_bps()
            && let Some(b) = self.bucket.as_mut()
        {
            let from = b.deps.back().map_or(now_ns, |&d| d.max(now_ns));
            let dep = b.charge(p.bytes, from, bps);
            b.deps.push_back(dep);
            self.release(now_ns);
        }
        if self.busy {
            return (Admit::Queued, None);
        }
        self.busy = true;
        (Admit::Queued, Some(self.service_end(p.bytes, now_ns)))
    }

    /// When the packet at the head, whose service starts at `now_ns`, leaves; a trace
    /// opportunity it takes is used up.
    fn service_end(&mut self, bytes: u32, now_ns: u64) -> u64 {
        if let Some(&dep) = self.bucket.as_ref().and_then(|b| b.deps.front()) {
            return dep;
        }
        match &self.rate {
            LinkRate::Constant { bps } => {
                now_ns + (u128::from(bytes) * 8 * 1_000_000_000 / u128::from((*bps).max(1))) as u64
            }
            LinkRate::Trace(t) => {
                let mut k = self.next_opportunity;
                if t.at(k) < now_ns {
                    // Opportunities that passed while the queue was empty are wasted.
                    k = k.max(t.first_at_or_after(now_ns));
                }
                self.next_opportunity = k.saturating_add(1);
                t.at(k)
            }
        }
    }

    /// The packet in service leaves. Returns it and, if another is waiting, when that one's
    /// service ends.
    pub fn depart(&mut self, now_ns: u64) -> (Option<LinkPacket>, Option<u64>) {
        self.release(now_ns);
        let p = self.queue.pop_front();
        if let Some(p) = p {
            match self.bucket.as_mut() {
                Some(b) if !b.deps.is_empty() => {
                    b.deps.pop_front();
                    if b.released > 0 {
                        b.released -= 1;
                    } else {
                        self.queued_bytes -= u64::from(p.bytes);
                    }
                }
                _ => self.queued_bytes -= u64::from(p.bytes),
            }
        }
        if let Some(bytes) = self.queue.front().map(|n| n.bytes) {
            (p, Some(self.service_end(bytes, now_ns)))
        } else {
            self.busy = false;
            (p, None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(pn: u64) -> LinkPacket {
        LinkPacket {
            flow: 0,
            pn,
            seg: pn,
            bytes: 1514,
            enqueued_ns: 0,
        }
    }

    /// Departure times of `count` packets all offered at time 0 to an unbounded trace link.
    fn departures(trace: &Trace, count: u64) -> Vec<u64> {
        let mut b = Bottleneck::new(LinkRate::Trace(trace.clone()), u64::MAX, 0.0, Rng::new(1));
        let mut next = None;
        for pn in 0..count {
            let (admit, end) = b.offer(pkt(pn), 0);
            assert_eq!(admit, Admit::Queued);
            next = next.or(end);
        }
        let mut out = Vec::new();
        while let Some(t) = next {
            out.push(t);
            next = b.depart(t).1;
        }
        out
    }

    #[test]
    fn every_repeated_timestamp_is_its_own_opportunity() {
        // mahimahi writes a millisecond once per packet it can carry: 4 per ms is 48 Mbit/s.
        // Before the fix the link found the next opportunity strictly after the last one and
        // delivered one packet per millisecond.
        let t = Trace::parse("t", "1\n1\n1\n1\n").expect("parse");
        assert_eq!(t.mean_bps(), 48_000_000);
        let d = departures(&t, 40);
        assert_eq!(d.len(), 40);
        for (i, &at) in d.iter().enumerate() {
            assert_eq!(at, (i as u64 / 4 + 1) * 1_000_000, "packet {i}");
        }
    }

    #[test]
    fn opportunities_at_a_period_boundary_all_count() {
        // "0 5 10" repeats every 10 ms: 10 ms has the last line of one period and the first
        // of the next.
        let t = Trace::parse("t", "0\n5\n10\n").expect("parse");
        assert_eq!(
            departures(&t, 6),
            [0, 5, 10, 10, 15, 20].map(|ms| ms * 1_000_000)
        );
        assert_eq!(t.opportunities_between(0, 10_000_000), 2);
        assert_eq!(t.opportunities_between(0, 10_000_001), 4);
        assert_eq!(t.opportunities_between(10_000_000, 30_000_000), 6);
        assert_eq!(t.opportunities_between(7, 7), 0);
    }

    #[test]
    fn idle_opportunities_are_wasted() {
        let t = Trace::parse("t", "1\n1\n2\n3\n4\n").expect("parse");
        let mut b = Bottleneck::new(LinkRate::Trace(t), u64::MAX, 0.0, Rng::new(1));
        // Nothing queued at 1 and 2 ms: a packet arriving at 2.5 ms leaves at 3 ms.
        assert_eq!(b.offer(pkt(0), 2_500_000), (Admit::Queued, Some(3_000_000)));
        assert_eq!(b.offer(pkt(1), 2_600_000), (Admit::Queued, None));
        assert_eq!(b.depart(3_000_000).1, Some(4_000_000));
    }

    #[test]
    fn a_long_fast_trace_has_its_rate() {
        // 1.6 million opportunities in 180 s (107 Mbit/s): bits x 10^9 overflow 64 bits, which
        // once reported 4.18 Mbit/s.
        let lines = 1_600_000u64;
        let ops: Vec<u64> = (0..lines)
            .map(|i| (i * 180_000 / lines + 1) * 1_000_000)
            .collect();
        let t = Trace {
            period_ns: 180_000 * 1_000_000,
            opportunities_ns: ops,
        };
        assert_eq!(t.mean_bps(), 106_666_666);
        assert_eq!(
            t.capacity_bits_between(0, t.period_ns + 1),
            u128::from(lines) * 1500 * 8
        );
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
            seg: pn,
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

    /// The testbed's `htb` at 12 Mbit/s with a 3028-byte burst (two frames): after idle, three
    /// 1500-byte frames leave at once (the tokens go to -1 frame), the fourth waits until the
    /// tokens are back at zero (1 ms per frame), and from then on the link drains at the rate.
    /// Frames that left do not occupy the buffer.
    #[test]
    fn token_bucket_passes_a_burst_then_drains_at_the_rate() {
        assert_eq!(htb_burst_bytes(10_000_000), 3028);
        assert_eq!(htb_burst_bytes(50_000_000), 6250);
        let mut b = Bottleneck::new(
            LinkRate::Constant { bps: 12_000_000 },
            3000,
            0.0,
            Rng::new(1),
        );
        b.set_burst(3028);
        let p = |pn| LinkPacket {
            flow: 0,
            pn,
            seg: pn,
            bytes: 1500,
            enqueued_ns: 0,
        };
        let mut deps = Vec::new();
        let mut next = None;
        for pn in 0..5 {
            let (admit, end) = b.offer(p(pn), 0);
            assert_eq!(admit, Admit::Queued, "pn {pn}");
            next = next.or(end);
            // Frames 0-2 leave the FIFO at once, so five fit a 3000-byte buffer at this instant.
        }
        while let Some(t) = next {
            deps.push(t);
            next = b.depart(t).1;
        }
        // 3028 tokens: frame 0 (-> 1528), frame 1 (-> 28), frame 2 (-> -1472), frame 3 waits
        // 1472 bytes = 0.981 ms, frame 4 one frame time (1 ms) later.
        assert_eq!(deps[..3], [0, 0, 0]);
        assert_eq!(deps[3], 981_334);
        assert_eq!(deps[4], 1_981_334);
        // Idle for long enough: the bucket is full again.
        assert_eq!(b.offer(p(5), 10_000_000), (Admit::Queued, Some(10_000_000)));
    }
}
