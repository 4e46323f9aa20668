//! The relay: our link emulator in the router namespace. Two `AF_PACKET` sockets, one on each
//! router interface, and a thread per direction that receives a frame on one, holds it for
//! the direction's one-way delay in a FIFO, and sends it out of the other. The data direction
//! drops TCP segments that carry data at random (seeded) and, when replaying a mahimahi trace,
//! drains its own drop-tail queue at the trace's delivery opportunities.
//!
//! Random loss draws once per data-carrying TCP segment and never for anything else (SYN,
//! pure ACK, FIN, ARP, neighbour discovery), exactly as the simulator's link draws once per
//! data packet offered, from the same stream (`Rng::derive(seed, 1)`). With one flow, the
//! k-th data segment sent (retransmissions count) is therefore dropped on the testbed iff it
//! is dropped in the simulator with the same seed: the two sides see one loss pattern (common
//! random numbers), so a comparison of a lossy cell measures the two TCPs and not two draws of
//! the loss process, and a SYN lost at random no longer costs a run its 1 s SYN timeout.
//!
//! Frames sent on the receiver-side socket pass through that interface's qdisc (the `htb`
//! shaper when the link has a constant rate). Both sockets ignore their own outgoing frames
//! (`PACKET_IGNORE_OUTGOING`, and the packet type as a second check), so nothing loops.

use std::collections::VecDeque;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::sim::Trace;
use crate::sim::rng::Rng;

use super::netns::NetNs;
use super::{TRACE_OPPORTUNITY_BYTES, TestbedError};

/// `PACKET_IGNORE_OUTGOING` (`linux/if_packet.h`, Linux 4.20).
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// `sll_pkttype` of a frame this host sent.
const PACKET_OUTGOING: u8 = 4;
/// Socket buffers of the relay's sockets: bursts at 100 Mbit/s and a full bottleneck queue
/// never block or drop at the socket.
const SOCKET_BUFFER_BYTES: libc::c_int = 32 << 20;
/// The Ethernet header before the IP packet.
const ETH_HEADER_BYTES: usize = 14;
/// Receive buffer: any frame up to the largest GSO packet, so an oversized one is seen and
/// counted rather than cut.
const RECV_BUFFER_BYTES: usize = 1 << 16;
/// Longest sleep with nothing due, so a stop request is seen soon.
const MAX_IDLE_WAIT: Duration = Duration::from_millis(20);
/// Frames read per wakeup before due frames are released again.
const RECV_BATCH: usize = 256;
/// How often a thread publishes its CPU time.
const CPU_UPDATE_INTERVAL: Duration = Duration::from_millis(100);
/// A frame released more than this after its due time counts as late.
pub const LATE_AFTER: Duration = Duration::from_millis(1);
/// `SCHED_FIFO` priority of the relay threads when real-time scheduling is asked for: above
/// every normal thread, below the kernel's own real-time threads (which use 50 and up).
const REALTIME_PRIORITY: libc::c_int = 10;
/// Timer slack of the relay threads, ns: wakeups land within a microsecond of the due time.
const TIMER_SLACK_NS: libc::c_ulong = 1_000;

/// What one direction of the relay does to frames.
#[derive(Debug, Clone)]
pub(crate) struct DirParams {
    /// One-way delay.
    pub(crate) delay: Duration,
    /// Drop probability.
    pub(crate) loss: f64,
    /// A trace to drain the direction's own queue by (none: forward when due).
    pub(crate) trace: Option<Arc<Trace>>,
    /// Drop-tail limit of the trace queue, bytes of Ethernet frames.
    pub(crate) queue_limit_bytes: u64,
}

/// Counters of one direction of the relay, since the testbed was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectionStats {
    /// Frames received from the incoming interface.
    pub frames_in: u64,
    /// Bytes of those frames (Ethernet header included).
    pub bytes_in: u64,
    /// Frames handed to the outgoing interface.
    pub forwarded: u64,
    /// Bytes of those frames.
    pub bytes_forwarded: u64,
    /// Data-carrying TCP segments dropped at random (`loss`).
    pub random_drops: u64,
    /// Frames dropped because the relay's trace queue was full.
    pub queue_drops: u64,
    /// Frames the outgoing interface's qdisc refused (`ENOBUFS`: the `htb` buffer was full;
    /// these are in [`LinkStats::qdisc_drops`](super::LinkStats::qdisc_drops) too).
    pub egress_refused: u64,
    /// Frames that could not be sent for another reason.
    pub send_errors: u64,
    /// Frames larger than any MTU-sized frame could be (offloads not disabled), dropped.
    pub oversized: u64,
    /// Frames released more than [`LATE_AFTER`] after their delay ended (the relay thread
    /// was not scheduled in time: an overloaded machine).
    pub late_frames: u64,
    /// The latest any frame was released after its delay ended.
    pub max_lateness: Duration,
    /// CPU time the direction's thread has used.
    pub cpu: Duration,
    /// The thread runs with real-time priority (`SCHED_FIFO`).
    pub realtime: bool,
}

#[derive(Debug, Default)]
struct Counters {
    frames_in: AtomicU64,
    bytes_in: AtomicU64,
    forwarded: AtomicU64,
    bytes_forwarded: AtomicU64,
    random_drops: AtomicU64,
    queue_drops: AtomicU64,
    egress_refused: AtomicU64,
    send_errors: AtomicU64,
    oversized: AtomicU64,
    late_frames: AtomicU64,
    max_lateness_ns: AtomicU64,
    cpu_ns: AtomicU64,
    realtime: AtomicBool,
}

impl Counters {
    fn snapshot(&self) -> DirectionStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        DirectionStats {
            frames_in: get(&self.frames_in),
            bytes_in: get(&self.bytes_in),
            forwarded: get(&self.forwarded),
            bytes_forwarded: get(&self.bytes_forwarded),
            random_drops: get(&self.random_drops),
            queue_drops: get(&self.queue_drops),
            egress_refused: get(&self.egress_refused),
            send_errors: get(&self.send_errors),
            oversized: get(&self.oversized),
            late_frames: get(&self.late_frames),
            max_lateness: Duration::from_nanos(get(&self.max_lateness_ns)),
            cpu: Duration::from_nanos(get(&self.cpu_ns)),
            realtime: self.realtime.load(Ordering::Relaxed),
        }
    }
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// One direction's shared state: parameters (swapped by `set`), counters, the error it died
/// of.
#[derive(Debug)]
struct Direction {
    params: Mutex<DirParams>,
    /// A new time zero for the trace schedule, taken with the next generation.
    restart: Mutex<Option<Instant>>,
    generation: AtomicU64,
    counters: Counters,
    error: Mutex<Option<String>>,
}

impl Direction {
    fn new(params: DirParams) -> Self {
        Self {
            params: Mutex::new(params),
            restart: Mutex::new(None),
            generation: AtomicU64::new(0),
            counters: Counters::default(),
            error: Mutex::new(None),
        }
    }

    fn set(&self, params: DirParams) {
        *self.params.lock().unwrap_or_else(PoisonError::into_inner) = params;
        self.generation.fetch_add(1, Ordering::Release);
    }

    fn restart_at(&self, epoch: Instant) {
        *self.restart.lock().unwrap_or_else(PoisonError::into_inner) = Some(epoch);
        self.generation.fetch_add(1, Ordering::Release);
    }

    fn take_restart(&self) -> Option<Instant> {
        self.restart
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn params(&self) -> DirParams {
        self.params
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn error(&self) -> Option<String> {
        self.error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The running relay: two threads, stopped and joined on drop.
#[derive(Debug)]
pub(crate) struct Relay {
    data: Arc<Direction>,
    ack: Arc<Direction>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Relay {
    /// Opens the sockets in `router` and starts forwarding between `sender_side` and
    /// `receiver_side`.
    pub(crate) fn start(
        router: &NetNs,
        sender_side: &str,
        receiver_side: &str,
        data: DirParams,
        ack: DirParams,
        seed: u64,
        realtime: bool,
    ) -> Result<Self, TestbedError> {
        let open = |ifname: &str| {
            PacketSocket::open(ifname)
                .map_err(TestbedError::os("opening an AF_PACKET socket", ifname))
        };
        let (s, r) = router.run(|| -> Result<_, TestbedError> {
            Ok((open(sender_side)?, open(receiver_side)?))
        })??;
        let (s, r) = (Arc::new(s), Arc::new(r));
        let mut relay = Self {
            data: Arc::new(Direction::new(data)),
            ack: Arc::new(Direction::new(ack)),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        };
        for (name, input, output, dir, stream) in [
            ("relay data", &s, &r, &relay.data, 1),
            ("relay ack", &r, &s, &relay.ack, 2),
        ] {
            let (input, output, dir, stop) = (
                Arc::clone(input),
                Arc::clone(output),
                Arc::clone(dir),
                Arc::clone(&relay.stop),
            );
            let rng = Rng::derive(seed, stream);
            let thread = std::thread::Builder::new()
                .name(name.to_string())
                .spawn(move || {
                    if realtime {
                        let ok = set_realtime();
                        dir.counters.realtime.store(ok, Ordering::Relaxed);
                    }
                    forward(&input, &output, &dir, rng, &stop);
                })
                .map_err(TestbedError::os("spawning a relay thread", router.name()))?;
            relay.threads.push(thread);
        }
        Ok(relay)
    }

    /// New parameters for both directions, applied from the threads' next wakeup.
    pub(crate) fn set(&self, data: DirParams, ack: DirParams) {
        self.data.set(data);
        self.ack.set(ack);
    }

    /// Starts both directions' trace schedules over, with the first opportunity at `epoch`
    /// (queued frames stay queued); a direction without a trace ignores it.
    pub(crate) fn restart_schedules(&self, epoch: Instant) {
        self.data.restart_at(epoch);
        self.ack.restart_at(epoch);
    }

    /// Both directions' counters, or why a direction stopped.
    pub(crate) fn stats(&self) -> Result<(DirectionStats, DirectionStats), TestbedError> {
        for (name, dir) in [("data", &self.data), ("ack", &self.ack)] {
            if let Some(e) = dir.error() {
                return Err(TestbedError::RelayStopped(format!("{name} direction: {e}")));
            }
        }
        Ok((self.data.counters.snapshot(), self.ack.counters.snapshot()))
    }

    /// Stops and joins the threads (idempotent).
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                tracing::error!("a relay thread panicked");
            }
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A frame waiting out its delay.
struct Held {
    due: Instant,
    frame: Vec<u8>,
}

/// One direction's loop; records a fatal error in `dir` before returning.
fn forward(
    input: &PacketSocket,
    output: &PacketSocket,
    dir: &Direction,
    mut rng: Rng,
    stop: &AtomicBool,
) {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and affects only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, TIMER_SLACK_NS);
    }
    let c = &dir.counters;
    let send = |frame: &[u8]| match output.send(frame) {
        Ok(()) => {
            bump(&c.forwarded, 1);
            bump(&c.bytes_forwarded, frame.len() as u64);
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => bump(&c.egress_refused, 1),
        Err(_) => bump(&c.send_errors, 1),
    };
    let mut generation = None;
    let mut params = dir.params();
    let mut held: VecDeque<Held> = VecDeque::new();
    let mut queue: Option<TraceQueue> = None;
    let mut buf = vec![0u8; RECV_BUFFER_BYTES];
    let mut cpu_published = Instant::now();
    let result = 'run: loop {
        if stop.load(Ordering::Relaxed) {
            break Ok(());
        }
        let now = Instant::now();
        let g = dir.generation.load(Ordering::Acquire);
        if generation != Some(g) {
            generation = Some(g);
            params = dir.params();
            queue = TraceQueue::reconfigure(queue.take(), &params, now, send);
            if let Some(epoch) = dir.take_restart()
                && let Some(q) = queue.as_mut()
            {
                q.restart(epoch);
            }
        }
        while held.front().is_some_and(|h| h.due <= now) {
            let Some(h) = held.pop_front() else { break };
            let late = now.duration_since(h.due);
            if late > LATE_AFTER {
                bump(&c.late_frames, 1);
            }
            c.max_lateness_ns
                .fetch_max(late.as_nanos() as u64, Ordering::Relaxed);
            match queue.as_mut() {
                Some(q) => {
                    if !q.push(h.frame, now) {
                        bump(&c.queue_drops, 1);
                    }
                }
                None => send(&h.frame),
            }
        }
        if let Some(q) = queue.as_mut() {
            q.serve(now, |f| send(&f));
        }
        let mut wake = now + MAX_IDLE_WAIT;
        if let Some(h) = held.front() {
            wake = wake.min(h.due);
        }
        if let Some(t) = queue.as_ref().and_then(TraceQueue::next_departure) {
            wake = wake.min(t);
        }
        if let Err(e) = input.wait_readable(wake.saturating_duration_since(now)) {
            break Err(e);
        }
        let arrival = Instant::now();
        for _ in 0..RECV_BATCH {
            let len = match input.recv(&mut buf) {
                Ok(Recv::Frame(len)) => len,
                Ok(Recv::Skip) => continue,
                Ok(Recv::Empty) => break,
                Err(e) => break 'run Err(e),
            };
            bump(&c.frames_in, 1);
            bump(&c.bytes_in, len as u64);
            let Some(frame) = buf.get(..len) else {
                bump(&c.oversized, 1);
                continue;
            };
            if params.loss > 0.0 && carries_tcp_data(frame) && rng.chance(params.loss) {
                bump(&c.random_drops, 1);
                continue;
            }
            held.push_back(Held {
                due: arrival + params.delay,
                frame: frame.to_vec(),
            });
        }
        if arrival.duration_since(cpu_published) >= CPU_UPDATE_INTERVAL {
            cpu_published = arrival;
            c.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
        }
    };
    c.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
    if let Err(e) = result {
        tracing::error!("relay direction stopped: {e}");
        *dir.error.lock().unwrap_or_else(PoisonError::into_inner) = Some(e.to_string());
    }
}

/// Puts the calling thread in `SCHED_FIFO` at [`REALTIME_PRIORITY`]; false (and a warning) if
/// the system refuses (no `CAP_SYS_NICE`, no real-time budget in the cgroup).
fn set_realtime() -> bool {
    let param = libc::sched_param {
        sched_priority: REALTIME_PRIORITY,
    };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param for the call.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &raw const param) };
    if rc == 0 {
        true
    } else {
        tracing::warn!(
            "relay stays at normal priority: SCHED_FIFO refused: {}",
            io::Error::last_os_error()
        );
        false
    }
}

/// CPU time of the calling thread, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A drop-tail queue drained by a mahimahi trace: each delivery opportunity carries
/// [`TRACE_OPPORTUNITY_BYTES`] of IP packet; a packet may take several opportunities, bytes an
/// opportunity cannot use are lost, and opportunities with nothing queued are wasted.
#[derive(Debug)]
struct TraceQueue {
    trace: Arc<Trace>,
    /// Time zero of the schedule.
    epoch: Instant,
    /// Current repetition of the trace.
    cycle: u64,
    /// Next opportunity within the repetition.
    index: usize,
    frames: VecDeque<Vec<u8>>,
    queued_bytes: u64,
    limit_bytes: u64,
    /// IP bytes of the head frame still to deliver (0: not started).
    head_left: usize,
}

impl TraceQueue {
    fn new(trace: Arc<Trace>, limit_bytes: u64, now: Instant) -> Self {
        Self {
            trace,
            epoch: now,
            cycle: 0,
            index: 0,
            frames: VecDeque::new(),
            queued_bytes: 0,
            limit_bytes,
            head_left: 0,
        }
    }

    /// The queue after a parameter change: the same schedule for the same trace (new limit),
    /// a new schedule from `now` for a new trace (queued frames kept), or none (queued frames
    /// sent at once).
    fn reconfigure(
        old: Option<Self>,
        params: &DirParams,
        now: Instant,
        send: impl Fn(&[u8]),
    ) -> Option<Self> {
        match (old, &params.trace) {
            (None, None) => None,
            (Some(old), None) => {
                old.frames.iter().for_each(|f| send(f));
                None
            }
            (Some(mut old), Some(t)) if *old.trace == **t => {
                old.limit_bytes = params.queue_limit_bytes;
                Some(old)
            }
            (old, Some(t)) => {
                let mut q = Self::new(Arc::clone(t), params.queue_limit_bytes, now);
                if let Some(old) = old {
                    q.frames = old.frames;
                    q.queued_bytes = old.queued_bytes;
                }
                Some(q)
            }
        }
    }

    /// The schedule from its start again, with its first opportunity at `epoch`.
    fn restart(&mut self, epoch: Instant) {
        self.epoch = epoch;
        self.cycle = 0;
        self.index = 0;
    }

    fn opportunity_at(&self) -> Instant {
        let offset_ns = self
            .trace
            .opportunities_ns
            .get(self.index)
            .copied()
            .unwrap_or(0);
        let at_ns = self
            .cycle
            .saturating_mul(self.trace.period_ns)
            .saturating_add(offset_ns);
        self.epoch + Duration::from_nanos(at_ns)
    }

    fn advance(&mut self) {
        self.index += 1;
        if self.index >= self.trace.opportunities_ns.len() {
            self.index = 0;
            self.cycle += 1;
        }
    }

    /// Enqueues `frame` arriving at `now`; false when the buffer is full (the frame is
    /// dropped).
    fn push(&mut self, frame: Vec<u8>, now: Instant) -> bool {
        let len = frame.len() as u64;
        if self.queued_bytes + len > self.limit_bytes {
            return false;
        }
        if self.frames.is_empty() {
            // Opportunities that passed while the queue was empty were wasted.
            while self.opportunity_at() < now {
                self.advance();
            }
        }
        self.queued_bytes += len;
        self.frames.push_back(frame);
        true
    }

    /// Uses every opportunity up to `now`, handing finished frames to `deliver`.
    fn serve(&mut self, now: Instant, mut deliver: impl FnMut(Vec<u8>)) {
        while !self.frames.is_empty() && self.opportunity_at() <= now {
            let mut budget = TRACE_OPPORTUNITY_BYTES as usize;
            while budget > 0 {
                let Some(front) = self.frames.front() else {
                    break;
                };
                if self.head_left == 0 {
                    self.head_left = front.len().saturating_sub(ETH_HEADER_BYTES).max(1);
                }
                let take = budget.min(self.head_left);
                self.head_left -= take;
                budget -= take;
                if self.head_left == 0
                    && let Some(frame) = self.frames.pop_front()
                {
                    self.queued_bytes -= frame.len() as u64;
                    deliver(frame);
                }
            }
            self.advance();
        }
    }

    /// When the next frame can leave, if any is queued.
    fn next_departure(&self) -> Option<Instant> {
        (!self.frames.is_empty()).then(|| self.opportunity_at())
    }
}

/// What one receive returned.
enum Recv {
    /// A frame of this length (may exceed the buffer: then it was cut).
    Frame(usize),
    /// A frame to ignore (our own outgoing one).
    Skip,
    /// Nothing waiting.
    Empty,
}

/// A raw `AF_PACKET` socket bound to one interface, all protocols.
#[derive(Debug)]
struct PacketSocket {
    fd: OwnedFd,
}

impl PacketSocket {
    /// Opens and binds a socket on `ifname` (in the calling thread's namespace).
    fn open(ifname: &str) -> io::Result<Self> {
        let name =
            CString::new(ifname).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: `name` is a valid C string for the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::last_os_error());
        }
        // Protocol 0: no frame is queued before the bind below picks the interface.
        // SAFETY: plain socket(2) call; the fd is owned right after.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a freshly opened fd nobody else owns.
        let sock = Self {
            fd: unsafe { OwnedFd::from_raw_fd(raw) },
        };
        // Older kernels lack the option; the packet-type check in `recv` still filters.
        let _ = sock.set_int(libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1);
        sock.set_int(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, SOCKET_BUFFER_BYTES)?;
        sock.set_int(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, SOCKET_BUFFER_BYTES)?;
        // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        addr.sll_ifindex = ifindex as i32;
        // SAFETY: `addr` is a valid sockaddr_ll and the length passed is its size.
        let rc = unsafe {
            libc::bind(
                sock.fd.as_raw_fd(),
                (&raw const addr).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(sock)
    }

    fn set_int(&self, level: libc::c_int, opt: libc::c_int, value: libc::c_int) -> io::Result<()> {
        // SAFETY: the option value points at a c_int of the size passed.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                level,
                opt,
                (&raw const value).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Waits until a frame is ready or `timeout` passes (a signal ends the wait early).
    fn wait_readable(&self, timeout: Duration) -> io::Result<()> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: libc::c_long::from(timeout.subsec_nanos()),
        };
        // SAFETY: one valid pollfd, a valid timespec, no signal mask.
        let rc = unsafe { libc::ppoll(&raw mut pfd, 1, &raw const ts, std::ptr::null()) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Receives one frame into `buf` without blocking.
    fn recv(&self, buf: &mut [u8]) -> io::Result<Recv> {
        // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut from_len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: `buf` is writable for its length; `from` and `from_len` are valid and
        // writable with the size passed.
        let n = unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                (&raw mut from).cast(),
                &raw mut from_len,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => Ok(Recv::Empty),
                io::ErrorKind::Interrupted => Ok(Recv::Skip),
                _ => Err(e),
            };
        }
        if from.sll_pkttype == PACKET_OUTGOING {
            return Ok(Recv::Skip);
        }
        Ok(Recv::Frame(n as usize))
    }

    /// Sends one frame out of the bound interface.
    fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: `frame` is readable for its length.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

/// `EtherType` of IPv4 and IPv6.
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
/// IP protocol number of TCP.
const IPPROTO_TCP: u8 = 6;
/// Fixed IPv6 header.
const IPV6_HEADER_BYTES: usize = 40;

/// Whether an Ethernet frame holds a TCP segment with at least one byte of payload (IPv4, or
/// IPv6 with TCP as the first next header). Anything shorter than its headers claim, or not
/// TCP, is not.
fn carries_tcp_data(frame: &[u8]) -> bool {
    let u16_at = |i: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*frame.get(i)?, *frame.get(i + 1)?]))
    };
    let ip = ETH_HEADER_BYTES;
    let Some(ethertype) = u16_at(12) else {
        return false;
    };
    // (TCP header offset, bytes from the TCP header to the IP packet's end)
    let (tcp, tcp_and_payload) = match ethertype {
        ETHERTYPE_IPV4 => {
            let (Some(&vihl), Some(&proto), Some(total)) =
                (frame.get(ip), frame.get(ip + 9), u16_at(ip + 2))
            else {
                return false;
            };
            let ihl = usize::from(vihl & 0x0f) * 4;
            if vihl >> 4 != 4 || proto != IPPROTO_TCP || ihl < 20 {
                return false;
            }
            (ip + ihl, usize::from(total).saturating_sub(ihl))
        }
        ETHERTYPE_IPV6 => {
            let (Some(&next), Some(len)) = (frame.get(ip + 6), u16_at(ip + 4)) else {
                return false;
            };
            if next != IPPROTO_TCP {
                return false;
            }
            (ip + IPV6_HEADER_BYTES, usize::from(len))
        }
        _ => return false,
    };
    let Some(&off) = frame.get(tcp + 12) else {
        return false;
    };
    let header = usize::from(off >> 4) * 4;
    header >= 20 && tcp_and_payload > header
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet frame with an IPv4 (`v6`: IPv6) TCP segment of `payload` bytes and a
    /// TCP header of `tcp_header` bytes.
    fn tcp_frame(v6: bool, tcp_header: usize, payload: usize) -> Vec<u8> {
        let ip_header = if v6 { IPV6_HEADER_BYTES } else { 20 };
        let mut f = vec![0u8; ETH_HEADER_BYTES + ip_header + tcp_header + payload];
        let ip = ETH_HEADER_BYTES;
        if v6 {
            f[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
            f[ip] = 0x60;
            f[ip + 4..ip + 6].copy_from_slice(&((tcp_header + payload) as u16).to_be_bytes());
            f[ip + 6] = IPPROTO_TCP;
        } else {
            f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
            f[ip] = 0x45;
            let total = (ip_header + tcp_header + payload) as u16;
            f[ip + 2..ip + 4].copy_from_slice(&total.to_be_bytes());
            f[ip + 9] = IPPROTO_TCP;
        }
        f[ip + ip_header + 12] = ((tcp_header / 4) as u8) << 4;
        f
    }

    #[test]
    fn random_loss_applies_to_data_segments_only() {
        for v6 in [false, true] {
            assert!(carries_tcp_data(&tcp_frame(v6, 20, 1448)), "v6={v6}");
            assert!(carries_tcp_data(&tcp_frame(v6, 32, 1)), "v6={v6}");
            // SYN (options, no payload) and a pure ACK with timestamps.
            assert!(!carries_tcp_data(&tcp_frame(v6, 40, 0)), "v6={v6}");
            assert!(!carries_tcp_data(&tcp_frame(v6, 32, 0)), "v6={v6}");
        }
        // Ethernet padding of a short frame is not payload: the IP length decides.
        let mut padded = tcp_frame(false, 20, 0);
        padded.resize(60, 0);
        assert!(!carries_tcp_data(&padded));
        // Not TCP: UDP, ARP, truncated frames.
        let mut udp = tcp_frame(false, 20, 100);
        udp[ETH_HEADER_BYTES + 9] = 17;
        assert!(!carries_tcp_data(&udp));
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert!(!carries_tcp_data(&arp));
        let data = tcp_frame(false, 20, 100);
        for cut in [0, 13, 20, 40, 45] {
            assert!(!carries_tcp_data(&data[..cut]), "cut at {cut}");
        }
        // A bogus IPv4 header length is refused, not misread.
        let mut bad = tcp_frame(false, 20, 100);
        bad[ETH_HEADER_BYTES] = 0x41;
        assert!(!carries_tcp_data(&bad));
    }

    fn frame(ip_bytes: usize) -> Vec<u8> {
        vec![0; ETH_HEADER_BYTES + ip_bytes]
    }

    fn one_per_ms() -> Arc<Trace> {
        let text = (1..=10)
            .map(|ms: u32| ms.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        Arc::new(Trace::parse("t", &text).unwrap())
    }

    #[test]
    fn trace_queue_sends_one_full_packet_per_opportunity() {
        let t0 = Instant::now();
        let mut q = TraceQueue::new(one_per_ms(), 100_000, t0);
        for _ in 0..5 {
            assert!(q.push(frame(1500), t0));
        }
        let mut out = 0;
        q.serve(t0 + Duration::from_micros(3_500), |_| out += 1);
        assert_eq!(out, 3, "opportunities at 1, 2 and 3 ms");
        assert_eq!(q.next_departure(), Some(t0 + Duration::from_millis(4)));
        q.serve(t0 + Duration::from_millis(20), |_| out += 1);
        assert_eq!(out, 5);
        assert_eq!(q.next_departure(), None);
    }

    #[test]
    fn trace_queue_uses_every_repeated_timestamp() {
        // mahimahi writes a millisecond once per packet it can carry: "1 1 1 2" carries three
        // full-size packets at 1 ms and one at 2 ms.
        let t0 = Instant::now();
        let t = Arc::new(Trace::parse("t", "1\n1\n1\n2\n").unwrap());
        let mut q = TraceQueue::new(t, 100_000, t0);
        for _ in 0..4 {
            assert!(q.push(frame(1500), t0));
        }
        let mut out = 0;
        q.serve(t0 + Duration::from_millis(1), |_| out += 1);
        assert_eq!(out, 3);
        q.serve(t0 + Duration::from_millis(2), |_| out += 1);
        assert_eq!(out, 4);
    }

    #[test]
    fn trace_queue_packs_small_packets_and_drops_at_the_limit() {
        let t0 = Instant::now();
        let mut q = TraceQueue::new(one_per_ms(), 3 * (ETH_HEADER_BYTES as u64 + 500), t0);
        for _ in 0..3 {
            assert!(q.push(frame(500), t0));
        }
        assert!(!q.push(frame(500), t0), "buffer full");
        let mut out = 0;
        q.serve(t0 + Duration::from_millis(1), |_| out += 1);
        assert_eq!(out, 3, "3 x 500 bytes fit in one 1504-byte opportunity");
    }

    #[test]
    fn a_restarted_trace_queue_keeps_its_frames_and_counts_from_the_new_epoch() {
        let t0 = Instant::now();
        let mut q = TraceQueue::new(one_per_ms(), 100_000, t0);
        let later = t0 + Duration::from_millis(250);
        assert!(q.push(frame(1500), later));
        assert_eq!(q.next_departure(), Some(later));
        q.restart(later + Duration::from_micros(300));
        // Opportunity 0 of the trace is at 1 ms from its time zero.
        assert_eq!(
            q.next_departure(),
            Some(later + Duration::from_micros(1_300))
        );
    }

    #[test]
    fn trace_queue_wastes_idle_opportunities_and_wraps() {
        let t0 = Instant::now();
        let mut q = TraceQueue::new(one_per_ms(), 100_000, t0);
        let late = t0 + Duration::from_micros(12_500);
        assert!(q.push(frame(1500), late));
        assert_eq!(q.next_departure(), Some(t0 + Duration::from_millis(13)));
        let mut out = 0;
        q.serve(t0 + Duration::from_millis(13), |_| out += 1);
        assert_eq!(out, 1);
    }
}
