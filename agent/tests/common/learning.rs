//! Helpers of the IW learning tests: the agent config, and short flows of this project's
//! datapath runtime (`Datapath` + `UnixTransport`) against the agent.

#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::runtime::open_flow;
use super::runtime::{Dp, MSS};

/// The only arm of the bandit (no sliding): what the agent learns once it has records.
pub(crate) const LEARNED_IW: u32 = 30;
pub(crate) const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

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

/// One short flow: opened, 40 ACKs, closed. Returns the IW it got, packets.
pub(crate) fn short_flow(dp: &mut Dp) -> u32 {
    let (mut flow, cwnd) = open_flow(dp, CLIENT, None);
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
