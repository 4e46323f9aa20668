//! The kernel datapath without a kernel module: a BPF `tcp_congestion_ops` named `ccp`
//! (`DESIGN.md` §3.6), its loader, and a bridge to the CCP runtime so a portus agent drives
//! real kernel TCP flows.
//!
//! # What runs where
//! - **In the kernel** (`bpf/ccp.bpf.c`, compiled by `build.rs` with clang against the running
//!   kernel's BTF and embedded here): `init` gives each socket that selects `ccp` (with
//!   `setsockopt(TCP_CONGESTION, "ccp")`) a flow id, kept in its CA private area, and emits an
//!   [`RecordKind::Init`] record. On every ACK (`cong_control`) it emits a [`Record`] into a
//!   ring buffer: acked bytes and packets, SACKed packets, newly lost packets, RTT sample,
//!   delivery and send rate, bytes and packets in flight, cwnd, ssthresh, pacing rate, CA state
//!   (timeout / recovery), `now` (ns), the 4-tuple. `release` emits [`RecordKind::Release`].
//! - **Control**: user space writes `(cwnd_bytes, rate_bytes_per_sec, updated_ns)` per flow into
//!   a hash map ([`KernelDatapath::set_control`]); the next ACK applies it: `snd_cwnd =
//!   cwnd_bytes / mss` (at least 2, at most the clamp), and for a non-zero rate
//!   `sk_pacing_rate = rate` with `sk_pacing_status = SK_PACING_NEEDED` (TCP then paces
//!   internally, no fq qdisc needed).
//! - **Fallback in the kernel**: when a flow has no control entry, or its entry is older than
//!   500 ms of `bpf_ktime_get_ns()` (or sets no cwnd), the program runs Reno itself (slow start
//!   below ssthresh, +1 MSS per window above it, down to ssthresh in fast recovery; ssthresh
//!   halves the window; undo restores `prior_cwnd`) and stops pacing at user space's stale
//!   rate. A flow never stalls because user space is slow, dead or absent.
//! - **In user space**: [`KernelDatapath`] registers `ccp` through a `struct_ops` *link* (the
//!   algorithm unregisters when the link is dropped or the process dies), reads records in
//!   batches and writes controls. [`KernelBridge`] turns each record into an
//!   [`invoke`](crate::runtime::Datapath::invoke) on the flow's runtime connection (created on
//!   the flow's first record) and writes the resulting cwnd/rate back while the agent is in
//!   control; when the runtime falls back, it deletes the entry so the in-kernel Reno takes
//!   over at once. `Ack.bytes_misordered` / `Ack.packets_misordered` are the packets *newly*
//!   SACKed: the increase of `tp->sacked_out` since the flow's previous record, as ccp-kernel
//!   computes them and as the simulator reports them (until 2026-11-28 the bridge passed the
//!   level `sacked_out` itself, so a program summing them over a report counted every SACKed
//!   packet once per ACK while its hole stayed open: Copa, Vivace, LP-TCP, RL-TCP and the
//!   selectors' delivery features over-counted delivered bytes on the kernel during loss
//!   recovery).
//!
//! - **Per connection, on a cgroup** ([`SockOps`], `bpf/sockops.bpf.c`): a sockops program
//!   attached to a cgroup v2 sets, in each new TCP connection's ESTABLISHED callback (before the
//!   first data segment), the initial window (`TCP_BPF_IW`) from an LPM table of remote IPv4
//!   prefixes that user space publishes as plain address ranges, and the congestion control
//!   (`TCP_CONGESTION`: `ccp`, `cubic`, `reno`, `bbr`, ...) by a per-port policy. A socket can
//!   still opt in to `ccp` itself with `setsockopt(TCP_CONGESTION)`.
//!
//! Needs root (or `CAP_BPF` + `CAP_NET_ADMIN`), a kernel with BTF and BPF `struct_ops`
//! congestion control (and cgroup v2 for [`SockOps`]); [`KernelError::is_unavailable`] tells a
//! caller to skip.
//!
//! - **As a process**: `ccp-agent`'s `ccp-kernel-datapath` binary runs a [`KernelBridge`] over
//!   unix sockets to `ccp-agent`; `ccp-eval run --datapath kernel` runs one in-process with a
//!   channel agent over the [`testbed`].
//!
//! # Not done
//! - IPv6 prefixes in the IW table (IPv4-mapped peers are covered). (`ccp-agent`'s
//!   `iw.kernel_cgroup`, feature `kernel`, publishes its IW table through [`SockOps`]; the API
//!   takes plain ranges so this crate does not depend on `iw-controller`.)
//! - One algorithm per bridge: every flow asks the agent for the same name (or the agent's
//!   default); per-socket choice goes through the selector.

mod bridge;
pub mod record;
pub mod sockops;
pub mod tcp;
pub mod testbed;

use std::cell::RefCell;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use libbpf_rs::{
    ErrorKind, Link, MapCore, MapFlags, MapHandle, Object, ObjectBuilder, RingBuffer,
    RingBufferBuilder,
};
use thiserror::Error;

pub use bridge::{BridgeStats, KernelBridge};
pub use record::{Record, RecordKind};
pub use sockops::{SockOps, SockOpsStats, ipv4_range_to_cidrs};

/// Name the congestion control registers under (`TCP_CONGESTION`).
pub const CCA_NAME: &str = "ccp";
/// User-space silence after which the BPF program runs its own Reno, ns.
pub const FALLBACK_TIMEOUT_NS: u64 = 500_000_000;

/// The compiled BPF object (see `build.rs`).
static BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ccp.bpf.o"));

/// Errors from loading or talking to the BPF program.
#[derive(Debug, Error)]
pub enum KernelError {
    /// A libbpf step failed.
    #[error("{step}: {source}")]
    Bpf {
        /// What was being done.
        step: &'static str,
        /// libbpf's error.
        source: libbpf_rs::Error,
    },
    /// The embedded object lacks a map or the `struct_ops` the loader expects.
    #[error("BPF object has no map `{0}`")]
    MissingMap(&'static str),
    /// A cgroup file operation failed ([`SockOps`]).
    #[error("{step} {}: {source}", path.display())]
    Cgroup {
        /// What was being done.
        step: &'static str,
        /// The cgroup file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// No cgroup v2 hierarchy is mounted (needed by [`SockOps`]).
    #[error("no cgroup2 filesystem is mounted (/proc/self/mounts)")]
    NoCgroup2,
    /// An argument the kernel would refuse (a CCA name too long, an empty range, ...).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// Another process has registered the congestion control `ccp` (a `ccp-eval --datapath
    /// kernel` run or a `ccp-agent` on the kernel datapath): one holds it at a time.
    #[error(
        "the congestion control `{CCA_NAME}` is already registered \
         (net.ipv4.tcp_available_congestion_control lists it): another process holds the \
         kernel datapath (a `ccp-eval --datapath kernel` run or a `ccp-agent` on it); one at \
         a time"
    )]
    InUse,
}

impl KernelError {
    fn bpf(step: &'static str) -> impl FnOnce(libbpf_rs::Error) -> Self {
        move |source| Self::Bpf { step, source }
    }

    fn cgroup(step: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| Self::Cgroup { step, path, source }
    }

    /// The kernel's verifier refused a program: a bug in the BPF source (or a kernel too old
    /// for it), not a missing permission, even though the kernel reports it as `EACCES`.
    pub fn is_verifier_rejection(&self) -> bool {
        matches!(self, Self::Bpf { step, .. } if step.contains("(verifier)"))
    }

    /// The machine does not let us load BPF `struct_ops` or attach sockops (not root, no
    /// `CAP_BPF`, the kernel lacks the support, no cgroup v2): callers should skip rather than
    /// fail.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Bpf { source, .. } => {
                matches!(
                    source.kind(),
                    ErrorKind::PermissionDenied | ErrorKind::Unsupported
                ) || {
                    let msg = source.to_string();
                    [
                        "EPERM",
                        "EACCES",
                        "ENOTSUP",
                        "EOPNOTSUPP",
                        "ENOSYS",
                        "errno 524",
                    ]
                    .iter()
                    .any(|m| msg.contains(m))
                }
            }
            Self::Cgroup { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
            ),
            Self::NoCgroup2 => true,
            Self::MissingMap(_) | Self::Invalid(_) | Self::InUse => false,
        }
    }
}

/// Counters kept by the BPF program.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Records lost because the ring buffer was full.
    pub records_dropped: u64,
    /// ACKs whose window came from user space.
    pub user_acks: u64,
    /// ACKs handled by the in-BPF fallback rule.
    pub fallback_acks: u64,
}

/// Whether the kernel lists a congestion control named `name` as available (false when the
/// list cannot be read).
fn registered(name: &str) -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .is_ok_and(|list| list.split_whitespace().any(|n| n == name))
}

/// The loaded `ccp` congestion control: records in, controls out. Unregisters on drop.
pub struct KernelDatapath {
    // Field order is drop order: the ring buffer and handles go before the link and object.
    ring: RingBuffer<'static>,
    decoded: Rc<RefCell<Vec<Record>>>,
    controls: MapHandle,
    counters: MapHandle,
    _records_map: MapHandle,
    link: Option<Link>,
    _obj: Object,
}

impl std::fmt::Debug for KernelDatapath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelDatapath")
            .field("registered", &self.link.is_some())
            .finish_non_exhaustive()
    }
}

impl KernelDatapath {
    /// Loads the BPF program and registers `ccp` (`struct_ops` link). Fails if another
    /// process already registered a congestion control named `ccp`.
    pub fn load() -> Result<Self, KernelError> {
        let open = ObjectBuilder::default()
            .open_memory(BPF_OBJECT)
            .map_err(KernelError::bpf("opening the BPF object"))?;
        let mut obj = open
            .load()
            .map_err(KernelError::bpf("loading the BPF object (verifier)"))?;
        let controls = map_handle(&obj, "controls")?;
        let counters = map_handle(&obj, "counters")?;
        let records_map = map_handle(&obj, "records")?;
        let link = {
            let mut ops = obj
                .maps_mut()
                .find(|m| m.name() == "ccp_ops")
                .ok_or(KernelError::MissingMap("ccp_ops"))?;
            ops.attach_struct_ops().map_err(|e| {
                if registered(CCA_NAME) {
                    KernelError::InUse
                } else {
                    KernelError::bpf("registering tcp_congestion_ops `ccp`")(e)
                }
            })?
        };
        let decoded = Rc::new(RefCell::new(Vec::with_capacity(4096)));
        let sink = Rc::clone(&decoded);
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&records_map, move |bytes: &[u8]| {
                if let Some(r) = Record::decode(bytes) {
                    sink.borrow_mut().push(r);
                }
                0
            })
            .map_err(KernelError::bpf("adding the ring buffer"))?;
        let ring = builder
            .build()
            .map_err(KernelError::bpf("mapping the ring buffer"))?;
        Ok(Self {
            ring,
            decoded,
            controls,
            counters,
            _records_map: records_map,
            link: Some(link),
            _obj: obj,
        })
    }

    /// Hands every record already in the ring buffer to `f`, in order; returns how many.
    pub fn poll_records(&mut self, f: impl FnMut(Record)) -> Result<usize, KernelError> {
        self.ring
            .consume()
            .map_err(KernelError::bpf("reading the ring buffer"))?;
        Ok(self.drain(f))
    }

    /// Like [`poll_records`](Self::poll_records), but first waits up to `timeout` for a
    /// record if there is none.
    pub fn wait_records(
        &mut self,
        timeout: Duration,
        f: impl FnMut(Record),
    ) -> Result<usize, KernelError> {
        match self.ring.poll(timeout) {
            // A signal cut the wait short: hand over what is there.
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            r => r.map_err(KernelError::bpf("waiting on the ring buffer"))?,
        }
        Ok(self.drain(f))
    }

    /// Like [`wait_records`](Self::wait_records), but also wakes when `other` (e.g. the agent's
    /// socket) becomes readable, so a caller can answer either without a polling delay.
    pub fn wait_records_or(
        &mut self,
        other: RawFd,
        timeout: Duration,
        f: impl FnMut(Record),
    ) -> Result<usize, KernelError> {
        let mut fds = [
            libc::pollfd {
                fd: self.ring.epoll_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: other,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ms = libc::c_int::try_from(timeout.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: `fds` is a valid array of two pollfd structs that outlives the call.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(KernelError::Bpf {
                    step: "waiting on the ring buffer and the agent",
                    source: libbpf_rs::Error::from(e),
                });
            }
        }
        self.poll_records(f)
    }

    fn drain(&mut self, f: impl FnMut(Record)) -> usize {
        let batch = std::mem::take(&mut *self.decoded.borrow_mut());
        let n = batch.len();
        batch.into_iter().for_each(f);
        n
    }

    /// Sets the window (bytes; 0 leaves it to the fallback rule) and pacing rate (bytes/s; 0
    /// for none) of `flow_id`, applied from its next ACK. It must be refreshed within
    /// [`FALLBACK_TIMEOUT_NS`] or the in-kernel fallback takes the flow back.
    pub fn set_control(
        &mut self,
        flow_id: u32,
        cwnd_bytes: u32,
        rate_bytes_per_sec: u64,
    ) -> Result<(), KernelError> {
        let value = record::encode_control(cwnd_bytes, rate_bytes_per_sec, monotonic_ns());
        self.controls
            .update(&flow_id.to_ne_bytes(), &value, MapFlags::ANY)
            .map_err(KernelError::bpf("writing a flow's control"))
    }

    /// Drops user space's control of `flow_id`: the in-kernel fallback runs from the next ACK.
    pub fn clear_control(&mut self, flow_id: u32) -> Result<(), KernelError> {
        match self.controls.delete(&flow_id.to_ne_bytes()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(KernelError::bpf("deleting a flow's control")(e)),
        }
    }

    /// The BPF program's counters.
    pub fn stats(&self) -> Result<KernelStats, KernelError> {
        let read = |i: u32| -> Result<u64, KernelError> {
            let v = self
                .counters
                .lookup(&i.to_ne_bytes(), MapFlags::ANY)
                .map_err(KernelError::bpf("reading counters"))?;
            Ok(
                v.and_then(|b| b.get(..8).map(|s| s.try_into().map(u64::from_ne_bytes)))
                    .and_then(Result::ok)
                    .unwrap_or(0),
            )
        };
        Ok(KernelStats {
            records_dropped: read(0)?,
            user_acks: read(1)?,
            fallback_acks: read(2)?,
        })
    }

    /// Unregisters `ccp` now (sockets still using it keep it until they close). Dropping the
    /// datapath does the same.
    pub fn unregister(&mut self) {
        self.link = None;
    }
}

/// `CLOCK_MONOTONIC` in ns, the clock of `bpf_ktime_get_ns()`.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// A handle on the map `name` of a loaded object (an fd of its own, so it outlives the object).
pub(crate) fn map_handle(obj: &Object, name: &'static str) -> Result<MapHandle, KernelError> {
    let map = obj
        .maps()
        .find(|m| m.name() == name)
        .ok_or(KernelError::MissingMap(name))?;
    MapHandle::try_from(&map).map_err(KernelError::bpf("duplicating a map fd"))
}
