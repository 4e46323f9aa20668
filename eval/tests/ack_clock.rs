//! `cubic-ackclock` (the window following the ACK clock in the datapath between reports) on
//! web-like flows over recorded cellular links where the agent's window costs timeouts: a
//! 2-packet buffer on the T-Mobile UMTS downlink, and the ATT LTE uplink. With the agent's
//! window, the retransmissions after the first loss go out as one burst at the old window and
//! are lost again; with the ACK clock they leave as segments leave the network.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;

use ccp_eval::results::FlowRow;
use ccp_eval::runner::{self, RunOptions};
use ccp_eval::scenario::Scenario;

fn rows(text: &str) -> Vec<FlowRow> {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let s = Scenario::parse("ack-clock.toml", text, Some(base)).unwrap();
    let opts = RunOptions {
        jobs: 2,
        ..RunOptions::default()
    };
    let plan = runner::plan(&s, &opts).unwrap();
    runner::run(&s, &plan, &opts).rows
}

/// Mean timeouts per flow and mean score of `scheme`'s flows in `condition`.
fn of(rows: &[FlowRow], condition: &str, scheme: &str) -> (f64, f64) {
    let mine: Vec<&FlowRow> = rows
        .iter()
        .filter(|r| r.condition == condition && r.scheme == scheme && r.role == "main")
        .collect();
    assert_eq!(mine.len(), 20, "{condition} {scheme}");
    let n = mine.len() as f64;
    let timeouts = mine.iter().map(|r| r.timeouts as f64).sum::<f64>() / n;
    let score = mine.iter().map(|r| r.score.expect("a score")).sum::<f64>() / n;
    (timeouts, score)
}

#[test]
fn the_ack_clock_spares_web_flows_the_timeouts_of_a_burst() {
    let rows = rows(
        r#"
        name = "ack-clock"
        duration_s = 30
        seeds = [7001]
        schemes = ["cubic", "cubic-ackclock"]

        [[conditions]]
        env = "web"
        id = "umts-down-rtt16-buf0.27"
        trace = "traces/TMobile-UMTS-driving.down"
        trace_offset_s = 205
        rtt_ms = 16.0
        buffer_bdp = 0.27
        flows = [{ count = 20, start_s = 1.0, stagger_s = 1.4, sizes = "web", objective = "fct" }]

        [[conditions]]
        env = "web"
        id = "att-lte-up-rtt30-buf1.2"
        trace = "traces/ATT-LTE-driving-2016.up"
        trace_offset_s = 19
        rtt_ms = 30.0
        buffer_bdp = 1.2
        flows = [{ count = 20, start_s = 1.0, stagger_s = 1.4, sizes = "web", objective = "fct" }]
        "#,
    );
    for condition in ["umts-down-rtt16-buf0.27", "att-lte-up-rtt30-buf1.2"] {
        let (agent_timeouts, agent_score) = of(&rows, condition, "cubic");
        let (clocked_timeouts, clocked_score) = of(&rows, condition, "cubic-ackclock");
        assert!(
            clocked_timeouts < 0.7 * agent_timeouts,
            "{condition}: {clocked_timeouts:.2} timeouts per flow with the ACK clock, \
             {agent_timeouts:.2} without"
        );
        assert!(
            clocked_score > agent_score + 0.1,
            "{condition}: score {clocked_score:.3} with the ACK clock, {agent_score:.3} without"
        );
    }
}
