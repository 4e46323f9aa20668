//! Control-loop round trip: our datapath sends a report (MEASURE, from `invoke` of a program
//! that reports on every ACK), a portus agent answers with `UPDATE_FIELD(Cwnd)`, our datapath
//! takes the answer in. Latency percentiles over many round trips, for
//! (a) unix datagram sockets to an agent in another process, and
//! (b) portus's in-process channel, the agent in a thread.
//!
//! Not a criterion bench: criterion reports means and throughput-style estimates of batched
//! iterations; a control loop is judged by its latency distribution (p50, p99), which needs
//! every round trip timed on its own.
//!
//! For (a) this binary re-executes itself as the agent (`CCP_BENCH_AGENT=<socket name>`): no
//! separate build step, and the agent exits when this process closes its stdin (even if this
//! process dies), and is killed explicitly at the end.
//!
//! Run: `cargo bench -p ccp-datapath --bench roundtrip`

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ccp_datapath::agent::{spawn_channel_agent, spawn_unix_agent};
use ccp_datapath::runtime::{
    ChannelTransport, Clock, Control, Datapath, DatapathConfig, FlowInfo, MonotonicClock,
    Primitives, Transport, UnixTransport,
};
use ccp_datapath::stats;
use portus::ipc::Ipc;
use portus::lang::Scope;
use portus::{CongAlg, DatapathInfo, DatapathTrait, Flow, Report};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

const AGENT_ENV: &str = "CCP_BENCH_AGENT";
/// CPU the agent process pins itself to, if set.
const AGENT_CPU_ENV: &str = "CCP_BENCH_AGENT_CPU";
const ECHO_PROGRAM: &str = "echo_every_ack";
const ECHO_PROGRAM_SRC: &str = "
(def (Report (volatile acked 0)))
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (report))
";
const INIT_CWND: u32 = 14_480;

/// Round trips measured (after warm-up) per variant.
const ROUND_TRIPS: usize = 20_000;
const WARMUP: usize = 2_000;
/// A round trip that takes longer than this is an error (agent gone).
const TIMEOUT: Duration = Duration::from_secs(2);

// ---- the agent's algorithm -----------------------------------------------------------------

/// Answers every report with `UPDATE_FIELD(Cwnd)`, the window moving by one byte each time.
#[derive(Debug, Clone, Copy, Default)]
struct Echo;

struct EchoFlow<I: Ipc> {
    control: portus::Datapath<I>,
    scope: Option<Scope>,
    cwnd: u32,
}

impl<I: Ipc> CongAlg<I> for Echo {
    type Flow = EchoFlow<I>;

    fn name() -> &'static str {
        "echo"
    }

    fn datapath_programs(&self) -> HashMap<&'static str, String> {
        HashMap::from([(ECHO_PROGRAM, ECHO_PROGRAM_SRC.to_string())])
    }

    fn new_flow(&self, mut control: portus::Datapath<I>, info: DatapathInfo) -> Self::Flow {
        let cwnd = info.init_cwnd.max(2 * info.mss);
        let scope = control
            .set_program(ECHO_PROGRAM, Some(&[("Cwnd", cwnd)]))
            .ok();
        EchoFlow {
            control,
            scope,
            cwnd,
        }
    }
}

impl<I: Ipc> Flow for EchoFlow<I> {
    fn on_report(&mut self, _sock_id: u32, _m: Report) {
        if let Some(sc) = self.scope.as_ref() {
            self.cwnd = if self.cwnd >= 2 * INIT_CWND {
                INIT_CWND
            } else {
                self.cwnd + 1
            };
            let _ = self.control.update_field(sc, &[("Cwnd", self.cwnd)]);
        }
    }
}

/// Pins the calling thread (and threads it spawns later) to CPU `cpu`.
fn pin(cpu: usize) {
    {
        // SAFETY: `set` is a plain bit set owned by this frame; the call only reads it.
        let rc = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &raw const set)
        };
        if rc != 0 {
            eprintln!("could not pin to CPU {cpu}");
        }
    }
}

/// Agent mode: serve `/tmp/ccp/<name>` until stdin closes.
fn agent_main(name: &str) -> BoxResult<()> {
    if let Ok(cpu) = std::env::var(AGENT_CPU_ENV) {
        pin(cpu.parse()?);
    }
    let handle = spawn_unix_agent(Echo, name).map_err(|e| format!("agent: {e:?}"))?;
    println!("ready");
    std::io::stdout().flush()?;
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(handle);
    Ok(())
}

/// The agent process; killed on drop.
struct AgentProcess(Child);

impl AgentProcess {
    fn spawn(name: &str, cpu: Option<usize>) -> BoxResult<Self> {
        let mut cmd = Command::new(std::env::current_exe()?);
        if let Some(cpu) = cpu {
            cmd.env(AGENT_CPU_ENV, cpu.to_string());
        }
        let mut child = cmd
            .env(AGENT_ENV, name)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let out = child.stdout.take().ok_or("no agent stdout")?;
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line)?;
        let agent = Self(child);
        if line.trim() != "ready" {
            return Err(format!("agent did not start: {line:?}").into());
        }
        Ok(agent)
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---- the datapath side ---------------------------------------------------------------------

fn prims(i: u64) -> Primitives {
    Primitives {
        bytes_acked: 1448,
        packets_acked: 1,
        rtt_sample_us: 10_000 + i % 64,
        bytes_in_flight: 14_480,
        packets_in_flight: 10,
        snd_cwnd: INIT_CWND,
        ..Primitives::default()
    }
}

fn config() -> DatapathConfig {
    DatapathConfig {
        // The agent answers every report; a generous timeout keeps scheduling hiccups on a
        // shared machine from sending the flow to fallback mid-measurement.
        agent_timeout_ns: 10_000_000_000,
        ..DatapathConfig::default()
    }
}

/// Polls and invokes until the agent runs the flow.
fn wait_for_agent<T: Transport, C: Clock>(dp: &mut Datapath<T, C>, sid: u32) -> BoxResult<()> {
    let t = Instant::now();
    let mut i = 0;
    loop {
        dp.poll();
        i += 1;
        if dp.invoke(sid, &prims(i))?.control == Control::Agent {
            break;
        }
        if t.elapsed() > Duration::from_secs(10) {
            return Err("the agent never took the flow".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // Take in the answer to that first report, and anything else in flight.
    std::thread::sleep(Duration::from_millis(50));
    dp.poll();
    Ok(())
}

/// How the datapath waits for the answer.
#[derive(Clone, Copy)]
enum Wait {
    /// Spin on `poll()` (non-blocking receive).
    BusyPoll,
    /// `poll()`, then `sched_yield`, until the answer is in: for an agent on the same CPU.
    PollYield,
    /// Block in `ChannelTransport::recv_timeout`, then `recv_msgs`.
    Blocking,
}

trait MaybeBlocking {
    fn recv_blocking(&mut self, buf: &mut [u8]) -> BoxResult<Option<usize>>;
}

impl MaybeBlocking for ChannelTransport {
    fn recv_blocking(&mut self, buf: &mut [u8]) -> BoxResult<Option<usize>> {
        Ok(self.recv_timeout(buf, TIMEOUT)?)
    }
}

impl MaybeBlocking for UnixTransport {
    fn recv_blocking(&mut self, _buf: &mut [u8]) -> BoxResult<Option<usize>> {
        Err("UnixTransport is non-blocking only".into())
    }
}

/// `n` round trips; nanoseconds each.
fn round_trips<T: Transport + MaybeBlocking, C: Clock>(
    dp: &mut Datapath<T, C>,
    sid: u32,
    n: usize,
    wait: Wait,
) -> BoxResult<Vec<u64>> {
    let mut samples = Vec::with_capacity(n);
    let mut buf = vec![0_u8; 4096];
    let mut last_cwnd = None;
    let mut changes = 0_usize;
    for i in 0..n {
        let before = dp.stats().msgs_received;
        let reports_before = dp.stats().reports_sent;
        let t = Instant::now();
        let a = dp.invoke(sid, &prims(i as u64))?;
        match wait {
            Wait::BusyPoll => {
                let mut spins = 0_u32;
                while dp.stats().msgs_received == before {
                    dp.poll();
                    spins = spins.wrapping_add(1);
                    if spins.is_multiple_of(4096) && t.elapsed() > TIMEOUT {
                        return Err(format!("no answer to report {i}").into());
                    }
                }
            }
            Wait::PollYield => {
                while dp.stats().msgs_received == before {
                    dp.poll();
                    if dp.stats().msgs_received != before {
                        break;
                    }
                    std::thread::yield_now();
                    if t.elapsed() > TIMEOUT {
                        return Err(format!("no answer to report {i}").into());
                    }
                }
            }
            Wait::Blocking => {
                let got = dp.transport_mut().recv_blocking(&mut buf)?;
                let n = got.ok_or_else(|| format!("no answer to report {i}"))?;
                dp.recv_msgs(&buf[..n]);
            }
        }
        samples.push(t.elapsed().as_nanos() as u64);
        if a.control != Control::Agent || dp.stats().reports_sent != reports_before + 1 {
            return Err(format!("round trip {i}: flow not under agent control").into());
        }
        if a.cwnd_bytes != last_cwnd {
            changes += 1;
            last_cwnd = a.cwnd_bytes;
        }
    }
    // Every answer changes the window by one byte: the updates really arrived and applied.
    if n > 10 && changes < n - 2 {
        return Err(format!("only {changes} of {n} answers changed the window").into());
    }
    if dp.stats().msgs_rejected != 0 {
        return Err("the datapath rejected agent messages".into());
    }
    Ok(samples)
}

fn fmt_us(ns: u64) -> String {
    format!("{}.{:02} µs", ns / 1_000, (ns % 1_000) / 10)
}

/// The nearest-rank `per_mille` quantile of sorted samples (0 for none).
fn percentile(sorted: &[u64], per_mille: u32) -> u64 {
    stats::percentile(sorted, per_mille).unwrap_or(0)
}

fn print_stats(name: &str, mut s: Vec<u64>) {
    s.sort_unstable();
    let mean = s.iter().sum::<u64>() / s.len() as u64;
    println!(
        "{name}: n={} p50={} p90={} p99={} p99.9={} max={} mean={}",
        s.len(),
        fmt_us(percentile(&s, 500)),
        fmt_us(percentile(&s, 900)),
        fmt_us(percentile(&s, 990)),
        fmt_us(percentile(&s, 999)),
        fmt_us(s[s.len() - 1]),
        fmt_us(mean),
    );
}

fn measure<T: Transport + MaybeBlocking, C: Clock>(
    name: &str,
    dp: &mut Datapath<T, C>,
    sid: u32,
    n: usize,
    warmup: usize,
    wait: Wait,
) -> BoxResult<()> {
    round_trips(dp, sid, warmup, wait)?;
    let s = round_trips(dp, sid, n, wait)?;
    print_stats(name, s);
    Ok(())
}

fn main() -> BoxResult<()> {
    if let Ok(name) = std::env::var(AGENT_ENV) {
        return agent_main(&name);
    }
    // `cargo bench` passes `--bench`; under `cargo test --benches` run a short smoke version.
    let full = std::env::args().any(|a| a == "--bench");
    let (n, warmup) = if full {
        (ROUND_TRIPS, WARMUP)
    } else {
        (200, 20)
    };
    let flow = FlowInfo {
        init_cwnd_bytes: INIT_CWND,
        mss_bytes: 1448,
        ..FlowInfo::default()
    };

    // (b) in-process channel, agent in a thread. Run first, before anything is pinned.
    {
        let (transport, channels) = ChannelTransport::pair(None);
        let _handle = spawn_channel_agent(Echo, channels).map_err(|e| format!("agent: {e:?}"))?;
        let mut dp = Datapath::new(config(), transport, MonotonicClock::new());
        let sid = dp.create_flow(flow.clone())?;
        wait_for_agent(&mut dp, sid)?;
        measure(
            "in-process channel, agent thread, unpinned, busy-poll",
            &mut dp,
            sid,
            n,
            warmup,
            Wait::BusyPoll,
        )?;
        measure(
            "in-process channel, agent thread, unpinned, blocking recv_timeout",
            &mut dp,
            sid,
            n,
            warmup,
            Wait::Blocking,
        )?;
    }

    // (a) unix datagram sockets, agent in another process. First unpinned (the scheduler
    // places both processes), then both pinned to CPU 0 with the datapath yielding while it
    // waits: no cross-CPU wake-up (see docs/benchmarks.md on vCPU halt).
    for same_cpu in [false, true] {
        let pid = std::process::id();
        let agent_name = format!("bench-rt-agent-{pid}-{same_cpu}");
        let _agent = AgentProcess::spawn(&agent_name, same_cpu.then_some(0))?;
        let transport = UnixTransport::bind(&format!("bench-rt-dp-{pid}"), &agent_name)?;
        let mut dp = Datapath::new(config(), transport, MonotonicClock::new());
        let sid = dp.create_flow(flow.clone())?;
        if same_cpu {
            pin(0);
        }
        wait_for_agent(&mut dp, sid)?;
        if same_cpu {
            measure(
                "unix socket, agent in another process, both pinned to CPU 0, poll+yield",
                &mut dp,
                sid,
                n,
                warmup,
                Wait::PollYield,
            )?;
        } else {
            measure(
                "unix socket, agent in another process, unpinned, busy-poll",
                &mut dp,
                sid,
                n,
                warmup,
                Wait::BusyPoll,
            )?;
        }
        let _ = std::fs::remove_file(format!("/tmp/ccp/{agent_name}"));
    }

    Ok(())
}
