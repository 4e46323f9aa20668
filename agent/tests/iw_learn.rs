//! End to end, the IW learning loop (`iw.learn`): the built `ccp-agent` binary in its own
//! process, this project's datapath runtime in the test, synthetic flows in real time.
//!
//! Flows open, are acknowledged and close; the agent writes their records, its controller ends
//! half-second iterations, and the table it learns (saved where `iw.table` is read) reaches
//! new flows: a later flow starts from the learned IW, and a SIGHUP that leaves the learning
//! settings alone keeps the running learner.
//!
//! The bandit has one arm (30 packets) and no sliding, and a group without records for one
//! iteration falls back to the standard IW (10): so the table says 30 exactly while closed
//! flows keep feeding the controller, and 10 before any did.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;

use ccp_datapath::agent::{SyntheticFlow, demo_config};
use ccp_datapath::runtime::{
    Control, Datapath, FlowInfo, MonotonicClock, Primitives, UnixTransport,
};
use common::Agent;

const MSS: u32 = 1448;
/// What the datapath itself would start with: neither the default IW nor the learned one.
const DATAPATH_IW: u32 = 4;
/// The only arm of the bandit (no sliding): what the agent learns once it has records.
const LEARNED_IW: u32 = 30;
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

type Dp = Datapath<UnixTransport, MonotonicClock>;

fn write_config(dir: &Path) -> PathBuf {
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
             [iw]\ntable = \"learned.csv\"\ndefault_iw = 10\nmax_iw = 100\nlearn = true\n\
             [iw.learning]\ngeo = \"geo.csv\"\nlevels = []\niteration_secs = 1\n\
             initial_arms = [{LEARNED_IW}]\nstep = 0\nstale_iterations = 1\n\
             records = \"flows.csv\"\nsave_table = \"learned.csv\"\n"
        ),
    )
    .unwrap();
    path
}

/// Opens a flow to `CLIENT` and returns it with the window of the agent's first program.
fn open_flow(dp: &mut Dp) -> (SyntheticFlow, u32) {
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
fn short_flow(dp: &mut Dp) -> u32 {
    let (mut flow, cwnd) = open_flow(dp);
    flow.run(dp, 40).unwrap();
    dp.close_flow(flow.sid).unwrap();
    cwnd / MSS
}

/// The saved table's IW for `CLIENT`, once the file exists.
fn saved_iw(dir: &Path) -> Option<u32> {
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
fn learn(dp: &mut Dp, dir: &Path) -> Vec<u32> {
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

#[test]
fn closed_flows_teach_the_agent_an_iw_that_later_flows_get() {
    let pid = std::process::id();
    let (agent_name, dp_name) = (format!("agent-learn-{pid}"), format!("dp-learn-{pid}"));
    let dir = std::env::temp_dir().join(format!("ccp-agent-e2e-learn-{pid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = write_config(&dir);
    let mut agent = Agent::spawn("selector", &config, &agent_name);
    agent.wait_bound();
    agent.wait_for_line("IW learning started", 1).unwrap();
    let transport = UnixTransport::bind(&dp_name, &agent_name).unwrap();
    let mut dp = Datapath::new(demo_config(), transport, MonotonicClock::new());

    // 1. Before any record the table is the default (no file yet: `learned.csv` is missing).
    assert_eq!(short_flow(&mut dp), 10, "the standard IW before learning");
    // 2. Flows close, their records reach the controller, an iteration ends, the table changes.
    let got = learn(&mut dp, &dir);
    assert!(!got.is_empty());
    // 3. A later flow is created with the learned IW (flows keep closing, so it stays learned).
    assert_eq!(
        short_flow(&mut dp),
        LEARNED_IW,
        "a later flow starts from the learned IW"
    );

    // The records: one line per closed flow, with the IW each got.
    agent
        .wait_for_line("IW table learned and published", 2)
        .unwrap();
    let records = std::fs::read_to_string(dir.join("flows.csv")).unwrap();
    let rows: Vec<Vec<&str>> = records
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert!(records.starts_with("end_us,client,province,isp,subnet,group,"));
    assert!(!rows.is_empty(), "no records written");
    for r in &rows {
        assert_eq!(&r[1..6], ["10.0.0.2", "P0", "fibre", "S0", "All"], "{r:?}");
        let size: u64 = r[9].parse().unwrap();
        assert!(size > 0 && r[19] == "true", "{r:?}");
    }
    assert!(
        rows.iter().any(|r| r[8] == "10"),
        "records of flows before learning"
    );

    // 4. SIGHUP with the same learning settings keeps the learner and its table.
    agent.signal(libc::SIGHUP);
    agent.wait_for_line("reloaded", 1).unwrap();
    learn(&mut dp, &dir);
    assert_eq!(
        short_flow(&mut dp),
        LEARNED_IW,
        "learning goes on after a reload"
    );
    assert_eq!(
        agent.log().matches("IW learning started").count(),
        1,
        "the reload kept the running learner"
    );
    assert_eq!(dp.stats().msgs_rejected, 0);
    drop(agent);
    std::fs::remove_dir_all(&dir).unwrap();
}
