//! How the datapath talks to the agent: portus's in-process channel IPC and unix datagram
//! sockets. Both are non-blocking: the datapath never waits on the agent.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};
use thiserror::Error;

/// Directory portus's unix sockets live in.
pub const CCP_SOCKET_DIR: &str = "/tmp/ccp";
/// Name the portus agent binds by default (`/tmp/ccp/portus`).
pub const DEFAULT_AGENT_NAME: &str = "portus";

/// Why a send did not happen.
#[derive(Debug, Error)]
pub enum SendError {
    /// The agent's queue is full; try again later.
    #[error("agent queue full")]
    Full,
    /// No agent is listening.
    #[error("agent unreachable: {0}")]
    Disconnected(String),
}

/// Why a receive failed (other than "nothing there").
#[derive(Debug, Error)]
pub enum RecvError {
    /// The agent side is gone for good.
    #[error("agent channel closed")]
    Closed,
    /// Any other I/O failure.
    #[error("receive failed: {0}")]
    Io(#[from] io::Error),
}

/// A message pipe to one agent.
pub trait Transport {
    /// Sends one message without blocking.
    fn send(&mut self, msg: &[u8]) -> Result<(), SendError>;
    /// Receives one message into `buf` without blocking; `Ok(None)` when none is waiting.
    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, RecvError>;

    /// A file descriptor that becomes readable when an agent message waits, for datapaths
    /// that sleep in `poll(2)` on several sources; `None` when there is none to wait on.
    fn readiness_fd(&self) -> Option<RawFd> {
        None
    }
}

/// No agent at all: every send fails, nothing arrives. Flows run on the fallback rule.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoAgent;

impl Transport for NoAgent {
    fn send(&mut self, _msg: &[u8]) -> Result<(), SendError> {
        Err(SendError::Disconnected("no agent configured".into()))
    }

    fn try_recv(&mut self, _buf: &mut [u8]) -> Result<Option<usize>, RecvError> {
        Ok(None)
    }
}

/// The datapath end of portus's channel IPC (`portus::ipc::chan::Socket`).
#[derive(Debug)]
pub struct ChannelTransport {
    to_agent: Sender<Vec<u8>>,
    from_agent: Receiver<Vec<u8>>,
}

/// The agent's end of a channel pair: hand these to `portus::ipc::chan::Socket::new`.
#[derive(Debug)]
pub struct AgentChannels {
    /// Agent -> datapath.
    pub to_datapath: Sender<Vec<u8>>,
    /// Datapath -> agent.
    pub from_datapath: Receiver<Vec<u8>>,
}

impl ChannelTransport {
    /// A connected pair: the datapath transport and the agent's channel ends.
    /// `capacity` bounds the datapath -> agent queue (`None` for unbounded).
    pub fn pair(capacity: Option<usize>) -> (Self, AgentChannels) {
        let (to_agent, from_datapath) = match capacity {
            Some(n) => crossbeam_channel::bounded(n),
            None => crossbeam_channel::unbounded(),
        };
        let (to_datapath, from_agent) = crossbeam_channel::unbounded();
        (
            Self {
                to_agent,
                from_agent,
            },
            AgentChannels {
                to_datapath,
                from_datapath,
            },
        )
    }

    /// Blocks until a message arrives or `timeout` passes: for lock-step embeddings (a
    /// simulator waiting for the agent's answer before moving virtual time on).
    pub fn recv_timeout(
        &mut self,
        buf: &mut [u8],
        timeout: std::time::Duration,
    ) -> Result<Option<usize>, RecvError> {
        match self.from_agent.recv_timeout(timeout) {
            Ok(m) => Ok(Some(copy_into(buf, &m))),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => Ok(None),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Err(RecvError::Closed),
        }
    }
}

/// Copies as much of `msg` as fits; a truncated copy fails decoding with a length error.
fn copy_into(buf: &mut [u8], msg: &[u8]) -> usize {
    let n = msg.len().min(buf.len());
    buf[..n].copy_from_slice(&msg[..n]);
    n
}

impl Transport for ChannelTransport {
    fn send(&mut self, msg: &[u8]) -> Result<(), SendError> {
        match self.to_agent.try_send(msg.to_vec()) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => Err(SendError::Full),
            Err(TrySendError::Disconnected(_)) => {
                Err(SendError::Disconnected("agent channel closed".into()))
            }
        }
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, RecvError> {
        match self.from_agent.try_recv() {
            Ok(m) => Ok(Some(copy_into(buf, &m))),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(RecvError::Closed),
        }
    }
}

/// A unix datagram socket bound to the datapath's own path under [`CCP_SOCKET_DIR`], sending
/// to the agent's path. Non-blocking: a full agent queue is [`SendError::Full`].
#[derive(Debug)]
pub struct UnixTransport {
    sock: UnixDatagram,
    own_path: PathBuf,
    agent_path: PathBuf,
}

impl UnixTransport {
    /// Binds `/tmp/ccp/<own_name>` (replacing a stale socket file) and targets
    /// `/tmp/ccp/<agent_name>`.
    pub fn bind(own_name: &str, agent_name: &str) -> io::Result<Self> {
        let dir = Path::new(CCP_SOCKET_DIR);
        Self::bind_paths(&dir.join(own_name), &dir.join(agent_name))
    }

    /// Binds `own_path` and targets `agent_path`.
    pub fn bind_paths(own_path: &Path, agent_path: &Path) -> io::Result<Self> {
        if let Some(parent) = own_path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        match std::fs::remove_file(own_path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let sock = UnixDatagram::bind(own_path)?;
        sock.set_nonblocking(true)?;
        Ok(Self {
            sock,
            own_path: own_path.to_path_buf(),
            agent_path: agent_path.to_path_buf(),
        })
    }

    /// The path this datapath is bound to.
    pub fn own_path(&self) -> &Path {
        &self.own_path
    }
}

impl Drop for UnixTransport {
    fn drop(&mut self) {
        // Best effort: a socket file left behind is replaced at the next bind anyway.
        let _ = std::fs::remove_file(&self.own_path);
    }
}

impl Transport for UnixTransport {
    fn readiness_fd(&self) -> Option<RawFd> {
        Some(self.sock.as_raw_fd())
    }

    fn send(&mut self, msg: &[u8]) -> Result<(), SendError> {
        match self.sock.send_to(msg, &self.agent_path) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(SendError::Full),
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => Err(SendError::Full),
            Err(e) => Err(SendError::Disconnected(e.to_string())),
        }
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, RecvError> {
        match self.sock.recv(buf) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(RecvError::Io(e)),
        }
    }
}
