//! One episode: a simulation whose agent hands control to the learner at every step.
//!
//! The simulator runs a portus agent in lock-step inside its own thread (`LockstepAgent`):
//! portus's run loop owns the call stack and calls the algorithm on every report. To give
//! control back to Python between steps without a thread per environment, the whole run lives
//! on its own stack, a coroutine (`corosensei`): the controller (the selector's policy, or the
//! rate/window algorithm) *suspends* the coroutine with its observation when a step ends, and
//! `step(action)` *resumes* it with the action, in the caller's thread. A switch costs tens of
//! nanoseconds and the run is the same code, event for event, as a `ccp-eval` run: the real
//! datapath runtime, the real portus, the real selector.

use ccp_datapath::sim::{LockstepAgent, SimConfig, SimResult, Simulation};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

/// What a controller sees at the end of a step.
#[derive(Debug, Clone, Default)]
pub(crate) struct Obs {
    /// The observation vector.
    pub(crate) features: Vec<f32>,
    /// The step's reward, ln(throughput Mbit/s / RTT ms).
    pub(crate) reward: f64,
    /// Goodput over the step, Mbit/s.
    pub(crate) throughput_mbps: f64,
    /// Mean RTT over the step, ms.
    pub(crate) rtt_ms: f64,
    /// Loss fraction over the step.
    pub(crate) loss: f64,
    /// Datapath time at the step's end, µs.
    pub(crate) now_us: u64,
    /// `select`: the active candidate; `rate`/`cwnd`: 0.
    pub(crate) current: usize,
    /// The window in force, bytes.
    pub(crate) cwnd_bytes: u64,
    /// The pacing rate in force, bytes/s (0: unpaced).
    pub(crate) rate_bytes_per_sec: u64,
}

type Co = Coroutine<f64, Obs, Result<SimResult, String>, DefaultStack>;

/// The controller's way out of the coroutine: suspends the run with an observation and
/// returns the action it is resumed with.
#[derive(Clone, Copy)]
pub(crate) struct Port(*const Yielder<f64, Obs>);

// SAFETY: a `Port` is made inside the coroutine's body (`Episode::start`) and handed only to
// the controller built there; the controller lives in the simulation, which the body owns and
// drops before it returns. So the pointer is only followed on the coroutine's own stack while
// the `Yielder` it points to (the body's argument) is alive, whichever thread resumes it.
unsafe impl Send for Port {}
// SAFETY: as above; `suspend` takes `&self` and is only called from the coroutine's stack.
unsafe impl Sync for Port {}

impl Port {
    /// Suspends the run with `obs`; returns the action the run is resumed with.
    pub(crate) fn suspend(&self, obs: Obs) -> f64 {
        // SAFETY: see the `Send` impl: the yielder outlives every controller holding a port,
        // and this runs on the coroutine's stack.
        unsafe { (*self.0).suspend(obs) }
    }
}

/// Builds the lock-step agent of one episode around its controller's [`Port`].
pub(crate) type AgentBuilder = Box<dyn FnOnce(Port) -> LockstepAgent + Send>;

/// A running episode.
pub(crate) struct Episode {
    co: Co,
}

// SAFETY: everything on the coroutine's stack while it is suspended is owned by it (the
// simulation, portus's run loop and its `Rc`s, the controller); nothing there is shared with
// another thread or refers to thread-local storage across a suspension (the controller
// suspends from its own `decide`/`on_report`, with no TLS borrow live). Moving the suspended
// stack to another thread is therefore what moving those owned values would be. The Python
// object holding an episode is used by one thread at a time (pyo3's borrow checking).
unsafe impl Send for Episode {}

/// What a resume gave.
pub(crate) enum Resumed {
    /// The next step's observation.
    Step(Obs),
    /// The run is over.
    Done(Result<SimResult, String>),
}

/// Stack of an episode's coroutine (mapped lazily; the run needs a fraction of it).
const STACK_BYTES: usize = 1 << 20;

impl Episode {
    /// An episode of `cfg` whose agent `build` makes around the controller's port. Nothing
    /// runs before the first [`Episode::resume`].
    pub(crate) fn start(cfg: SimConfig, build: AgentBuilder) -> Result<Self, String> {
        let stack = DefaultStack::new(STACK_BYTES).map_err(|e| format!("coroutine stack: {e}"))?;
        let co = Coroutine::with_stack(stack, move |yielder: &Yielder<f64, Obs>, _first: f64| {
            let agent = build(Port(std::ptr::from_ref(yielder)));
            Simulation::new(cfg, Some(agent))
                .map_err(|e| e.to_string())?
                .run()
                .map_err(|e| e.to_string())
        });
        Ok(Self { co })
    }

    /// Runs to the end of the next step with `action` (ignored by the first resume).
    pub(crate) fn resume(&mut self, action: f64) -> Resumed {
        if self.co.done() {
            return Resumed::Done(Err("the episode is over".into()));
        }
        match self.co.resume(action) {
            CoroutineResult::Yield(obs) => Resumed::Step(obs),
            CoroutineResult::Return(r) => Resumed::Done(r),
        }
    }
}
