//! How fast the network-namespace testbed goes: one cubic flow through the relay with no
//! delay, loss or rate limit; through `htb` at 100 Mbit/s with 20 ms and 200 ms RTT; and the
//! relay's CPU time in each. Needs root.
//!
//! ```text
//! cargo run --release -p ccp-datapath --features kernel --example testbed_capacity
//! ```

use std::process::ExitCode;
use std::time::Duration;

use ccp_datapath::kernel::testbed::{FlowSpec, LinkConfig, Testbed, TestbedConfig, TestbedError};

fn main() -> ExitCode {
    let cases = [
        (
            "relay only, no delay, no limit",
            LinkConfig::unlimited(Duration::ZERO),
            5,
        ),
        (
            "htb 100 Mbit/s, 20 ms RTT, 1 BDP",
            LinkConfig::constant(100_000_000, Duration::from_millis(20)),
            10,
        ),
        (
            "htb 100 Mbit/s, 200 ms RTT, 1 BDP",
            LinkConfig::constant(100_000_000, Duration::from_millis(200)),
            15,
        ),
    ];
    println!(
        "case | goodput Mbit/s | srtt p50 ms | retrans | relay CPU (data+ack) % of a core | \
         late data frames, max lateness"
    );
    for (name, link, secs) in cases {
        if let Err(e) = measure(name, link, secs) {
            eprintln!("{name}: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

fn measure(name: &str, link: LinkConfig, secs: u64) -> Result<(), TestbedError> {
    let tb = Testbed::new(TestbedConfig::new(link))?;
    let before = tb.stats()?;
    let duration = Duration::from_secs(secs);
    let flow = tb.run(&[FlowSpec::timed("cubic", duration)])?.remove(0);
    let after = tb.stats()?;
    let cpu = (after.data.cpu + after.ack.cpu).saturating_sub(before.data.cpu + before.ack.cpu);
    println!(
        "{name} | {:.1} | {:.1} | {} | {:.1} (data {:.1}) | {} of {}, {:?}",
        flow.goodput_bps / 1e6,
        f64::from(flow.srtt_p50_us) / 1e3,
        flow.retrans_segs,
        cpu.as_secs_f64() / flow.active.as_secs_f64() * 100.0,
        after.data.cpu.saturating_sub(before.data.cpu).as_secs_f64() / flow.active.as_secs_f64()
            * 100.0,
        after.data.late_frames - before.data.late_frames,
        after.data.forwarded - before.data.forwarded,
        after.data.max_lateness,
    );
    Ok(())
}
