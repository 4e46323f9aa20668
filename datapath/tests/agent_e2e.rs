//! End to end with a real portus agent: our runtime on one side, portus running the AIMD test
//! algorithm on the other, over the in-process channel and over unix datagram sockets.
//!
//! A fake flow runs a few hundred ACKs in real time; the tests check that reports reach the
//! agent and that the agent's window updates come back and are applied. The unix test then
//! kills the agent mid-flow (the flow must fall back and keep its window moving) and starts a
//! new agent on the same socket (it must take the flow back).

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::atomic::Ordering;
use std::time::Duration;

#[path = "support/aimd.rs"]
mod aimd;

use aimd::Aimd;
use ccp_datapath::agent::{self, SyntheticFlow, demo_config};
use ccp_datapath::runtime::transport::CCP_SOCKET_DIR;
use ccp_datapath::runtime::{ChannelTransport, Datapath, MonotonicClock, Transport, UnixTransport};

const MSS: u32 = 1448;
const INIT_CWND: u32 = 10 * MSS;

fn start_flow<T: Transport>(dp: &mut Datapath<T, MonotonicClock>) -> SyntheticFlow {
    SyntheticFlow::start(dp, aimd::AIMD_NAME, MSS, INIT_CWND).expect("create flow")
}

/// Removes the agent's socket file `/tmp/ccp/<name>` when dropped: a killed agent process
/// leaves it behind.
struct AgentSocket(String);

impl Drop for AgentSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(std::path::Path::new(CCP_SOCKET_DIR).join(&self.0));
    }
}

fn init_tracing() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
}

#[test]
fn channel_agent_controls_the_flow() {
    init_tracing();
    let (transport, agent_end) = ChannelTransport::pair(None);
    let alg = Aimd::default();
    let counters = alg.counters.clone();
    let handle = agent::spawn_channel_agent(alg, agent_end).expect("agent");
    let mut dp = Datapath::new(demo_config(), transport, MonotonicClock::new());
    let mut flow = start_flow(&mut dp);

    let under_control = flow
        .run_until(&mut dp, Duration::from_secs(5), |_, f| f.agent_acks > 0)
        .expect("run");
    assert!(under_control, "agent never took the flow");
    flow.run(&mut dp, 300).expect("run");

    let reports = counters.reports.load(Ordering::Relaxed);
    let updates = counters.updates.load(Ordering::Relaxed);
    println!(
        "channel: {} ACKs ({} under agent control), {reports} reports at the agent, {updates} \
         window updates, cwnd {} -> {} bytes",
        flow.acks, flow.agent_acks, INIT_CWND, flow.cwnd_bytes
    );
    assert!(
        reports >= 20,
        "too few reports reached the agent: {reports}"
    );
    assert!(
        flow.cwnd_bytes > INIT_CWND + 10 * MSS,
        "AIMD should have grown the window: {}",
        flow.cwnd_bytes
    );
    // Let the last update arrive; the next ACK applies exactly what the agent sent last.
    std::thread::sleep(Duration::from_millis(50));
    dp.poll();
    let last_sent = counters.last_cwnd.load(Ordering::Relaxed);
    flow.run(&mut dp, 1).expect("run");
    assert_eq!(
        u64::from(flow.cwnd_bytes),
        last_sent,
        "the agent's last window is the one applied"
    );
    assert_eq!(dp.stats().msgs_rejected, 0);
    assert!(!dp.in_fallback());

    dp.close_flow(flow.sid).expect("close");
    handle.kill();
    handle.wait().expect("agent stops cleanly");
}

#[test]
fn unix_agent_controls_the_flow_survives_its_death_and_is_taken_back() {
    init_tracing();
    let pid = std::process::id();
    let agent_name = format!("e2e-agent-{pid}");
    let _socket = AgentSocket(agent_name.clone());
    let dp_name = format!("e2e-dp-{pid}");

    let alg = Aimd::default();
    let counters = alg.counters.clone();
    let handle = agent::spawn_unix_agent(alg, &agent_name).expect("agent");
    let transport = UnixTransport::bind(&dp_name, &agent_name).expect("bind datapath socket");
    let mut dp = Datapath::new(demo_config(), transport, MonotonicClock::new());
    let mut flow = start_flow(&mut dp);

    // 1. The agent takes the flow and drives its window.
    let under_control = flow
        .run_until(&mut dp, Duration::from_secs(5), |_, f| f.agent_acks > 0)
        .expect("run");
    assert!(under_control, "agent never took the flow");
    flow.run(&mut dp, 300).expect("run");
    let reports = counters.reports.load(Ordering::Relaxed);
    assert!(
        reports >= 20,
        "too few reports reached the agent: {reports}"
    );
    let cwnd_at_kill = flow.cwnd_bytes;
    assert!(
        cwnd_at_kill > INIT_CWND,
        "AIMD should have grown the window"
    );

    // 2. Kill the agent mid-flow: the flow falls back and its window keeps moving.
    handle.kill();
    handle.wait().expect("agent stops");
    let fell_back = flow
        .run_until(&mut dp, Duration::from_secs(3), |dp, _| dp.in_fallback())
        .expect("run");
    assert!(fell_back, "datapath never noticed the agent was gone");
    let fallback_start = flow.fallback_acks;
    let cwnd_at_fallback = flow.cwnd_bytes;
    flow.run(&mut dp, 300).expect("run");
    assert!(
        flow.fallback_acks >= fallback_start + 300,
        "flow must run on the fallback rule"
    );
    assert!(
        flow.cwnd_bytes > cwnd_at_fallback,
        "fallback must keep the window moving: {cwnd_at_fallback} -> {}",
        flow.cwnd_bytes
    );
    assert!(
        flow.cwnd_bytes < 4 * cwnd_at_fallback,
        "fallback continues from the agent's window, not a fresh slow start"
    );
    let stats = dp.stats();
    assert_eq!(stats.fallback_entries, 1);
    assert!(
        stats.readies_sent >= 2,
        "READY must be re-sent while the agent is gone"
    );

    // 3. A new agent on the same socket takes the flow back, from the current window.
    let alg2 = Aimd::default();
    let counters2 = alg2.counters.clone();
    let handle2 = agent::spawn_unix_agent(alg2, &agent_name).expect("second agent");
    let cwnd_before_return = flow.cwnd_bytes;
    let taken_back = flow
        .run_until(&mut dp, Duration::from_secs(5), |dp, f| {
            !dp.in_fallback() && f.agent_acks > 0 && counters2.reports.load(Ordering::Relaxed) > 5
        })
        .expect("run");
    assert!(taken_back, "the restarted agent never took the flow back");
    // One CREATE normally suffices; a retry already on the wire when the agent answered may
    // make it recreate the flow once more (harmless: portus replaces the flow).
    let recreated = counters2.flows.load(Ordering::Relaxed);
    assert!(
        (1..=2).contains(&recreated),
        "flow re-created {recreated} times"
    );
    assert!(
        flow.cwnd_bytes >= cwnd_before_return / 2,
        "control resumed from the current window: {cwnd_before_return} -> {}",
        flow.cwnd_bytes
    );
    println!(
        "unix: window {INIT_CWND} -> {cwnd_at_kill} under agent 1, {cwnd_at_fallback} -> \
         {cwnd_before_return} on fallback, {} after agent 2 took over; stats {:?}",
        flow.cwnd_bytes,
        dp.stats()
    );
    assert_eq!(dp.stats().agent_recoveries, 1);

    dp.close_flow(flow.sid).expect("close");
    handle2.kill();
    handle2.wait().expect("agent stops");
}

#[test]
fn simulator_in_real_time_with_an_agent_over_unix_sockets() {
    use ccp_datapath::netem::{FlowSpec, LinkRate, LinkSpec, Network, NetworkSpec, Scheme};
    use ccp_datapath::sim::RealtimeSimulator;

    init_tracing();
    let pid = std::process::id();
    let agent_name = format!("rt-agent-{pid}");
    let _socket = AgentSocket(agent_name.clone());
    let alg = Aimd::default();
    let counters = alg.counters.clone();
    let handle = agent::spawn_unix_agent(alg, &agent_name).expect("agent");
    let transport = UnixTransport::bind(&format!("rt-dp-{pid}"), &agent_name).expect("bind");
    let spec = NetworkSpec {
        seed: 1,
        duration_ns: 1_500_000_000,
        link: LinkSpec {
            rate: LinkRate::Constant { bps: 10_000_000 },
            buffer_bytes: 25_000,
            loss: 0.0,
        },
        flows: vec![FlowSpec::bulk(
            Scheme::Ccp {
                alg: aimd::AIMD_NAME.into(),
            },
            10_000_000,
        )],
        changes: Vec::new(),
        ack_aggregation_ns: 0,
        sample_interval_ns: 0,
    };
    let started = std::time::Instant::now();
    let r = RealtimeSimulator::new(transport)
        .with_datapath(demo_config())
        .run(spec)
        .expect("run");
    let wall = started.elapsed();
    let reports = counters.reports.load(Ordering::Relaxed);
    let util = r.flows[0].throughput_bps(r.duration_ns) / 10e6;
    println!(
        "real time: {wall:?} wall for 1.5 s virtual, {reports} reports, utilization {util:.2}"
    );
    assert!(
        wall >= Duration::from_millis(1_400),
        "paced to the wall clock: {wall:?}"
    );
    assert!(
        reports >= 30,
        "the agent controlled the flow: {reports} reports"
    );
    assert!(util > 0.3, "the flow moved: {util:.2}");
    handle.kill();
    handle.wait().expect("agent stops");
}
