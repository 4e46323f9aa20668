//! Our side (a recording transport) and the harness driving both datapaths and comparing them.

use std::sync::atomic::Ordering;

use ccp_datapath::runtime::transport::{RecvError, SendError};
use ccp_datapath::runtime::vm::VmError;
use ccp_datapath::runtime::{Datapath, FlowInfo, ManualClock, Primitives, Transport};
use portus::lang::{Bin, Reg, Scope};
use portus::serialize;

use crate::libccp_side::{LibFlow, Sent, lib_prims};
use crate::{MAX_PRINTED, MSS, VCLOCK_NS};

// ---------------------------------------------------------------------------------------------
// Our side.

pub(crate) struct Recorder(pub(crate) Sent);

impl Transport for Recorder {
    fn send(&mut self, msg: &[u8]) -> Result<(), SendError> {
        self.0.lock().unwrap().push(msg.to_vec());
        Ok(())
    }

    fn try_recv(&mut self, _buf: &mut [u8]) -> Result<Option<usize>, RecvError> {
        Ok(None)
    }
}

// ---------------------------------------------------------------------------------------------
// The comparison harness.

/// How an invocation ended, in terms both datapaths share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    AddOverflow,
    SubUnderflow,
    MulOverflow,
    DivByZero,
    Other,
}

fn lib_outcome(r: Result<(), libccp::LibccpError>) -> Outcome {
    use libccp::LibccpError as E;
    match r {
        Ok(()) => Outcome::Ok,
        Err(E::LibccpAddIntOverflow) => Outcome::AddOverflow,
        Err(E::LibccpSubIntUnderflow) => Outcome::SubUnderflow,
        Err(E::LibccpMulIntOverflow) => Outcome::MulOverflow,
        Err(E::LibccpDivByZero) => Outcome::DivByZero,
        Err(_) => Outcome::Other,
    }
}

fn our_outcome(f: Option<VmError>) -> Outcome {
    match f {
        None => Outcome::Ok,
        Some(VmError::AddOverflow { .. }) => Outcome::AddOverflow,
        Some(VmError::SubUnderflow { .. }) => Outcome::SubUnderflow,
        Some(VmError::MulOverflow { .. }) => Outcome::MulOverflow,
        Some(VmError::DivByZero { .. }) => Outcome::DivByZero,
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tally {
    pub(crate) programs: u64,
    pub(crate) acks: u64,
    pub(crate) measures: u64,
    pub(crate) reports: u64,
    pub(crate) cwnd_sets: u64,
    pub(crate) rate_sets: u64,
    pub(crate) faults: u64,
    pub(crate) agent_msgs: u64,
    pub(crate) switches: u64,
    pub(crate) updates: u64,
}

impl Tally {
    pub(crate) fn add(&mut self, o: &Tally) {
        self.programs += o.programs;
        self.acks += o.acks;
        self.measures += o.measures;
        self.reports += o.reports;
        self.cwnd_sets += o.cwnd_sets;
        self.rate_sets += o.rate_sets;
        self.faults += o.faults;
        self.agent_msgs += o.agent_msgs;
        self.switches += o.switches;
        self.updates += o.updates;
    }
}

fn is_measure(m: &[u8]) -> bool {
    m.len() >= 2 && m[0] == 1 && m[1] == 0
}

fn sid_of(m: &[u8]) -> u32 {
    u32::from_le_bytes([m[4], m[5], m[6], m[7]])
}

/// One program as the test installs it.
pub(crate) struct Installed {
    pub(crate) uid: u32,
    pub(crate) scope: Scope,
}

/// An open flow on both datapaths.
pub(crate) struct PairFlow<'dp> {
    pub(crate) sid: u32,
    lib: libccp::Connection<'dp, LibFlow>,
    /// Current program (index into the case's programs).
    pub(crate) program: usize,
    /// Window the (simulated) transport runs with.
    pub(crate) cwnd: u32,
    pub(crate) rate: u64,
}

pub(crate) struct Pair<'dp> {
    pub(crate) lib: &'dp libccp::Datapath,
    pub(crate) lib_sent: Sent,
    pub(crate) ours: Datapath<Recorder, ManualClock>,
    pub(crate) our_sent: Sent,
    pub(crate) clock: ManualClock,
    pub(crate) tally: Tally,
    pub(crate) mismatches: Vec<String>,
    /// What the current case is, for mismatch reports.
    pub(crate) context: String,
}

impl<'dp> Pair<'dp> {
    pub(crate) fn advance(&mut self, ns: u64) {
        let now = VCLOCK_NS.fetch_add(ns, Ordering::SeqCst) + ns;
        self.clock.set_ns(now);
    }

    fn mismatch(&mut self, what: String) {
        if self.mismatches.len() < MAX_PRINTED {
            println!("MISMATCH in {}: {what}", self.context);
        }
        self.mismatches.push(what);
    }

    pub(crate) fn take_sent(&self) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let lib = std::mem::take(&mut *self.lib_sent.lock().unwrap());
        let ours = std::mem::take(&mut *self.our_sent.lock().unwrap());
        (lib, ours)
    }

    /// Compares the MEASURE messages both sides sent since the last call.
    fn compare_measures(&mut self, when: &str) {
        let (lib, ours) = self.take_sent();
        let lib: Vec<_> = lib.into_iter().filter(|m| is_measure(m)).collect();
        let ours: Vec<_> = ours.into_iter().filter(|m| is_measure(m)).collect();
        if lib == ours {
            self.tally.measures += lib.len() as u64;
            self.tally.reports += lib.iter().filter(|m| m.len() > 16).count() as u64;
        } else {
            self.mismatch(format!("{when}: MEASURE libccp {lib:?} ours {ours:?}"));
        }
    }

    /// Feeds one agent message to both datapaths; both must accept it or both refuse it.
    pub(crate) fn deliver(&mut self, msg: &[u8], what: &str) -> bool {
        let mut copy = msg.to_vec();
        let lib_ok = self.lib.recv_msg(&mut copy).is_ok();
        let our = self.ours.recv_msg(msg);
        self.tally.agent_msgs += 1;
        if lib_ok != our.is_ok() {
            self.mismatch(format!("{what}: libccp accepted={lib_ok}, ours {our:?}"));
        }
        lib_ok && our.is_ok()
    }

    pub(crate) fn install(&mut self, uid: u32, bin: Bin, what: &str) {
        let msg = serialize::install::Msg {
            sid: 0,
            program_uid: uid,
            num_events: bin.events.len() as u32,
            num_instrs: bin.instrs.len() as u32,
            instrs: bin,
        };
        let bytes = serialize::serialize(&msg).expect("serialize INSTALL");
        self.deliver(&bytes, &format!("INSTALL {what}"));
    }

    pub(crate) fn open(&mut self, init_cwnd: u32) -> PairFlow<'dp> {
        // libccp reuses a slot's stale CREATE timestamp: keep clear of its 100 ms window.
        self.advance(200_000_000);
        let info = libccp::FlowInfo::default()
            .with_init_cwnd(init_cwnd)
            .with_mss(MSS)
            .with_four_tuple(0x0a00_0001, 4242, 0x0a00_0002, 80);
        let lib = libccp::Connection::start(self.lib, LibFlow::default(), info)
            .expect("libccp flow start");
        let sid = self
            .ours
            .create_flow(FlowInfo {
                init_cwnd_bytes: init_cwnd,
                mss_bytes: MSS,
                src_ip: 0x0a00_0001,
                src_port: 4242,
                dst_ip: 0x0a00_0002,
                dst_port: 80,
                alg: None,
            })
            .expect("create flow");
        let (lib_msgs, our_msgs) = self.take_sent();
        let lib_sid = lib_msgs.iter().find(|m| m[0] == 0).map(|m| sid_of(m));
        let our_sid = our_msgs.iter().find(|m| m[0] == 0).map(|m| sid_of(m));
        assert_eq!(
            lib_sid,
            Some(sid),
            "libccp did not send CREATE for sid {sid}"
        );
        assert_eq!(our_sid, Some(sid));
        PairFlow {
            sid,
            lib,
            program: 0,
            cwnd: init_cwnd,
            rate: 0,
        }
    }

    pub(crate) fn close(&mut self, flow: PairFlow<'_>) {
        let sid = flow.sid;
        drop(flow.lib);
        self.ours.close_flow(sid).expect("close flow");
        self.compare_measures(&format!("close sid {sid}"));
    }

    pub(crate) fn change_prog(
        &mut self,
        flow: &mut PairFlow<'_>,
        idx: usize,
        prog: &Installed,
        fields: Vec<(Reg, u64)>,
    ) {
        let msg = serialize::changeprog::Msg {
            sid: flow.sid,
            program_uid: prog.uid,
            num_fields: fields.len() as u32,
            fields,
        };
        let bytes = serialize::serialize(&msg).expect("serialize CHANGE_PROG");
        if self.deliver(
            &bytes,
            &format!("CHANGE_PROG sid {} uid {}", flow.sid, prog.uid),
        ) {
            flow.program = idx;
            self.tally.switches += 1;
        }
    }

    pub(crate) fn update(&mut self, flow: &PairFlow<'_>, fields: Vec<(Reg, u64)>) {
        let msg = serialize::update_field::Msg {
            sid: flow.sid,
            num_fields: fields.len() as u8,
            fields,
        };
        let bytes = serialize::serialize(&msg).expect("serialize UPDATE_FIELD");
        self.deliver(&bytes, &format!("UPDATE_FIELD sid {}", flow.sid));
        self.tally.updates += 1;
    }

    /// One ACK on both datapaths; compares everything they did.
    pub(crate) fn step(&mut self, flow: &mut PairFlow<'_>, prims: &Primitives, ack: usize) {
        flow.lib.cwnd = None;
        flow.lib.rate = None;
        flow.lib.load_primitives(lib_prims(prims));
        let lib = lib_outcome(flow.lib.invoke());
        let ours = self.ours.invoke(flow.sid, prims).expect("invoke");
        self.tally.acks += 1;
        let when = format!("sid {} ack {ack}", flow.sid);
        let our = our_outcome(ours.fault);
        if lib != our {
            self.mismatch(format!(
                "{when}: outcome libccp {lib:?} ours {our:?} ({prims:?})"
            ));
        } else if lib != Outcome::Ok {
            self.tally.faults += 1;
        }
        if flow.lib.cwnd != ours.cwnd_bytes {
            self.mismatch(format!(
                "{when}: cwnd libccp {:?} ours {:?} ({prims:?})",
                flow.lib.cwnd, ours.cwnd_bytes
            ));
        } else if ours.cwnd_bytes.is_some() {
            self.tally.cwnd_sets += 1;
        }
        if flow.lib.rate != ours.rate_bytes_per_sec {
            self.mismatch(format!(
                "{when}: rate libccp {:?} ours {:?} ({prims:?})",
                flow.lib.rate, ours.rate_bytes_per_sec
            ));
        } else if ours.rate_bytes_per_sec.is_some() {
            self.tally.rate_sets += 1;
        }
        if let Some(c) = ours.cwnd_bytes {
            flow.cwnd = c;
        }
        if let Some(r) = ours.rate_bytes_per_sec {
            flow.rate = u64::from(r);
        }
        self.compare_measures(&when);
    }
}
