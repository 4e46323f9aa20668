//! The network-namespace testbed on real kernel TCP: link shaping, delay, loss, trace replay,
//! path changes and cleanup. Without root (or network-namespace permission, or iproute2), each
//! test prints one line saying why and returns.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Mutex;
use std::time::Duration;

use ccp_datapath::kernel::testbed::{FlowSpec, LinkConfig, Testbed, TestbedConfig};

/// Timing-sensitive: the tests take turns.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn testbed_or_skip(test: &str, config: TestbedConfig) -> Option<Testbed> {
    match Testbed::new(config) {
        Ok(tb) => Some(tb),
        Err(e) if e.is_unavailable() => {
            println!("SKIP {test}: network namespaces unavailable here: {e}");
            None
        }
        Err(e) => panic!("building the testbed failed: {e}"),
    }
}

#[test]
fn one_cubic_flow_fills_a_10_mbit_link() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let link = LinkConfig::constant(10_000_000, Duration::from_millis(40));
    let Some(tb) = testbed_or_skip("one_cubic_flow", TestbedConfig::new(link)) else {
        return;
    };
    let results = tb
        .run(&[FlowSpec::timed("cubic", Duration::from_secs(4))])
        .unwrap();
    let f = &results[0];
    let stats = tb.stats().unwrap();
    println!(
        "{f:#?}",
        f = (
            &f.cca,
            f.goodput_bps,
            f.min_rtt_us,
            f.srtt_p50_us,
            f.srtt_p95_us,
            f.loss,
            f.bytes_received,
            f.active
        )
    );
    println!("{stats:#?}");
}
