//! A portus agent run in lock-step with virtual time, in the simulator's own thread.
//!
//! portus's run loop reads messages from an IPC and handles each completely (calling the
//! algorithm, which answers through the same IPC) before it reads the next. [`LockstepIpc`] is
//! that IPC, and the simulation lives inside it: when portus asks for the next message, the
//! IPC first delivers the answers to the previous one (at the current virtual time, or after a
//! modelled agent latency), then advances the simulation until the datapath has something to
//! send. The agent therefore sees every report before virtual time moves on, the outcome
//! depends on virtual time only, and no thread hand-off is paid per report.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use portus::ipc::{BackendBuilder, Ipc};
use portus::{CongAlg, NoSpawn, RunBuilder};

use super::network::{SimError, SimResult, Simulation};

/// Starts portus over the given IPC (with the given stop handle) and runs it to completion in
/// the calling thread.
type StartFn = Box<dyn FnOnce(LockstepIpc, Arc<AtomicBool>) -> portus::Result<()> + Send>;

/// The algorithms a simulation's agent runs; portus itself starts when the simulation runs.
pub struct LockstepAgent {
    start: StartFn,
}

/// Why the lock-step agent failed.
#[derive(Debug, thiserror::Error)]
pub enum LockstepError {
    /// portus would not start (e.g. a datapath program failed to compile).
    #[error("agent failed to start: {0}")]
    Start(String),
    /// The agent's run loop ended before the simulation did.
    #[error("agent stopped before the run ended")]
    Stopped,
}

impl std::fmt::Debug for LockstepAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LockstepAgent")
    }
}

impl LockstepAgent {
    /// An agent running one algorithm.
    pub fn new<A>(alg: A) -> Self
    where
        A: CongAlg<LockstepIpc> + Send + 'static,
    {
        Self::with_algorithms(move |b| b.default_alg(alg).run())
    }

    /// An agent running several algorithms: `start` registers them on the builder it is given
    /// and runs it, e.g. `|b| b.default_alg(a).additional_alg(c).run()`; portus picks a flow's
    /// algorithm by the CREATE's name (`CongAlg::name`), falling back to the default.
    pub fn with_algorithms<F>(start: F) -> Self
    where
        F: FnOnce(RunBuilder<LockstepIpc, (), NoSpawn>) -> portus::Result<()> + Send + 'static,
    {
        Self::with_wrapped_ipc(std::convert::identity, start)
    }

    /// [`LockstepAgent::with_algorithms`] over `wrap(ipc)`: an IPC layer of the caller's
    /// between the simulation and portus (e.g. one that notes the algorithm each CREATE asks
    /// for).
    pub fn with_wrapped_ipc<W, G, F>(wrap: G, start: F) -> Self
    where
        W: Ipc,
        G: FnOnce(LockstepIpc) -> W + Send + 'static,
        F: FnOnce(RunBuilder<W, (), NoSpawn>) -> portus::Result<()> + Send + 'static,
    {
        Self {
            start: Box::new(move |ipc, stop| {
                start(RunBuilder::new(BackendBuilder { sock: wrap(ipc) }).with_stop_handle(stop))
            }),
        }
    }

    /// Runs `sim` to its end with portus handling its messages; returns the result.
    pub(crate) fn run(self, sim: Simulation) -> Result<SimResult, SimError> {
        let stop = Arc::new(AtomicBool::new(true));
        let outcome = Arc::new(Mutex::new(None));
        let ipc = LockstepIpc {
            sim: RefCell::new(Some(sim)),
            answers: RefCell::new(Vec::new()),
            outcome: outcome.clone(),
            keep_going: stop.clone(),
        };
        (self.start)(ipc, stop).map_err(|e| LockstepError::Start(e.0))?;
        let taken = match outcome.lock() {
            Ok(mut o) => o.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        taken.unwrap_or(Err(SimError::Agent(LockstepError::Stopped)))
    }
}

/// The IPC portus reads from: the simulation itself.
pub struct LockstepIpc {
    sim: RefCell<Option<Simulation>>,
    /// What the agent sent while handling the last message.
    answers: RefCell<Vec<Vec<u8>>>,
    outcome: Arc<Mutex<Option<Result<SimResult, SimError>>>>,
    /// portus's "continue listening" flag: cleared when the simulation ends.
    keep_going: Arc<AtomicBool>,
}

impl LockstepIpc {
    fn finish(&self, result: Result<SimResult, SimError>) -> portus::Error {
        if let Ok(mut o) = self.outcome.lock() {
            *o = Some(result);
        }
        self.keep_going.store(false, Ordering::SeqCst);
        portus::Error(String::from("simulation finished"))
    }
}

impl Ipc for LockstepIpc {
    type Addr = ();

    fn name() -> String {
        String::from("lockstep")
    }

    fn send(&self, msg: &[u8], _to: &Self::Addr) -> portus::Result<()> {
        self.answers.borrow_mut().push(msg.to_vec());
        Ok(())
    }

    fn recv(&self, buf: &mut [u8]) -> portus::Result<(usize, Self::Addr)> {
        let mut slot = self.sim.borrow_mut();
        let Some(sim) = slot.as_mut() else {
            return Err(portus::Error(String::from("simulation finished")));
        };
        // portus handled the previous message completely: its answers are all here.
        for answer in self.answers.borrow_mut().drain(..) {
            sim.agent_answer(answer);
        }
        loop {
            if let Some(m) = sim.take_outbound() {
                if m.len() > buf.len() {
                    let msg = format!("datapath message of {} bytes does not fit", m.len());
                    return Err(self.finish(Err(SimError::Agent(LockstepError::Start(msg)))));
                }
                buf[..m.len()].copy_from_slice(&m);
                return Ok((m.len(), ()));
            }
            match sim.step() {
                Ok(true) => {}
                Ok(false) => {
                    let result = slot.take().map(Simulation::finish);
                    return Err(self.finish(result.ok_or(SimError::Agent(LockstepError::Stopped))));
                }
                Err(e) => return Err(self.finish(Err(e))),
            }
        }
    }

    fn close(&mut self) -> portus::Result<()> {
        Ok(())
    }
}
