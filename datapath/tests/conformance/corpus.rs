//! The hand-written corpus: portus's integration-test programs and programs covering every
//! operation, fault and register kind, with the cases that run them.

use crate::aimd;
use crate::cases::{Case, Src, Val};

// ---------------------------------------------------------------------------------------------
// Hand-written corpus.

const PORTUS_BASIC: &str = "
    (def (Report.acked 0) (Control.num_invoked 0) (Report.cwnd 0) (Report.rate 0))
    (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Control.num_invoked (+ Control.num_invoked 1))
        (:= Report.cwnd Cwnd)
        (:= Report.rate Rate)
        (fallthrough)
    )
    (when (== Control.num_invoked 20)
        (report)
    )";

const PORTUS_PRESET: &str = "
    (def
        (Report
            (testFoo 0)
        )
        (foo 0)
    )
    (when true
        (:= Report.testFoo foo)
        (report)
    )";

const PORTUS_TIMING: &str = "
    (def (Report.acked 0) (Control.state 0) (Report.cwnd 0) (Report.rate 0))
    (when true
        (:= Report.acked Ack.bytes_acked)
        (:= Report.cwnd Cwnd)
        (:= Report.rate Rate)
        (fallthrough)
    )
    (when (&& (> Micros 3000000) (== Control.state 0))
        (:= Control.state 1)
        (report)
    )";

const PORTUS_TWOFLOW: &str = "
    (def (Control.number 0) (Report.value 0))
    (when (> Control.number 0)
        (:= Report.value Control.number)
        (:= Control.numer 0)
        (report)
    )";

const PORTUS_UPDATE: &str = "
    (def (Report.acked 0) (Report.cwnd 0) (Report.rate 0))
    (when true
        (:= Report.acked Ack.bytes_acked)
        (:= Report.cwnd Cwnd)
        (:= Report.rate Rate)
        (fallthrough)
    )
    (when (== Cwnd 42)
        (report)
    )
    (when (> Micros 10000000)
        (report)
    )";

const PORTUS_VOLATILE: &str = "
    (def
        (volatile foo1 0)
        (Report
            (volatile foo 0)
            (bar 0)
            (volatile sum 0)
        )
        (bar1 0)
    )
    (when true
        (:= Report.foo (+ Report.foo 1))
        (:= Report.bar (+ Report.bar 1))
        (:= foo1 (+ foo1 1))
        (:= bar1 (+ bar1 1))
        (:= Report.sum (+ foo1 bar1))
        (fallthrough)
    )
    (when (== Report.foo 10)
        (report)
    )";

/// Every operation, both report kinds, both control kinds, locals, `if`/`!if`/`ewma`.
const ALL_OPS: &str = "
    (def
        (Report
            (volatile sum 0) (volatile diff 0) (volatile prod 0) (volatile quot 0)
            (volatile eq false) (volatile gt false) (volatile lt false)
            (mx 0) (mn +infinity) (wmx 0)
            (volatile both false) (volatile either false)
            (cond 0) (ncond 0) (avg 0) (loc 0)
        )
        (ctl 7)
        (volatile vctl 0)
    )
    (when true
        (:= Report.sum (+ Report.sum Ack.bytes_acked))
        (:= Report.diff (- Flow.bytes_in_flight (min Flow.bytes_in_flight Ack.bytes_acked)))
        (:= Report.prod (* Ack.packets_acked ctl))
        (:= Report.quot (/ Flow.bytes_pending (+ Ack.packets_acked 1)))
        (:= Report.eq (== Ack.ecn_packets 0))
        (:= Report.gt (> Flow.rtt_sample_us 50000))
        (:= Report.lt (< Flow.rtt_sample_us 50000))
        (:= Report.mx (max Report.mx Flow.rtt_sample_us))
        (:= Report.mn (min Report.mn Flow.rtt_sample_us))
        (:= Report.wmx (wrapped_max Report.wmx Flow.bytes_pending))
        (:= Report.both (&& Report.eq Report.gt))
        (:= Report.either (|| Report.eq Flow.was_timeout))
        (:= Report.cond (if Report.gt Ack.bytes_acked))
        (:= Report.ncond (!if Report.gt Ack.packets_acked))
        (:= Report.avg (ewma 8 Flow.bytes_in_flight))
        (:= tmp (max Ack.bytes_acked Ack.bytes_misordered))
        (:= Report.loc (+ Report.loc tmp))
        (:= vctl (+ vctl 1))
        (fallthrough)
    )
    (when (> vctl 5)
        (:= Cwnd (+ Cwnd Ack.bytes_acked))
        (:= Rate (max Flow.rate_incoming 1))
        (report)
    )";

/// Fallthrough chains: the flag, once set, carries through later true clauses.
const FALLTHROUGH: &str = "
    (def (Report (volatile a 0) (volatile b 0) (volatile c 0) (volatile d 0)))
    (when (> Ack.bytes_acked 3000)
        (:= Report.a (+ Report.a 1))
        (fallthrough)
    )
    (when (> Ack.bytes_acked 1500)
        (:= Report.b (+ Report.b 1))
    )
    (when (> Ack.packets_acked 1)
        (:= Report.c (+ Report.c 1))
    )
    (when true
        (:= Report.d (+ Report.d 1))
        (:= Cwnd (+ Cwnd (* Report.d 10)))
        (report)
    )";

/// Division by zero on ACKs without packets: no cwnd, no report.
const DIV_ZERO: &str = "
    (def (Report (volatile per_pkt 0)))
    (when true
        (:= Report.per_pkt (/ Ack.bytes_acked Ack.packets_acked))
        (:= Cwnd (+ Cwnd Report.per_pkt))
        (report)
    )";

/// Underflow when more bytes are acked than the window holds.
const SUB_UNDERFLOW: &str = "
    (def (Report (volatile left 0)))
    (when true
        (:= Cwnd (- Cwnd Ack.bytes_acked))
        (:= Report.left Cwnd)
        (report)
    )";

/// 64-bit overflows: add and libccp's partial multiplication check.
const OVERFLOWS: &str = "
    (def (Report (volatile s 0) (volatile p 0)))
    (when true
        (:= Report.s (+ Flow.rate_outgoing Flow.rate_incoming))
        (:= Report.p (* Flow.rate_outgoing Flow.rate_incoming))
        (:= Rate Report.p)
        (report)
    )";

/// Infinity defaults (both spellings), cwnd/rate edge values: 0 (ignored), 2^32 (truncated).
const EDGES: &str = "
    (def
        (Report (minrtt +infinity) (old 1073741823) (volatile big 0))
        (lim +infinity)
    )
    (when true
        (:= Report.minrtt (min Report.minrtt Flow.rtt_sample_us))
        (:= Report.big (* 65536 65536))
        (fallthrough)
    )
    (when (== Ack.packets_acked 0)
        (:= Cwnd 0)
        (:= Rate 0)
        (report)
    )
    (when (== Ack.packets_acked 1)
        (:= Cwnd Report.big)
        (:= Rate lim)
        (report)
    )
    (when (> Ack.packets_acked 1)
        (:= Cwnd (min lim (+ Cwnd 1448)))
        (:= Rate (+ Report.big 1))
    )";

/// Micros: reset by writes, read against a control threshold; Ack.now is reported.
const TIMERS: &str = "
    (def (Report (volatile acked 0) (volatile at 0) (volatile m 0)) (period 40000))
    (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Report.at Ack.now)
        (:= Report.m Micros)
        (fallthrough)
    )
    (when (> Micros period)
        (:= Micros 0)
        (report)
    )";

/// A control set only by the agent steers the window.
const CONTROLLED: &str = "
    (def (Report (volatile acked 0)) (target 14480) (volatile gain 1))
    (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Cwnd (+ (min Cwnd target) (* gain 1448)))
        (fallthrough)
    )
    (when (> Report.acked 20000)
        (report)
    )";

pub(crate) fn hand_cases() -> Vec<Case> {
    let s = Src::new;
    let mut cases = Vec::new();

    let mut aimd = Case::new("agent AIMD", vec![s(aimd::AIMD_PROGRAM_SRC)]);
    aimd.tick_ns = (0, 30_000_000);
    cases.push(aimd);

    // portus's tests switch programs without fields (but preset's `foo`).
    let portus = |name: &str, src: &str| {
        let mut c = Case::new(name, vec![s(src)]);
        c.start_cwnd = false;
        c
    };
    cases.push(portus("portus basic", PORTUS_BASIC));

    let mut preset = portus("portus preset (CHANGE_PROG field)", PORTUS_PRESET);
    preset.start_fields = vec![("foo", Val::Const(52))];
    cases.push(preset);
    let preset_compiled = Src {
        text: PORTUS_PRESET.to_string(),
        presets: vec![("foo", 52)],
    };
    let mut preset = Case::new("portus preset (compile-time)", vec![preset_compiled]);
    preset.start_cwnd = false;
    cases.push(preset);

    let mut timing = portus("portus timing", PORTUS_TIMING);
    timing.tick_ns = (10_000_000, 50_000_000);
    cases.push(timing);

    let mut twoflow = portus("portus twoflow", PORTUS_TWOFLOW);
    twoflow.flows = 2;
    twoflow.updates = vec![(0, vec![("Control.number", Val::SidTimes(10))])];
    cases.push(twoflow);

    let mut update = portus("portus update", PORTUS_UPDATE);
    update.updates = vec![
        (0, vec![("Cwnd", Val::Const(42)), ("Rate", Val::Const(10))]),
        (150, vec![("Cwnd", Val::Const(42))]),
    ];
    update.tick_ns = (0, 100_000_000);
    cases.push(update);

    cases.push(portus("portus volatile", PORTUS_VOLATILE));

    let mut all_ops = Case::new("all ops", vec![s(ALL_OPS)]);
    all_ops.start_fields = vec![("ctl", Val::Const(3)), ("vctl", Val::Const(4))];
    all_ops.updates = vec![(100, vec![("ctl", Val::Const(9)), ("vctl", Val::Const(2))])];
    all_ops.flows = 2;
    cases.push(all_ops);

    cases.push(Case::new("fallthrough", vec![s(FALLTHROUGH)]));
    cases.push(Case::new("division by zero", vec![s(DIV_ZERO)]));
    cases.push(Case::new("sub underflow", vec![s(SUB_UNDERFLOW)]));
    cases.push(Case::new("add/mul overflow", vec![s(OVERFLOWS)]));

    let mut edges = Case::new("infinity and cwnd/rate edges", vec![s(EDGES)]);
    edges.updates = vec![(50, vec![("Rate", Val::Const(0)), ("Cwnd", Val::Const(0))])];
    cases.push(edges);

    let mut timers = Case::new("Micros and Ack.now", vec![s(TIMERS)]);
    timers.tick_ns = (0, 20_000_000);
    timers.updates = vec![(
        120,
        vec![("period", Val::Const(5_000)), ("Micros", Val::Const(7))],
    )];
    cases.push(timers);

    let mut controlled = Case::new("agent-set controls", vec![s(CONTROLLED)]);
    controlled.updates = vec![
        (
            60,
            vec![("target", Val::Const(100_000)), ("gain", Val::Const(3))],
        ),
        (200, vec![("gain", Val::Const(0))]),
    ];
    cases.push(controlled);

    let mut switching = Case::new(
        "program switching",
        vec![
            s(ALL_OPS),
            s(aimd::AIMD_PROGRAM_SRC),
            s(CONTROLLED),
            s(TIMERS),
        ],
    );
    switching.flows = 2;
    switching.acks = 600;
    switching.random_agent_every = 8;
    cases.push(switching);

    cases
}
