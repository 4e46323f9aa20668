//! `--ipc shm`: the agent's end of the shared-memory transport
//! ([`ccp_datapath::runtime::shm`], where the rings, the segment and the attach protocol are).
//!
//! The agent listens on a unix stream socket at `/tmp/ccp/<name>` (claimed like the unix
//! datagram socket, [`crate::socket::claim`]); each datapath that connects hands over a sealed
//! memfd with two rings and two eventfd doorbells and becomes one peer, addressed by a number
//! (portus's `Addr`). Every record read is one datagram to portus, so the [`crate::guard`]
//! checks it exactly as it checks unix datagrams.
//!
//! **Waiting.** [`ShmIpc::recv`] looks at every peer's ring in turn; when all are empty it
//! spins for `spin` (default [`DEFAULT_SPIN`]) and then parks in `poll(2)` on the doorbells,
//! the listening socket and every peer's stream (for at most a second, so portus sees its stop
//! flag). While spinning it looks for new peers and departed ones every millisecond. The spin
//! does not yield the CPU between looks: with `sched_yield` a spinning agent was starved by
//! the other builds on the shared test machine (docs/benchmarks.md §15); a parked agent that is
//! woken gets the scheduler's wake-up credit instead.
//!
//! **What a peer can do.** A hello that is not exactly ours (magic, length, a sealed memfd of
//! that length, two eventfds) is refused and closed; so is a peer that sends no hello within
//! [`HELLO_TIMEOUT`], and any beyond [`MAX_PEERS`]. A ring with impossible positions or record
//! lengths drops that peer (it may attach again). A peer whose stream closes (it exited or
//! was killed) is dropped; what it had published but the agent had not read is lost, like
//! datagrams queued to a dead socket. Sends never block and never fail to portus (a failed
//! send would end portus's run loop): an answer to a ring that is full, or to a peer that is
//! gone, is dropped and counted in [`ShmCounters`].

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ccp_datapath::runtime::shm::{Accept, Attachment, PushError, wait_readable};
use portus::ipc::Ipc;
use tracing::{info, warn};

/// How long the agent keeps looking at the rings after the last message before it sleeps.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);
/// A connection that has not sent its hello by then is closed.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(1);
/// Most datapaths attached at once; more are refused.
pub const MAX_PEERS: usize = 1024;
/// Most connections waiting for their hello.
const MAX_PENDING: usize = 64;
/// How often a spinning agent accepts new peers and notices departed ones.
const HOUSEKEEPING: Duration = Duration::from_millis(1);
/// Longest sleep, so that portus looks at its stop flag.
const PARK_MS: i32 = 1000;

/// What happened to peers and answers (shared with whoever reports them).
#[derive(Debug, Default)]
pub struct ShmCounters {
    attached: AtomicU64,
    detached: AtomicU64,
    refused: AtomicU64,
    corrupt: AtomicU64,
    dropped_full: AtomicU64,
    dropped_gone: AtomicU64,
}

impl ShmCounters {
    /// Fresh counters.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }
    /// Datapaths attached so far.
    pub fn attached(&self) -> u64 {
        self.attached.load(Ordering::Relaxed)
    }
    /// Datapaths dropped because their stream closed.
    pub fn detached(&self) -> u64 {
        self.detached.load(Ordering::Relaxed)
    }
    /// Connections refused (bad hello, no hello in time, too many).
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
    /// Datapaths dropped because their ring was corrupt.
    pub fn corrupt(&self) -> u64 {
        self.corrupt.load(Ordering::Relaxed)
    }
    /// Answers dropped because the ring to the datapath was full.
    pub fn dropped_full(&self) -> u64 {
        self.dropped_full.load(Ordering::Relaxed)
    }
    /// Answers dropped because the datapath was gone.
    pub fn dropped_gone(&self) -> u64 {
        self.dropped_gone.load(Ordering::Relaxed)
    }
    /// All counts in one `info` line.
    pub fn log_totals(&self) {
        info!(
            attached = self.attached(),
            detached = self.detached(),
            refused = self.refused(),
            corrupt = self.corrupt(),
            dropped_full = self.dropped_full(),
            dropped_gone = self.dropped_gone(),
            "shm totals"
        );
    }
}

fn bump(c: &AtomicU64) -> u64 {
    c.fetch_add(1, Ordering::Relaxed) + 1
}

struct Peer {
    id: u64,
    link: Attachment,
}

struct Server {
    listener: UnixListener,
    path: PathBuf,
    pending: Vec<(UnixStream, Instant)>,
    peers: Vec<Peer>,
    next_id: u64,
    rr: usize,
    spin: Duration,
    last_housekeeping: Instant,
    counters: Arc<ShmCounters>,
    fds: Vec<RawFd>,
    ready: Vec<bool>,
}

/// The agent's shared-memory IPC (see the module doc). `Addr` is the peer's number.
pub struct ShmIpc {
    server: RefCell<Server>,
}

impl ShmIpc {
    /// Listens at `/tmp/ccp/<name>` (the caller has claimed the name: a stale socket file
    /// there is replaced).
    pub fn bind(name: &str, spin: Duration, counters: Arc<ShmCounters>) -> io::Result<Self> {
        Self::bind_path(
            &Path::new(crate::socket::SOCKET_DIR).join(name),
            spin,
            counters,
        )
    }

    /// Listens at `path`.
    pub fn bind_path(path: &Path, spin: Duration, counters: Arc<ShmCounters>) -> io::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let listener = UnixListener::bind(path)?;
        listener.set_nonblocking(true)?;
        Ok(Self {
            server: RefCell::new(Server {
                listener,
                path: path.to_path_buf(),
                pending: Vec::new(),
                peers: Vec::new(),
                next_id: 1,
                rr: 0,
                spin,
                last_housekeeping: Instant::now(),
                counters,
                fds: Vec::new(),
                ready: Vec::new(),
            }),
        })
    }

    fn server(&self) -> portus::Result<std::cell::RefMut<'_, Server>> {
        self.server
            .try_borrow_mut()
            .map_err(|_| portus::Error("shm: re-entrant use of the IPC".into()))
    }
}

impl Server {
    /// The next record of any peer, round robin.
    fn pop_any(&mut self, buf: &mut [u8]) -> Option<(usize, u64)> {
        let n = self.peers.len();
        for k in 0..n {
            let i = (self.rr + k) % n;
            match self.peers[i].link.rx.pop(buf) {
                Ok(Some(len)) => {
                    self.rr = i + 1;
                    return Some((len, self.peers[i].id));
                }
                Ok(None) => {}
                Err(e) => {
                    let peer = self.peers.swap_remove(i);
                    let count = bump(&self.counters.corrupt);
                    warn!(peer = peer.id, count, error = %e, "shm ring corrupt: datapath dropped");
                    return None;
                }
            }
        }
        None
    }

    fn accept_new(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((s, _)) => {
                    if self.pending.len() >= MAX_PENDING || s.set_nonblocking(true).is_err() {
                        bump(&self.counters.refused);
                        continue;
                    }
                    self.pending.push((s, Instant::now()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    warn!(error = %e, "shm: accept failed");
                    return;
                }
            }
        }
    }

    fn read_hellos(&mut self) {
        let now = Instant::now();
        let pending = std::mem::take(&mut self.pending);
        for (s, since) in pending {
            match Attachment::accept(s) {
                Accept::Attached(link) if self.peers.len() < MAX_PEERS => {
                    let id = self.next_id;
                    self.next_id += 1;
                    bump(&self.counters.attached);
                    info!(
                        peer = id,
                        ring_bytes = link.segment.ring_bytes(),
                        "datapath attached"
                    );
                    self.peers.push(Peer { id, link });
                }
                Accept::Attached(_) => {
                    let count = bump(&self.counters.refused);
                    warn!(
                        count,
                        max = MAX_PEERS,
                        "shm: too many datapaths, one refused"
                    );
                }
                Accept::NotYet(s) if now.duration_since(since) < HELLO_TIMEOUT => {
                    self.pending.push((s, since));
                }
                Accept::NotYet(_) => {
                    let count = bump(&self.counters.refused);
                    warn!(count, "shm: no hello within a second, connection closed");
                }
                Accept::Refused(e) => {
                    let count = bump(&self.counters.refused);
                    if count.is_power_of_two() {
                        warn!(count, error = %e, "shm: connection refused");
                    }
                }
            }
        }
    }

    fn drop_departed(&mut self) {
        let mut i = 0;
        while i < self.peers.len() {
            if self.peers[i].link.peer_gone() {
                let peer = self.peers.swap_remove(i);
                bump(&self.counters.detached);
                info!(peer = peer.id, "datapath detached");
            } else {
                i += 1;
            }
        }
    }

    /// Accepts, reads hellos and drops departed peers; sleeps up to `timeout_ms` in `poll(2)`
    /// first (0: just look). Returns whether anything was ready.
    fn housekeeping(&mut self, timeout_ms: i32) -> io::Result<bool> {
        self.last_housekeeping = Instant::now();
        self.fds.clear();
        self.fds.push(self.listener.as_raw_fd());
        self.fds
            .extend(self.pending.iter().map(|(s, _)| s.as_raw_fd()));
        self.fds
            .extend(self.peers.iter().map(|p| p.link.ctl.as_raw_fd()));
        self.fds
            .extend(self.peers.iter().map(|p| p.link.bell_rx.fd()));
        self.ready.clear();
        self.ready.resize(self.fds.len(), false);
        let n = wait_readable(&self.fds, timeout_ms, &mut self.ready)?;
        for p in &self.peers {
            p.link.bell_rx.drain();
        }
        if self.ready[0] {
            self.accept_new();
        }
        if !self.pending.is_empty() {
            self.read_hellos();
        }
        if n > 0 || timeout_ms > 0 {
            self.drop_departed();
        }
        Ok(n > 0)
    }

    fn recv(&mut self, buf: &mut [u8]) -> portus::Result<(usize, u64)> {
        let mut start = Instant::now();
        loop {
            if let Some(r) = self.pop_any(buf) {
                return Ok(r);
            }
            let now = Instant::now();
            if now.duration_since(self.last_housekeeping) >= HOUSEKEEPING {
                self.housekeeping(0)?;
            }
            let waited = now.duration_since(start);
            if waited < self.spin {
                std::hint::spin_loop();
                continue;
            }
            for p in &self.peers {
                p.link.rx.set_waiting(true);
            }
            let got = self.pop_any(buf);
            let woke = if got.is_none() {
                self.housekeeping(PARK_MS)
            } else {
                Ok(true)
            };
            for p in &self.peers {
                p.link.rx.set_waiting(false);
            }
            if let Some(r) = got {
                return Ok(r);
            }
            if !woke? {
                return Err(portus::Error("shm: nothing received for a second".into()));
            }
            start = Instant::now();
        }
    }

    fn send(&mut self, msg: &[u8], to: u64) {
        let Some(i) = self.peers.iter().position(|p| p.id == to) else {
            bump(&self.counters.dropped_gone);
            return;
        };
        match self.peers[i].link.send(msg) {
            Ok(()) => {}
            Err(PushError::Full) => {
                let count = bump(&self.counters.dropped_full);
                if count.is_power_of_two() {
                    warn!(
                        peer = to,
                        count, "shm: ring to the datapath full, answer dropped"
                    );
                }
            }
            Err(PushError::TooLarge(n)) => {
                warn!(
                    peer = to,
                    bytes = n,
                    "shm: message larger than a ring record dropped"
                );
            }
            Err(PushError::Corrupt(e)) => {
                let peer = self.peers.swap_remove(i);
                let count = bump(&self.counters.corrupt);
                warn!(peer = peer.id, count, error = %e, "shm ring corrupt: datapath dropped");
            }
        }
    }
}

impl Ipc for ShmIpc {
    type Addr = u64;

    fn name() -> String {
        "shm".into()
    }

    /// Never blocks and never fails for a full ring or a departed peer (counted instead).
    fn send(&self, msg: &[u8], to: &u64) -> portus::Result<()> {
        self.server()?.send(msg, *to);
        Ok(())
    }

    fn recv(&self, msg: &mut [u8]) -> portus::Result<(usize, u64)> {
        self.server()?.recv(msg)
    }

    fn close(&mut self) -> portus::Result<()> {
        let s = self.server.get_mut();
        s.peers.clear();
        s.pending.clear();
        Ok(())
    }
}

/// portus closes the IPC only when no flow holds a sender; the socket file is removed when
/// it is dropped. (The totals are logged by the agent's shutdown.)
impl Drop for ShmIpc {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.server.get_mut().path);
    }
}
