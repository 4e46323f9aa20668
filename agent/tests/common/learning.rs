//! Helpers of the IW learning tests: the agent config, and short flows of this project's
//! datapath runtime (`Datapath` + `UnixTransport`) against the agent.

#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ccp_datapath::agent::{SyntheticFlow, demo_config};
use ccp_datapath::runtime::{
    Control, Datapath, FlowInfo, MonotonicClock, Primitives, UnixTransport,
};

pub(crate) const MSS: u32 = 1448;
/// What the datapath itself would start with: neither the default IW nor the learned one.
pub(crate) const DATAPATH_IW: u32 = 4;
/// The only arm of the bandit (no sliding): what the agent learns once it has records.
pub(crate) const LEARNED_IW: u32 = 30;
pub(crate) const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

pub(crate) type Dp = Datapath<UnixTransport, MonotonicClock>;

/// Writes `geo.csv` and `agent.toml` (learning: one arm of IW 30, one-second iterations) into
/// `dir`; `iw_extra` is appended to the `[iw]` section.
pub(crate) fn write_config(dir: &Path, iw_extra: &str) -> PathBuf {
    std::fs::write(
        dir.join("geo.csv"),
        "start,end,subnet,isp,province\n10.0.0.0,10.0.0.255,S0,fibre,P0\n",
    )
    .unwrap();
    let path = dir.join("agent.toml");
    std::fs::write(
        &path,
        format!(
            "[selector]\npolicy = \"static:cubic\"\n\
             [iw]\ntable = \"learned.csv\"\ndefault_iw = 10\nmax_iw = 100\nlearn = true\n{iw_extra}\
             [iw.learning]\ngeo = \"geo.csv\"\nlevels = []\niteration_secs = 1\n\
             initial_arms = [{LEARNED_IW}]\nstep = 0\nstale_iterations = 1\n\
             records = \"flows.csv\"\nsave_table = \"learned.csv\"\n"
        ),
    )
    .unwrap();
    path
}

/// Opens a flow to `CLIENT` and returns it with the window of the agent's first program.
pub(crate) fn open_flow(dp: &mut Dp) -> (SyntheticFlow, u32) {
    let sid = dp
        .create_flow(FlowInfo {
            init_cwnd_bytes: DATAPATH_IW * MSS,
            mss_bytes: MSS,
            src_ip: u32::from(Ipv4Addr::new(192, 0, 2, 1)),
            src_port: 40_000,
            dst_ip: u32::from(CLIENT),
            dst_port: 443,
            alg: None,
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
            "agent never took flow {sid}"
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

/// One short flow: opened, 40 ACKs, closed. Returns the IW it got, packets.
pub(crate) fn short_flow(dp: &mut Dp) -> u32 {
    let (mut flow, cwnd) = open_flow(dp);
    flow.run(dp, 40).unwrap();
    dp.close_flow(flow.sid).unwrap();
    cwnd / MSS
}

/// The saved table's IW for `CLIENT`, once the file exists.
pub(crate) fn saved_iw(dir: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(dir.join("learned.csv")).ok()?;
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("start"))
        .find_map(|l| {
            let cols: Vec<&str> = l.split(',').collect();
            let (s, e): (Ipv4Addr, Ipv4Addr) = (cols[0].parse().ok()?, cols[1].parse().ok()?);
            (s <= CLIENT && CLIENT <= e).then(|| cols[2].parse().ok())?
        })
}

/// Closes short flows until the saved table gives `CLIENT` the learned IW; returns the IWs
/// the flows got.
pub(crate) fn learn(dp: &mut Dp, dir: &Path) -> Vec<u32> {
    let start = Instant::now();
    let mut got = Vec::new();
    while saved_iw(dir) != Some(LEARNED_IW) {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "never learned; flows got {got:?}"
        );
        got.push(short_flow(dp));
    }
    got
}

/// A datapath bound at `/tmp/ccp/<dp_name>` talking to the agent at `<agent_name>`.
pub(crate) fn datapath(dp_name: &str, agent_name: &str) -> Dp {
    let transport = UnixTransport::bind(dp_name, agent_name).unwrap();
    Datapath::new(demo_config(), transport, MonotonicClock::new())
}
