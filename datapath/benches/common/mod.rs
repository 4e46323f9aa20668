//! Shared by the benches: the ~20-instruction program, its INSTALL and CHANGE_PROG messages as
//! portus serializes them, a transport that discards sends, and a primitives generator.
//!
//! No floating point here: `vm_vs_libccp` links libccp, whose C symbol `log` replaces libm's.

// Each bench binary uses a different subset of these helpers.
#![allow(dead_code, unreachable_pub)]

use ccp_datapath::runtime::transport::{RecvError, SendError};
use ccp_datapath::runtime::{Clock, Datapath, DatapathConfig, FlowInfo, Primitives, Transport};

/// The program whose per-ACK cost is measured: 5 report fields folded on every ACK, a report
/// every 100 ACKs (so the cost measured is the VM's, not the report's).
pub const VM_PROGRAM_SRC: &str = "
(def (Report
    (volatile acked 0)
    (volatile loss 0)
    (volatile rtt 0)
    (volatile inflight 0)
    (volatile n 0)))
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Report.loss (+ Report.loss Ack.lost_pkts_sample))
    (:= Report.rtt (ewma 2 Flow.rtt_sample_us))
    (:= Report.inflight (max Report.inflight Flow.bytes_in_flight))
    (:= Report.n (+ Report.n 1))
    (fallthrough))
(when (> Report.n 99)
    (report))
";

/// Program uid used for [`VM_PROGRAM_SRC`].
pub const VM_PROGRAM_UID: u32 = 7;

/// `VM_PROGRAM_SRC` compiled by portus: (number of instructions, INSTALL message bytes).
pub fn install_msg(src: &str, uid: u32) -> Result<(usize, Vec<u8>), BoxError> {
    let (bin, _scope) = portus::lang::compile(src.as_bytes(), &[]).map_err(portus_err)?;
    let n_instrs = bin.instrs.len();
    let msg = portus::serialize::install::Msg {
        sid: 0,
        program_uid: uid,
        num_events: bin.events.len() as u32,
        num_instrs: n_instrs as u32,
        instrs: bin,
    };
    Ok((
        n_instrs,
        portus::serialize::serialize(&msg).map_err(portus_err)?,
    ))
}

/// CHANGE_PROG of flow `sid` to program `uid`, no field updates.
pub fn change_prog_msg(sid: u32, uid: u32) -> Result<Vec<u8>, BoxError> {
    let msg = portus::serialize::changeprog::Msg {
        sid,
        program_uid: uid,
        num_fields: 0,
        fields: Vec::new(),
    };
    portus::serialize::serialize(&msg).map_err(portus_err)
}

/// Boxed error for bench setup code.
pub type BoxError = Box<dyn std::error::Error>;

/// portus's error type does not implement `std::error::Error`.
pub fn portus_err(e: impl std::fmt::Debug) -> BoxError {
    format!("portus: {e:?}").into()
}

/// Accepts and drops every message; nothing ever arrives.
#[derive(Debug, Default, Clone, Copy)]
pub struct Discard;

impl Transport for Discard {
    fn send(&mut self, _msg: &[u8]) -> Result<(), SendError> {
        Ok(())
    }

    fn try_recv(&mut self, _buf: &mut [u8]) -> Result<Option<usize>, RecvError> {
        Ok(None)
    }
}

/// The primitives of ACK number `i` (varied a little so nothing is constant-folded).
pub fn prims(i: u64) -> Primitives {
    Primitives {
        bytes_acked: 1448,
        packets_acked: 1,
        lost_pkts_sample: u32::from(i % 1000 == 999),
        rtt_sample_us: 10_000 + i % 64,
        bytes_in_flight: 14_480 + (i % 16) as u32 * 1448,
        packets_in_flight: 10 + (i % 16) as u32,
        snd_cwnd: 14_480,
        rate_outgoing: 12_500_000,
        rate_incoming: 12_500_000,
        ..Primitives::default()
    }
}

/// A datapath that never falls back, with one flow running [`VM_PROGRAM_SRC`].
pub fn our_datapath<C: Clock>(clock: C) -> Result<(Datapath<Discard, C>, u32), BoxError> {
    let cfg = DatapathConfig {
        agent_timeout_ns: u64::MAX,
        ..DatapathConfig::default()
    };
    let mut dp = Datapath::new(cfg, Discard, clock);
    let sid = dp.create_flow(FlowInfo {
        init_cwnd_bytes: 14_480,
        mss_bytes: 1448,
        ..FlowInfo::default()
    })?;
    let (_, install) = install_msg(VM_PROGRAM_SRC, VM_PROGRAM_UID)?;
    dp.recv_msg(&install)?;
    dp.recv_msg(&change_prog_msg(sid, VM_PROGRAM_UID)?)?;
    let a = dp.invoke(sid, &prims(0))?;
    if a.control != ccp_datapath::runtime::Control::Agent {
        return Err("flow is not under program control".into());
    }
    Ok((dp, sid))
}
