//! Network namespaces and their plumbing: creating and deleting them (`ip netns`), running a
//! closure on a thread inside one (`setns(CLONE_NEWNET)`: namespace membership is per
//! thread), the veth pairs, addresses, sysctls and offloads of the testbed.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread::JoinHandle;

use super::TestbedError;

/// Where `ip netns` keeps its named namespaces (bind mounts of `/proc/<pid>/ns/net`).
const NETNS_DIR: &str = "/run/netns";

/// A named network namespace, deleted (with the interfaces in it) when dropped.
#[derive(Debug)]
pub(crate) struct NetNs {
    name: String,
    file: File,
}

impl NetNs {
    /// `ip netns add name`, and a handle on it.
    pub(crate) fn create(name: &str) -> Result<Self, TestbedError> {
        run_tool("ip", &["netns", "add", name])?;
        let path = Path::new(NETNS_DIR).join(name);
        match File::open(&path) {
            Ok(file) => Ok(Self {
                name: name.to_string(),
                file,
            }),
            Err(e) => {
                if let Err(d) = delete(name) {
                    tracing::warn!("deleting namespace {name} after a failed open: {d}");
                }
                Err(TestbedError::os(
                    "opening the namespace",
                    path.display().to_string(),
                )(e))
            }
        }
    }

    /// The namespace's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Runs `f` on a fresh thread inside the namespace and returns its value.
    pub(crate) fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T, TestbedError> {
        let fd = self.file.as_fd();
        let name = self.name.as_str();
        std::thread::scope(|s| {
            let thread = std::thread::Builder::new()
                .name(format!("netns {name}"))
                .spawn_scoped(s, move || -> Result<T, TestbedError> {
                    enter(fd, name)?;
                    Ok(f())
                })
                .map_err(TestbedError::os("spawning a thread", name))?;
            thread
                .join()
                .map_err(|_| TestbedError::ThreadPanicked(format!("netns {name}")))?
        })
    }

    /// Spawns a named thread that enters the namespace, then runs `f`.
    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        thread_name: String,
        f: impl FnOnce() -> Result<T, TestbedError> + Send + 'static,
    ) -> Result<JoinHandle<Result<T, TestbedError>>, TestbedError> {
        let file = self
            .file
            .try_clone()
            .map_err(TestbedError::os("duplicating the namespace fd", &self.name))?;
        let name = self.name.clone();
        std::thread::Builder::new()
            .name(thread_name)
            .spawn(move || {
                enter(file.as_fd(), &name)?;
                drop(file);
                f()
            })
            .map_err(TestbedError::os("spawning a thread", &self.name))
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        if let Err(e) = delete(&self.name) {
            tracing::warn!("deleting namespace {}: {e}", self.name);
        }
    }
}

/// Moves the calling thread into the network namespace `fd`.
fn enter(fd: BorrowedFd<'_>, name: &str) -> Result<(), TestbedError> {
    // SAFETY: setns takes an open namespace fd (borrowed for the call) and a flag; it changes
    // only this thread's network namespace.
    let rc = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc == 0 {
        Ok(())
    } else {
        Err(TestbedError::os("entering the namespace (setns)", name)(
            io::Error::last_os_error(),
        ))
    }
}

/// `ip netns del name`; a namespace already gone is not an error.
pub(crate) fn delete(name: &str) -> Result<(), TestbedError> {
    match run_tool("ip", &["netns", "del", name]) {
        Err(TestbedError::Command { stderr, .. }) if stderr.contains("No such file") => Ok(()),
        r => r.map(drop),
    }
}

/// Names of all named network namespaces.
pub(crate) fn list() -> Result<Vec<String>, TestbedError> {
    let dir = match std::fs::read_dir(NETNS_DIR) {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(TestbedError::os("listing namespaces", NETNS_DIR)(e)),
    };
    let mut names = Vec::new();
    for entry in dir {
        let entry = entry.map_err(TestbedError::os("listing namespaces", NETNS_DIR))?;
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_string());
        }
    }
    names.sort();
    Ok(names)
}

/// Whether a process with `pid` exists.
pub(crate) fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Runs an iproute2 tool and returns its stdout.
pub(crate) fn run_tool(tool: &'static str, args: &[&str]) -> Result<String, TestbedError> {
    let out = Command::new(tool_path(tool))
        .args(args)
        .output()
        .map_err(|source| {
            if source.kind() == io::ErrorKind::NotFound {
                TestbedError::ToolMissing { tool, source }
            } else {
                TestbedError::os("running", tool)(source)
            }
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(TestbedError::Command {
            command: format!("{tool} {}", args.join(" ")),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// `tool` in the usual system directories (root's `PATH` may lack `/usr/sbin`), else the bare
/// name for a `PATH` lookup.
fn tool_path(tool: &str) -> PathBuf {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(tool))
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(tool))
}

/// Names and addresses of the testbed's interfaces.
#[derive(Debug)]
pub(crate) struct Wiring<'a> {
    pub(crate) sender_if: &'a str,
    pub(crate) receiver_if: &'a str,
    pub(crate) router_sender_if: &'a str,
    pub(crate) router_receiver_if: &'a str,
    pub(crate) sender_mac: &'a str,
    pub(crate) receiver_mac: &'a str,
    pub(crate) sender_addr: Ipv4Addr,
    pub(crate) receiver_addr: Ipv4Addr,
    pub(crate) prefix_len: u8,
    pub(crate) socket_buffer_max_bytes: u64,
}

/// Creates the two veth pairs, sets addresses, static neighbours, sysctls and offloads, and
/// brings everything up.
pub(crate) fn wire(
    sender: &NetNs,
    router: &NetNs,
    receiver: &NetNs,
    w: &Wiring<'_>,
) -> Result<(), TestbedError> {
    let (s, r, v) = (sender.name(), router.name(), receiver.name());
    // Each end is created directly in its namespace, so concurrent testbeds never collide on
    // interface names in the root namespace.
    for (ns, ifname, mac, peer) in [
        (s, w.sender_if, w.sender_mac, w.router_sender_if),
        (v, w.receiver_if, w.receiver_mac, w.router_receiver_if),
    ] {
        run_tool(
            "ip",
            &[
                "link", "add", ifname, "address", mac, "netns", ns, "type", "veth", "peer", "name",
                peer, "netns", r,
            ],
        )?;
    }
    let wmem = format!("4096 16384 {}", w.socket_buffer_max_bytes);
    let rmem = format!("4096 131072 {}", w.socket_buffer_max_bytes);
    let host_sysctls = [
        ("net.ipv4.tcp_no_metrics_save", "1"),
        ("net.ipv4.tcp_rmem", rmem.as_str()),
        ("net.ipv4.tcp_wmem", wmem.as_str()),
    ];
    for (ns, ifs, sysctls) in [
        (sender, &[w.sender_if][..], &host_sysctls[..]),
        (
            router,
            &[w.router_sender_if, w.router_receiver_if][..],
            &[][..],
        ),
        (receiver, &[w.receiver_if][..], &host_sysctls[..]),
    ] {
        ns.run(|| -> Result<(), TestbedError> {
            disable_ipv6()?;
            for (key, value) in sysctls {
                write_sysctl(key, value)?;
            }
            for ifname in ifs {
                disable_offloads(ifname)
                    .map_err(TestbedError::os("disabling offloads", *ifname))?;
            }
            Ok(())
        })??;
    }
    let (saddr, raddr) = (
        format!("{}/{}", w.sender_addr, w.prefix_len),
        format!("{}/{}", w.receiver_addr, w.prefix_len),
    );
    run_tool("ip", &["-n", s, "addr", "add", &saddr, "dev", w.sender_if])?;
    run_tool(
        "ip",
        &["-n", v, "addr", "add", &raddr, "dev", w.receiver_if],
    )?;
    for (ns, ifname) in [
        (s, "lo"),
        (s, w.sender_if),
        (r, "lo"),
        (r, w.router_sender_if),
        (r, w.router_receiver_if),
        (v, "lo"),
        (v, w.receiver_if),
    ] {
        run_tool("ip", &["-n", ns, "link", "set", ifname, "up"])?;
    }
    // Static neighbours: no ARP exchange has to cross the relay before the first SYN.
    let (sa, ra) = (w.sender_addr.to_string(), w.receiver_addr.to_string());
    for (ns, addr, mac, ifname) in [
        (s, ra.as_str(), w.receiver_mac, w.sender_if),
        (v, sa.as_str(), w.sender_mac, w.receiver_if),
    ] {
        run_tool(
            "ip",
            &[
                "-n",
                ns,
                "neigh",
                "replace",
                addr,
                "lladdr",
                mac,
                "dev",
                ifname,
                "nud",
                "permanent",
            ],
        )?;
    }
    Ok(())
}

/// Writes `/proc/sys/<key with dots as slashes>`; `/proc/sys/net` is the calling thread's
/// network namespace.
fn write_sysctl(key: &str, value: &str) -> Result<(), TestbedError> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::write(&path, value).map_err(TestbedError::os("writing sysctl", path))
}

/// No IPv6 on the testbed: no router solicitations or DAD frames cross the relay.
fn disable_ipv6() -> Result<(), TestbedError> {
    if !Path::new("/proc/sys/net/ipv6").exists() {
        return Ok(());
    }
    write_sysctl("net.ipv6.conf.all.disable_ipv6", "1")?;
    write_sysctl("net.ipv6.conf.default.disable_ipv6", "1")
}

// Legacy ethtool commands (linux/ethtool.h): each takes a `struct ethtool_value`.
const ETHTOOL_GFLAGS: u32 = 0x25;
const ETHTOOL_SFLAGS: u32 = 0x26;
const ETHTOOL_STXCSUM: u32 = 0x17;
const ETHTOOL_SSG: u32 = 0x19;
const ETHTOOL_STSO: u32 = 0x1f;
const ETHTOOL_SGSO: u32 = 0x24;
const ETHTOOL_SGRO: u32 = 0x2c;
const ETH_FLAG_LRO: u32 = 1 << 15;

/// `struct ethtool_value`.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// `struct ifreq` with its union used as `ifr_data` (padded to the kernel's 40 bytes).
#[repr(C)]
struct IfReqData {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// Turns off checksum offload, scatter-gather, TSO, GSO, GRO and LRO on `ifname` (in the
/// calling thread's namespace), so the relay sees MTU-sized frames with correct checksums.
/// A feature the device cannot change (`EOPNOTSUPP`) is left as is.
pub(crate) fn disable_offloads(ifname: &str) -> io::Result<()> {
    // SAFETY: plain socket(2) call; the fd is owned right after.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a freshly opened fd nobody else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let name = CString::new(ifname).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let ignore_unsupported = |r: io::Result<u32>| match r {
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(()),
        r => r.map(drop),
    };
    for cmd in [
        ETHTOOL_STXCSUM,
        ETHTOOL_SSG,
        ETHTOOL_STSO,
        ETHTOOL_SGSO,
        ETHTOOL_SGRO,
    ] {
        ignore_unsupported(ethtool(&sock, &name, cmd, 0))?;
    }
    let flags = ethtool(&sock, &name, ETHTOOL_GFLAGS, 0)?;
    if flags & ETH_FLAG_LRO != 0 {
        ignore_unsupported(ethtool(&sock, &name, ETHTOOL_SFLAGS, flags & !ETH_FLAG_LRO))?;
    }
    Ok(())
}

/// One `SIOCETHTOOL` call with a `struct ethtool_value`; returns the value's data after it.
fn ethtool(sock: &OwnedFd, name: &CString, cmd: u32, data: u32) -> io::Result<u32> {
    let bytes = name.as_bytes_with_nul();
    if bytes.len() > libc::IFNAMSIZ {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let mut value = EthtoolValue { cmd, data };
    let mut req = IfReqData {
        name: [0; libc::IFNAMSIZ],
        data: (&raw mut value).cast(),
        _pad: [0; 16],
    };
    for (dst, &src) in req.name.iter_mut().zip(bytes) {
        *dst = src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq whose data points at `value`, both alive for the call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL, &raw mut req) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(value.data)
    }
}
