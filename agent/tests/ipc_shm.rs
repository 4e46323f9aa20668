//! `ccp-agent --ipc shm` end to end: the built binary in its own process, this project's
//! datapath runtime over `ShmTransport` in the test, synthetic flows in real time.
//!
//! Checked: flows come under the agent's control through the rings; records that are torn
//! (a header claiming more than the record holds) or garbage are dropped and counted by the
//! guard exactly as datagrams are, and the flows keep being answered; an agent killed with
//! SIGKILL in the middle of answering puts every flow on the fallback (no garbage read by the
//! datapath), and a new agent under the same name is attached to and takes the flows back.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

mod common;

use ccp_datapath::agent::demo_config;
use ccp_datapath::runtime::shm::Attachment;
use ccp_datapath::runtime::{Datapath, MonotonicClock, ShmTransport};
use common::Agent;
use common::runtime::{assert_controlled, open_flow};

type ShmDp = Datapath<ShmTransport, MonotonicClock>;

fn spawn_agent(name: &str) -> Agent {
    let agent = Agent::spawn_program(
        Path::new(env!("CARGO_BIN_EXE_ccp-agent")),
        &["--ipc", "shm", "--alg", "cubic", "--name", name],
        name,
        "agent",
    );
    agent.wait_bound();
    agent
}

fn datapath(agent_name: &str) -> ShmDp {
    Datapath::new(
        demo_config(),
        ShmTransport::new(agent_name),
        MonotonicClock::new(),
    )
}

/// A CCP header: type, length, socket id.
fn header(typ: u16, len: u16, sid: u32) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend(typ.to_le_bytes());
    m.extend(len.to_le_bytes());
    m.extend(sid.to_le_bytes());
    m
}

/// The `key=value` of `field` in a tracing line.
fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

#[test]
fn flows_run_over_shared_memory_and_torn_or_garbage_records_are_dropped_by_the_guard() {
    let name = format!("agent-shm-{}-g", std::process::id());
    let mut agent = spawn_agent(&name);
    let mut dp = datapath(&name);
    let (mut a, _) = open_flow(&mut dp, Ipv4Addr::new(10, 0, 0, 1), Some("cubic"));
    let (mut b, _) = open_flow(&mut dp, Ipv4Addr::new(10, 0, 0, 2), Some("reno"));
    assert_controlled(&mut dp, &mut a, 50);
    assert_controlled(&mut dp, &mut b, 50);

    // A second, hostile datapath on the same agent, writing records the runtime never would.
    let mut evil = Attachment::connect(&Path::new("/tmp/ccp").join(&name), 4096).unwrap();
    let mut torn = header(0, 96, 1); // a CREATE that claims 96 bytes and has 40
    torn.resize(40, 0);
    let mut bad_fields = header(1, 24, 1); // a MEASURE with one field claiming three
    bad_fields.extend(7u32.to_le_bytes());
    bad_fields.extend(3u32.to_le_bytes());
    bad_fields.extend([0; 8]);
    let install = header(2, 8, 1); // an agent -> datapath type
    let garbage: Vec<Vec<u8>> = vec![torn, bad_fields, install, vec![0xff; 3], Vec::new()];
    for g in &garbage {
        evil.send(g).unwrap();
    }
    // The honest flows are still answered while and after the guard drops those.
    assert_controlled(&mut dp, &mut a, 50);
    assert_controlled(&mut dp, &mut b, 50);
    assert_eq!(dp.stats().msgs_rejected, 0, "the datapath read nothing bad");
    assert!(dp.transport().attached());
    assert_eq!(dp.transport().stats().attaches, 1);
    // The hostile datapath goes away: the agent drops it and keeps serving the other.
    drop(evil);
    agent.wait_for_line("datapath detached", 1).unwrap();
    assert_controlled(&mut dp, &mut a, 20);

    agent.signal(libc::SIGTERM);
    let totals = agent.wait_for_line("ipc guard totals", 1).unwrap();
    assert_eq!(field(&totals, "rejected"), 5, "{totals}");
    assert_eq!(field(&totals, "length_mismatch"), 1, "{totals}");
    assert_eq!(field(&totals, "bad_fields"), 1, "{totals}");
    assert_eq!(field(&totals, "unexpected_type"), 1, "{totals}");
    assert_eq!(field(&totals, "short"), 2, "{totals}");
    let shm = agent.wait_for_line("shm totals", 1).unwrap();
    assert_eq!(field(&shm, "attached"), 2, "{shm}");
    assert_eq!(field(&shm, "detached"), 1, "{shm}");
    assert_eq!(field(&shm, "corrupt"), 0, "{shm}");
    let status = agent.child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn a_killed_agent_puts_flows_on_the_fallback_and_a_restarted_one_is_reattached() {
    let name = format!("agent-shm-{}-k", std::process::id());
    let agent = spawn_agent(&name);
    let mut dp = datapath(&name);
    let mut flows: Vec<_> = (1..=4)
        .map(|i| open_flow(&mut dp, Ipv4Addr::new(10, 0, 1, i), Some("cubic")).0)
        .collect();
    for f in &mut flows {
        assert_controlled(&mut dp, f, 30);
    }
    // Killed while it answers: the flows keep sending reports the whole time.
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        agent.signal(libc::SIGKILL);
        agent
    });
    let start = Instant::now();
    while !dp.in_fallback() {
        for f in &mut flows {
            f.run(&mut dp, 1).unwrap();
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "never fell back after the agent was killed"
        );
    }
    drop(killer.join().unwrap());
    let fb = flows[0].fallback_acks;
    for f in &mut flows {
        f.run(&mut dp, 20).unwrap();
    }
    assert!(
        flows[0].fallback_acks >= fb + 20,
        "flows keep going on the fallback"
    );
    assert_eq!(dp.stats().msgs_rejected, 0, "nothing torn was read");
    assert!(!dp.transport().attached());

    // A new agent under the same name: the datapath attaches a new segment and the flows
    // come back under control.
    let _agent = spawn_agent(&name);
    let start = Instant::now();
    loop {
        for f in &mut flows {
            f.run(&mut dp, 2).unwrap();
        }
        if !dp.in_fallback() && flows.iter().all(|f| f.agent_acks > 0) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the restarted agent never took the flows back"
        );
    }
    for f in &mut flows {
        assert_controlled(&mut dp, f, 30);
    }
    let s = dp.transport().stats();
    assert_eq!((s.attaches, s.detaches, s.corrupt), (2, 1, 0), "{s:?}");
    assert_eq!(dp.stats().msgs_rejected, 0);
}
