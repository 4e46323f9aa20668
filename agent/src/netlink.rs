//! The agent's netlink IPC to ccp-kernel: portus's netlink socket, with a receive that cannot
//! be made to panic.
//!
//! portus 0.9's `ipc::netlink::Socket` subtracts the 16-byte netlink header from the received
//! length without checking it: any local process that can send to the agent's port
//! (`NETLINK_USERSOCK` has no kernel owner) kills the agent with one message shorter than 16
//! bytes (an overflow panic, and in release builds a slice out of range). It also receives into
//! a fixed 1024-byte buffer and silently cuts longer messages. [`Socket`] does what portus's
//! does (the same protocol, port = the process id, multicast group 22, a 1 s receive timeout
//! so the run loop sees its stop flag, the same 16-byte header on sends) but hands the guard
//! what arrived: a message without a whole header becomes an empty payload (counted `short`),
//! one whose payload does not fit the caller's buffer fills it (counted `truncated`), and a
//! header whose length disagrees with the bytes received is passed on as received, for the
//! guard's CCP-level checks.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use portus::ipc::Ipc;

/// `NETLINK_USERSOCK`: the protocol ccp-kernel uses.
const NETLINK_USERSOCK: libc::c_int = 2;
/// The multicast group ccp-kernel sends to.
const CCP_GROUP: libc::c_int = 22;
/// Length of `struct nlmsghdr`.
pub const NLMSG_HDRLEN: usize = 16;
/// Largest netlink message received whole (payload and header).
const RECV_BUF: usize = 8_192;

fn os_err(what: &str) -> portus::Error {
    portus::Error(format!(
        "netlink {what}: {}",
        std::io::Error::last_os_error()
    ))
}

/// A blocking netlink socket for the agent (see the module doc).
#[derive(Debug)]
pub struct Socket {
    fd: OwnedFd,
}

impl Socket {
    /// Opens the socket, binds it to this process's id and joins ccp-kernel's group.
    pub fn new() -> portus::Result<Self> {
        // SAFETY: plain socket(2); the result is checked.
        let raw = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, NETLINK_USERSOCK) };
        if raw < 0 {
            return Err(os_err("socket"));
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_nl is plain old data; zeroed is valid.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_pid = std::process::id();
        // SAFETY: `addr` is a valid sockaddr_nl of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&raw const addr).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(os_err("bind"));
        }
        let group = CCP_GROUP;
        // SAFETY: the option value is a c_int of the size passed.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_NETLINK,
                libc::NETLINK_ADD_MEMBERSHIP,
                (&raw const group).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(os_err("group membership"));
        }
        let timeout = libc::timeval {
            tv_sec: 1,
            tv_usec: 0,
        };
        // SAFETY: the option value is a timeval of the size passed.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&raw const timeout).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(os_err("receive timeout"));
        }
        Ok(Self { fd })
    }
}

/// The payload of one received netlink message of `n` bytes in `raw`, as the guard should see
/// it: empty without a whole header, else what follows the header.
pub fn payload(raw: &[u8], n: usize) -> &[u8] {
    if n < NLMSG_HDRLEN || n > raw.len() {
        return &[];
    }
    &raw[NLMSG_HDRLEN..n]
}

impl Ipc for Socket {
    type Addr = ();

    fn name() -> String {
        String::from("netlink")
    }

    fn send(&self, msg: &[u8], _to: &()) -> portus::Result<()> {
        let len = NLMSG_HDRLEN + msg.len();
        let mut out = Vec::with_capacity(len);
        out.extend((len as u32).to_le_bytes());
        out.extend([0u8; NLMSG_HDRLEN - 4]);
        out.extend(msg);
        // SAFETY: `out` is valid for its length; the socket's default peer is ccp-kernel.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), out.as_ptr().cast(), out.len(), 0) };
        if r < 0 {
            return Err(os_err("send"));
        }
        Ok(())
    }

    fn recv(&self, msg: &mut [u8]) -> portus::Result<(usize, ())> {
        let mut raw = [0u8; RECV_BUF];
        // SAFETY: `raw` is valid for its length. MSG_TRUNC: the result is the message's full
        // length even when it did not fit.
        let r = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                raw.as_mut_ptr().cast(),
                raw.len(),
                libc::MSG_TRUNC,
            )
        };
        if r < 0 {
            return Err(os_err("recv"));
        }
        let body = payload(&raw, (r as usize).min(RECV_BUF));
        // A payload that does not fit the caller's buffer fills it: the guard counts it
        // truncated (it sees a datagram as long as its buffer).
        let take = body.len().min(msg.len());
        msg[..take].copy_from_slice(&body[..take]);
        Ok((take, ()))
    }

    fn close(&mut self) -> portus::Result<()> {
        // The descriptor is closed when the socket is dropped (portus's closes it twice).
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_of_short_and_whole_messages() {
        let raw = [7u8; 40];
        assert!(payload(&raw, 0).is_empty());
        assert!(payload(&raw, 4).is_empty());
        assert!(payload(&raw, 15).is_empty());
        assert!(payload(&raw, 16).is_empty());
        assert_eq!(payload(&raw, 28).len(), 12);
        assert!(payload(&raw, 41).is_empty(), "longer than the buffer");
    }
}
