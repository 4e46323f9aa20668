//! The network-namespace testbed on real kernel TCP: a shaped and delayed link, random loss,
//! a path change mid-run, mahimahi trace replay (its time zero is the run's), several flows
//! at once, the kernel's count of timeouts, and cleanup (after drop, and of a crashed run's leftovers).
//!
//! Each test builds its own testbed and runs flows for a few seconds; the tests take turns
//! because their numbers depend on timing. Tolerances are loose enough for a loaded two-core
//! machine and tight enough to catch a link that is not shaped, not delayed or not lossy.
//! Without root (or network-namespace permission, or iproute2), each test prints one line
//! saying why and returns.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ccp_datapath::kernel::tcp;
use ccp_datapath::kernel::testbed::{
    self, FlowSpec, LinkConfig, NS_PREFIX, Testbed, TestbedConfig, Trace,
};

/// Timing-sensitive: the tests take turns.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Payload share of a full frame: 1448 bytes of TCP payload (timestamps on) per 1514-byte
/// Ethernet frame.
const PAYLOAD_PER_FRAME: f64 = 1448.0 / 1514.0;

fn turn() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner)
}

fn testbed_or_skip(test: &str, config: TestbedConfig) -> Option<Testbed> {
    match Testbed::new(config) {
        Ok(tb) => Some(tb),
        Err(e) if e.is_unavailable() => {
            println!("SKIP {test}: the testbed is unavailable here: {e}");
            None
        }
        Err(e) => panic!("building the testbed failed: {e}"),
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn mbps(bps: f64) -> f64 {
    bps / 1e6
}

fn assert_near(what: &str, got: f64, want: f64, tolerance: f64) {
    assert!(
        (got - want).abs() <= tolerance * want,
        "{what}: got {got:.3}, want {want:.3} within {:.0} %",
        tolerance * 100.0
    );
}

fn named_namespaces() -> Vec<String> {
    match std::fs::read_dir("/run/netns") {
        Ok(dir) => dir
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn cubic_fills_a_10_mbit_40_ms_link_and_sees_its_rtt() {
    let _turn = turn();
    let link = LinkConfig::constant(10_000_000, ms(40));
    let Some(tb) = testbed_or_skip("cubic_fills_a_10_mbit_40_ms_link", TestbedConfig::new(link))
    else {
        return;
    };
    let f = tb
        .run(&[FlowSpec::timed("cubic", Duration::from_secs(4))])
        .unwrap()
        .remove(0);
    let stats = tb.stats().unwrap();
    println!(
        "goodput {:.2} Mbit/s, min RTT {} us, srtt p50 {} us p95 {} us, loss {:.4}, {stats:?}",
        mbps(f.goodput_bps),
        f.min_rtt_us,
        f.srtt_p50_us,
        f.srtt_p95_us,
        f.loss
    );
    assert_eq!(f.cca, "cubic");
    assert!(f.completed);
    // One flow with a 1-BDP buffer keeps the link busy: goodput within 10 % of the rate.
    assert_near("goodput, Mbit/s", mbps(f.goodput_bps), 10.0, 0.10);
    assert!(
        f.goodput_bps <= 10e6 * PAYLOAD_PER_FRAME * 1.02,
        "faster than the link"
    );
    // The relay's delay, plus at most one frame's serialization (1.2 ms at 10 Mbit/s).
    assert_near("min RTT, ms", f64::from(f.min_rtt_us) / 1e3, 40.0, 0.05);
    assert!(
        f.min_rtt_us >= 39_800,
        "RTT below the configured delay: {}",
        f.min_rtt_us
    );
    // The queue fills: cubic's RTT samples sit between the empty and the full buffer.
    assert!(f.srtt_p50_us > 40_500 && f.srtt_p95_us < 100_000, "{f:?}");
    assert!(!f.series.is_empty());
    assert_eq!(stats.data.random_drops, 0);
    assert_eq!(
        stats.data.oversized, 0,
        "offloads left on: the relay saw GSO frames"
    );
    // Frames leave when their delay ends, give or take the scheduler of a busy machine (a
    // workspace test run beside it made 6 % late once; a relay that did not keep time would
    // make nearly all of them late).
    assert!(
        stats.data.late_frames * 10 < stats.data.forwarded,
        "{stats:?}"
    );
    assert!(stats.data.forwarded >= 3_000, "{stats:?}");
    assert!(stats.ack.forwarded >= 1_000, "{stats:?}");
}

#[test]
fn random_loss_drops_one_percent_of_data_frames() {
    let _turn = turn();
    let link = LinkConfig::constant(50_000_000, ms(4)).with_loss(0.01);
    let Some(tb) = testbed_or_skip("random_loss", TestbedConfig::new(link).with_seed(7)) else {
        return;
    };
    let f = tb
        .run(&[FlowSpec::timed("cubic", Duration::from_secs(3))])
        .unwrap()
        .remove(0);
    let stats = tb.stats().unwrap();
    println!(
        "goodput {:.2} Mbit/s, flow loss {:.4}, relay drop fraction {:.4}, {stats:?}",
        mbps(f.goodput_bps),
        f.loss,
        stats.random_drop_fraction()
    );
    assert!(
        stats.data.frames_in >= 5_000,
        "too few frames to judge: {stats:?}"
    );
    assert_near(
        "relay drop fraction",
        stats.random_drop_fraction(),
        0.01,
        0.4,
    );
    assert_eq!(stats.ack.random_drops, 0, "the ACK direction is lossless");
    // The sender retransmits about what was dropped (plus a little spurious or queue loss).
    assert!((0.005..0.03).contains(&f.loss), "flow loss {}", f.loss);
}

#[test]
fn set_link_changes_rate_and_delay_mid_flow() {
    let _turn = turn();
    let fast = LinkConfig::constant(20_000_000, ms(20));
    let slow = LinkConfig::constant(5_000_000, ms(60));
    let Some(tb) = testbed_or_skip("set_link", TestbedConfig::new(fast.clone())) else {
        return;
    };
    let within = |got: f64, want: f64| (got - want).abs() <= 0.15 * want;
    // A real-time run on a shared machine: a flow that a descheduled relay stalled in its fast
    // phase (seen once in many runs: 14 of 19 Mbit/s) gets one more run; two such runs fail.
    let mut attempt = 0;
    let (f, before, after) = loop {
        attempt += 1;
        tb.set_link(fast.clone()).unwrap();
        let f = tb
            .run_with_changes(
                &[FlowSpec::timed("cubic", Duration::from_secs(5))],
                &[(ms(2_500), slow.clone())],
            )
            .unwrap()
            .remove(0);
        assert_eq!(tb.link(), slow);
        let before = f.goodput_between(ms(1_000), ms(2_500)).unwrap();
        let after = f.goodput_between(ms(3_500), ms(5_000)).unwrap();
        let ok = within(mbps(before), 20.0 * PAYLOAD_PER_FRAME)
            && within(mbps(after), 5.0 * PAYLOAD_PER_FRAME);
        if ok || attempt == 2 {
            break (f, before, after);
        }
        println!(
            "attempt {attempt}: before {:.2} Mbit/s, after {:.2} Mbit/s; once more",
            mbps(before),
            mbps(after)
        );
    };
    println!(
        "before {:.2} Mbit/s, after {:.2} Mbit/s",
        mbps(before),
        mbps(after)
    );
    assert_near(
        "goodput at 20 Mbit/s",
        mbps(before),
        20.0 * PAYLOAD_PER_FRAME,
        0.15,
    );
    assert_near(
        "goodput at 5 Mbit/s",
        mbps(after),
        5.0 * PAYLOAD_PER_FRAME,
        0.15,
    );
    // The longer path shows in every RTT sample once the old frames have drained.
    let srtt = |from: Duration, to: Duration| {
        let mut v: Vec<u32> = f
            .samples
            .iter()
            .filter(|s| s.at >= from && s.at < to)
            .map(|s| s.srtt_us)
            .collect();
        v.sort_unstable();
        v
    };
    let (before, after) = (srtt(ms(1_000), ms(2_500)), srtt(ms(3_500), ms(5_000)));
    println!(
        "srtt before {}..{} us, after {}..{} us",
        before[0],
        before[before.len() - 1],
        after[0],
        after[after.len() - 1]
    );
    assert!(before[before.len() / 2] < 45_000, "{before:?}");
    assert!(after[0] >= 59_000, "{after:?}");
}

#[test]
fn a_constant_mahimahi_trace_gives_its_rate() {
    let _turn = turn();
    // One 1504-byte opportunity per millisecond: 12 Mbit/s, one full-size packet per ms.
    let text = (1..=1000)
        .map(|t: u32| t.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    let trace = Trace::parse("one-per-ms", &text).unwrap();
    assert_eq!(testbed::trace_mean_bps(&trace), 12_032_000);
    let link = LinkConfig::trace(trace, ms(40));
    let Some(tb) = testbed_or_skip("mahimahi_trace", TestbedConfig::new(link)) else {
        return;
    };
    let f = tb
        .run(&[FlowSpec::timed("cubic", Duration::from_secs(4))])
        .unwrap()
        .remove(0);
    let stats = tb.stats().unwrap();
    let steady = f.goodput_between(ms(1_000), ms(4_000)).unwrap();
    println!(
        "goodput {:.2} Mbit/s (steady {:.2}), min RTT {} us, {stats:?}",
        mbps(f.goodput_bps),
        mbps(steady),
        f.min_rtt_us
    );
    // 1000 packets/s of 1448 payload bytes.
    let want = 1000.0 * 1448.0 * 8.0 / 1e6;
    assert_near("steady goodput, Mbit/s", mbps(steady), want, 0.05);
    assert_near("goodput, Mbit/s", mbps(f.goodput_bps), want, 0.10);
    assert_eq!(stats.qdisc_drops, 0, "no htb shaper in trace mode");
    assert_near("min RTT, ms", f64::from(f.min_rtt_us) / 1e3, 40.0, 0.05);
}

#[test]
fn a_traces_time_zero_is_the_runs_start() {
    let _turn = turn();
    // Every 3 s: 1 s of one opportunity per millisecond, then 2 s of nothing.
    let mut lines: Vec<String> = (1..=1000).map(|t: u32| t.to_string()).collect();
    lines.push("3000".into());
    let trace = Trace::parse("one-s-in-three", &lines.join("\n")).unwrap();
    let link = LinkConfig::trace(trace, ms(10));
    let Some(tb) = testbed_or_skip("trace_time_zero", TestbedConfig::new(link)) else {
        return;
    };
    // What a run's set-up (an agent, a BPF program) may take before the run starts: 1.5 s
    // in which the trace must not run on, or the run would start in its dark part.
    std::thread::sleep(ms(1_500));
    let f = tb
        .run(&[FlowSpec::timed("cubic", ms(900))])
        .unwrap()
        .remove(0);
    println!(
        "handshake {:?}, goodput {:.2} Mbit/s over {:?}",
        f.connect_time,
        mbps(f.goodput_bps),
        f.active
    );
    // The run's first 900 ms meet the trace's lit second: the handshake takes a round trip
    // and a slow start's worth of data gets through. Met 1.5 s into the trace, the SYN would
    // wait out the dark part (1.5 s) in the queue.
    assert!(f.connect_time < ms(500), "handshake {:?}", f.connect_time);
    assert!(f.bytes_received > 300_000, "{} bytes", f.bytes_received);
}

#[test]
fn the_kernels_timeout_count_sees_every_backed_off_rto() {
    let _turn = turn();
    let clear = LinkConfig::constant(20_000_000, ms(10));
    // 1.4 s in which almost nothing gets through: the retransmission timer fires, backs off
    // to twice its value and fires again, within one stay in the Loss state.
    let dark = clear.clone().with_loss(0.999);
    let config = TestbedConfig::new(clear.clone()).with_seed(3);
    let Some(tb) = testbed_or_skip("timeout_count", config) else {
        return;
    };
    let f = tb
        .run_with_changes(
            &[FlowSpec::timed("cubic", Duration::from_secs(4))],
            &[(ms(1_500), dark), (ms(2_900), clear)],
        )
        .unwrap()
        .remove(0);
    let Some(rtos) = f.samples.last().and_then(|s| s.total_rto) else {
        println!("SKIP timeout_count: this kernel's TCP_INFO has no tcpi_total_rto (before 6.7)");
        return;
    };
    let loss_entries = testbed::loss_state_entries(&f.samples);
    let counts: Vec<u16> = f.samples.iter().filter_map(|s| s.total_rto).collect();
    println!("{rtos} RTOs, {loss_entries} entries into Loss");
    // The minimum RTO is 200 ms: at least 200 + 400 ms of backoff fit in the outage.
    assert!(rtos >= 2, "{rtos} RTOs in a 1.4-s outage");
    assert!(
        usize::from(rtos) > loss_entries,
        "{rtos} RTOs, {loss_entries} Loss entries"
    );
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
    assert!(f.completed && f.goodput_bps > 1e6, "{f:?}");
}

#[test]
fn flows_share_the_link_and_honour_their_socket_hooks() {
    let _turn = turn();
    let link = LinkConfig::constant(20_000_000, ms(10));
    let Some(tb) = testbed_or_skip("several_flows", TestbedConfig::new(link)) else {
        return;
    };
    let bytes = 2_000_000;
    let results = tb
        .run(&[
            FlowSpec::timed("cubic", Duration::from_secs(3)),
            FlowSpec::bytes("cubic", bytes)
                .starting_at(ms(500))
                .with_hook(|fd| tcp::set_congestion_control(&fd, "reno")),
            FlowSpec::timed("bbr", Duration::from_secs(2)).starting_at(ms(1_000)),
        ])
        .unwrap();
    for f in &results {
        println!(
            "{} {}: {:.2} Mbit/s over {:?}, {} bytes, started at {:?}",
            f.index,
            f.cca,
            mbps(f.goodput_bps),
            f.active,
            f.bytes_received,
            f.started_at
        );
    }
    let [cubic, reno, bbr] = &results[..] else {
        panic!("three results expected")
    };
    assert_eq!(
        [cubic.cca.as_str(), reno.cca.as_str(), bbr.cca.as_str()],
        ["cubic", "reno", "bbr"]
    );
    assert!(reno.completed && reno.bytes_received == bytes, "{reno:?}");
    assert!(reno.started_at >= ms(500) && bbr.started_at >= ms(1_000));
    assert!(cubic.completed && bbr.completed);
    for f in &results {
        assert!(f.goodput_bps > 1e6, "flow {} starved: {f:?}", f.index);
    }
    // Together they use the link and never beat it.
    let total: u64 = results.iter().map(|f| f.bytes_received).sum();
    let first = results.iter().map(|f| f.started_at).min().unwrap();
    let last = results
        .iter()
        .map(|f| f.started_at + f.connect_time + f.active)
        .max()
        .unwrap();
    let together = total as f64 * 8.0 / last.saturating_sub(first).as_secs_f64();
    println!("together {:.2} Mbit/s", mbps(together));
    // Never above the link; below it by the stretch where the byte-count Reno flow, its share
    // decided by the others, finishes alone from a small window (in one of eight runs here it
    // ended ~1 s after the others and the total landed 13 % under the link).
    let link_mbps = 20.0 * PAYLOAD_PER_FRAME;
    assert!(
        mbps(together) <= link_mbps * 1.02 && mbps(together) >= link_mbps * 0.75,
        "goodput together: {:.3} Mbit/s, link {link_mbps:.3}",
        mbps(together)
    );
}

#[test]
fn drop_removes_every_namespace() {
    let _turn = turn();
    let link = LinkConfig::unlimited(ms(2));
    let Some(tb) = testbed_or_skip("drop_removes_namespaces", TestbedConfig::new(link)) else {
        return;
    };
    let names: Vec<String> = tb.namespaces().iter().map(ToString::to_string).collect();
    for n in &names {
        assert!(Path::new("/run/netns").join(n).exists(), "{n} missing");
        assert_eq!(testbed::creator_pid(n), Some(std::process::id()));
    }
    drop(tb);
    let ours = format!("{NS_PREFIX}-{}-", std::process::id());
    let left: Vec<_> = named_namespaces()
        .into_iter()
        .filter(|n| n.starts_with(&ours))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_crashed_runs_leftovers_are_removed_by_the_next_testbed() {
    let _turn = turn();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIP a_crashed_runs_leftovers: not root, cannot create network namespaces");
        return;
    }
    // A pid that just died, and one that never does.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale: Vec<String> = ["snd", "rtr", "rcv"]
        .iter()
        .map(|role| format!("{NS_PREFIX}-{dead}-0-{role}"))
        .collect();
    let live = format!("{NS_PREFIX}-1-0-snd");
    for n in stale.iter().chain([&live]) {
        let ok = Command::new("ip")
            .args(["netns", "add", n])
            .status()
            .unwrap();
        assert!(ok.success(), "ip netns add {n}");
    }
    // A veth in the stale namespaces, as a crashed testbed leaves them.
    let ok = Command::new("ip")
        .args([
            "link", "add", "snd0", "netns", &stale[0], "type", "veth", "peer", "name",
        ])
        .args(["rtr-snd", "netns", &stale[1]])
        .status()
        .unwrap();
    assert!(ok.success());
    let tb = testbed_or_skip(
        "a_crashed_runs_leftovers",
        TestbedConfig::new(LinkConfig::unlimited(ms(2))),
    );
    let now = named_namespaces();
    let removed_live = !now.contains(&live);
    let _ = Command::new("ip").args(["netns", "del", &live]).status();
    assert!(!removed_live, "a live process's namespace was removed");
    let Some(_tb) = tb else { return };
    for n in &stale {
        assert!(!now.contains(n), "{n} survived");
    }
    assert!(testbed::cleanup_stale().unwrap().is_empty());
}

#[test]
fn two_testbeds_run_side_by_side() {
    let _turn = turn();
    let build = || {
        let link = LinkConfig::constant(10_000_000, ms(20));
        testbed_or_skip("two_testbeds_run_side_by_side", TestbedConfig::new(link))
    };
    let results: Vec<Option<f64>> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let tb = build()?;
                    let f = tb
                        .run(&[FlowSpec::timed("cubic", Duration::from_secs(2))])
                        .unwrap()
                        .remove(0);
                    Some(f.goodput_between(ms(500), ms(2_000)).unwrap())
                })
            })
            .collect();
        runs.into_iter().map(|t| t.join().unwrap()).collect()
    });
    for goodput in results.into_iter().flatten() {
        println!("goodput {:.2} Mbit/s", mbps(goodput));
        // Each has its own link: neither shares the other's 10 Mbit/s.
        assert_near(
            "goodput, Mbit/s",
            mbps(goodput),
            10.0 * PAYLOAD_PER_FRAME,
            0.1,
        );
    }
}
