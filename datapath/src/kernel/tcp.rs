//! Per-socket TCP options the kernel datapath is checked and driven with: `TCP_INFO` and
//! `TCP_CONGESTION` (read and set) on any socket.

use std::io;
use std::os::fd::AsRawFd;

/// The longest congestion control name the kernel accepts (`TCP_CA_NAME_MAX`).
const CA_NAME_MAX: usize = 16;

/// `getsockopt(TCP_INFO)`.
pub fn info(socket: &impl AsRawFd) -> io::Result<libc::tcp_info> {
    info_filled(socket).map(|(info, _)| info)
}

/// `getsockopt(TCP_INFO)` and how many of its bytes the kernel filled: a kernel older than the
/// struct fills a prefix and leaves the rest zero ([`total_rto`] tells the two apart).
pub fn info_filled(socket: &impl AsRawFd) -> io::Result<(libc::tcp_info, usize)> {
    // SAFETY: tcp_info is plain old data; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: the fd is open for the borrow of `socket`; `info` and `len` are valid and
    // writable with the size passed.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &raw mut len,
        )
    };
    if rc == 0 {
        Ok((info, len as usize))
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The kernel's own count of the socket's retransmission timeouts (`tcpi_total_rto`, Linux
/// 6.7 and later: every RTO, recurring ones and the handshake's included), or `None` when the
/// `filled` bytes the kernel wrote ([`info_filled`]) do not reach the field.
pub fn total_rto(info: &libc::tcp_info, filled: usize) -> Option<u16> {
    let end = std::mem::offset_of!(libc::tcp_info, tcpi_total_rto) + std::mem::size_of::<u16>();
    (filled >= end).then_some(info.tcpi_total_rto)
}

/// `getsockopt(TCP_CONGESTION)`: the socket's congestion control name.
pub fn congestion_control(socket: &impl AsRawFd) -> io::Result<String> {
    let mut buf = [0u8; CA_NAME_MAX];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the fd is open; `buf` and `len` are valid and writable with the size passed.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// `setsockopt(TCP_CONGESTION, name)`.
pub fn set_congestion_control(socket: &impl AsRawFd, name: &str) -> io::Result<()> {
    // SAFETY: the fd is open; the option value points at `name.len()` readable bytes.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
