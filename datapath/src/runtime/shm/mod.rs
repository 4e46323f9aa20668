//! Shared-memory transport: the datapath and the agent exchange the same messages as over unix
//! datagrams, through two lock-free single-producer/single-consumer rings in a shared segment.
//!
//! **Attaching.** The datapath creates the segment as a *memfd* (anonymous memory, sealed
//! against resizing), two eventfd doorbells, and connects a unix stream socket to the agent's
//! `/tmp/ccp/<name>`; one 16-byte hello ([`hello`]) carries the three descriptors
//! (`SCM_RIGHTS`). A memfd rather than a file under `/dev/shm`: it has no name to collide, to
//! clean up after a crash or for another local user to open; only the agent it was handed to
//! can map it; its seals guarantee the peer cannot shrink it under the other side's mapping
//! (which would turn the next access into `SIGBUS`); and it is freed when both sides close it.
//! The stream stays open for the life of the attachment: its end-of-file is how each side
//! learns that the other is gone (a process killed outright closes it too).
//!
//! **Framing.** A ring record is one whole CCP message, exactly the bytes of the unix datagram
//! it replaces, so the agent's guard checks every message as before. See [`ring`] for the
//! layout and the memory ordering.
//!
//! **Waiting.** The datapath never waits ([`Transport`] is non-blocking). The agent spins on
//! its rings for a configurable time after the last message, then parks in `poll(2)` on the
//! doorbells (**eventfd**, not futex: the agent sleeps on every datapath's ring and on its
//! listening socket at once, which one futex word cannot express; and the datapath gets a
//! descriptor for its own `poll(2)`, [`Transport::readiness_fd`]). A producer rings a doorbell
//! only when the consumer said it is about to sleep, so a busy loop costs no system call.
//!
//! **Failure.** Same semantics as unix sockets:
//! - agent gone (its end of the stream closed, seen within [`LIVENESS_CHECK`]) or never there:
//!   sends fail with [`SendError::Disconnected`], so the runtime falls back at once; an agent
//!   that is alive but silent lets the runtime's agent timeout fire as before;
//! - ring full: [`SendError::Full`], counted ([`ShmStats::ring_full`]); the runtime queues a
//!   bounded number and drops the oldest beyond, counted; nothing blocks;
//! - agent restarted: the next send after the old one is gone attaches a *new* segment to the
//!   new agent (at most every [`REATTACH_INTERVAL`]); the runtime's READY/CREATE retries then
//!   hand it the flows, as with unix sockets;
//! - a ring whose positions or record lengths are impossible ([`ring::Corrupt`]): the segment
//!   is dropped and a new one attached.

pub(crate) mod raw;
pub mod ring;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::transport::{CCP_SOCKET_DIR, RecvError, SendError, Transport};
pub use ring::{Consumer, Direction, Doorbell, Producer, PushError, Segment};

/// How often an idle datapath checks that its agent is still attached.
pub const LIVENESS_CHECK: Duration = Duration::from_millis(1);
/// Least time between two attach attempts.
pub const REATTACH_INTERVAL: Duration = Duration::from_millis(10);
/// Length of the hello that carries the descriptors.
pub const HELLO_LEN: usize = 16;
/// First 8 bytes of the hello.
pub const HELLO_MAGIC: [u8; 8] = *b"CCPSHMv1";

/// The hello for a segment of `segment_len` bytes: magic, then the length (`u64` LE).
pub fn hello(segment_len: usize) -> [u8; HELLO_LEN] {
    let mut h = [0u8; HELLO_LEN];
    h[..8].copy_from_slice(&HELLO_MAGIC);
    h[8..].copy_from_slice(&(segment_len as u64).to_le_bytes());
    h
}

/// One side's end of an attachment: its rings, the doorbells, and the stream whose
/// end-of-file means the peer is gone.
#[derive(Debug)]
pub struct Attachment {
    /// The stream to the peer.
    pub ctl: UnixStream,
    /// Records this side writes.
    pub tx: Producer,
    /// Records this side reads.
    pub rx: Consumer,
    /// Rung to wake the peer (it reads `tx`).
    pub bell_tx: Doorbell,
    /// Rung by the peer to wake this side (this side reads `rx`).
    pub bell_rx: Doorbell,
    /// The mapped segment.
    pub segment: Segment,
}

impl Attachment {
    /// The datapath side: creates a segment with rings of `ring_bytes`, connects to the agent
    /// at `agent_path` and hands it over.
    pub fn connect(agent_path: &Path, ring_bytes: usize) -> io::Result<Self> {
        let ctl = UnixStream::connect(agent_path)?;
        let (segment, memfd) = Segment::create(ring_bytes)?;
        let to_agent = Doorbell::new()?;
        let to_datapath = Doorbell::new()?;
        let fds = [memfd.as_raw_fd(), to_agent.fd(), to_datapath.fd()];
        raw::send_with_fds(&ctl, &hello(ring::segment_len(ring_bytes)), &fds)?;
        ctl.set_nonblocking(true)?;
        Ok(Self {
            ctl,
            tx: segment.producer(Direction::ToAgent),
            rx: segment.consumer(Direction::ToDatapath),
            bell_tx: to_agent,
            bell_rx: to_datapath,
            segment,
        })
    }

    /// The agent side: reads the hello from a freshly accepted stream (non-blocking) and maps
    /// the segment it carries. Any hello that is not exactly ours (magic, length, three
    /// descriptors: a sealed memfd of that length and two eventfds) is refused, and every
    /// descriptor that came with it is closed.
    pub fn accept(ctl: UnixStream) -> Accept {
        let mut h = [0u8; HELLO_LEN];
        let (n, fds) = match raw::recv_with_fds(&ctl, &mut h) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Accept::NotYet(ctl),
            Err(e) => return Accept::Refused(e),
        };
        match Self::check_hello(&h[..n], fds) {
            Ok((segment, bell_rx, bell_tx)) => Accept::Attached(Self {
                ctl,
                tx: segment.producer(Direction::ToDatapath),
                rx: segment.consumer(Direction::ToAgent),
                bell_tx,
                bell_rx,
                segment,
            }),
            Err(e) => Accept::Refused(e),
        }
    }

    fn check_hello(h: &[u8], fds: Vec<OwnedFd>) -> io::Result<(Segment, Doorbell, Doorbell)> {
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
        if h.len() != HELLO_LEN || h[..8] != HELLO_MAGIC {
            return Err(bad("not a shared-memory hello"));
        }
        let [memfd, to_agent, to_datapath]: [OwnedFd; 3] = fds
            .try_into()
            .map_err(|_| bad("hello without exactly three descriptors"))?;
        let segment = Segment::open(&memfd)?;
        let len = u64::from_le_bytes(h[8..16].try_into().map_err(|_| bad("hello length"))?);
        if len != ring::segment_len(segment.ring_bytes()) as u64 {
            return Err(bad("hello length disagrees with the segment"));
        }
        Ok((
            segment,
            Doorbell::from_peer(to_agent)?,
            Doorbell::from_peer(to_datapath)?,
        ))
    }

    /// Whether the peer closed its end of the stream (exited or was killed). Non-blocking.
    pub fn peer_gone(&self) -> bool {
        match raw::peek(&self.ctl) {
            Ok(0) => true,
            Ok(_) => false, // nothing is sent on the stream after the hello; ignore it
            Err(e) => e.kind() != io::ErrorKind::WouldBlock,
        }
    }

    /// Pushes one record and rings the peer if it asked.
    pub fn send(&mut self, msg: &[u8]) -> Result<(), PushError> {
        if self.tx.push(msg)? {
            self.bell_tx.ring();
        }
        Ok(())
    }
}

/// What [`Attachment::accept`] made of a connection.
#[derive(Debug)]
pub enum Accept {
    /// A datapath attached.
    Attached(Attachment),
    /// No hello yet: the stream, to try again.
    NotYet(UnixStream),
    /// Not a valid hello (the stream and the descriptors are closed).
    Refused(io::Error),
}

/// Counters of the datapath's shared-memory transport.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShmStats {
    /// Segments handed to an agent.
    pub attaches: u64,
    /// Attach attempts that failed (no agent, refused).
    pub attach_failures: u64,
    /// Attachments ended because the agent went away.
    pub detaches: u64,
    /// Sends that found the ring to the agent full.
    pub ring_full: u64,
    /// Rings found corrupt (the segment was dropped).
    pub corrupt: u64,
}

/// The datapath end of the shared-memory transport to the agent bound at
/// `/tmp/ccp/<agent_name>` (`ccp-agent --ipc shm`). See the module doc.
#[derive(Debug)]
pub struct ShmTransport {
    agent_path: PathBuf,
    ring_bytes: usize,
    link: Option<Attachment>,
    next_attempt: Option<Instant>,
    last_check: Instant,
    wants_readiness: std::cell::Cell<bool>,
    stats: ShmStats,
}

impl ShmTransport {
    /// A transport to `/tmp/ccp/<agent_name>` with rings of
    /// [`ring::DEFAULT_RING_BYTES`]; it attaches at the first send.
    pub fn new(agent_name: &str) -> Self {
        Self::with_path(
            &Path::new(CCP_SOCKET_DIR).join(agent_name),
            ring::DEFAULT_RING_BYTES,
        )
    }

    /// A transport to the agent listening at `agent_path`, rings of `ring_bytes` (a power of
    /// two, see [`Segment::create`]); it attaches at the first send.
    pub fn with_path(agent_path: &Path, ring_bytes: usize) -> Self {
        Self {
            agent_path: agent_path.to_path_buf(),
            ring_bytes,
            link: None,
            next_attempt: None,
            last_check: Instant::now(),
            wants_readiness: std::cell::Cell::new(false),
            stats: ShmStats::default(),
        }
    }

    /// Attaches now (an error when no agent listens there or it refuses).
    pub fn connect(agent_name: &str) -> io::Result<Self> {
        let mut t = Self::new(agent_name);
        t.attach()?;
        Ok(t)
    }

    /// Whether a segment is attached to a live agent (as of the last check).
    pub fn attached(&self) -> bool {
        self.link.is_some()
    }

    /// The transport's counters.
    pub fn stats(&self) -> ShmStats {
        self.stats
    }

    fn attach(&mut self) -> io::Result<()> {
        let now = Instant::now();
        self.next_attempt = Some(now + REATTACH_INTERVAL);
        match Attachment::connect(&self.agent_path, self.ring_bytes) {
            Ok(link) => {
                if self.wants_readiness.get() {
                    link.rx.set_always_wake(true);
                }
                self.link = Some(link);
                self.last_check = now;
                self.stats.attaches += 1;
                Ok(())
            }
            Err(e) => {
                self.stats.attach_failures += 1;
                Err(e)
            }
        }
    }

    fn detach(&mut self) {
        if self.link.take().is_some() {
            self.stats.detaches += 1;
        }
    }

    /// Detaches if the agent closed its end; checked at most every [`LIVENESS_CHECK`].
    fn check_alive(&mut self) {
        let now = Instant::now();
        if now.duration_since(self.last_check) < LIVENESS_CHECK {
            return;
        }
        self.last_check = now;
        if self.link.as_ref().is_some_and(Attachment::peer_gone) {
            self.detach();
        }
    }
}

impl Transport for ShmTransport {
    fn send(&mut self, msg: &[u8]) -> Result<(), SendError> {
        if self.link.is_none() {
            if self.next_attempt.is_some_and(|t| Instant::now() < t) {
                return Err(SendError::Disconnected("agent not attached".into()));
            }
            if let Err(e) = self.attach() {
                return Err(SendError::Disconnected(format!(
                    "{}: {e}",
                    self.agent_path.display()
                )));
            }
        }
        let Some(link) = self.link.as_mut() else {
            return Err(SendError::Disconnected("agent not attached".into()));
        };
        match link.send(msg) {
            Ok(()) => Ok(()),
            Err(PushError::Full) => {
                self.stats.ring_full += 1;
                // A full ring may mean an agent that died without our noticing yet.
                self.check_alive();
                if self.link.is_none() {
                    return Err(SendError::Disconnected("agent went away".into()));
                }
                Err(SendError::Full)
            }
            Err(PushError::TooLarge(n)) => Err(SendError::Disconnected(format!(
                "message of {n} bytes larger than a ring record"
            ))),
            Err(PushError::Corrupt(e)) => {
                self.stats.corrupt += 1;
                self.detach();
                Err(SendError::Disconnected(e.to_string()))
            }
        }
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, RecvError> {
        let Some(link) = self.link.as_mut() else {
            return Ok(None);
        };
        match link.rx.pop(buf) {
            Ok(Some(n)) => Ok(Some(n)),
            Ok(None) => {
                if self.wants_readiness.get() {
                    link.bell_rx.drain();
                }
                self.check_alive();
                Ok(None)
            }
            Err(e) => {
                self.stats.corrupt += 1;
                self.detach();
                Err(RecvError::Io(io::Error::new(io::ErrorKind::InvalidData, e)))
            }
        }
    }

    /// The doorbell the agent rings after each message once this is called (the agent then
    /// pays one `write(2)` per message); `None` while detached.
    fn readiness_fd(&self) -> Option<RawFd> {
        let link = self.link.as_ref()?;
        if !self.wants_readiness.replace(true) {
            link.rx.set_always_wake(true);
        }
        Some(link.bell_rx.fd())
    }
}

/// Waits until one of `fds` is readable (or hung up) or `timeout_ms` passes (-1: no limit);
/// sets `ready[i]` for each that is, returns how many. `ready` must be as long as `fds`.
pub fn wait_readable(fds: &[RawFd], timeout_ms: i32, ready: &mut [bool]) -> io::Result<usize> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let n = raw::poll(&mut pfds, timeout_ms)?;
    for (r, p) in ready.iter_mut().zip(&pfds) {
        *r = p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::fs::File;
    use std::os::unix::net::UnixListener;

    use super::*;

    /// An agent end in this process: a listener at a fresh path, in a folder removed when the
    /// returned guard drops.
    fn listener(tag: &str) -> (UnixListener, PathBuf, tempfile::TempDir) {
        let dir = tempfile::Builder::new()
            .prefix(&format!("ccp-shm-{tag}-"))
            .tempdir()
            .unwrap();
        let path = dir.path().join("agent");
        (UnixListener::bind(&path).unwrap(), path, dir)
    }

    fn accept(l: &UnixListener) -> Attachment {
        let (s, _) = l.accept().unwrap();
        let start = Instant::now();
        let mut s = s;
        loop {
            match Attachment::accept(s) {
                Accept::Attached(a) => return a,
                Accept::NotYet(again) => s = again,
                Accept::Refused(e) => panic!("refused: {e}"),
            }
            assert!(start.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn messages_cross_both_ways_and_the_doorbell_rings_for_a_sleeper() {
        let (l, path, _dir) = listener("both");
        let mut dp = ShmTransport::with_path(&path, ring::MIN_RING_BYTES);
        dp.send(b"ready-message").unwrap();
        let mut agent = accept(&l);
        let mut buf = [0u8; 64];
        assert_eq!(agent.rx.pop(&mut buf).unwrap(), Some(13));
        assert_eq!(&buf[..13], b"ready-message");
        agent.send(b"install").unwrap();
        assert_eq!(dp.try_recv(&mut buf).unwrap(), Some(7));
        assert_eq!(dp.try_recv(&mut buf).unwrap(), None);
        // The agent about to sleep: the datapath's next send rings its doorbell.
        agent.rx.set_waiting(true);
        dp.send(b"report").unwrap();
        let mut ready = [false];
        assert_eq!(
            wait_readable(&[agent.bell_rx.fd()], 1000, &mut ready).unwrap(),
            1
        );
        agent.bell_rx.drain();
        assert_eq!(
            wait_readable(&[agent.bell_rx.fd()], 0, &mut ready).unwrap(),
            0
        );
        // A datapath that sleeps on its readiness descriptor is rung for every answer.
        let fd = dp.readiness_fd().unwrap();
        agent.send(b"update").unwrap();
        assert_eq!(wait_readable(&[fd], 1000, &mut ready).unwrap(), 1);
        assert_eq!(dp.try_recv(&mut buf).unwrap(), Some(6));
    }

    #[test]
    fn a_full_ring_is_full_at_once_and_counted() {
        let (l, path, _dir) = listener("full");
        let mut dp = ShmTransport::with_path(&path, ring::MIN_RING_BYTES);
        dp.send(&[1; 92]).unwrap();
        let _agent = accept(&l); // attached, never reads
        let mut sent = 1;
        let full = loop {
            match dp.send(&[1; 92]) {
                Ok(()) => sent += 1,
                Err(e) => break e,
            }
            assert!(sent < 1000);
        };
        assert!(matches!(full, SendError::Full), "{full}");
        assert_eq!(sent, ring::MIN_RING_BYTES / 96);
        for _ in 0..10 {
            assert!(matches!(dp.send(&[1; 92]), Err(SendError::Full)));
        }
        assert_eq!(dp.stats().ring_full, 11);
        assert!(
            dp.attached(),
            "a live agent that does not read stays attached"
        );
    }

    #[test]
    fn no_agent_then_a_gone_agent_then_a_new_one() {
        let (l, path, _dir) = listener("gone");
        drop(l);
        let _ = std::fs::remove_file(&path);
        let mut dp = ShmTransport::with_path(&path, ring::MIN_RING_BYTES);
        assert!(matches!(dp.send(b"x"), Err(SendError::Disconnected(_))));
        // Attempts are paced: the next send within the interval does not try.
        assert!(matches!(dp.send(b"x"), Err(SendError::Disconnected(_))));
        assert_eq!(dp.stats().attach_failures, 1);

        let l = UnixListener::bind(&path).unwrap();
        std::thread::sleep(REATTACH_INTERVAL);
        dp.send(b"hello").unwrap();
        let agent = accept(&l);
        drop(agent); // the agent exits
        drop(l);
        let mut buf = [0u8; 16];
        let start = Instant::now();
        while dp.attached() {
            assert_eq!(dp.try_recv(&mut buf).unwrap(), None);
            assert!(
                start.elapsed() < Duration::from_secs(1),
                "departure never seen"
            );
        }
        assert!(matches!(dp.send(b"x"), Err(SendError::Disconnected(_))));

        // A new agent at the same path gets a new segment.
        let _ = std::fs::remove_file(&path);
        let l = UnixListener::bind(&path).unwrap();
        std::thread::sleep(REATTACH_INTERVAL);
        dp.send(b"again").unwrap();
        let mut agent = accept(&l);
        assert_eq!(agent.rx.pop(&mut buf).unwrap(), Some(5));
        let s = dp.stats();
        assert_eq!((s.attaches, s.detaches), (2, 1));
    }

    #[test]
    fn hellos_that_are_not_ours_are_refused() {
        let (agent, path, _dir) = listener("hello");
        // No descriptors.
        let c = UnixStream::connect(&path).unwrap();
        std::io::Write::write_all(&mut &c, &hello(1000)).unwrap();
        let (s, _) = agent.accept().unwrap();
        s.set_nonblocking(true).unwrap();
        assert!(matches!(Attachment::accept(s), Accept::Refused(_)));
        // Three descriptors, but the "segment" is an eventfd.
        let c = UnixStream::connect(&path).unwrap();
        let efd = raw::eventfd().unwrap();
        raw::send_with_fds(&c, &hello(1000), &[efd.as_raw_fd(); 3]).unwrap();
        let (s, _) = agent.accept().unwrap();
        s.set_nonblocking(true).unwrap();
        assert!(matches!(Attachment::accept(s), Accept::Refused(_)));
        // A real segment whose doorbells are not eventfds (a pipe could block the agent).
        let c = UnixStream::connect(&path).unwrap();
        let (seg, memfd) = Segment::create(ring::MIN_RING_BYTES).unwrap();
        let null = File::open("/dev/null").unwrap();
        let len = ring::segment_len(seg.ring_bytes());
        raw::send_with_fds(
            &c,
            &hello(len),
            &[memfd.as_raw_fd(), null.as_raw_fd(), null.as_raw_fd()],
        )
        .unwrap();
        let (s, _) = agent.accept().unwrap();
        s.set_nonblocking(true).unwrap();
        assert!(matches!(Attachment::accept(s), Accept::Refused(_)));
        // Nothing sent yet.
        let _c = UnixStream::connect(&path).unwrap();
        let (s, _) = agent.accept().unwrap();
        s.set_nonblocking(true).unwrap();
        assert!(matches!(Attachment::accept(s), Accept::NotYet(_)));
    }
}
