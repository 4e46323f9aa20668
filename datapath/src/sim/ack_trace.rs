//! The simulator's per-ACK trace ([`TRACE_DIR_ENV`]): one CSV file per run, in the columns
//! of the kernel bridge's trace, to compare what a CCP algorithm sees in the simulator and on
//! the kernel (`docs/calibration.md`).

use std::io::Write;

use super::network::SimConfig;
use super::tcp::AckOutcome;
use crate::netem::{LinkRate, Scheme};

/// Environment variable naming a directory: every run writes a per-ACK CSV trace of its
/// flows there, in the columns of the kernel bridge's trace
/// (`ccp_datapath::kernel::KernelBridge::with_trace`; `ca_state` is the built-in Linux
/// recovery's state, for CCP flows the sender's: 3 from a marked loss to its recovery point), one file per run named by its link, first scheme and
/// seed. For comparing what a CCP algorithm sees in the simulator and on the kernel
/// (`docs/calibration.md`).
pub const TRACE_DIR_ENV: &str = "CCP_SIM_TRACE_DIR";

pub(super) fn trace_file(cfg: &SimConfig) -> Option<Box<dyn std::io::Write + Send>> {
    let dir = std::env::var_os(TRACE_DIR_ENV)?;
    let rate = match &cfg.link.rate {
        LinkRate::Constant { bps } => format!("{}M", bps / 1_000_000),
        LinkRate::Trace(_) => "trace".to_string(),
    };
    let first = cfg.flows.first();
    let scheme = first.map_or_else(String::new, |f| match &f.scheme {
        Scheme::Ccp { alg } => alg.clone(),
        Scheme::Reno => "native-reno".into(),
        Scheme::Cubic => "native-cubic".into(),
        Scheme::Kernel { cca } => format!("native-{cca}"),
        Scheme::Fixed { .. } => "fixed".into(),
    });
    let owd_ms = first.map_or(0, |f| f.one_way_delay_ns / 1_000_000);
    let name = format!(
        "sim-{rate}-{}ms-{}B-{}-{scheme}-s{}.csv",
        2 * owd_ms,
        cfg.link.buffer_bytes,
        cfg.link.loss,
        cfg.seed
    );
    let mut f =
        std::io::BufWriter::new(std::fs::File::create(std::path::Path::new(&dir).join(name)).ok()?);
    writeln!(
        f,
        "kind,t_ns,flow,ca_state,lost,bytes_acked,pkts_acked,sacked_out,inflight_pkts,cwnd_bytes,rtt_us_or_rate,read_ns"
    )
    .ok()?;
    Some(Box::new(f))
}

/// One ACK's row: flow `f` at `now`, its recovery `state`, what the ACK did (`out`), the
/// sender's SACKed packets and window after it.
pub(super) fn write_ack(
    trace: &mut (dyn Write + Send),
    now: u64,
    f: usize,
    state: u8,
    out: &AckOutcome,
    sacked_pkts: u32,
    cwnd_bytes: u32,
) {
    let prims = &out.prims;
    let _ = writeln!(
        trace,
        "ack,{now},{f},{state},{},{},{},{sacked_pkts},{},{cwnd_bytes},{},{now}",
        prims.lost_pkts_sample,
        prims.bytes_acked,
        out.delivered_pkts,
        prims.packets_in_flight,
        prims.rtt_sample_us
    );
}
