//! Deterministic tests of the datapath in virtual time, with portus serializing the agent's
//! messages and a scripted transport standing in for the agent.

use std::cell::RefCell;
use std::rc::Rc;

use portus::lang::{Reg as PReg, Type};
use portus::serialize::{changeprog, install, serialize, update_field};

use super::transport::{RecvError, SendError};
use super::wire::msg_type;
use super::*;

/// Records what the datapath sends; can be told the agent is gone or its queue is full.
#[derive(Clone, Default)]
struct Script {
    sent: Rc<RefCell<Vec<Vec<u8>>>>,
    mode: Rc<RefCell<Mode>>,
}

#[derive(Clone, Copy, Default, PartialEq)]
enum Mode {
    #[default]
    Up,
    Full,
    Gone,
}

impl Transport for Script {
    fn send(&mut self, msg: &[u8]) -> Result<(), SendError> {
        match *self.mode.borrow() {
            Mode::Up => {
                self.sent.borrow_mut().push(msg.to_vec());
                Ok(())
            }
            Mode::Full => Err(SendError::Full),
            Mode::Gone => Err(SendError::Disconnected("gone".into())),
        }
    }

    fn try_recv(&mut self, _buf: &mut [u8]) -> Result<Option<usize>, RecvError> {
        Ok(None)
    }
}

impl Script {
    fn sent_of(&self, t: u16) -> Vec<Vec<u8>> {
        let t = t.to_le_bytes();
        self.sent
            .borrow()
            .iter()
            .filter(|m| m[0..2] == t)
            .cloned()
            .collect()
    }
}

const MS: u64 = 1_000_000;

fn setup() -> (Datapath<Script, ManualClock>, Script, ManualClock) {
    let script = Script::default();
    let clock = ManualClock::new(1_000 * MS);
    let cfg = DatapathConfig {
        agent_timeout_ns: 50 * MS,
        ..DatapathConfig::default()
    };
    (
        Datapath::new(cfg, script.clone(), clock.clone()),
        script,
        clock,
    )
}

/// Compiles `src` with portus and returns (INSTALL bytes, scope).
fn install_msg(src: &str) -> (Vec<u8>, portus::lang::Scope) {
    let (bin, sc) = portus::lang::compile(src.as_bytes(), &[]).expect("compile");
    let msg = install::Msg {
        sid: 0,
        program_uid: sc.program_uid,
        num_events: bin.events.len() as u32,
        num_instrs: bin.instrs.len() as u32,
        instrs: bin,
    };
    (serialize(&msg).expect("serialize"), sc)
}

fn change_prog(sid: u32, uid: u32, cwnd: Option<u64>) -> Vec<u8> {
    let fields: Vec<(PReg, u64)> = cwnd
        .map(|c| vec![(PReg::Implicit(4, Type::Num(None)), c)])
        .unwrap_or_default();
    serialize(&changeprog::Msg {
        sid,
        program_uid: uid,
        num_fields: fields.len() as u32,
        fields,
    })
    .expect("serialize")
}

const COUNTER: &str = "(def (Report (volatile acked 0)) (Control.n 0))
    (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Control.n (+ Control.n 1))
        (fallthrough))
    (when (== Control.n 3)
        (:= Control.n 0)
        (:= Cwnd (* Cwnd 2))
        (report))";

fn flow(dp: &mut Datapath<Script, ManualClock>) -> u32 {
    dp.create_flow(FlowInfo {
        init_cwnd_bytes: 14_480,
        mss_bytes: 1448,
        ..FlowInfo::default()
    })
    .expect("flow")
}

fn ack(cwnd: u32) -> Primitives {
    Primitives {
        bytes_acked: 1448,
        packets_acked: 1,
        rtt_sample_us: 10_000,
        snd_cwnd: cwnd,
        ..Primitives::default()
    }
}

#[test]
fn ready_then_create_then_reports_every_third_ack() {
    let (mut dp, script, _clock) = setup();
    assert_eq!(script.sent_of(msg_type::READY).len(), 1);
    let (ins, sc) = install_msg(COUNTER);
    dp.recv_msg(&ins).expect("install");
    let sid = flow(&mut dp);
    assert_eq!(script.sent_of(msg_type::CREATE).len(), 1);
    dp.recv_msg(&change_prog(sid, sc.program_uid, Some(20_000)))
        .expect("change");

    let a = dp.invoke(sid, &ack(14_480)).expect("invoke");
    assert_eq!(a.control, Control::Agent);
    assert_eq!(
        a.cwnd_bytes,
        Some(20_000),
        "Cwnd from CHANGE_PROG applies on the next ACK"
    );
    assert_eq!(
        a.agent_cwnd_bytes,
        Some(20_000),
        "the agent's, not the program's"
    );
    assert!(!dp.invoke(sid, &ack(20_000)).expect("invoke").reported);
    let a = dp.invoke(sid, &ack(20_000)).expect("invoke");
    assert_eq!(a.cwnd_bytes, Some(40_000));
    assert_eq!(
        a.agent_cwnd_bytes, None,
        "the program doubled the window; the agent set nothing"
    );
    assert!(a.reported, "the third ACK's invocation sent the report");
    let reports = script.sent_of(msg_type::MEASURE);
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    assert_eq!(
        u32::from_le_bytes(r[8..12].try_into().unwrap()),
        sc.program_uid
    );
    assert_eq!(
        u32::from_le_bytes(r[12..16].try_into().unwrap()),
        1,
        "one report field"
    );
    assert_eq!(u64::from_le_bytes(r[16..24].try_into().unwrap()), 3 * 1448);
    // The volatile field was reset: three more ACKs report 3 * 1448 again, not 6 * 1448.
    for _ in 0..3 {
        dp.invoke(sid, &ack(40_000)).expect("invoke");
    }
    let reports = script.sent_of(msg_type::MEASURE);
    assert_eq!(
        u64::from_le_bytes(reports[1][16..24].try_into().unwrap()),
        3 * 1448
    );
}

#[test]
fn update_field_stages_until_the_next_ack() {
    let (mut dp, _script, _clock) = setup();
    let (ins, sc) = install_msg(COUNTER);
    dp.recv_msg(&ins).expect("install");
    let sid = flow(&mut dp);
    dp.recv_msg(&change_prog(sid, sc.program_uid, None))
        .expect("change");
    dp.invoke(sid, &ack(10_000)).expect("invoke");
    let upd = update_field::Msg {
        sid,
        num_fields: 1,
        fields: vec![(PReg::Implicit(4, Type::Num(None)), 77_000)],
    };
    dp.recv_msg(&serialize(&upd).expect("serialize"))
        .expect("update");
    let a = dp.invoke(sid, &ack(10_000)).expect("invoke");
    assert_eq!(a.cwnd_bytes, Some(77_000));
}

/// Found by fuzzing (`fuzz/fuzz/corpus/datapath/cwnd-2-32`): a window or rate register
/// above `u32::MAX` was cut to 32 bits as libccp does, so 2^32 became a window of 0 and the
/// flow stalled. The runtime saturates by default; libccp's cut is `WideValues::Truncate`, which
/// the conformance test against libccp uses.
#[test]
fn windows_and_rates_above_32_bits_saturate() {
    let (mut dp, _script, _clock) = setup();
    let (ins, sc) = install_msg(COUNTER);
    dp.recv_msg(&ins).expect("install");
    let sid = flow(&mut dp);
    dp.recv_msg(&change_prog(sid, sc.program_uid, None))
        .expect("change");
    dp.invoke(sid, &ack(10_000)).expect("invoke");
    let upd = update_field::Msg {
        sid,
        num_fields: 2,
        fields: vec![
            (PReg::Implicit(4, Type::Num(None)), 1 << 32),
            (PReg::Implicit(5, Type::Num(None)), (1 << 32) + 5),
        ],
    };
    dp.recv_msg(&serialize(&upd).expect("serialize"))
        .expect("update");
    let a = dp.invoke(sid, &ack(10_000)).expect("invoke");
    assert_eq!(a.cwnd_bytes, Some(u32::MAX));
    assert_eq!(a.rate_bytes_per_sec, Some(u32::MAX));

    let (ins, sc) =
        install_msg("(def (Report (volatile a 0))) (when true (:= Cwnd (* 65536 65536)) (report))");
    dp.recv_msg(&ins).expect("install");
    dp.recv_msg(&change_prog(sid, sc.program_uid, None))
        .expect("change");
    let a = dp.invoke(sid, &ack(10_000)).expect("invoke");
    assert_eq!(a.cwnd_bytes, Some(u32::MAX));
}

#[test]
fn agent_updates_can_be_applied_before_the_next_ack() {
    let (mut dp, _script, _clock) = setup();
    let (ins, sc) = install_msg(COUNTER);
    dp.recv_msg(&ins).expect("install");
    let a = flow(&mut dp);
    let b = flow(&mut dp);
    // A program change carrying a window, then an update for the other flow.
    dp.recv_msg(&change_prog(a, sc.program_uid, Some(30_000)))
        .expect("change");
    dp.recv_msg(&change_prog(b, sc.program_uid, None))
        .expect("change");
    let mut seen = Vec::new();
    assert_eq!(dp.apply_agent_updates(|sid, x| seen.push((sid, x))), 1);
    assert_eq!(seen[0].0, a);
    assert_eq!(seen[0].1.cwnd_bytes, Some(30_000));
    assert_eq!(seen[0].1.control, Control::Agent);
    // Applied once: nothing left, and the next ACK runs the new program from that window.
    assert_eq!(dp.apply_agent_updates(|_, _| panic!("applied twice")), 0);
    let x = dp.invoke(a, &ack(30_000)).expect("invoke");
    assert_eq!(x.control, Control::Agent);
    assert_eq!(x.cwnd_bytes, Some(30_000));
    let upd = update_field::Msg {
        sid: b,
        num_fields: 1,
        fields: vec![(PReg::Implicit(4, Type::Num(None)), 55_000)],
    };
    dp.recv_msg(&serialize(&upd).expect("serialize"))
        .expect("update");
    seen.clear();
    dp.apply_agent_updates(|sid, x| seen.push((sid, x)));
    assert_eq!(seen.len(), 1);
    assert_eq!((seen[0].0, seen[0].1.cwnd_bytes), (b, Some(55_000)));
}

#[test]
fn bad_messages_get_typed_errors_and_flows_keep_running() {
    let (mut dp, _script, _clock) = setup();
    let (ins, sc) = install_msg(COUNTER);
    dp.recv_msg(&ins).expect("install");
    let sid = flow(&mut dp);
    dp.recv_msg(&change_prog(sid, sc.program_uid, None))
        .expect("change");

    // Truncated.
    assert!(matches!(
        dp.recv_msg(&ins[..ins.len() - 3]),
        Err(RuntimeError::Decode(_))
    ));
    // Oversized claim.
    let mut big = ins.clone();
    big[2..4].copy_from_slice(&u16::MAX.to_le_bytes());
    assert!(matches!(dp.recv_msg(&big), Err(RuntimeError::Decode(_))));
    // Unknown type.
    let mut unknown = ins.clone();
    unknown[0] = 42;
    assert!(matches!(
        dp.recv_msg(&unknown),
        Err(RuntimeError::Decode(_))
    ));
    // Out-of-range register in an otherwise valid INSTALL: report register 200.
    let mut bad_reg = ins.clone();
    let first_instr = 8 + 12 + 16 * 2; // header, install header, two events
    bad_reg[first_instr + 2..first_instr + 6].copy_from_slice(&200u32.to_le_bytes());
    assert!(matches!(
        dp.recv_msg(&bad_reg),
        Err(RuntimeError::Program { .. })
    ));
    // Unknown flow and unknown program.
    assert!(matches!(
        dp.recv_msg(&change_prog(99, sc.program_uid, None)),
        Err(RuntimeError::UnknownConnection(99))
    ));
    assert!(matches!(
        dp.recv_msg(&change_prog(sid, 123_456, None)),
        Err(RuntimeError::UnknownProgram { .. })
    ));
    // An update to a primitive register is refused as a whole.
    let upd = update_field::Msg {
        sid,
        num_fields: 2,
        fields: vec![
            (PReg::Implicit(4, Type::Num(None)), 5_000),
            (PReg::Primitive(0, Type::Num(None)), 1),
        ],
    };
    assert!(matches!(
        dp.recv_msg(&serialize(&upd).expect("serialize")),
        Err(RuntimeError::BadUpdate { .. })
    ));
    // recv_msg hands errors to the caller; recv_msgs (what poll uses) logs and counts them,
    // and keeps reading after a bad message whose length is known.
    assert_eq!(dp.stats().msgs_rejected, 0);
    assert_eq!(
        dp.recv_msgs(&[0xff; 5]),
        0,
        "a fragment shorter than a header"
    );
    let mut buf = unknown.clone();
    buf.extend_from_slice(&ins);
    buf.extend_from_slice(&[1, 2, 3]);
    assert_eq!(
        dp.recv_msgs(&buf),
        1,
        "the INSTALL between two bad pieces is still read"
    );
    assert_eq!(dp.stats().msgs_rejected, 3);

    // The flow still runs its program, and the refused update left nothing behind.
    let a = dp.invoke(sid, &ack(10_000)).expect("invoke");
    assert_eq!(a.control, Control::Agent);
    assert_eq!(a.cwnd_bytes, Some(10_000));
}

#[test]
fn program_table_overflow_is_refused() {
    let script = Script::default();
    let clock = ManualClock::new(0);
    let cfg = DatapathConfig {
        max_programs: 2,
        ..DatapathConfig::default()
    };
    let mut dp = Datapath::new(cfg, script, clock);
    for i in 0..2 {
        let (ins, _) = install_msg(&format!("(def (Report (x {i}))) (when true (report))"));
        dp.recv_msg(&ins).expect("fits");
    }
    let (ins, _) = install_msg("(def (Report (x 9))) (when true (report))");
    assert!(matches!(
        dp.recv_msg(&ins),
        Err(RuntimeError::ProgramTableFull { max: 2, .. })
    ));
    assert_eq!(dp.program_count(), 2);
}

#[test]
fn division_by_zero_stops_the_invocation_not_the_flow() {
    let (mut dp, script, _clock) = setup();
    let (ins, sc) = install_msg(
        "(def (Report (volatile q 0)))
         (when true (:= Report.q (/ Ack.bytes_acked Ack.ecn_bytes)) (:= Cwnd 5000) (report))",
    );
    dp.recv_msg(&ins).expect("install");
    let sid = flow(&mut dp);
    dp.recv_msg(&change_prog(sid, sc.program_uid, None))
        .expect("change");
    let a = dp.invoke(sid, &ack(10_000)).expect("invoke");
    assert!(matches!(a.fault, Some(vm::VmError::DivByZero { .. })));
    assert_eq!(a.cwnd_bytes, None, "a faulting invocation sets nothing");
    assert!(script.sent_of(msg_type::MEASURE).is_empty());
    let a = dp
        .invoke(
            sid,
            &Primitives {
                ecn_bytes: 2,
                ..ack(10_000)
            },
        )
        .expect("invoke");
    assert_eq!(a.fault, None);
    assert_eq!(a.cwnd_bytes, Some(5000));
    assert_eq!(script.sent_of(msg_type::MEASURE).len(), 1);
    assert_eq!(dp.stats().vm_faults, 1);
}

#[test]
fn closing_a_flow_does_not_wait_for_an_answer() {
    let (mut dp, _script, clock) = setup();
    let (ins, sc) = install_msg(COUNTER);
    dp.recv_msg(&ins).expect("install");
    let sid = flow(&mut dp);
    // The agent answers the CREATE: nothing is outstanding.
    dp.recv_msg(&change_prog(sid, sc.program_uid, None))
        .expect("change");
    dp.close_flow(sid).expect("close");
    // The agent says nothing about a closed flow, well past the 50 ms timeout.
    clock.advance_ns(500 * MS);
    dp.poll();
    assert!(!dp.in_fallback(), "a close is not a question");
    assert_eq!(dp.stats().fallback_entries, 0);
}

#[test]
fn silent_agent_means_fallback_with_backoff_then_recovery() {
    let (mut dp, script, clock) = setup();
    let (ins, sc) = install_msg(COUNTER);
    dp.recv_msg(&ins).expect("install");
    let sid = flow(&mut dp);
    dp.recv_msg(&change_prog(sid, sc.program_uid, Some(30_000)))
        .expect("change");
    let mut cwnd = dp
        .invoke(sid, &ack(14_480))
        .expect("invoke")
        .cwnd_bytes
        .expect("cwnd");

    // The agent stops answering: after 50 ms of silence the flow falls back.
    *script.mode.borrow_mut() = Mode::Gone;
    let mut fallback_at = None;
    for i in 0..400u64 {
        clock.advance_ns(MS);
        let a = dp.invoke(sid, &ack(cwnd)).expect("invoke");
        cwnd = a.cwnd_bytes.unwrap_or(cwnd);
        if a.control == Control::Fallback && fallback_at.is_none() {
            fallback_at = Some(i);
        }
    }
    let at = fallback_at.expect("fell back");
    assert!(
        (45..=60).contains(&at),
        "fallback after the 50 ms timeout, got {at} ms"
    );
    assert!(
        cwnd > 30_000 * 2,
        "the fallback rule keeps growing the window: {cwnd}"
    );
    assert!(dp.in_fallback());

    // While gone, READY is retried with exponential backoff (100, 200, 400 ms, ...).
    *script.mode.borrow_mut() = Mode::Up;
    script.sent.borrow_mut().clear();
    for _ in 0..1500 {
        clock.advance_ns(MS);
        cwnd = dp
            .invoke(sid, &ack(cwnd))
            .expect("invoke")
            .cwnd_bytes
            .expect("cwnd");
    }
    let readies = script.sent_of(msg_type::READY).len();
    assert!(
        (2..=5).contains(&readies),
        "backoff bounds the retries: {readies} in 1.5 s"
    );
    let creates = script.sent_of(msg_type::CREATE);
    assert_eq!(
        creates.len(),
        readies,
        "each READY is followed by the flow's CREATE"
    );
    let init_cwnd = u32::from_le_bytes(creates[0][8..12].try_into().unwrap());
    assert!(
        init_cwnd > 30_000,
        "CREATE carries the current window, not the first one"
    );

    // The agent answers: a new program generation, then the flow is taken back.
    let (ins, sc) = install_msg(COUNTER);
    dp.recv_msg(&ins).expect("install");
    assert!(!dp.in_fallback());
    dp.recv_msg(&change_prog(
        sid,
        sc.program_uid,
        Some(u64::from(init_cwnd)),
    ))
    .expect("change");
    let a = dp.invoke(sid, &ack(cwnd)).expect("invoke");
    assert_eq!(a.control, Control::Agent);
    assert_eq!(a.cwnd_bytes, Some(init_cwnd));
    assert_eq!(dp.stats().fallback_entries, 1);
    assert_eq!(dp.stats().agent_recoveries, 1);
}

#[test]
fn a_full_agent_queue_is_retried_in_order_not_lost() {
    let (mut dp, script, _clock) = setup();
    let (ins, sc) = install_msg(
        "(def (Report (volatile a 0))) (when true (:= Report.a Ack.bytes_acked) (report))",
    );
    dp.recv_msg(&ins).expect("install");
    let sid = flow(&mut dp);
    dp.recv_msg(&change_prog(sid, sc.program_uid, None))
        .expect("change");
    script.sent.borrow_mut().clear();
    *script.mode.borrow_mut() = Mode::Full;
    for i in 1..=5 {
        dp.invoke(
            sid,
            &Primitives {
                bytes_acked: i,
                ..ack(10_000)
            },
        )
        .expect("invoke");
    }
    assert!(script.sent.borrow().is_empty());
    assert_eq!(dp.stats().sends_full, 5);
    *script.mode.borrow_mut() = Mode::Up;
    dp.poll();
    let got: Vec<u64> = script
        .sent_of(msg_type::MEASURE)
        .iter()
        .map(|m| u64::from_le_bytes(m[16..24].try_into().unwrap()))
        .collect();
    assert_eq!(got, vec![1, 2, 3, 4, 5]);
}

#[test]
fn no_agent_at_all_still_moves_the_window() {
    let clock = ManualClock::new(0);
    let mut dp = Datapath::new(DatapathConfig::default(), NoAgent, clock.clone());
    let sid = dp
        .create_flow(FlowInfo {
            init_cwnd_bytes: 14_480,
            mss_bytes: 1448,
            ..FlowInfo::default()
        })
        .expect("flow");
    let mut cwnd = 14_480;
    for _ in 0..100 {
        clock.advance_ns(MS);
        let a = dp.invoke(sid, &ack(cwnd)).expect("invoke");
        assert_eq!(a.control, Control::Fallback);
        cwnd = a.cwnd_bytes.expect("cwnd");
    }
    assert_eq!(cwnd, 14_480 + 100 * 1448, "slow start on the fallback rule");
    assert!(dp.stats().sends_failed >= 1);
}

#[test]
fn connection_table_is_bounded_and_slots_are_reused() {
    let cfg = DatapathConfig {
        max_connections: 2,
        ..DatapathConfig::default()
    };
    let mut dp = Datapath::new(cfg, NoAgent, ManualClock::new(0));
    let a = dp.create_flow(FlowInfo::default()).expect("a");
    let _b = dp.create_flow(FlowInfo::default()).expect("b");
    assert!(matches!(
        dp.create_flow(FlowInfo::default()),
        Err(RuntimeError::ConnectionTableFull(2))
    ));
    dp.close_flow(a).expect("close");
    assert_eq!(dp.create_flow(FlowInfo::default()).expect("reuse"), a);
    assert!(matches!(
        dp.invoke(77, &Primitives::default()),
        Err(RuntimeError::UnknownConnection(77))
    ));
    assert!(matches!(
        dp.invoke(0, &Primitives::default()),
        Err(RuntimeError::UnknownConnection(0))
    ));
}

mod robustness {
    //! Whatever bytes arrive, the runtime answers with errors, never a panic, and its flows
    //! keep running. Flows and ACKs are drawn over each field's whole range (any `u32` MSS and
    //! window, 0 and `u32::MAX` included; any `u64` RTT and rate), not just typical values.
    use super::*;
    use proptest::prelude::*;

    fn valid_messages() -> Vec<Vec<u8>> {
        let (ins, sc) = install_msg(COUNTER);
        let upd = update_field::Msg {
            sid: 1,
            num_fields: 1,
            fields: vec![(PReg::Implicit(4, Type::Num(None)), 9_000)],
        };
        vec![
            ins,
            change_prog(1, sc.program_uid, Some(20_000)),
            serialize(&upd).expect("ser"),
        ]
    }

    fn edge_u32() -> impl Strategy<Value = u32> {
        prop_oneof![
            Just(0u32),
            Just(1u32),
            Just(1448u32),
            Just(1u32 << 31),
            Just(u32::MAX),
            any::<u32>(),
        ]
    }

    fn edge_u64() -> impl Strategy<Value = u64> {
        prop_oneof![
            Just(0u64),
            Just(1u64),
            Just(u64::from(u32::MAX)),
            Just(1u64 << 63),
            Just(u64::MAX),
            any::<u64>(),
        ]
    }

    fn any_flow_info() -> impl Strategy<Value = FlowInfo> {
        (
            (edge_u32(), edge_u32()),
            (any::<u32>(), edge_u32(), any::<u32>(), edge_u32()),
            proptest::option::of(
                proptest::collection::vec(any::<char>(), 0..80).prop_map(String::from_iter),
            ),
        )
            .prop_map(
                |((init_cwnd_bytes, mss_bytes), (src_ip, src_port, dst_ip, dst_port), alg)| {
                    FlowInfo {
                        init_cwnd_bytes,
                        mss_bytes,
                        src_ip,
                        src_port,
                        dst_ip,
                        dst_port,
                        alg,
                    }
                },
            )
    }

    fn any_primitives() -> impl Strategy<Value = Primitives> {
        (
            (
                edge_u32(),
                edge_u32(),
                edge_u32(),
                edge_u32(),
                edge_u32(),
                edge_u32(),
                edge_u32(),
            ),
            (any::<bool>(), edge_u64(), edge_u64(), edge_u64()),
            (edge_u32(), edge_u32(), edge_u32(), edge_u64(), edge_u32()),
        )
            .prop_map(
                |(
                    (bytes_acked, packets_acked, bytes_mis, packets_mis, ecn_b, ecn_p, lost),
                    (was_timeout, rtt_sample_us, rate_outgoing, rate_incoming),
                    (bytes_in_flight, packets_in_flight, snd_cwnd, snd_rate, bytes_pending),
                )| Primitives {
                    bytes_acked,
                    packets_acked,
                    bytes_misordered: bytes_mis,
                    packets_misordered: packets_mis,
                    ecn_bytes: ecn_b,
                    ecn_packets: ecn_p,
                    lost_pkts_sample: lost,
                    was_timeout,
                    rtt_sample_us,
                    rate_outgoing,
                    rate_incoming,
                    bytes_in_flight,
                    packets_in_flight,
                    snd_cwnd,
                    snd_rate,
                    bytes_pending,
                },
            )
    }

    /// Anything from empty to past libccp's largest message.
    fn any_bytes() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..600),
            proptest::collection::vec(any::<u8>(), 0..=wire::MAX_MSG_LEN + 1_000),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn random_bytes_never_panic(
            bytes in any_bytes(),
            info in any_flow_info(),
            prims in any_primitives(),
        ) {
            let (mut dp, _script, _clock) = setup();
            let sid = dp.create_flow(info).expect("flow");
            dp.recv_msgs(&bytes);
            let _ = dp.recv_msg(&bytes);
            prop_assert!(dp.invoke(sid, &prims).is_ok());
        }

        #[test]
        fn mutated_messages_never_panic(
            which in 0usize..3,
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
            cut in any::<usize>(),
            info in any_flow_info(),
            acks in proptest::collection::vec(any_primitives(), 20),
        ) {
            let (mut dp, _script, clock) = setup();
            let sid = dp.create_flow(info).expect("flow");
            let msgs = valid_messages();
            dp.recv_msgs(&msgs[0]);
            let mut m = msgs[which].clone();
            for (pos, byte) in flips {
                let i = pos % m.len();
                m[i] = byte;
            }
            m.truncate(cut % (m.len() + 1));
            dp.recv_msgs(&m);
            for prims in &acks {
                clock.advance_ns(MS);
                let a = dp.invoke(sid, prims);
                prop_assert!(a.is_ok());
            }
        }

        /// A flow under an agent program, with any window the agent sets and any ACKs: the
        /// program's arithmetic wraps, nothing panics, and the flow stays under the agent.
        #[test]
        fn any_flow_and_any_acks_under_a_program_never_panic(
            info in any_flow_info(),
            cwnd in proptest::option::of(edge_u64()),
            acks in proptest::collection::vec((any_primitives(), edge_u64()), 1..40),
        ) {
            let (mut dp, _script, clock) = setup();
            let (ins, sc) = install_msg(COUNTER);
            dp.recv_msg(&ins).expect("install");
            let sid = dp.create_flow(info).expect("flow");
            dp.recv_msg(&change_prog(sid, sc.program_uid, cwnd)).expect("change");
            for (prims, gap_ns) in &acks {
                // At most 1 ms apart: 40 ACKs stay inside the 50 ms agent timeout.
                clock.advance_ns(gap_ns % MS);
                let a = dp.invoke(sid, prims).expect("invoke");
                prop_assert_eq!(a.control, Control::Agent);
            }
            dp.close_flow(sid).expect("close");
        }
    }
}

#[test]
fn reinstalling_a_uid_with_new_constants_restarts_it_safely() {
    let (mut dp, _script, _clock) = setup();
    let (ins, sc) =
        install_msg("(def (Report (volatile a 0))) (when true (:= Cwnd 1000) (report))");
    dp.recv_msg(&ins).expect("install");
    let sid = flow(&mut dp);
    dp.recv_msg(&change_prog(sid, sc.program_uid, None))
        .expect("change");
    assert_eq!(
        dp.invoke(sid, &ack(5_000)).expect("invoke").cwnd_bytes,
        Some(1000)
    );
    // Same uid, more constants: the flow must run the new program, not index past its file.
    let (bin, _) = portus::lang::compile(
        b"(def (Report (volatile a 0))) (when true (:= Report.a (+ 7 (+ 11 13))) (:= Cwnd 2000) (report))",
        &[],
    )
    .expect("compile");
    let msg = install::Msg {
        sid: 0,
        program_uid: sc.program_uid,
        num_events: bin.events.len() as u32,
        num_instrs: bin.instrs.len() as u32,
        instrs: bin,
    };
    dp.recv_msg(&serialize(&msg).expect("serialize"))
        .expect("reinstall");
    let a = dp.invoke(sid, &ack(5_000)).expect("invoke");
    assert_eq!(a.cwnd_bytes, Some(2000));
    assert_eq!(a.fault, None);
}
