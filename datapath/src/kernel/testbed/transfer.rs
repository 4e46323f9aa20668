//! Our own traffic: bulk TCP flows from the sender namespace to sinks in the receiver
//! namespace, with per-flow measurements.
//!
//! Each flow is three threads: a sender (entered into the sender namespace with `setns`
//! before it creates its socket), a sampler reading the sender's `TCP_INFO` every 10 ms, and
//! a sink reading as fast as it can (its listener is created inside the receiver namespace,
//! and accepted connections stay there). A timed flow ends with a reset (`SO_LINGER` 0), so
//! nothing queued in the socket after its end reaches the receiver; a byte-count flow sends
//! its bytes, closes its side and waits for the receiver to close.

use std::io::{self, Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::netns::NetNs;
use super::{RECEIVER_ADDR, TestbedError};
use crate::kernel::tcp;
use crate::stats::percentile;

/// How often the sender's `TCP_INFO` is sampled.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(10);
/// Spacing of [`FlowResult::series`] points.
pub const SERIES_INTERVAL: Duration = Duration::from_millis(100);
/// Default give-up time of a byte-count flow, from its start.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_mins(1);

/// Bytes per `write` of a sender.
const WRITE_CHUNK_BYTES: usize = 64 << 10;
/// Bytes per `read` of a sink.
const READ_CHUNK_BYTES: usize = 256 << 10;
/// Socket timeouts of the loops, so they notice deadlines and stops.
const IO_TIMEOUT: Duration = Duration::from_millis(50);
/// A sink gives up this long after its flow should have ended.
const SINK_GRACE: Duration = Duration::from_secs(5);
/// A connect gives up after this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest start offset, duration or timeout a flow may have (a typo guard that also keeps
/// every deadline representable).
pub const MAX_FLOW_TIME: Duration = Duration::from_hours(24);
/// Longest congestion control name the kernel accepts, without the NUL (`TCP_CA_NAME_MAX`).
const CA_NAME_MAX_BYTES: usize = 15;

/// Called with the sender's socket after its congestion control is set and before
/// `connect`, to set more socket options (an error fails the flow).
pub type SocketHook = Arc<dyn Fn(BorrowedFd<'_>) -> io::Result<()> + Send + Sync>;

/// How much a flow sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    /// As much as it can, for this long after the connection is established.
    For(Duration),
    /// This many bytes (the flow ends when the receiver has them all).
    Bytes(u64),
}

/// One bulk TCP flow.
#[derive(Clone)]
pub struct FlowSpec {
    /// Congestion control (`TCP_CONGESTION`): `cubic`, `reno`, `bbr`, `ccp`, ...
    pub cca: String,
    /// When the flow starts, from the start of the run.
    pub start: Duration,
    /// How much it sends.
    pub amount: Amount,
    /// A byte-count flow gives up this long after it starts ([`DEFAULT_TIMEOUT`]).
    pub timeout: Duration,
    /// Extra socket options, applied before `connect`.
    pub hook: Option<SocketHook>,
}

impl std::fmt::Debug for FlowSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowSpec")
            .field("cca", &self.cca)
            .field("start", &self.start)
            .field("amount", &self.amount)
            .field("timeout", &self.timeout)
            .field("hook", &self.hook.is_some())
            .finish()
    }
}

impl FlowSpec {
    /// A flow with congestion control `cca` sending `amount`, starting with the run.
    pub fn new(cca: impl Into<String>, amount: Amount) -> Self {
        Self {
            cca: cca.into(),
            start: Duration::ZERO,
            amount,
            timeout: DEFAULT_TIMEOUT,
            hook: None,
        }
    }

    /// A flow sending for `duration`.
    pub fn timed(cca: impl Into<String>, duration: Duration) -> Self {
        Self::new(cca, Amount::For(duration))
    }

    /// A flow sending `bytes`.
    pub fn bytes(cca: impl Into<String>, bytes: u64) -> Self {
        Self::new(cca, Amount::Bytes(bytes))
    }

    /// Starts the flow `offset` after the run starts.
    #[must_use]
    pub fn starting_at(mut self, offset: Duration) -> Self {
        self.start = offset;
        self
    }

    /// Sets the give-up time of a byte-count flow.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets a hook run on the socket before `connect`.
    #[must_use]
    pub fn with_hook(
        mut self,
        hook: impl Fn(BorrowedFd<'_>) -> io::Result<()> + Send + Sync + 'static,
    ) -> Self {
        self.hook = Some(Arc::new(hook));
        self
    }

    fn validate(&self, index: usize) -> Result<(), TestbedError> {
        let field = "flow";
        if self.cca.is_empty() || self.cca.len() > CA_NAME_MAX_BYTES || self.cca.contains('\0') {
            return Err(TestbedError::invalid(
                field,
                format!(
                    "{index}: congestion control name {:?} must be 1 to {CA_NAME_MAX_BYTES} bytes",
                    self.cca
                ),
            ));
        }
        let empty = match self.amount {
            Amount::For(d) => d.is_zero(),
            Amount::Bytes(n) => n == 0 || self.timeout.is_zero(),
        };
        if empty {
            return Err(TestbedError::invalid(
                field,
                format!(
                    "{index}: sends nothing ({:?}, timeout {:?})",
                    self.amount, self.timeout
                ),
            ));
        }
        let length = match self.amount {
            Amount::For(d) => d,
            Amount::Bytes(_) => Duration::ZERO,
        };
        if [self.start, self.timeout, length]
            .iter()
            .any(|&t| t > MAX_FLOW_TIME)
        {
            return Err(TestbedError::invalid(
                field,
                format!(
                    "{index}: start {:?}, length {length:?} and timeout {:?} must each be at most \
                     {MAX_FLOW_TIME:?}",
                    self.start, self.timeout
                ),
            ));
        }
        Ok(())
    }

    /// When the flow should be over at the latest, from the run start.
    fn end_bound(&self) -> Duration {
        self.start
            + match self.amount {
                Amount::For(d) => d + CONNECT_TIMEOUT,
                Amount::Bytes(_) => self.timeout,
            }
    }
}

/// One `TCP_INFO` sample of a sender.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InfoSample {
    /// When, from the start of the run.
    pub at: Duration,
    /// Smoothed RTT, µs.
    pub srtt_us: u32,
    /// RTT variation, µs.
    pub rttvar_us: u32,
    /// Minimum RTT seen, µs (0 before the first sample).
    pub min_rtt_us: u32,
    /// Congestion window, segments.
    pub cwnd_pkts: u32,
    /// Slow-start threshold, segments (`u32::MAX` while infinite).
    pub ssthresh_pkts: u32,
    /// Sender MSS, bytes.
    pub mss_bytes: u32,
    /// Segments in flight (sent, not yet acknowledged).
    pub unacked_pkts: u32,
    /// The kernel's latest delivery-rate sample, bytes/s.
    pub delivery_rate_bytes_per_sec: u64,
    /// Pacing rate, bytes/s.
    pub pacing_rate_bytes_per_sec: u64,
    /// Bytes acknowledged so far (cumulatively: in order at the receiver).
    pub bytes_acked: u64,
    /// Segments delivered so far, SACKed ones included (`tcpi_delivered`).
    pub delivered_pkts: u32,
    /// Segments received so far (`tcpi_segs_in`): for a sender, the ACKs, and the handshake's
    /// SYN-ACK.
    pub segs_in: u32,
    /// Segments retransmitted so far.
    pub total_retrans_segs: u32,
    /// Data segments sent so far, retransmissions included.
    pub data_segs_out: u32,
    /// Congestion-avoidance state (`TCP_CA_Open` 0 ... `TCP_CA_Loss` 4).
    pub ca_state: u8,
    /// Retransmission timeouts so far, the kernel's own count ([`tcp::total_rto`]; `None` on a
    /// kernel before 6.7).
    pub total_rto: Option<u16>,
}

/// `TCP_CA_Loss`: the state a retransmission timeout puts a socket in.
const TCP_CA_LOSS: u8 = 4;

/// How often `samples` show the socket entering the Loss state (a retransmission timeout):
/// RTOs that recur within one stay in it, and stays shorter than a sample, are not seen.
pub fn loss_state_entries(samples: &[InfoSample]) -> usize {
    samples
        .windows(2)
        .filter(|w| w[1].ca_state == TCP_CA_LOSS && w[0].ca_state != TCP_CA_LOSS)
        .count()
}

impl InfoSample {
    fn from_info(info: &libc::tcp_info, filled: usize, at: Duration) -> Self {
        Self {
            at,
            srtt_us: info.tcpi_rtt,
            rttvar_us: info.tcpi_rttvar,
            min_rtt_us: if info.tcpi_min_rtt == u32::MAX {
                0
            } else {
                info.tcpi_min_rtt
            },
            cwnd_pkts: info.tcpi_snd_cwnd,
            ssthresh_pkts: info.tcpi_snd_ssthresh,
            mss_bytes: info.tcpi_snd_mss,
            unacked_pkts: info.tcpi_unacked,
            delivery_rate_bytes_per_sec: info.tcpi_delivery_rate,
            pacing_rate_bytes_per_sec: info.tcpi_pacing_rate,
            bytes_acked: info.tcpi_bytes_acked,
            delivered_pkts: info.tcpi_delivered,
            segs_in: info.tcpi_segs_in,
            total_retrans_segs: info.tcpi_total_retrans,
            data_segs_out: info.tcpi_data_segs_out,
            ca_state: info.tcpi_ca_state,
            total_rto: tcp::total_rto(info, filled),
        }
    }

    /// Congestion window in bytes.
    pub fn cwnd_bytes(&self) -> u64 {
        u64::from(self.cwnd_pkts) * u64::from(self.mss_bytes)
    }
}

/// One point of a flow's time series ([`SERIES_INTERVAL`] apart).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SeriesPoint {
    /// When, from the start of the run.
    pub at: Duration,
    /// Congestion window, bytes.
    pub cwnd_bytes: u64,
    /// Smoothed RTT, µs.
    pub srtt_us: u32,
    /// Data delivered since the previous point (segments acknowledged or SACKed, at the
    /// current MSS), bits per second.
    pub throughput_bps: f64,
}

/// What one flow did.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowResult {
    /// Position in the run's flow list.
    pub index: usize,
    /// Congestion control the socket ran (read back after `connect`).
    pub cca: String,
    /// The sender's port (the flow is `SENDER_ADDR:local_port -> RECEIVER_ADDR:remote_port`).
    pub local_port: u16,
    /// The sink's port.
    pub remote_port: u16,
    /// When `connect` was called, from the start of the run.
    pub started_at: Duration,
    /// Handshake time.
    pub connect_time: Duration,
    /// From the end of the handshake to the last byte at the receiver.
    pub active: Duration,
    /// Bytes handed to the socket.
    pub bytes_sent: u64,
    /// Bytes the receiver read.
    pub bytes_received: u64,
    /// A timed flow ran its full time; a byte-count flow delivered every byte.
    pub completed: bool,
    /// `bytes_received` over `active`, bits per second.
    pub goodput_bps: f64,
    /// Median of the smoothed-RTT samples, µs (0 without samples).
    pub srtt_p50_us: u32,
    /// 95th percentile of the smoothed-RTT samples, µs.
    pub srtt_p95_us: u32,
    /// The kernel's minimum RTT at the end, µs.
    pub min_rtt_us: u32,
    /// Segments retransmitted.
    pub retrans_segs: u64,
    /// Data segments sent, retransmissions included.
    pub data_segs_out: u64,
    /// `retrans_segs / data_segs_out`.
    pub loss: f64,
    /// The raw `TCP_INFO` samples, every [`SAMPLE_INTERVAL`].
    pub samples: Vec<InfoSample>,
    /// cwnd, RTT and throughput every [`SERIES_INTERVAL`].
    pub series: Vec<SeriesPoint>,
}

impl FlowResult {
    /// Goodput (bytes cumulatively acknowledged, bits per second) between two run times, from
    /// the samples at or before them; `None` if the flow has no samples spanning the interval.
    /// Over short intervals a loss recovery that ends inside the interval counts bytes SACKed
    /// before it: prefer intervals of many RTTs, or [`FlowResult::series`].
    pub fn goodput_between(&self, from: Duration, to: Duration) -> Option<f64> {
        let a = self
            .samples
            .iter()
            .rev()
            .find(|s| s.at <= from)
            .or_else(|| self.samples.first())?;
        let b = self.samples.iter().rev().find(|s| s.at <= to)?;
        let dt = b.at.checked_sub(a.at)?.as_secs_f64();
        (dt > 0.0).then(|| b.bytes_acked.saturating_sub(a.bytes_acked) as f64 * 8.0 / dt)
    }
}

/// Flows in progress; [`Run::wait`] collects them. Dropping a `Run` leaves its threads to end
/// by themselves (at the flows' ends or timeouts).
#[derive(Debug)]
pub struct Run {
    started: Instant,
    flows: Vec<FlowThreads>,
}

#[derive(Debug)]
struct FlowThreads {
    sender: JoinHandle<Result<SenderOutcome, TestbedError>>,
    sink: JoinHandle<Result<SinkOutcome, TestbedError>>,
    remote_port: u16,
}

impl Run {
    /// When the run started (flow offsets count from here).
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Waits for every flow to end; the results are in the order the flows were given. The
    /// first error of any flow fails the run.
    pub fn wait(self) -> Result<Vec<FlowResult>, TestbedError> {
        let mut results = Vec::with_capacity(self.flows.len());
        let mut first_error = None;
        for (index, flow) in self.flows.into_iter().enumerate() {
            let sender = join(flow.sender, index, "sender");
            let sink = join(flow.sink, index, "sink");
            match (sender, sink) {
                (Ok(s), Ok(r)) => {
                    results.push(summarize(index, s, &r, flow.remote_port, self.started));
                }
                (Err(e), _) | (_, Err(e)) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(results),
        }
    }
}

fn join<T>(
    thread: JoinHandle<Result<T, TestbedError>>,
    index: usize,
    what: &str,
) -> Result<T, TestbedError> {
    thread
        .join()
        .map_err(|_| TestbedError::ThreadPanicked(format!("flow {index} {what}")))?
}

/// Shared by a flow's sender and sink.
#[derive(Debug, Default)]
struct FlowSync {
    /// The sender is done (finished or failed): a silent sink may stop.
    sender_done: AtomicBool,
}

/// Creates the sinks, then starts every flow's sender at its offset.
pub(crate) fn start(
    sender_ns: &NetNs,
    receiver_ns: &NetNs,
    flows: &[FlowSpec],
) -> Result<Run, TestbedError> {
    for (i, f) in flows.iter().enumerate() {
        f.validate(i)?;
    }
    let listeners = receiver_ns
        .run(|| {
            flows
                .iter()
                .map(|_| TcpListener::bind(SocketAddrV4::new(RECEIVER_ADDR, 0)))
                .collect::<io::Result<Vec<_>>>()
        })?
        .map_err(TestbedError::os("listening", receiver_ns.name()))?;
    let started = Instant::now();
    let mut run = Run {
        started,
        flows: Vec::with_capacity(flows.len()),
    };
    for (index, (spec, listener)) in flows.iter().zip(listeners).enumerate() {
        let remote_port = listener
            .local_addr()
            .map_err(TestbedError::os(
                "reading a sink's port",
                format!("flow {index}"),
            ))?
            .port();
        let sync = Arc::new(FlowSync::default());
        let sink_deadline = started + spec.end_bound() + SINK_GRACE;
        let sink = {
            let sync = Arc::clone(&sync);
            std::thread::Builder::new()
                .name(format!("flow {index} sink"))
                .spawn(move || sink(listener, &sync, sink_deadline, index))
                .map_err(TestbedError::os("spawning a sink", format!("flow {index}")))?
        };
        let dest = SocketAddrV4::new(RECEIVER_ADDR, remote_port);
        let spawned = {
            let (spec, sync) = (spec.clone(), Arc::clone(&sync));
            sender_ns.spawn(format!("flow {index} sender"), move || {
                let r = send(index, &spec, dest, started);
                sync.sender_done.store(true, Ordering::Release);
                r
            })
        };
        let sender = match spawned {
            Ok(t) => t,
            Err(e) => {
                sync.sender_done.store(true, Ordering::Release);
                return Err(e);
            }
        };
        run.flows.push(FlowThreads {
            sender,
            sink,
            remote_port,
        });
    }
    Ok(run)
}

/// What a sender saw.
#[derive(Debug)]
struct SenderOutcome {
    cca: String,
    local_port: u16,
    connect_start: Instant,
    connected: Instant,
    bytes_sent: u64,
    completed: bool,
    samples: Vec<InfoSample>,
}

/// What a sink saw.
#[derive(Debug, Default)]
struct SinkOutcome {
    bytes: u64,
    last_byte: Option<Instant>,
}

fn send(
    index: usize,
    spec: &FlowSpec,
    dest: SocketAddrV4,
    started: Instant,
) -> Result<SenderOutcome, TestbedError> {
    let target = || format!("flow {index} ({})", spec.cca);
    std::thread::sleep((started + spec.start).saturating_duration_since(Instant::now()));
    let connect_start = Instant::now();
    let fd = tcp_socket().map_err(TestbedError::os("creating a socket", target()))?;
    tcp::set_congestion_control(&fd, &spec.cca).map_err(TestbedError::os(
        "selecting the congestion control",
        target(),
    ))?;
    if let Some(hook) = &spec.hook {
        hook(fd.as_fd()).map_err(TestbedError::os("running the socket hook", target()))?;
    }
    let stream = TcpStream::from(fd);
    stream
        .set_write_timeout(Some(CONNECT_TIMEOUT))
        .map_err(TestbedError::os("setting a socket timeout", target()))?;
    connect(&stream, dest).map_err(TestbedError::os("connecting", target()))?;
    let connected = Instant::now();
    let cca = tcp::congestion_control(&stream)
        .map_err(TestbedError::os("reading the congestion control", target()))?;
    let local_port = stream
        .local_addr()
        .map_err(TestbedError::os("reading the local port", target()))?
        .port();
    for set in [TcpStream::set_write_timeout, TcpStream::set_read_timeout] {
        set(&stream, Some(IO_TIMEOUT))
            .map_err(TestbedError::os("setting a socket timeout", target()))?;
    }
    let probe = stream
        .try_clone()
        .map_err(TestbedError::os("duplicating the socket", target()))?;
    let sampler = Sampler::start(probe, started, index)?;
    let (deadline, limit) = match spec.amount {
        Amount::For(d) => (connected + d, u64::MAX),
        Amount::Bytes(n) => (connect_start + spec.timeout, n),
    };
    let bytes_sent =
        write_until(&stream, deadline, limit).map_err(TestbedError::os("sending", target()))?;
    let completed = match spec.amount {
        Amount::For(_) => Instant::now() >= deadline,
        Amount::Bytes(n) => {
            bytes_sent == n
                && wait_for_close(&stream, deadline)
                    .map_err(TestbedError::os("waiting for the receiver", target()))?
        }
    };
    let samples = sampler.finish();
    if !completed || matches!(spec.amount, Amount::For(_)) {
        reset_on_close(&stream).map_err(TestbedError::os("setting SO_LINGER", target()))?;
    }
    drop(stream);
    Ok(SenderOutcome {
        cca,
        local_port,
        connect_start,
        connected,
        bytes_sent,
        completed,
        samples,
    })
}

/// Writes until `deadline` or `limit` bytes; returns the bytes written.
fn write_until(mut stream: &TcpStream, deadline: Instant, limit: u64) -> io::Result<u64> {
    let chunk = vec![0x5a_u8; WRITE_CHUNK_BYTES];
    let mut sent = 0u64;
    while sent < limit && Instant::now() < deadline {
        let want = usize::try_from(limit - sent).map_or(chunk.len(), |n| n.min(chunk.len()));
        match stream.write(chunk.get(..want).unwrap_or(&chunk)) {
            Ok(0) => break,
            Ok(n) => sent += n as u64,
            Err(e) if is_timeout(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

/// Closes our side and waits until the receiver closes its side (it has every byte), or
/// `deadline`; true if it did.
fn wait_for_close(mut stream: &TcpStream, deadline: Instant) -> io::Result<bool> {
    stream.shutdown(std::net::Shutdown::Write)?;
    let mut buf = [0u8; 512];
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(true),
            Ok(_) => {}
            Err(e) if is_timeout(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Accepts the flow's one connection and reads it to the end.
fn sink(
    listener: TcpListener,
    sync: &FlowSync,
    deadline: Instant,
    index: usize,
) -> Result<SinkOutcome, TestbedError> {
    let target = || format!("flow {index} sink");
    set_timeout(&listener, libc::SO_RCVTIMEO, IO_TIMEOUT)
        .map_err(TestbedError::os("setting the accept timeout", target()))?;
    let mut stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if is_timeout(&e) => {
                if sync.sender_done.load(Ordering::Acquire) || Instant::now() >= deadline {
                    return Ok(SinkOutcome::default());
                }
            }
            Err(e) => return Err(TestbedError::os("accepting", target())(e)),
        }
    };
    drop(listener);
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .map_err(TestbedError::os("setting a socket timeout", target()))?;
    let mut out = SinkOutcome::default();
    let mut buf = vec![0u8; READ_CHUNK_BYTES];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                out.bytes += n as u64;
                out.last_byte = Some(Instant::now());
            }
            Err(e) if is_timeout(&e) => {
                // Silence after the sender is done: its reset was lost, or it failed.
                if sync.sender_done.load(Ordering::Acquire) || Instant::now() >= deadline {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break,
            Err(e) => return Err(TestbedError::os("receiving", target())(e)),
        }
    }
    Ok(out)
}

/// Samples a socket's `TCP_INFO` every [`SAMPLE_INTERVAL`] on a thread of its own.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<InfoSample>>>,
}

impl Sampler {
    fn start(stream: TcpStream, started: Instant, index: usize) -> Result<Self, TestbedError> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(format!("flow {index} sampler"))
            .spawn(move || {
                let mut samples = Vec::new();
                let mut next = Instant::now();
                loop {
                    let now = Instant::now();
                    if let Ok((info, filled)) = tcp::info_filled(&stream) {
                        samples.push(InfoSample::from_info(
                            &info,
                            filled,
                            now.saturating_duration_since(started),
                        ));
                    }
                    if flag.load(Ordering::Acquire) {
                        break samples;
                    }
                    next += SAMPLE_INTERVAL;
                    if next <= now {
                        next = now + SAMPLE_INTERVAL;
                    }
                    std::thread::sleep(next.saturating_duration_since(now));
                }
            })
            .map_err(TestbedError::os(
                "spawning a sampler",
                format!("flow {index}"),
            ))?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }

    /// Takes a last sample, stops and returns every sample.
    fn finish(mut self) -> Vec<InfoSample> {
        self.stop.store(true, Ordering::Release);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Turns a sender's samples and its sink's counts into the flow's result.
fn summarize(
    index: usize,
    s: SenderOutcome,
    r: &SinkOutcome,
    remote_port: u16,
    started: Instant,
) -> FlowResult {
    let active = r
        .last_byte
        .map(|t| t.saturating_duration_since(s.connected))
        .unwrap_or_default();
    let goodput_bps = if active.is_zero() {
        0.0
    } else {
        r.bytes as f64 * 8.0 / active.as_secs_f64()
    };
    let mut srtt: Vec<u32> = s
        .samples
        .iter()
        .map(|x| x.srtt_us)
        .filter(|&v| v > 0)
        .collect();
    srtt.sort_unstable();
    let min_rtt_us = s
        .samples
        .iter()
        .map(|x| x.min_rtt_us)
        .filter(|&v| v > 0)
        .min()
        .unwrap_or(0);
    let (retrans_segs, data_segs_out) = s.samples.last().map_or((0, 0), |x| {
        (u64::from(x.total_retrans_segs), u64::from(x.data_segs_out))
    });
    let loss = if data_segs_out == 0 {
        0.0
    } else {
        retrans_segs as f64 / data_segs_out as f64
    };
    FlowResult {
        index,
        cca: s.cca,
        local_port: s.local_port,
        remote_port,
        started_at: s.connect_start.saturating_duration_since(started),
        connect_time: s.connected.saturating_duration_since(s.connect_start),
        active,
        bytes_sent: s.bytes_sent,
        bytes_received: r.bytes,
        completed: s.completed,
        goodput_bps,
        srtt_p50_us: percentile(&srtt, 500).unwrap_or_default(),
        srtt_p95_us: percentile(&srtt, 950).unwrap_or_default(),
        min_rtt_us,
        retrans_segs,
        data_segs_out,
        loss,
        series: series(&s.samples),
        samples: s.samples,
    }
}

/// One point per [`SERIES_INTERVAL`] (or the first sample after it).
fn series(samples: &[InfoSample]) -> Vec<SeriesPoint> {
    let mut points = Vec::new();
    let Some(mut prev) = samples.first() else {
        return points;
    };
    for s in samples {
        let dt = s.at.saturating_sub(prev.at);
        if dt >= SERIES_INTERVAL {
            points.push(SeriesPoint {
                at: s.at,
                cwnd_bytes: s.cwnd_bytes(),
                srtt_us: s.srtt_us,
                throughput_bps: f64::from(s.delivered_pkts.wrapping_sub(prev.delivered_pkts))
                    * f64::from(s.mss_bytes)
                    * 8.0
                    / dt.as_secs_f64(),
            });
            prev = s;
        }
    }
    points
}

/// A blocking IPv4 TCP socket (in the calling thread's namespace).
fn tcp_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the fd is owned right after.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a freshly opened fd nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// `connect(2)`, bounded by the socket's send timeout.
fn connect(stream: &TcpStream, dest: SocketAddrV4) -> io::Result<()> {
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: dest.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*dest.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: `addr` is a valid sockaddr_in and the length passed is its size.
    let rc = unsafe {
        libc::connect(
            stream.as_raw_fd(),
            (&raw const addr).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EINPROGRESS) {
        Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))
    } else {
        Err(e)
    }
}

/// `SO_LINGER` 0: closing sends a reset and discards unsent data.
fn reset_on_close(stream: &TcpStream) -> io::Result<()> {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    setsockopt(stream.as_fd(), libc::SO_LINGER, &linger)
}

/// `SO_RCVTIMEO` / `SO_SNDTIMEO` on any socket (a listener's accept obeys `SO_RCVTIMEO`).
fn set_timeout(socket: &impl AsFd, opt: libc::c_int, timeout: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: libc::suseconds_t::from(timeout.subsec_micros()),
    };
    setsockopt(socket.as_fd(), opt, &tv)
}

fn setsockopt<T>(fd: BorrowedFd<'_>, opt: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points at a `T` of the size passed, alive for the call.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            std::ptr::from_ref(value).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_ms: u64, delivered_pkts: u32, srtt_us: u32) -> InfoSample {
        InfoSample {
            at: Duration::from_millis(at_ms),
            delivered_pkts,
            bytes_acked: u64::from(delivered_pkts) * 1448,
            srtt_us,
            cwnd_pkts: 10,
            mss_bytes: 1448,
            ..InfoSample::default()
        }
    }

    #[test]
    fn series_has_a_point_per_interval_with_throughput() {
        let samples: Vec<_> = (0..=30)
            .map(|i| sample(i * 10, i as u32 * 10, 40_000))
            .collect();
        let s = series(&samples);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].at, Duration::from_millis(100));
        // Ten 1448-byte segments per 10 ms is 11.584 Mbit/s.
        assert!(
            (s[0].throughput_bps - 11.584e6).abs() < 1.0,
            "{}",
            s[0].throughput_bps
        );
        assert_eq!(s[0].cwnd_bytes, 14_480);
    }

    #[test]
    fn flow_specs_reject_nonsense() {
        assert!(
            FlowSpec::timed("cubic", Duration::ZERO)
                .validate(0)
                .is_err()
        );
        assert!(FlowSpec::bytes("", 10).validate(0).is_err());
        assert!(
            FlowSpec::bytes("a-name-far-too-long", 10)
                .validate(0)
                .is_err()
        );
        assert!(FlowSpec::bytes("bbr", 10).validate(0).is_ok());
        assert!(FlowSpec::timed("bbr", Duration::MAX).validate(0).is_err());
        let late = FlowSpec::bytes("bbr", 10).starting_at(Duration::MAX);
        assert!(late.validate(0).is_err());
    }
}
