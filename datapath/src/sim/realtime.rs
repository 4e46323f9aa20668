//! The simulator paced to the wall clock, its CCP flows driven by an external agent (its own
//! process or thread, e.g. `ccp-agent`) over a unix socket: for demos and for trying an agent
//! binary against a simulated network. Results then depend on scheduling and are not
//! reproducible; the lock-step [`super::Simulator`] is.
//!
//! The event loop is the simulator's own ([`Simulation`]); this module only holds each event
//! back until the wall clock reaches its virtual time, taking in the agent's messages while
//! it waits.

use std::time::{Duration, Instant};

use super::network::{SimConfig, SimError, Simulation};
use crate::netem::{Network, NetworkResult, NetworkSpec};
use crate::runtime::{DatapathConfig, UnixTransport};

/// Longest sleep between two looks at the agent's socket while waiting for an event.
const POLL_EVERY: Duration = Duration::from_micros(200);

/// The simulator in real time, talking to an agent over `transport`.
pub struct RealtimeSimulator {
    transport: UnixTransport,
    datapath: DatapathConfig,
}

impl RealtimeSimulator {
    /// A simulator whose datapath runtime talks to the agent over `transport` (bound to its
    /// own socket, addressed to the agent's), with the runtime's default settings.
    pub fn new(transport: UnixTransport) -> Self {
        Self {
            transport,
            datapath: DatapathConfig::default(),
        }
    }

    /// The datapath runtime's settings (e.g. a short agent timeout for demos).
    #[must_use]
    pub fn with_datapath(mut self, datapath: DatapathConfig) -> Self {
        self.datapath = datapath;
        self
    }
}

impl Network for RealtimeSimulator {
    type Error = SimError;

    fn run(self, spec: NetworkSpec) -> Result<NetworkResult, SimError> {
        let duration_ns = spec.duration_ns;
        let cfg = SimConfig::from_spec(spec, 0, self.datapath);
        let mut sim = Simulation::with_unix_agent(cfg, self.transport);
        let start = Instant::now();
        while let Some(t_ns) = sim.next_event_ns() {
            if t_ns > duration_ns {
                break;
            }
            wait_for_wall_clock(&mut sim, start, t_ns);
            if !sim.step()? {
                break;
            }
        }
        Ok(sim.finish())
    }
}

/// Sleeps until wall time since `start` reaches `t_ns`, taking in the agent's messages.
fn wait_for_wall_clock(sim: &mut Simulation, start: Instant, t_ns: u64) {
    loop {
        sim.poll_agent();
        let elapsed = start.elapsed().as_nanos() as u64;
        if elapsed >= t_ns {
            return;
        }
        std::thread::sleep(Duration::from_nanos(t_ns - elapsed).min(POLL_EVERY));
    }
}
