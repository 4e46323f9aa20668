//! `ccp-agent --ipc netlink` end to end against an emulated ccp-kernel: the datapath runtime
//! of this project plays the kernel module's part over a `NETLINK_USERSOCK` socket.
//!
//! How the emulation stands in for the kernel: ccp-kernel's netlink socket is the kernel's own
//! (port id 0), to which portus sends with no address. No user-space socket can hold port 0,
//! so the test takes a duplicate of the agent's netlink socket (`pidfd_getfd`, root or
//! `CAP_SYS_PTRACE`) and `connect`s it to the emulated kernel's port: the agent's sends without
//! an address then arrive there, byte for byte as they would at port 0. The emulated kernel
//! sends to the agent's port (its pid, as portus binds it), as ccp-kernel does. Every message
//! carries the 16-byte netlink header portus writes and strips.
//!
//! Checked: READY, CREATE, the agent's INSTALLs and its program changes, MEASUREs and the
//! agent's window updates all cross the netlink path (flows under the agent's control, their
//! windows grow), two flows with different algorithms; garbage on the netlink socket is
//! dropped by the guard and counted (totals at SIGTERM), and the agent exits 0.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::too_many_lines)]

use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use ccp_datapath::agent::demo_config;
use ccp_datapath::runtime::transport::{RecvError, SendError, Transport};
use ccp_datapath::runtime::{Datapath, MonotonicClock};
use common::runtime::open_flow_from;
use common::{Agent, fields};

const NETLINK_USERSOCK: libc::c_int = 2;
const NLMSG_HDRLEN: usize = 16;

fn sockaddr_nl(pid: u32) -> libc::sockaddr_nl {
    // SAFETY: sockaddr_nl is plain old data; all zeros is a valid value.
    let mut a: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    a.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    a.nl_pid = pid;
    a
}

/// The emulated ccp-kernel's netlink socket: a `NETLINK_USERSOCK` socket with its own port,
/// talking to the agent's port.
struct NetlinkKernel {
    fd: OwnedFd,
    port: u32,
    agent_port: u32,
}

impl NetlinkKernel {
    fn bind(agent_port: u32) -> Self {
        // SAFETY: plain socket(2); the result is checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK,
                NETLINK_USERSOCK,
            )
        };
        assert!(
            raw >= 0,
            "netlink socket: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let addr = sockaddr_nl(0); // port chosen by the kernel
        // SAFETY: `addr` is a valid sockaddr_nl of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&raw const addr).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
        let mut got = sockaddr_nl(0);
        let mut len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
        // SAFETY: `got` has room for a sockaddr_nl; `len` says so.
        let r = unsafe { libc::getsockname(fd.as_raw_fd(), (&raw mut got).cast(), &raw mut len) };
        assert_eq!(r, 0);
        Self {
            fd,
            port: got.nl_pid,
            agent_port,
        }
    }

    /// Sends `payload` (one CCP message, or any bytes) to the agent with a netlink header.
    fn send_raw(&self, payload: &[u8]) -> std::io::Result<()> {
        let mut msg = Vec::with_capacity(NLMSG_HDRLEN + payload.len());
        msg.extend(((NLMSG_HDRLEN + payload.len()) as u32).to_le_bytes());
        msg.extend([0u8; 12]);
        msg.extend(payload);
        self.send_bytes(&msg)
    }

    /// Sends `bytes` as they are (no header added) to the agent's port.
    fn send_bytes(&self, bytes: &[u8]) -> std::io::Result<()> {
        let to = sockaddr_nl(self.agent_port);
        // SAFETY: `bytes` and `to` are valid for the lengths passed.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                0,
                (&raw const to).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Transport for NetlinkKernel {
    fn send(&mut self, msg: &[u8]) -> Result<(), SendError> {
        self.send_raw(msg).map_err(|e| match e.raw_os_error() {
            Some(libc::EAGAIN | libc::ENOBUFS) => SendError::Full,
            _ => SendError::Disconnected(e.to_string()),
        })
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, RecvError> {
        let mut raw = [0u8; 4096];
        // SAFETY: `raw` is valid for its length.
        let n = unsafe { libc::recv(self.fd.as_raw_fd(), raw.as_mut_ptr().cast(), raw.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) => Ok(None),
                _ => Err(RecvError::Io(e)),
            };
        }
        let n = n as usize;
        assert!(n >= NLMSG_HDRLEN, "agent sent {n} bytes: no netlink header");
        let len = u32::from_le_bytes(raw[0..4].try_into().unwrap()) as usize;
        assert_eq!(len, n, "netlink length");
        let body = &raw[NLMSG_HDRLEN..n];
        buf[..body.len()].copy_from_slice(body);
        Ok(Some(body.len()))
    }
}

/// A duplicate of descriptor `target_fd` of process `pid` (`pidfd_open` + `pidfd_getfd`).
fn steal_fd(pid: libc::pid_t, target_fd: RawFd) -> OwnedFd {
    // SAFETY: raw syscalls with valid arguments; results are checked.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    assert!(
        pidfd >= 0,
        "pidfd_open: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: as above.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd as libc::c_int, target_fd, 0) };
    let err = std::io::Error::last_os_error();
    // SAFETY: `pidfd` is ours.
    unsafe { libc::close(pidfd as libc::c_int) };
    assert!(fd >= 0, "pidfd_getfd: {err} (needs root or CAP_SYS_PTRACE)");
    // SAFETY: a fresh descriptor we own.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

/// The agent's netlink socket: the descriptor of `pid` whose link names a socket and whose
/// address family is netlink; waits until it exists (portus opens it at start).
fn agent_netlink_socket(pid: libc::pid_t) -> OwnedFd {
    let start = Instant::now();
    loop {
        let dir = PathBuf::from(format!("/proc/{pid}/fd"));
        for e in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok) {
            let Ok(link) = std::fs::read_link(e.path()) else {
                continue;
            };
            if !link.to_string_lossy().starts_with("socket:") {
                continue;
            }
            let Ok(n) = e.file_name().to_string_lossy().parse::<RawFd>() else {
                continue;
            };
            let fd = steal_fd(pid, n);
            let mut a = sockaddr_nl(0);
            let mut len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
            // SAFETY: `a` has room for a sockaddr_nl.
            let r = unsafe { libc::getsockname(fd.as_raw_fd(), (&raw mut a).cast(), &raw mut len) };
            if r == 0 && i32::from(a.nl_family) == libc::AF_NETLINK && a.nl_pid == pid as u32 {
                return fd;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "agent opened no netlink socket"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `ccp-agent --ipc netlink` and connects its socket to a fresh emulated kernel.
fn start_agent(tag: &str) -> (Agent, NetlinkKernel, PathBuf) {
    let dir = std::env::temp_dir().join(format!("ccp-agent-netlink-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("agent.toml");
    std::fs::write(&config, "").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_ccp-agent"))
        .args(["--ipc", "netlink", "--alg", "cubic", "--config"])
        .arg(&config)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let agent = Agent::adopt(child, "netlink");
    let pid = libc::pid_t::try_from(agent.child.id()).unwrap();
    let agent_sock = agent_netlink_socket(pid);
    let kernel = NetlinkKernel::bind(pid as u32);
    let to = sockaddr_nl(kernel.port);
    // SAFETY: `to` is a valid sockaddr_nl; connecting the shared socket sets its default peer.
    let r = unsafe {
        libc::connect(
            agent_sock.as_raw_fd(),
            (&raw const to).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
    (agent, kernel, dir)
}

/// A netlink message shorter than its own 16-byte header, and one longer than portus's
/// 1024-byte receive buffer: the agent stays up and serves a flow afterwards.
#[test]
fn a_netlink_message_without_a_whole_header_does_not_kill_the_agent() {
    let (mut agent, kernel, dir) = start_agent("short");
    kernel.send_bytes(&[1, 2, 3, 4]).unwrap();
    kernel.send_raw(&vec![0u8; 2000]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        agent.child.try_wait().unwrap().is_none(),
        "agent exited:\n{}",
        agent.log()
    );
    let mut dp = Datapath::new(demo_config(), kernel, MonotonicClock::new());
    let mut flow = open_flow_from(&mut dp, 40_003, Ipv4Addr::new(10, 0, 0, 2), Some("reno")).0;
    flow.run(&mut dp, 100).unwrap();
    assert!(flow.agent_acks >= 90);
    agent.signal(libc::SIGTERM);
    let totals = fields(&agent.wait_for_line("ipc guard totals", 1).unwrap());
    assert_eq!(totals["rejected"], 2, "{totals:?}");
    assert!(!agent.log().contains("panicked"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ccp_agent_over_netlink_runs_flows_of_an_emulated_ccp_kernel() {
    let dir = std::env::temp_dir().join(format!("ccp-agent-netlink-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("agent.toml");
    std::fs::write(&config, "").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_ccp-agent"))
        .args(["--ipc", "netlink", "--alg", "cubic", "--config"])
        .arg(&config)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut agent = Agent::adopt(child, "netlink");
    let pid = libc::pid_t::try_from(agent.child.id()).unwrap();

    let agent_sock = agent_netlink_socket(pid);
    let kernel = NetlinkKernel::bind(pid as u32);
    let to = sockaddr_nl(kernel.port);
    // SAFETY: `to` is a valid sockaddr_nl; connecting the shared socket sets its default peer.
    let r = unsafe {
        libc::connect(
            agent_sock.as_raw_fd(),
            (&raw const to).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
    drop(agent_sock);

    // Garbage first, as a hostile or broken kernel peer could send it (each a whole netlink
    // message; portus strips the header, the guard sees the rest).
    let garbage: [&[u8]; 4] = [
        b"",                                                   // short
        &[9, 0, 12, 0, 1, 0, 0, 0, 0, 0, 0, 0],                // unexpected_type
        &[5, 0, 40, 0, 1, 0, 0, 0, 7, 0, 0, 0],                // length_mismatch
        &[1, 0, 17, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], // bad_length
    ];
    let mut dp = Datapath::new(demo_config(), kernel, MonotonicClock::new());
    for g in garbage {
        dp.transport().send_raw(g).unwrap();
    }

    let mut cubic = open_flow_from(&mut dp, 40_001, Ipv4Addr::new(10, 0, 0, 2), Some("cubic")).0;
    let mut reno = open_flow_from(&mut dp, 40_002, Ipv4Addr::new(10, 0, 0, 2), Some("reno")).0;
    for flow in [&mut cubic, &mut reno] {
        let before = flow.cwnd_bytes;
        flow.run(&mut dp, 400).unwrap();
        assert!(
            !dp.in_fallback(),
            "datapath fell back: agent silent over netlink"
        );
        assert!(
            flow.agent_acks >= 360,
            "flow {}: {} of 400 ACKs under the agent",
            flow.sid,
            flow.agent_acks
        );
        assert!(
            flow.cwnd_bytes > before,
            "flow {}: window never grew from {before}",
            flow.sid
        );
    }
    let stats = dp.stats();
    eprintln!("netlink: {stats:?}");

    agent.signal(libc::SIGTERM);
    let totals = fields(&agent.wait_for_line("ipc guard totals", 1).unwrap());
    for reason in ["short", "unexpected_type", "length_mismatch", "bad_length"] {
        assert_eq!(totals.get(reason), Some(&1), "{reason}: {totals:?}");
    }
    assert_eq!(totals["rejected"], 4, "{totals:?}");
    assert!(totals["accepted"] > 10, "{totals:?}");
    assert_eq!(agent.child.wait().unwrap().code(), Some(0));
    assert!(!agent.log().contains("panicked"));
    let _ = std::fs::remove_dir_all(Path::new(&dir));
}
