//! A portus agent run in lock-step with virtual time.
//!
//! portus's run loop lives in its own thread and blocks in `Ipc::recv`. [`LockstepIpc`] is a
//! portus IPC whose `recv` first tells the datapath side "everything you sent before is fully
//! handled" and only then waits for the next message. Since portus answers a message while
//! handling it, once that signal arrives every answer is already queued. The simulator can
//! therefore send a report, wait for the signal, collect the answers and deliver them at a
//! virtual time of its choosing (now, or after a modelled agent latency): the outcome depends
//! on virtual time only, never on thread scheduling.

use std::collections::VecDeque;

use crossbeam_channel::{Receiver, Sender, unbounded};
use portus::ipc::{BackendBuilder, Ipc};
use portus::{CCPHandle, CongAlg, NoSpawn, RunBuilder};

use crate::runtime::transport::{RecvError, SendError, Transport};

/// The agent's IPC: receives from the datapath, sends to it, and signals idleness.
pub struct LockstepIpc {
    from_datapath: Receiver<Vec<u8>>,
    to_datapath: Sender<Vec<u8>>,
    idle: Sender<()>,
}

impl Ipc for LockstepIpc {
    type Addr = ();

    fn name() -> String {
        String::from("lockstep")
    }

    fn send(&self, msg: &[u8], _to: &Self::Addr) -> portus::Result<()> {
        self.to_datapath
            .send(msg.to_vec())
            .map_err(|_| portus::Error(String::from("datapath side closed")))
    }

    fn recv(&self, msg: &mut [u8]) -> portus::Result<(usize, Self::Addr)> {
        // Everything received so far has been handled: say so, then wait for more.
        if self.idle.send(()).is_err() {
            return Err(portus::Error(String::from("datapath side closed")));
        }
        match self.from_datapath.recv() {
            Ok(m) if m.len() <= msg.len() => {
                msg[..m.len()].copy_from_slice(&m);
                Ok((m.len(), ()))
            }
            Ok(m) => Err(portus::Error(format!(
                "message of {} bytes does not fit",
                m.len()
            ))),
            Err(_) => Err(portus::Error(String::from("datapath side closed"))),
        }
    }

    fn close(&mut self) -> portus::Result<()> {
        Ok(())
    }
}

/// The datapath's end: a [`Transport`] that records what it sent, and a way to wait until the
/// agent has handled it all.
pub struct LockstepAgent {
    to_agent: Option<Sender<Vec<u8>>>,
    from_agent: Receiver<Vec<u8>>,
    idle: Receiver<()>,
    /// Messages sent and not yet confirmed handled.
    outstanding: u64,
    handle: Option<CCPHandle>,
    answers: VecDeque<Vec<u8>>,
}

/// Why the lock-step agent failed.
#[derive(Debug, thiserror::Error)]
pub enum LockstepError {
    /// portus would not start (e.g. a datapath program failed to compile).
    #[error("agent failed to start: {0}")]
    Start(String),
    /// The agent thread ended while the datapath was waiting on it.
    #[error("agent stopped: {0}")]
    Stopped(String),
}

impl LockstepAgent {
    /// Starts portus with `alg` in its own thread and waits until it is ready.
    pub fn spawn<A>(alg: A) -> Result<Self, LockstepError>
    where
        A: CongAlg<LockstepIpc> + Send + 'static,
    {
        Self::spawn_with(|b| b.default_alg(alg).spawn_thread().run())
    }

    /// Starts portus in its own thread with several algorithms and waits until it is ready.
    /// `start` registers them on the builder it is given and starts the thread, e.g.
    /// `|b| b.default_alg(a).additional_alg(c).spawn_thread().run()`; portus picks a flow's
    /// algorithm by the CREATE's name (`CongAlg::name`), falling back to the default.
    pub fn spawn_with<F>(start: F) -> Result<Self, LockstepError>
    where
        F: FnOnce(RunBuilder<LockstepIpc, (), NoSpawn>) -> portus::Result<CCPHandle>,
    {
        let (to_agent, from_datapath) = unbounded();
        let (to_datapath, from_agent) = unbounded();
        let (idle_tx, idle) = unbounded();
        let ipc = LockstepIpc {
            from_datapath,
            to_datapath,
            idle: idle_tx,
        };
        let handle = start(RunBuilder::new(BackendBuilder { sock: ipc }))
            .map_err(|e| LockstepError::Start(e.0))?;
        let mut agent = Self {
            to_agent: Some(to_agent),
            from_agent,
            idle,
            outstanding: 0,
            handle: Some(handle),
            answers: VecDeque::new(),
        };
        // The first idle signal: the agent compiled its programs and waits for a datapath.
        agent.wait_idle(1)?;
        Ok(agent)
    }

    fn wait_idle(&mut self, n: u64) -> Result<(), LockstepError> {
        for _ in 0..n {
            if self.idle.recv().is_err() {
                let why = self
                    .handle
                    .take()
                    .map(|h| match h.wait() {
                        Ok(()) => String::from("agent thread ended"),
                        Err(e) => e.0,
                    })
                    .unwrap_or_default();
                return Err(LockstepError::Stopped(why));
            }
        }
        Ok(())
    }

    /// Waits until the agent has handled everything sent so far, then moves its answers to
    /// the queue [`LockstepAgent::take_answers`] reads.
    pub fn sync(&mut self) -> Result<(), LockstepError> {
        let n = std::mem::take(&mut self.outstanding);
        self.wait_idle(n)?;
        while let Ok(m) = self.from_agent.try_recv() {
            self.answers.push_back(m);
        }
        Ok(())
    }

    /// Answers collected by [`LockstepAgent::sync`], oldest first.
    pub fn take_answers(&mut self) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.answers.drain(..)
    }

    /// Whether a sync is needed.
    pub fn has_outstanding(&self) -> bool {
        self.outstanding > 0
    }
}

impl Transport for LockstepAgent {
    fn send(&mut self, msg: &[u8]) -> Result<(), SendError> {
        let Some(tx) = self.to_agent.as_ref() else {
            return Err(SendError::Disconnected("agent stopped".into()));
        };
        tx.send(msg.to_vec())
            .map_err(|_| SendError::Disconnected("agent stopped".into()))?;
        self.outstanding += 1;
        Ok(())
    }

    /// Answers are delivered by the simulator at the virtual time it chooses, not polled.
    fn try_recv(&mut self, _buf: &mut [u8]) -> Result<Option<usize>, RecvError> {
        Ok(None)
    }
}

impl Drop for LockstepAgent {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.kill();
            // Closing the channel wakes the agent's recv; it sees the kill flag and returns.
            self.to_agent = None;
            // An agent that ended with an error has nothing left to report here.
            let _ = h.wait();
        }
    }
}
