//! This project's datapath runtime (`Datapath` + `UnixTransport`) as a datapath for the agent
//! under test: binding it, and opening synthetic flows the agent takes over.

#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use ccp_datapath::agent::{SyntheticFlow, demo_config};
use ccp_datapath::runtime::{
    Control, Datapath, FlowInfo, MonotonicClock, Primitives, Transport, UnixTransport,
};

pub(crate) const MSS: u32 = 1448;
/// What the datapath itself would start with: different from every IW the tests configure.
pub(crate) const DATAPATH_IW: u32 = 4;

pub(crate) type Dp = Datapath<UnixTransport, MonotonicClock>;

/// A datapath bound at `/tmp/ccp/<dp_name>` talking to the agent at `<agent_name>`.
pub(crate) fn datapath(dp_name: &str, agent_name: &str) -> Dp {
    let transport = UnixTransport::bind(dp_name, agent_name).unwrap();
    Datapath::new(demo_config(), transport, MonotonicClock::new())
}

/// Opens a flow to `dst` asking for `alg` (or the agent's default) and returns it with the
/// window the agent's first program change set (ACKs acknowledging nothing until then, so no
/// program grows it).
pub(crate) fn open_flow<T: Transport>(
    dp: &mut Datapath<T, MonotonicClock>,
    dst: Ipv4Addr,
    alg: Option<&str>,
) -> (SyntheticFlow, u32) {
    open_flow_from(dp, 40_000, dst, alg)
}

/// [`open_flow`] from source port `src_port` (flows of one datapath told apart by port).
pub(crate) fn open_flow_from<T: Transport>(
    dp: &mut Datapath<T, MonotonicClock>,
    src_port: u32,
    dst: Ipv4Addr,
    alg: Option<&str>,
) -> (SyntheticFlow, u32) {
    let sid = dp
        .create_flow(FlowInfo {
            init_cwnd_bytes: DATAPATH_IW * MSS,
            mss_bytes: MSS,
            src_ip: u32::from(Ipv4Addr::new(192, 0, 2, 1)),
            src_port,
            dst_ip: u32::from(dst),
            dst_port: 443,
            alg: alg.map(str::to_string),
        })
        .unwrap();
    let idle = Primitives {
        rtt_sample_us: 300,
        snd_cwnd: DATAPATH_IW * MSS,
        ..Primitives::default()
    };
    let start = Instant::now();
    let cwnd = loop {
        dp.poll();
        let a = dp.invoke(sid, &idle).unwrap();
        if a.control == Control::Agent {
            break a.cwnd_bytes.unwrap();
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "agent never took flow {sid} to {dst}"
        );
        std::thread::sleep(Duration::from_micros(200));
    };
    let flow = SyntheticFlow {
        sid,
        mss_bytes: MSS,
        cwnd_bytes: cwnd,
        rtt_us: 300,
        ack_gap: Duration::from_micros(100),
        acks: 0,
        agent_acks: 0,
        fallback_acks: 0,
    };
    (flow, cwnd)
}

/// Plays `n` ACKs on `flow` and checks the agent answered: every ACK under its program and the
/// window grew (Cubic, or whatever the flow runs, in slow start on a loss-free flow).
pub(crate) fn assert_controlled<T: Transport>(
    dp: &mut Datapath<T, MonotonicClock>,
    flow: &mut SyntheticFlow,
    n: u64,
) {
    let (acks, cwnd) = (flow.agent_acks, flow.cwnd_bytes);
    flow.run(dp, n).unwrap();
    assert!(!dp.in_fallback(), "datapath fell back: agent silent");
    assert!(
        flow.agent_acks >= acks + n * 9 / 10,
        "flow {} left agent control: {} of {n} ACKs",
        flow.sid,
        flow.agent_acks - acks
    );
    assert!(
        flow.cwnd_bytes > cwnd,
        "flow {}: window never grew from {cwnd}",
        flow.sid
    );
}
