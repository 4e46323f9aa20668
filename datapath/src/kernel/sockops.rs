//! Per-connection congestion control and initial window from a sockops program on a cgroup v2
//! (`DESIGN.md` §3.6; the BPF side is `bpf/sockops.bpf.c`).
//!
//! [`SockOps::attach`] loads the program and attaches it to a cgroup through a BPF link, so it
//! detaches when the [`SockOps`] is dropped or the process dies. Every TCP connection whose
//! socket belongs to the cgroup (a socket belongs to the cgroup of the process that created
//! it; an accepted socket to its listener's) then gets, in its ESTABLISHED callback, before the
//! first data segment:
//! - the congestion control the policy names for its service port ([`SockOps::set_cca_policy`];
//!   port 0 is the default for every other port; no entry leaves the system default). The
//!   service port is the remote port of a connection this side opened and the local port of an
//!   accepted one.
//! - the initial window (`TCP_BPF_IW`, packets) of the longest IPv4 prefix of the peer's address
//!   in the table user space publishes ([`SockOps::publish_iw`]); no match leaves the kernel's
//!   default IW (10, or the route's `initcwnd`).
//!
//! The table takes plain inclusive address ranges (what an IW controller such as `iw-controller`
//! learns per range) and stores the smallest set of CIDR prefixes covering each
//! ([`ipv4_range_to_cidrs`]).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{ErrorKind as IoErrorKind, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, Object, ObjectBuilder};

use super::KernelError;

/// The compiled sockops object (see `build.rs`).
static SOCKOPS_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sockops.bpf.o"));

/// The largest initial window [`SockOps::publish_iw`] writes, packets; larger ones are clamped.
pub const MAX_IW_PKTS: u32 = 1000;
/// Prefixes the IW table holds (the LPM trie's `max_entries`).
pub const IW_TABLE_CAPACITY: usize = 65_536;
/// Ports the CCA policy holds (the hash map's `max_entries`).
pub const CCA_POLICY_CAPACITY: usize = 256;
/// Longest CCA name the kernel accepts, bytes (`TCP_CA_NAME_MAX` less the NUL).
pub const CCA_NAME_MAX: usize = 15;

/// Counters kept by the sockops program.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SockOpsStats {
    /// Connections seen (active and passive ESTABLISHED callbacks).
    pub connections: u64,
    /// Connections whose congestion control the policy set.
    pub cca_set: u64,
    /// Connections whose policy named a CCA the kernel refused (e.g. `ccp` not registered):
    /// they keep the system default.
    pub cca_failed: u64,
    /// Connections whose initial window the table set.
    pub iw_set: u64,
    /// Connections for which the kernel refused `TCP_BPF_IW`.
    pub iw_failed: u64,
    /// IPv4 connections with no table entry (kernel default IW).
    pub iw_miss: u64,
    /// Connections to a peer that is not IPv4 (no IW lookup).
    pub not_ipv4: u64,
}

/// The sockops program attached to a cgroup. Detaches (and removes a cgroup it created) on
/// drop.
pub struct SockOps {
    // Field order is drop order: the link goes before the cgroup is emptied and removed.
    link: Option<Link>,
    policy: MapHandle,
    iw: MapHandle,
    counters: MapHandle,
    prog_id: u32,
    cgroup: Cgroup,
    _obj: Object,
}

impl std::fmt::Debug for SockOps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SockOps")
            .field("cgroup", &self.cgroup.path)
            .field("owned", &self.cgroup.owned)
            .field("attached", &self.link.is_some())
            .finish_non_exhaustive()
    }
}

impl SockOps {
    /// Creates the cgroup `cgroup` (a path relative to the cgroup v2 mount, e.g. `ccp-iw`, or
    /// an absolute path inside it) and attaches the program to it. A cgroup left at that path
    /// by a run that crashed is emptied (its processes moved to the parent) and removed first,
    /// so the path must not belong to anything else. The cgroup is emptied and removed on drop.
    pub fn attach(cgroup: impl AsRef<Path>) -> Result<Self, KernelError> {
        let path = resolve(cgroup.as_ref())?;
        if path == cgroup2_mount()? {
            return Err(KernelError::Invalid(
                "the cgroup v2 root cannot be created or removed: use SockOps::attach_existing"
                    .into(),
            ));
        }
        if path.exists() {
            remove_cgroup(&path)?;
        }
        fs::create_dir(&path).map_err(KernelError::cgroup("creating", &path))?;
        let cg = Cgroup::open(path, true)?;
        Self::load_and_attach(cg)
    }

    /// Attaches the program to an existing cgroup (e.g. the cgroup v2 root, for every socket
    /// on the machine), which is left in place on drop.
    pub fn attach_existing(cgroup: impl AsRef<Path>) -> Result<Self, KernelError> {
        let path = resolve(cgroup.as_ref())?;
        let cg = Cgroup::open(path, false)?;
        Self::load_and_attach(cg)
    }

    fn load_and_attach(cgroup: Cgroup) -> Result<Self, KernelError> {
        let open = ObjectBuilder::default()
            .open_memory(SOCKOPS_OBJECT)
            .map_err(KernelError::bpf("opening the sockops BPF object"))?;
        let obj = open.load().map_err(KernelError::bpf(
            "loading the sockops BPF object (verifier)",
        ))?;
        let policy = super::map_handle(&obj, "cca_policy")?;
        let iw = super::map_handle(&obj, "iw_table")?;
        let counters = super::map_handle(&obj, "sockops_counters")?;
        let (link, prog_id) = {
            let prog = obj
                .progs_mut()
                .find(|p| p.name() == "ccp_sockops")
                .ok_or(KernelError::MissingMap("ccp_sockops"))?;
            let id = libbpf_rs::Program::id_from_fd(std::os::fd::AsFd::as_fd(&prog))
                .map_err(KernelError::bpf("reading the sockops program id"))?;
            let link = prog
                .attach_cgroup(cgroup.dir.as_raw_fd())
                .map_err(KernelError::bpf("attaching sockops to the cgroup"))?;
            (link, id)
        };
        Ok(Self {
            link: Some(link),
            policy,
            iw,
            counters,
            prog_id,
            cgroup,
            _obj: obj,
        })
    }

    /// The cgroup the program is attached to.
    pub fn cgroup_path(&self) -> &Path {
        &self.cgroup.path
    }

    /// The kernel's id of the loaded program (for `bpftool prog show id`).
    pub fn prog_id(&self) -> u32 {
        self.prog_id
    }

    /// Moves process `pid` (all its threads) into the cgroup: sockets it creates from now on
    /// get the policy and IW table. Sockets it created before keep their cgroup.
    pub fn add_process(&self, pid: u32) -> Result<(), KernelError> {
        write_pid(&self.cgroup.path, pid)
    }

    /// Connections on service `port` (0: every port without its own entry) get congestion
    /// control `name` (e.g. `ccp`, `cubic`, `reno`, `bbr`). A name the kernel does not know
    /// when a connection starts leaves that connection on the system default (counted in
    /// [`SockOpsStats::cca_failed`]).
    pub fn set_cca_policy(&mut self, port: u16, name: &str) -> Result<(), KernelError> {
        if name.is_empty() || name.len() > CCA_NAME_MAX || name.contains('\0') {
            return Err(KernelError::Invalid(format!(
                "congestion control name {name:?}: 1 to {CCA_NAME_MAX} bytes, no NUL"
            )));
        }
        let mut value = [0u8; CCA_NAME_MAX + 1];
        value[..name.len()].copy_from_slice(name.as_bytes());
        self.policy
            .update(&u32::from(port).to_ne_bytes(), &value, MapFlags::ANY)
            .map_err(KernelError::bpf("writing the CCA policy"))
    }

    /// Removes the policy entry of `port` (0: the default).
    pub fn clear_cca_policy(&mut self, port: u16) -> Result<(), KernelError> {
        match self.policy.delete(&u32::from(port).to_ne_bytes()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(KernelError::bpf("deleting a CCA policy entry")(e)),
        }
    }

    /// Replaces the IW table with `ranges`: `(first address, last address (inclusive), IW in
    /// packets)`, addresses as host-order `u32` (`u32::from(Ipv4Addr)`). Each IW is clamped to
    /// `[1, MAX_IW_PKTS]`. Each range becomes its minimal set of CIDR prefixes; where ranges
    /// overlap, the longest prefix wins, and of identical prefixes the later range. New entries
    /// are written first, then stale ones deleted, so a connection starting meanwhile sees the
    /// old or the new IW of its prefix, never no entry when both tables have one. Returns the
    /// number of prefixes written.
    pub fn publish_iw(&mut self, ranges: &[(u32, u32, u32)]) -> Result<usize, KernelError> {
        let mut table: BTreeMap<(u8, u32), u32> = BTreeMap::new();
        for &(start, end, iw_pkts) in ranges {
            if start > end {
                return Err(KernelError::Invalid(format!(
                    "IW range {start:#010x}..={end:#010x} is empty"
                )));
            }
            let iw = iw_pkts.clamp(1, MAX_IW_PKTS);
            for (addr, len) in ipv4_range_to_cidrs(start, end) {
                table.insert((len, addr), iw);
            }
        }
        if table.len() > IW_TABLE_CAPACITY {
            return Err(KernelError::Invalid(format!(
                "IW table of {} prefixes exceeds {IW_TABLE_CAPACITY}",
                table.len()
            )));
        }
        for (&(len, addr), &iw) in &table {
            self.iw
                .update(&lpm_key(len, addr), &iw.to_ne_bytes(), MapFlags::ANY)
                .map_err(KernelError::bpf("writing the IW table"))?;
        }
        let stale: Vec<Vec<u8>> = self
            .iw
            .keys()
            .filter(|k| {
                parse_lpm_key(k).is_none_or(|(len, addr)| !table.contains_key(&(len, addr)))
            })
            .collect();
        for key in stale {
            match self.iw.delete(&key) {
                Ok(()) => {}
                Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => {}
                Err(e) => return Err(KernelError::bpf("deleting a stale IW prefix")(e)),
            }
        }
        Ok(table.len())
    }

    /// The IW table as it is in the kernel: `(network address, prefix length, IW packets)`,
    /// sorted.
    pub fn iw_table(&self) -> Result<Vec<(u32, u8, u32)>, KernelError> {
        let mut out = Vec::new();
        for key in self.iw.keys() {
            let Some((len, addr)) = parse_lpm_key(&key) else {
                continue;
            };
            let v = self
                .iw
                .lookup(&key, MapFlags::ANY)
                .map_err(KernelError::bpf("reading the IW table"))?;
            if let Some(iw) = v.and_then(|b| b.get(..4).and_then(|s| s.try_into().ok())) {
                out.push((addr, len, u32::from_ne_bytes(iw)));
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// The program's counters.
    pub fn stats(&self) -> Result<SockOpsStats, KernelError> {
        let read = |i: u32| -> Result<u64, KernelError> {
            let v = self
                .counters
                .lookup(&i.to_ne_bytes(), MapFlags::ANY)
                .map_err(KernelError::bpf("reading sockops counters"))?;
            Ok(v.and_then(|b| b.get(..8).and_then(|s| s.try_into().ok()))
                .map_or(0, u64::from_ne_bytes))
        };
        Ok(SockOpsStats {
            connections: read(0)?,
            cca_set: read(1)?,
            cca_failed: read(2)?,
            iw_set: read(3)?,
            iw_failed: read(4)?,
            iw_miss: read(5)?,
            not_ipv4: read(6)?,
        })
    }

    /// The kernel's run statistics of the program: `(runs, total run time ns)`. Both stay 0
    /// unless statistics are on (`sysctl kernel.bpf_stats_enabled=1`), which costs every BPF
    /// program on the machine a clock read per run.
    pub fn run_stats(&self) -> (u64, u64) {
        libbpf_rs::query::ProgInfoIter::default()
            .find(|p| p.id == self.prog_id)
            .map_or((0, 0), |p| (p.run_cnt, p.run_time_ns))
    }

    /// Detaches the program now; dropping does the same (and removes a cgroup we created).
    pub fn detach(&mut self) {
        self.link = None;
    }
}

/// The smallest set of CIDR blocks `(network address, prefix length)` whose union is exactly
/// the inclusive range `start..=end` (host-order IPv4), in address order; empty when
/// `start > end`. At most 62 blocks (`0.0.0.1..=255.255.255.254`).
pub fn ipv4_range_to_cidrs(start: u32, end: u32) -> Vec<(u32, u8)> {
    let mut out = Vec::new();
    let (mut lo, hi) = (u64::from(start), u64::from(end));
    while lo <= hi {
        // The largest block aligned at `lo` (2^32 at 0) that does not pass `hi`.
        let mut size: u64 = if lo == 0 {
            1 << 32
        } else {
            1 << lo.trailing_zeros()
        };
        while lo + size - 1 > hi {
            size >>= 1;
        }
        out.push((lo as u32, (32 - size.trailing_zeros()) as u8));
        lo += size;
    }
    out
}

/// An LPM trie key: prefix length (host order) then the address (network order).
fn lpm_key(len: u8, addr: u32) -> [u8; 8] {
    let mut k = [0u8; 8];
    k[..4].copy_from_slice(&u32::from(len).to_ne_bytes());
    k[4..].copy_from_slice(&addr.to_be_bytes());
    k
}

fn parse_lpm_key(key: &[u8]) -> Option<(u8, u32)> {
    let len = u32::from_ne_bytes(key.get(..4)?.try_into().ok()?);
    let addr = u32::from_be_bytes(key.get(4..8)?.try_into().ok()?);
    Some((u8::try_from(len).ok().filter(|&l| l <= 32)?, addr))
}

/// A cgroup v2 directory, open (the fd the link attaches to).
struct Cgroup {
    path: PathBuf,
    dir: File,
    /// Created by us: emptied and removed on drop.
    owned: bool,
}

impl Cgroup {
    fn open(path: PathBuf, owned: bool) -> Result<Self, KernelError> {
        match File::open(&path) {
            Ok(dir) => Ok(Self { path, dir, owned }),
            Err(e) => {
                if owned {
                    let _ = fs::remove_dir(&path);
                }
                Err(KernelError::cgroup("opening", &path)(e))
            }
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if self.owned
            && let Err(e) = remove_cgroup(&self.path)
        {
            tracing::warn!("leaving cgroup behind: {e}");
        }
    }
}

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup` on a pure v2 system,
/// `/sys/fs/cgroup/unified` on a hybrid one).
pub fn cgroup2_mount() -> Result<PathBuf, KernelError> {
    let mounts = fs::read_to_string("/proc/self/mounts").map_err(KernelError::cgroup(
        "reading",
        Path::new("/proc/self/mounts"),
    ))?;
    mounts
        .lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            let (_, dir, fstype) = (f.next()?, f.next()?, f.next()?);
            (fstype == "cgroup2").then(|| PathBuf::from(dir))
        })
        .ok_or(KernelError::NoCgroup2)
}

fn resolve(cgroup: &Path) -> Result<PathBuf, KernelError> {
    let root = cgroup2_mount()?;
    let path = if cgroup.is_absolute() {
        cgroup.to_path_buf()
    } else {
        root.join(cgroup)
    };
    if !path.starts_with(&root) || path.components().any(|c| c.as_os_str() == "..") {
        return Err(KernelError::Invalid(format!(
            "{} is not inside the cgroup v2 hierarchy at {}",
            path.display(),
            root.display()
        )));
    }
    Ok(path)
}

fn write_pid(cgroup: &Path, pid: u32) -> Result<(), KernelError> {
    let procs = cgroup.join("cgroup.procs");
    fs::OpenOptions::new()
        .write(true)
        .open(&procs)
        .and_then(|mut f| f.write_all(pid.to_string().as_bytes()))
        .map_err(KernelError::cgroup("writing a pid to", &procs))
}

/// Moves every process of `cgroup` to its parent and removes it (retrying briefly while the
/// kernel finishes exiting tasks). Child cgroups are not handled: removal then fails.
fn remove_cgroup(cgroup: &Path) -> Result<(), KernelError> {
    let parent = cgroup.parent().unwrap_or(cgroup);
    let mut last = None;
    for _ in 0..50 {
        let procs = cgroup.join("cgroup.procs");
        if let Ok(list) = fs::read_to_string(&procs) {
            for pid in list.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
                // A process may exit meanwhile (ESRCH): nothing to move then.
                let _ = write_pid(parent, pid);
            }
        }
        match fs::remove_dir(cgroup) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == IoErrorKind::NotFound => return Ok(()),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(KernelError::cgroup("removing", cgroup)(
        last.unwrap_or_else(|| std::io::Error::other("cgroup still busy")),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covered(blocks: &[(u32, u8)]) -> Vec<(u64, u64)> {
        blocks
            .iter()
            .map(|&(a, l)| {
                let size = 1u64 << (32 - u32::from(l));
                assert_eq!(u64::from(a) % size, 0, "block {a:#x}/{l} not aligned");
                (u64::from(a), u64::from(a) + size - 1)
            })
            .collect()
    }

    /// The blocks tile `start..=end` exactly, in order, and no two neighbours could merge
    /// (greedy largest-aligned-block is minimal).
    fn check(start: u32, end: u32) -> Vec<(u32, u8)> {
        let blocks = ipv4_range_to_cidrs(start, end);
        let spans = covered(&blocks);
        assert_eq!(spans.first().map(|s| s.0), Some(u64::from(start)));
        assert_eq!(spans.last().map(|s| s.1), Some(u64::from(end)));
        for w in spans.windows(2) {
            assert_eq!(w[0].1 + 1, w[1].0, "gap or overlap in {blocks:?}");
        }
        for w in blocks.windows(2) {
            let ((a, la), (_, lb)) = (w[0], w[1]);
            let merged = la > 0 && la == lb && (u64::from(a) % (1u64 << (33 - u32::from(la)))) == 0;
            assert!(!merged, "{blocks:?} not minimal");
        }
        blocks
    }

    #[test]
    fn whole_space_is_one_prefix() {
        assert_eq!(check(0, u32::MAX), vec![(0, 0)]);
    }

    #[test]
    fn single_addresses_and_aligned_blocks() {
        assert_eq!(check(0x7f00_0001, 0x7f00_0001), vec![(0x7f00_0001, 32)]);
        assert_eq!(check(0x7f00_0000, 0x7fff_ffff), vec![(0x7f00_0000, 8)]);
        assert_eq!(check(0x0a00_0000, 0x0a00_00ff), vec![(0x0a00_0000, 24)]);
        assert_eq!(check(u32::MAX, u32::MAX), vec![(u32::MAX, 32)]);
        assert_eq!(check(0, 0), vec![(0, 32)]);
    }

    #[test]
    fn unaligned_ranges() {
        // 10.0.0.1 - 10.0.0.6: .1/32, .2/31, .4/31, .6/32.
        assert_eq!(
            check(0x0a00_0001, 0x0a00_0006),
            vec![
                (0x0a00_0001, 32),
                (0x0a00_0002, 31),
                (0x0a00_0004, 31),
                (0x0a00_0006, 32)
            ]
        );
        // 192.168.0.0 - 192.168.2.255: a /23 then a /24.
        assert_eq!(
            check(0xc0a8_0000, 0xc0a8_02ff),
            vec![(0xc0a8_0000, 23), (0xc0a8_0200, 24)]
        );
        assert_eq!(check(1, u32::MAX - 1).len(), 62);
        assert_eq!(check(1, u32::MAX).len(), 32);
        assert_eq!(check(0, u32::MAX - 1).len(), 32);
    }

    #[test]
    fn empty_when_reversed() {
        assert!(ipv4_range_to_cidrs(5, 4).is_empty());
    }

    #[test]
    fn many_ranges_tile() {
        // A deterministic spread of ranges, including ones touching both ends of the space.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let a = x as u32;
            let b = (x >> 32) as u32;
            check(a.min(b), a.max(b));
            check(a, a.saturating_add(x as u32 & 0xffff));
        }
    }

    #[test]
    fn lpm_key_round_trips() {
        let k = lpm_key(24, 0x0a01_0200);
        assert_eq!(&k[4..], &[10, 1, 2, 0]);
        assert_eq!(parse_lpm_key(&k), Some((24, 0x0a01_0200)));
    }
}
