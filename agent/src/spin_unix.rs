//! `--ipc unix --spin-us N`: the unix datagram socket of `--ipc unix` (same path, same
//! datagrams, same guard), read by spinning on a non-blocking `recv` for `N` µs after the
//! last datagram before sleeping in `poll(2)` (as `--ipc shm` does). It takes the wake-up of a
//! sleeping agent (a trip through the hypervisor on a VM whose idle vCPUs halt at once, docs/benchmarks.md §1)
//! out of the control loop while datagrams keep coming, at the price of a busy core; a very
//! large `N` polls for good.
//!
//! Sends behave as portus's blocking unix socket: a datapath whose queue is full is retried
//! (every 10 µs, for at most a second) rather than failed, since a failed send ends portus's
//! run loop.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ccp_datapath::runtime::shm::wait_readable;
use portus::ipc::Ipc;

/// Longest a send waits for room in a datapath's queue.
const SEND_PATIENCE: Duration = Duration::from_secs(1);

/// A unix datagram socket at `/tmp/ccp/<name>` read by spin-then-park.
pub struct SpinUnix {
    sock: UnixDatagram,
    path: PathBuf,
    spin: Duration,
}

impl SpinUnix {
    /// Binds `/tmp/ccp/<name>` (the caller has claimed it), spinning `spin` before sleeping.
    pub fn bind(name: &str, spin: Duration) -> io::Result<Self> {
        let path = Path::new(crate::socket::SOCKET_DIR).join(name);
        std::fs::create_dir_all(crate::socket::SOCKET_DIR)?;
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let sock = UnixDatagram::bind(&path)?;
        sock.set_nonblocking(true)?;
        Ok(Self { sock, path, spin })
    }

    fn try_recv(&self, msg: &mut [u8]) -> portus::Result<Option<(usize, PathBuf)>> {
        match self.sock.recv_from(msg) {
            Ok((n, addr)) => match addr.as_pathname() {
                Some(p) => Ok(Some((n, p.to_path_buf()))),
                None => Err(portus::Error("datagram from an unnamed socket".into())),
            },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(portus::Error(e.to_string())),
        }
    }
}

impl Ipc for SpinUnix {
    type Addr = PathBuf;

    fn name() -> String {
        "unix".into()
    }

    fn send(&self, msg: &[u8], to: &PathBuf) -> portus::Result<()> {
        let start = Instant::now();
        loop {
            match self.sock.send_to(msg, to) {
                Ok(_) => return Ok(()),
                Err(e)
                    if (e.kind() == io::ErrorKind::WouldBlock
                        || e.raw_os_error() == Some(libc::ENOBUFS))
                        && start.elapsed() < SEND_PATIENCE =>
                {
                    std::thread::sleep(Duration::from_micros(10));
                }
                Err(e) => return Err(portus::Error(e.to_string())),
            }
        }
    }

    fn recv(&self, msg: &mut [u8]) -> portus::Result<(usize, PathBuf)> {
        let start = Instant::now();
        loop {
            if let Some(r) = self.try_recv(msg)? {
                return Ok(r);
            }
            let waited = start.elapsed();
            if waited < self.spin {
                std::hint::spin_loop();
                continue;
            }
            let mut ready = [false];
            let n = wait_readable(&[self.sock.as_raw_fd()], 1000, &mut ready)
                .map_err(|e| portus::Error(e.to_string()))?;
            if n == 0 {
                return Err(portus::Error("nothing received for a second".into()));
            }
            if let Some(r) = self.try_recv(msg)? {
                return Ok(r);
            }
        }
    }

    fn close(&mut self) -> portus::Result<()> {
        let _ = std::fs::remove_file(&self.path);
        Ok(())
    }
}
