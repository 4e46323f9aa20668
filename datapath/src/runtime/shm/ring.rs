//! The segment's layout and the lock-free single-producer/single-consumer ring, one per
//! direction. Safe code over the atomics and bounds-checked copies of `raw.rs`.
//!
//! ```text
//! segment: [header 64 B][ring 0: datapath -> agent][ring 1: agent -> datapath]
//! header:  magic u64 "CCPSHM\0\x01" | version u32 | ring_bytes u32 | zero
//! ring:    tail u64 (own cache line) | head u64 (own line) | waiting u32, always u32 (line)
//!          | data[ring_bytes]
//! record:  length u32 LE | the message's bytes (a whole CCP message, as one datagram)
//! ```
//!
//! `tail` and `head` are byte positions that only grow (modulo 2^64); a record may wrap
//! around the end of `data` (copied in two parts). The producer writes a record's bytes, then
//! publishes it with a Release store of `tail`; the consumer reads `tail` with Acquire, so it
//! never sees a record before all its bytes. A producer that dies mid-write has not published
//! anything of that record: the consumer sees the ring as it was before. Each side keeps its
//! own position in private memory and only publishes it, so the peer scribbling on `head` or
//! `tail` cannot make this side read or write outside the ring; it shows up as
//! [`Corrupt`] (positions more than `ring_bytes` apart, a length beyond what was published or
//! above [`MAX_RECORD`]).
//!
//! Wake-ups: a consumer about to sleep sets `waiting` and looks again; a producer publishes,
//! then looks at `waiting` (a `SeqCst` fence on both sides between store and load, so at
//! least one of them sees the other) and rings the consumer's doorbell (an eventfd) if set.
//! `always` asks for the doorbell on every record (a consumer sleeping in `poll(2)` on it).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};

use super::raw::{self, Mapping};

/// First word of a segment.
pub const MAGIC: u64 = u64::from_le_bytes(*b"CCPSHM\0\x01");
/// Layout version.
pub const VERSION: u32 = 1;
/// Default size of each ring's data area: 256 KiB holds about 2,500 reports of 10 fields.
pub const DEFAULT_RING_BYTES: usize = 256 * 1024;
/// Smallest ring accepted.
pub const MIN_RING_BYTES: usize = 4096;
/// Largest ring accepted.
pub const MAX_RING_BYTES: usize = 64 * 1024 * 1024;
/// Largest record: a CCP message's length is a `u16`.
pub const MAX_RECORD: usize = u16::MAX as usize;

const HEADER: usize = 64;
const CTRL: usize = 192;
const TAIL: usize = 0;
const HEAD: usize = 64;
const WAITING: usize = 128;
const ALWAYS: usize = 132;
const LEN_BYTES: usize = 4;

/// Which ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Datapath -> agent (reports, READY, CREATE).
    ToAgent,
    /// Agent -> datapath (INSTALL, UPDATE_FIELD, CHANGE_PROG).
    ToDatapath,
}

/// The ring's positions or a record's length are impossible: the peer broke the protocol
/// (or wrote over the segment). The ring cannot be resynchronised; drop the segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("shared-memory ring corrupt: {0}")]
pub struct Corrupt(pub &'static str);

/// Why a record was not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    /// Not enough free space; nothing was written.
    #[error("ring full")]
    Full,
    /// The message is longer than [`MAX_RECORD`] or than the ring.
    #[error("message of {0} bytes does not fit a ring record")]
    TooLarge(usize),
    /// See [`Corrupt`].
    #[error(transparent)]
    Corrupt(#[from] Corrupt),
}

/// A mapped segment: header and two rings.
#[derive(Debug, Clone)]
pub struct Segment {
    map: Arc<Mapping>,
    ring_bytes: usize,
}

/// Total size of a segment with rings of `ring_bytes`.
pub fn segment_len(ring_bytes: usize) -> usize {
    HEADER + 2 * (CTRL + ring_bytes)
}

impl Segment {
    /// A new segment (a sealed memfd) with two empty rings of `ring_bytes` (a power of two in
    /// [`MIN_RING_BYTES`]..=[`MAX_RING_BYTES`]); the descriptor is for the peer.
    pub fn create(ring_bytes: usize) -> io::Result<(Self, OwnedFd)> {
        if !ring_bytes.is_power_of_two() || !(MIN_RING_BYTES..=MAX_RING_BYTES).contains(&ring_bytes)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "ring size {ring_bytes}: need a power of two in {MIN_RING_BYTES}..={MAX_RING_BYTES}"
                ),
            ));
        }
        let (map, fd) = Mapping::create("ccp-shm", segment_len(ring_bytes))?;
        map.u32_at(8).store(VERSION, Ordering::Relaxed);
        map.u32_at(12).store(ring_bytes as u32, Ordering::Relaxed);
        map.u64_at(0).store(MAGIC, Ordering::Release);
        Ok((
            Self {
                map: Arc::new(map),
                ring_bytes,
            },
            fd,
        ))
    }

    /// Maps a segment a peer created, checking its seals, header and size.
    pub fn open(fd: &OwnedFd) -> io::Result<Self> {
        let map = Mapping::map(fd)?;
        let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
        if map.len() < HEADER {
            return Err(bad(format!("segment of {} bytes has no header", map.len())));
        }
        if map.u64_at(0).load(Ordering::Acquire) != MAGIC {
            return Err(bad("not a CCP shared-memory segment (magic)".into()));
        }
        let version = map.u32_at(8).load(Ordering::Relaxed);
        if version != VERSION {
            return Err(bad(format!(
                "segment version {version}, this build reads {VERSION}"
            )));
        }
        let ring_bytes = map.u32_at(12).load(Ordering::Relaxed) as usize;
        if !ring_bytes.is_power_of_two()
            || !(MIN_RING_BYTES..=MAX_RING_BYTES).contains(&ring_bytes)
            || segment_len(ring_bytes) != map.len()
        {
            return Err(bad(format!(
                "ring size {ring_bytes} does not match a segment of {} bytes",
                map.len()
            )));
        }
        Ok(Self {
            map: Arc::new(map),
            ring_bytes,
        })
    }

    /// Size of each ring's data area.
    pub fn ring_bytes(&self) -> usize {
        self.ring_bytes
    }

    fn base(&self, dir: Direction) -> usize {
        match dir {
            Direction::ToAgent => HEADER,
            Direction::ToDatapath => HEADER + CTRL + self.ring_bytes,
        }
    }

    fn ring(&self, dir: Direction) -> Ring {
        Ring {
            map: Arc::clone(&self.map),
            base: self.base(dir),
            cap: self.ring_bytes,
        }
    }

    /// The writing end of `dir`'s ring (one per ring: the protocol is single-producer).
    pub fn producer(&self, dir: Direction) -> Producer {
        let ring = self.ring(dir);
        let tail = ring.tail();
        Producer { ring, tail }
    }

    /// The reading end of `dir`'s ring (one per ring).
    pub fn consumer(&self, dir: Direction) -> Consumer {
        let ring = self.ring(dir);
        let head = ring.map.u64_at(ring.base + HEAD).load(Ordering::Acquire);
        Consumer { ring, head }
    }
}

#[derive(Debug)]
struct Ring {
    map: Arc<Mapping>,
    base: usize,
    cap: usize,
}

impl Ring {
    fn tail(&self) -> u64 {
        self.map.u64_at(self.base + TAIL).load(Ordering::Acquire)
    }

    fn data(&self) -> usize {
        self.base + CTRL
    }

    fn write_wrapped(&self, pos: u64, bytes: &[u8]) {
        let off = (pos % self.cap as u64) as usize;
        let first = bytes.len().min(self.cap - off);
        self.map.write(self.data() + off, &bytes[..first]);
        if first < bytes.len() {
            self.map.write(self.data(), &bytes[first..]);
        }
    }

    fn read_wrapped(&self, pos: u64, out: &mut [u8]) {
        let off = (pos % self.cap as u64) as usize;
        let first = out.len().min(self.cap - off);
        self.map.read(self.data() + off, &mut out[..first]);
        if first < out.len() {
            self.map.read(self.data(), &mut out[first..]);
        }
    }

    fn flag(&self, at: usize) -> &std::sync::atomic::AtomicU32 {
        self.map.u32_at(self.base + at)
    }
}

/// The writing end of one ring.
#[derive(Debug)]
pub struct Producer {
    ring: Ring,
    tail: u64,
}

impl Producer {
    /// Writes `msg` as one record and publishes it. `Ok(true)` when the consumer asked to be
    /// woken (ring its doorbell). Never blocks: a full ring is [`PushError::Full`].
    pub fn push(&mut self, msg: &[u8]) -> Result<bool, PushError> {
        let need = LEN_BYTES + msg.len();
        if msg.len() > MAX_RECORD || need > self.ring.cap {
            return Err(PushError::TooLarge(msg.len()));
        }
        let head = self
            .ring
            .map
            .u64_at(self.ring.base + HEAD)
            .load(Ordering::Acquire);
        let used = self.tail.wrapping_sub(head);
        if used > self.ring.cap as u64 {
            return Err(Corrupt("consumer position ahead of the producer").into());
        }
        if need as u64 > self.ring.cap as u64 - used {
            return Err(PushError::Full);
        }
        self.ring
            .write_wrapped(self.tail, &(msg.len() as u32).to_le_bytes());
        self.ring.write_wrapped(self.tail + LEN_BYTES as u64, msg);
        self.publish(self.tail.wrapping_add(need as u64));
        Ok(self.ring.flag(WAITING).load(Ordering::Relaxed) != 0
            || self.ring.flag(ALWAYS).load(Ordering::Relaxed) != 0)
    }

    fn publish(&mut self, tail: u64) {
        self.tail = tail;
        self.ring
            .map
            .u64_at(self.ring.base + TAIL)
            .store(tail, Ordering::Release);
        // Pairs with the consumer's fence in `Consumer::set_waiting`.
        fence(Ordering::SeqCst);
    }

    /// Writes a record's bytes without publishing it: what a producer killed mid-write leaves.
    #[cfg(test)]
    pub(crate) fn write_unpublished(&mut self, msg: &[u8]) {
        self.ring
            .write_wrapped(self.tail, &(msg.len() as u32).to_le_bytes());
        self.ring.write_wrapped(self.tail + LEN_BYTES as u64, msg);
    }

    /// Publishes raw bytes as if they were records (tests of a misbehaving producer).
    #[cfg(test)]
    pub(crate) fn push_raw(&mut self, bytes: &[u8]) {
        self.ring.write_wrapped(self.tail, bytes);
        self.publish(self.tail.wrapping_add(bytes.len() as u64));
    }
}

/// The reading end of one ring.
#[derive(Debug)]
pub struct Consumer {
    ring: Ring,
    head: u64,
}

impl Consumer {
    /// Takes the next record into `buf`: `Ok(Some(n))` with the bytes copied (a record longer
    /// than `buf` is cut to `buf.len()`, as a datagram is), `Ok(None)` when the ring is empty.
    pub fn pop(&mut self, buf: &mut [u8]) -> Result<Option<usize>, Corrupt> {
        let tail = self.ring.tail();
        let avail = tail.wrapping_sub(self.head);
        if avail == 0 {
            return Ok(None);
        }
        if avail > self.ring.cap as u64 {
            return Err(Corrupt("producer position more than a ring ahead"));
        }
        if avail < LEN_BYTES as u64 {
            return Err(Corrupt("published bytes shorter than a record length"));
        }
        let mut len = [0u8; LEN_BYTES];
        self.ring.read_wrapped(self.head, &mut len);
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_RECORD || (LEN_BYTES + len) as u64 > avail {
            return Err(Corrupt("record length beyond what was published"));
        }
        let n = len.min(buf.len());
        self.ring
            .read_wrapped(self.head + LEN_BYTES as u64, &mut buf[..n]);
        self.head = self.head.wrapping_add((LEN_BYTES + len) as u64);
        self.ring
            .map
            .u64_at(self.ring.base + HEAD)
            .store(self.head, Ordering::Release);
        Ok(Some(n))
    }

    /// Whether nothing is published beyond what was read.
    pub fn is_empty(&self) -> bool {
        self.ring.tail() == self.head
    }

    /// Marks this consumer as about to sleep (or awake again). After setting it, look at the
    /// ring once more before sleeping: a record published before the mark was seen by the
    /// producer without ringing.
    pub fn set_waiting(&self, waiting: bool) {
        self.ring
            .flag(WAITING)
            .store(u32::from(waiting), Ordering::Relaxed);
        // Pairs with the producer's fence after publishing.
        fence(Ordering::SeqCst);
    }

    /// Asks the producer to ring the doorbell after every record (for a consumer that sleeps
    /// in `poll(2)` on it without marking itself waiting).
    pub fn set_always_wake(&self, always: bool) {
        self.ring
            .flag(ALWAYS)
            .store(u32::from(always), Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }
}

/// An eventfd one side rings and the other sleeps on.
#[derive(Debug)]
pub struct Doorbell(File);

impl Doorbell {
    /// A new doorbell.
    pub fn new() -> io::Result<Self> {
        Ok(Self(raw::eventfd()?))
    }

    /// A doorbell received from a peer: must be an eventfd (writing to it never blocks);
    /// made non-blocking for reads.
    pub fn from_peer(fd: OwnedFd) -> io::Result<Self> {
        if !raw::is_eventfd(&fd) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "doorbell is not an eventfd",
            ));
        }
        raw::set_nonblocking(&fd)?;
        Ok(Self(File::from(fd)))
    }

    /// Wakes the sleeper (adds one to the counter; never blocks).
    pub fn ring(&self) {
        // An eventfd write fails only when the counter would overflow 2^64 - 2: the sleeper
        // is woken anyway.
        let _ = (&self.0).write(&1u64.to_ne_bytes());
    }

    /// Resets the counter after a wake-up.
    pub fn drain(&self) {
        let mut b = [0u8; 8];
        let _ = (&self.0).read(&mut b);
    }

    /// The descriptor, for `poll(2)`.
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// A duplicate descriptor to hand to the peer.
    pub fn share(&self) -> io::Result<OwnedFd> {
        Ok(OwnedFd::from(self.0.try_clone()?))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn pair(ring_bytes: usize) -> (Segment, Producer, Consumer) {
        let (seg, _fd) = Segment::create(ring_bytes).unwrap();
        let p = seg.producer(Direction::ToAgent);
        let c = seg.consumer(Direction::ToAgent);
        (seg, p, c)
    }

    fn msg(i: u32, len: usize) -> Vec<u8> {
        (0..len).map(|k| (i as usize * 31 + k) as u8).collect()
    }

    #[test]
    fn records_wrap_around_the_end_intact() {
        let (_seg, mut p, mut c) = pair(MIN_RING_BYTES);
        let mut buf = vec![0u8; 2048];
        // Lengths that do not divide the ring, so records and length words straddle its end
        // at every offset; more than 100 laps.
        let mut written = 0u64;
        for i in 0..20_000u32 {
            let len = 1 + (i as usize * 7) % 300;
            let m = msg(i, len);
            assert!(p.push(&m).is_ok(), "push {i}");
            written += (LEN_BYTES + len) as u64;
            let n = c.pop(&mut buf).unwrap().expect("a record");
            assert_eq!(&buf[..n], &m[..], "record {i}");
            assert!(c.is_empty());
        }
        assert!(written > 100 * MIN_RING_BYTES as u64);
        // Several in flight across the end as well.
        for round in 0..200u32 {
            let ms: Vec<_> = (0..9)
                .map(|k| msg(round * 9 + k, 100 + k as usize))
                .collect();
            for m in &ms {
                p.push(m).unwrap();
            }
            for m in &ms {
                let n = c.pop(&mut buf).unwrap().unwrap();
                assert_eq!(&buf[..n], &m[..]);
            }
        }
        assert_eq!(c.pop(&mut buf).unwrap(), None);
    }

    #[test]
    fn a_full_ring_refuses_without_writing_and_frees_on_read() {
        let (_seg, mut p, mut c) = pair(MIN_RING_BYTES);
        let m = msg(1, 92); // 96-byte records: 42 fit in 4096, with 64 bytes left over
        let mut pushed = 0;
        while p.push(&m).is_ok() {
            pushed += 1;
        }
        assert_eq!(pushed, MIN_RING_BYTES / 96);
        assert_eq!(p.push(&m), Err(PushError::Full));
        // A record that still fits does go in.
        assert!(p.push(&[7; 60]).is_ok());
        assert_eq!(p.push(&[7; 1]), Err(PushError::Full));
        let mut buf = [0u8; 128];
        assert_eq!(c.pop(&mut buf).unwrap(), Some(92));
        assert!(p.push(&m).is_ok(), "room again after one read");
        let mut n = 0;
        while c.pop(&mut buf).unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, pushed + 1);
        assert_eq!(
            p.push(&vec![0; MIN_RING_BYTES]),
            Err(PushError::TooLarge(MIN_RING_BYTES))
        );
    }

    #[test]
    fn a_record_longer_than_the_buffer_is_cut_like_a_datagram() {
        let (_seg, mut p, mut c) = pair(MIN_RING_BYTES);
        p.push(&msg(3, 200)).unwrap();
        p.push(&msg(4, 10)).unwrap();
        let mut small = [0u8; 50];
        assert_eq!(c.pop(&mut small).unwrap(), Some(50));
        assert_eq!(&small[..], &msg(3, 200)[..50]);
        assert_eq!(
            c.pop(&mut small).unwrap(),
            Some(10),
            "the next record is whole"
        );
    }

    #[test]
    fn an_unpublished_record_is_never_seen() {
        // A producer killed between writing a record and publishing it.
        let (seg, mut p, mut c) = pair(MIN_RING_BYTES);
        p.push(&msg(1, 40)).unwrap();
        p.write_unpublished(&msg(2, 40));
        let mut buf = [0u8; 64];
        assert_eq!(c.pop(&mut buf).unwrap(), Some(40));
        assert_eq!(c.pop(&mut buf).unwrap(), None);
        // A new producer on the same ring (the peer restarted) starts at the published tail
        // and overwrites the half-written bytes.
        let mut p2 = seg.producer(Direction::ToAgent);
        p2.push(&msg(3, 12)).unwrap();
        assert_eq!(c.pop(&mut buf).unwrap(), Some(12));
        assert_eq!(&buf[..12], &msg(3, 12)[..]);
    }

    #[test]
    fn impossible_positions_and_lengths_are_corrupt_not_read() {
        let mut buf = [0u8; 64];
        // A length word beyond what was published.
        let (_s, mut p, mut c) = pair(MIN_RING_BYTES);
        p.push_raw(&[200, 0, 0, 0, 1, 2, 3]);
        assert!(c.pop(&mut buf).is_err());
        // A length above MAX_RECORD.
        let (_s, mut p, mut c) = pair(MIN_RING_BYTES);
        let mut raw = u32::MAX.to_le_bytes().to_vec();
        raw.extend([0; 60]);
        p.push_raw(&raw);
        assert!(c.pop(&mut buf).is_err());
        // Fewer than 4 bytes published.
        let (_s, mut p, mut c) = pair(MIN_RING_BYTES);
        p.push_raw(&[1, 0]);
        assert!(c.pop(&mut buf).is_err());
        // A tail more than a ring ahead (the peer wrote the position word).
        let (seg, _p, mut c) = pair(MIN_RING_BYTES);
        seg.map
            .u64_at(HEADER + TAIL)
            .store(10 * MIN_RING_BYTES as u64, Ordering::Release);
        assert_eq!(
            c.pop(&mut buf),
            Err(Corrupt("producer position more than a ring ahead"))
        );
        // A head the producer cannot have given back.
        let (seg, mut p, _c) = pair(MIN_RING_BYTES);
        seg.map
            .u64_at(HEADER + HEAD)
            .store(10 * MIN_RING_BYTES as u64, Ordering::Release);
        assert!(matches!(p.push(&[1; 8]), Err(PushError::Corrupt(_))));
    }

    #[test]
    fn segments_are_checked_when_opened() {
        let (seg, fd) = Segment::create(MIN_RING_BYTES).unwrap();
        let other = Segment::open(&fd).unwrap();
        assert_eq!(other.ring_bytes(), MIN_RING_BYTES);
        // The two mappings share the memory.
        let mut p = seg.producer(Direction::ToDatapath);
        let mut c = other.consumer(Direction::ToDatapath);
        p.push(b"hello").unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(c.pop(&mut buf).unwrap(), Some(5));
        // Wrong magic.
        seg.map.u64_at(0).store(1, Ordering::Release);
        assert!(Segment::open(&fd).is_err());
        seg.map.u64_at(0).store(MAGIC, Ordering::Release);
        // Ring size disagreeing with the segment.
        seg.map.u32_at(12).store(8192, Ordering::Relaxed);
        assert!(Segment::open(&fd).is_err());
        // A memfd without the seals is refused (it could be shrunk under the mapping).
        let plain = raw::eventfd().unwrap();
        assert!(Segment::open(&OwnedFd::from(plain)).is_err());
        assert!(Segment::create(5000).is_err(), "not a power of two");
    }

    #[test]
    fn the_waiting_flag_asks_for_the_doorbell() {
        let (_seg, mut p, c) = pair(MIN_RING_BYTES);
        assert!(!p.push(b"a").unwrap());
        c.set_waiting(true);
        assert!(p.push(b"b").unwrap());
        c.set_waiting(false);
        c.set_always_wake(true);
        assert!(p.push(b"c").unwrap());
    }

    /// A producer process killed with SIGKILL at an arbitrary point of its writing: the
    /// consumer reads only whole, correct records and then finds the ring empty.
    #[test]
    fn a_producer_killed_mid_write_leaves_only_whole_records() {
        let (seg, _fd) = Segment::create(MIN_RING_BYTES).unwrap();
        let mut c = seg.consumer(Direction::ToAgent);
        let mut p = seg.producer(Direction::ToAgent);
        let child = raw::fork_child(move || {
            let mut rec = [0u8; 300];
            let mut i = 0u32;
            loop {
                let len = 8 + (i as usize * 13) % 280;
                rec[..4].copy_from_slice(&i.to_le_bytes());
                for (k, b) in rec[4..len].iter_mut().enumerate() {
                    *b = (i as usize + k) as u8;
                }
                if p.push(&rec[..len]).is_ok() {
                    i = i.wrapping_add(1);
                }
            }
        });
        let mut buf = [0u8; 512];
        let mut expect = 0u32;
        let check = |buf: &[u8], expect: u32| {
            let len = 8 + (expect as usize * 13) % 280;
            assert_eq!(buf.len(), len, "record {expect}: length");
            assert_eq!(u32::from_le_bytes(buf[..4].try_into().unwrap()), expect);
            for (k, &b) in buf[4..].iter().enumerate() {
                assert_eq!(b, (expect as usize + k) as u8, "record {expect} byte {k}");
            }
        };
        while expect < 5_000 {
            if let Some(n) = c.pop(&mut buf).unwrap() {
                check(&buf[..n], expect);
                expect += 1;
            }
        }
        raw::kill_and_reap(child);
        while let Some(n) = c.pop(&mut buf).unwrap() {
            check(&buf[..n], expect);
            expect += 1;
        }
        assert!(c.is_empty());
    }
}
