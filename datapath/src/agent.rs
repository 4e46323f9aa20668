//! Running a portus agent beside a datapath: helpers that start one over the in-process channel
//! or over unix sockets, settings for real-time demos, and a synthetic flow that plays ACKs
//! against a datapath. The algorithms live in `ccp-algorithms`.

use std::time::{Duration, Instant};

use portus::ipc::{BackendBuilder, Blocking};
use portus::{CCPHandle, CongAlg};

use crate::runtime::transport::AgentChannels;
use crate::runtime::{
    Control, Datapath, DatapathConfig, FlowInfo, MonotonicClock, Primitives, RuntimeError,
    Transport,
};

/// Starts a portus agent running `alg` in its own thread, over the in-process channel.
pub fn spawn_channel_agent<A>(alg: A, channels: AgentChannels) -> portus::Result<CCPHandle>
where
    A: CongAlg<portus::ipc::chan::Socket<Blocking>> + Send + 'static,
{
    let sock =
        portus::ipc::chan::Socket::<Blocking>::new(channels.to_datapath, channels.from_datapath);
    portus::RunBuilder::new(BackendBuilder { sock })
        .default_alg(alg)
        .spawn_thread()
        .run()
}

/// Starts a portus agent running `alg` in its own thread, bound to `/tmp/ccp/<bind_name>`.
pub fn spawn_unix_agent<A>(alg: A, bind_name: &str) -> portus::Result<CCPHandle>
where
    A: CongAlg<portus::ipc::unix::Socket<Blocking>> + Send + 'static,
{
    let sock = portus::ipc::unix::Socket::<Blocking>::new(bind_name)?;
    portus::RunBuilder::new(BackendBuilder { sock })
        .default_alg(alg)
        .spawn_thread()
        .run()
}

/// Settings for demos and tests that run an agent beside a datapath in real time: a short
/// agent timeout so a dead agent is noticed within 100 ms.
pub fn demo_config() -> DatapathConfig {
    DatapathConfig {
        id: 7,
        agent_timeout_ns: 100_000_000,
        retry_initial_ns: 20_000_000,
        retry_max_ns: 200_000_000,
        ..DatapathConfig::default()
    }
}

/// A synthetic flow played in real time against a datapath: every ACK acknowledges one
/// segment, the RTT sample is fixed, the window is whatever the datapath last set. It has no
/// network behind it; it exists to exercise the control loop (the simulator models networks).
#[derive(Debug, Clone)]
pub struct SyntheticFlow {
    /// Socket id.
    pub sid: u32,
    /// Segment size, bytes.
    pub mss_bytes: u32,
    /// Current window, bytes.
    pub cwnd_bytes: u32,
    /// RTT sample every ACK carries, µs.
    pub rtt_us: u64,
    /// Gap between ACKs.
    pub ack_gap: Duration,
    /// ACKs played.
    pub acks: u64,
    /// ACKs handled by an agent program.
    pub agent_acks: u64,
    /// ACKs handled by the fallback rule.
    pub fallback_acks: u64,
}

impl SyntheticFlow {
    /// Opens a flow on `dp` asking for algorithm `alg`.
    pub fn start<T: Transport>(
        dp: &mut Datapath<T, MonotonicClock>,
        alg: &str,
        mss_bytes: u32,
        init_cwnd_bytes: u32,
    ) -> Result<Self, RuntimeError> {
        let info = FlowInfo {
            init_cwnd_bytes,
            mss_bytes,
            src_port: 4242,
            dst_port: 80,
            alg: Some(alg.to_string()),
            ..FlowInfo::default()
        };
        let sid = dp.create_flow(info)?;
        Ok(Self {
            sid,
            mss_bytes,
            cwnd_bytes: init_cwnd_bytes,
            rtt_us: 300,
            ack_gap: Duration::from_micros(100),
            acks: 0,
            agent_acks: 0,
            fallback_acks: 0,
        })
    }

    /// Plays `n` ACKs, polling the agent after each.
    pub fn run<T: Transport>(
        &mut self,
        dp: &mut Datapath<T, MonotonicClock>,
        n: u64,
    ) -> Result<(), RuntimeError> {
        for _ in 0..n {
            let prims = Primitives {
                bytes_acked: self.mss_bytes,
                packets_acked: 1,
                rtt_sample_us: self.rtt_us,
                bytes_in_flight: self.cwnd_bytes,
                packets_in_flight: self.cwnd_bytes / self.mss_bytes.max(1),
                snd_cwnd: self.cwnd_bytes,
                ..Primitives::default()
            };
            let a = dp.invoke(self.sid, &prims)?;
            if let Some(c) = a.cwnd_bytes {
                self.cwnd_bytes = c;
            }
            match a.control {
                Control::Agent => self.agent_acks += 1,
                Control::Fallback => self.fallback_acks += 1,
            }
            self.acks += 1;
            dp.poll();
            std::thread::sleep(self.ack_gap);
        }
        Ok(())
    }

    /// Plays ACKs until `pred` holds or `timeout` passes; returns whether it held.
    pub fn run_until<T: Transport>(
        &mut self,
        dp: &mut Datapath<T, MonotonicClock>,
        timeout: Duration,
        mut pred: impl FnMut(&Datapath<T, MonotonicClock>, &Self) -> bool,
    ) -> Result<bool, RuntimeError> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if pred(dp, self) {
                return Ok(true);
            }
            self.run(dp, 10)?;
        }
        Ok(pred(dp, self))
    }
}
