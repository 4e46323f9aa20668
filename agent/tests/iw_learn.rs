//! End to end, the IW learning loop (`iw.learn`): the built `ccp-agent` binary in its own
//! process, this project's datapath runtime in the test, synthetic flows in real time.
//!
//! Flows open, are acknowledged and close; the agent writes their records, its controller ends
//! one-second iterations, and the table it learns (saved where `iw.table` is read) reaches
//! new flows: a later flow starts from the learned IW, and a SIGHUP that leaves the learning
//! settings alone keeps the running learner.
//!
//! The bandit has one arm (30 packets) and no sliding, and a group without records for one
//! iteration falls back to the standard IW (10): so the table says 30 exactly while closed
//! flows keep feeding the controller, and 10 before any did.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use common::Agent;
use common::learning::{LEARNED_IW, learn, short_flow, write_config};
use common::runtime::datapath;

#[test]
fn closed_flows_teach_the_agent_an_iw_that_later_flows_get() {
    let pid = std::process::id();
    let (agent_name, dp_name) = (format!("agent-learn-{pid}"), format!("dp-learn-{pid}"));
    let dir = std::env::temp_dir().join(format!("ccp-agent-e2e-learn-{pid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = write_config(&dir, "");
    let mut agent = Agent::spawn("selector", &config, &agent_name);
    agent.wait_bound();
    agent.wait_for_line("IW learning started", 1).unwrap();
    let mut dp = datapath(&dp_name, &agent_name);

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
