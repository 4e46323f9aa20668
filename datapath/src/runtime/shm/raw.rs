//! Every `unsafe` line of the shared-memory transport: the sealed memfd and its mapping,
//! eventfds, passing descriptors over a unix stream (`SCM_RIGHTS`) and `poll(2)`.
//!
//! The rest of [`super`] is safe code on top of [`Mapping`]'s bounds-checked accessors. The
//! memory is shared with another process that is not trusted: it may write anything at any
//! time. Nothing here hands out a reference to plain (non-atomic) shared bytes; bytes are
//! copied in and out, and the ring logic validates every value it copies out.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

/// A shared mapping of a whole memfd, `MAP_SHARED`, read and write. Unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; all access goes through atomics
// or bounds-checked byte copies, which are valid from any thread.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` only allows atomic access and copies.
unsafe impl Sync for Mapping {}

/// The seals a segment must carry before the other side maps it: its size can never change
/// (a shrink would turn the peer's next access into `SIGBUS`), and the seals are final.
const REQUIRED_SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

impl Mapping {
    /// A new zeroed memfd of `len` bytes, sealed against resizing, and its mapping.
    pub(crate) fn create(name: &str, len: usize) -> io::Result<(Self, OwnedFd)> {
        let cname = std::ffi::CString::new(name)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in memfd name"))?;
        // SAFETY: `cname` is a valid NUL-terminated string for the duration of the call.
        let fd = cvt(unsafe {
            libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
        })?;
        // SAFETY: `fd` was just returned by memfd_create and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let file = File::from(fd);
        file.set_len(len as u64)?;
        // SAFETY: fcntl on a descriptor we own, with an integer argument.
        cvt(unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, REQUIRED_SEALS) })?;
        let fd = OwnedFd::from(file);
        let map = Self::map(&fd)?;
        Ok((map, fd))
    }

    /// Maps a memfd received from a peer, whole. Refused unless it carries the seals that
    /// keep its size fixed, and is not empty.
    pub(crate) fn map(fd: &OwnedFd) -> io::Result<Self> {
        // SAFETY: fcntl on a descriptor we own, no pointer argument.
        let seals = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) })?;
        if seals & REQUIRED_SEALS != REQUIRED_SEALS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "segment is not sealed against resizing",
            ));
        }
        let len = usize::try_from(File::from(fd.try_clone()?).metadata()?.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "segment too large"))?;
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "empty segment"));
        }
        // SAFETY: a fresh mapping chosen by the kernel (addr NULL) of a descriptor we own;
        // the result is checked against MAP_FAILED before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        Ok(Self { ptr, len })
    }

    /// Size of the mapping, bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn check(&self, off: usize, n: usize, align: usize) {
        assert!(
            off.is_multiple_of(align) && off.checked_add(n).is_some_and(|e| e <= self.len),
            "shm access {off}+{n} outside the {} byte segment",
            self.len
        );
    }

    /// The 64-bit word at `off` (8-aligned, in bounds: panics otherwise, a layout bug).
    pub(crate) fn u64_at(&self, off: usize) -> &AtomicU64 {
        self.check(off, 8, 8);
        // SAFETY: in bounds and 8-aligned (the mapping is page-aligned); the memory lives as
        // long as `self`; AtomicU64 has the layout of u64 and any bit pattern is valid; the
        // peer only ever accesses these words atomically too.
        #[allow(clippy::cast_ptr_alignment)] // alignment checked above
        unsafe {
            &*self.ptr.as_ptr().add(off).cast::<AtomicU64>()
        }
    }

    /// The 32-bit word at `off` (4-aligned, in bounds).
    pub(crate) fn u32_at(&self, off: usize) -> &AtomicU32 {
        self.check(off, 4, 4);
        // SAFETY: as for `u64_at`, with 4-byte alignment.
        #[allow(clippy::cast_ptr_alignment)] // alignment checked above
        unsafe {
            &*self.ptr.as_ptr().add(off).cast::<AtomicU32>()
        }
    }

    /// Copies `src` into the segment at `off` (in bounds).
    pub(crate) fn write(&self, off: usize, src: &[u8]) {
        self.check(off, src.len(), 1);
        // SAFETY: the destination range is inside the mapping (checked) and cannot overlap
        // `src`, a Rust slice outside it. The ring protocol gives this range to the writer
        // alone (past the published tail, inside the space the reader has released); a peer
        // breaking the protocol can only make the bytes it reads wrong, which it checks.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(off), src.len());
        }
    }

    /// Copies `dst.len()` bytes out of the segment at `off` (in bounds).
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) {
        self.check(off, dst.len(), 1);
        // SAFETY: the source range is inside the mapping (checked), `dst` is a distinct Rust
        // slice. The bytes are published (before `tail`, read after an Acquire load of it);
        // whatever a misbehaving peer put there is copied as plain bytes and validated by
        // the caller; no reference to the shared bytes escapes.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), dst.as_mut_ptr(), dst.len());
        };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned; after this nothing uses them
        // (the references `u64_at`/`u32_at` hand out borrow `self`).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// A new non-blocking eventfd (a doorbell), as a `File` for plain `read`/`write`.
pub(crate) fn eventfd() -> io::Result<File> {
    // SAFETY: no pointer arguments.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Whether `fd` is an eventfd (so that writing 8 bytes to it can never block: a doorbell
/// handed over by a peer could otherwise be a full pipe).
pub(crate) fn is_eventfd(fd: &impl AsRawFd) -> bool {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .is_ok_and(|p| p.as_os_str() == "anon_inode:[eventfd]")
}

/// Sets `O_NONBLOCK` on `fd`'s file description.
pub(crate) fn set_nonblocking(fd: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: fcntl with integer arguments on a valid descriptor.
    let flags = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) })?;
    Ok(())
}

/// Most descriptors one hello carries.
pub(crate) const MAX_FDS: usize = 3;

/// Space for `MAX_FDS` descriptors in a control message, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct CmsgBuf([u8; 64]);

/// Sends `data` with `fds` attached (`SCM_RIGHTS`) in one `sendmsg`.
pub(crate) fn send_with_fds(sock: &UnixStream, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    assert!(fds.len() <= MAX_FDS);
    let mut cbuf = CmsgBuf([0; 64]);
    let fd_bytes = std::mem::size_of_val(fds);
    let mut iov = libc::iovec {
        iov_base: data.as_ptr().cast_mut().cast(),
        iov_len: data.len(),
    };
    // SAFETY: a zeroed msghdr is a valid empty one.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is a pure computation.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
    assert!(msg.msg_controllen <= cbuf.0.len());
    // SAFETY: msg_control points at `cbuf`, big enough (asserted) and aligned; CMSG_FIRSTHDR
    // therefore returns a header inside it, and CMSG_DATA a pointer with room for `fds`.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as usize;
        std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(cmsg), fd_bytes);
    }
    // SAFETY: `msg` points at live buffers (`iov` -> `data`, `cbuf`) for the call's duration.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &raw const msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != data.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short sendmsg"));
    }
    Ok(())
}

/// Receives up to `buf.len()` bytes and the descriptors attached (`SCM_RIGHTS`, at most
/// [`MAX_FDS`]; received descriptors are owned, so extra or unexpected ones are closed).
pub(crate) fn recv_with_fds(
    sock: &UnixStream,
    buf: &mut [u8],
) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut cbuf = CmsgBuf([0; 64]);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: a zeroed msghdr is a valid empty one.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.0.as_mut_ptr().cast();
    msg.msg_controllen = cbuf.0.len();
    // SAFETY: `msg` points at live buffers we own for the call's duration.
    let n = unsafe {
        libc::recvmsg(
            sock.as_raw_fd(),
            &raw mut msg,
            libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `msg_control` with `msg_controllen` bytes of well-formed
    // control messages; CMSG_FIRSTHDR/NXTHDR walk them within those bounds. Each SCM_RIGHTS
    // payload is an array of descriptors now owned by this process (read unaligned).
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let bytes = (*cmsg).cmsg_len - (data as usize - cmsg as usize);
                for i in 0..bytes / size_of::<RawFd>() {
                    let fd = data
                        .add(i * size_of::<RawFd>())
                        .cast::<RawFd>()
                        .read_unaligned();
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&raw const msg, cmsg);
        }
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "too many descriptors attached",
        ));
    }
    Ok((n as usize, fds))
}

/// `poll(2)` over `fds` for at most `timeout_ms` (-1: no limit); returns how many are ready.
/// An interrupted wait counts as "none ready".
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    // SAFETY: `fds` is a valid, exclusively borrowed array of `fds.len()` pollfds.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(rc as usize)
}

/// Runs `child` in a forked process (tests of a peer that dies): returns its pid.
///
/// `child` must only touch memory that is valid after `fork` in a multi-threaded parent:
/// no allocation, no locks (it is meant to be ended by [`kill_and_reap`]).
#[cfg(test)]
pub(crate) fn fork_child(child: impl FnOnce()) -> libc::pid_t {
    // SAFETY: the child runs only `child`, which by contract neither allocates nor locks,
    // and then leaves with `_exit` (no destructor or harness code of the parent runs).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        child();
        // SAFETY: ends the child at once; always sound.
        unsafe { libc::_exit(0) };
    }
    pid
}

/// SIGKILLs and reaps a child of [`fork_child`].
#[cfg(test)]
pub(crate) fn kill_and_reap(pid: libc::pid_t) {
    // SAFETY: signalling and reaping our own child; a null status pointer is allowed.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
}

/// Peeks at `sock` without waiting or consuming: `Ok(0)` is end-of-file (the peer closed).
pub(crate) fn peek(sock: &UnixStream) -> io::Result<usize> {
    let mut b = [0u8; 16];
    // SAFETY: `b` is a live buffer of the given length for the call's duration.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            b.as_mut_ptr().cast(),
            b.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}
