//! Tests of the learning loop with a manual clock and synthetic flows.

use std::net::Ipv4Addr;
use std::path::Path;

use ccp_algorithms::Measurement;

use super::*;
use crate::config::Config;

const MIN: u64 = 60 * 1_000_000;
/// A deep-buffer subnet (the best IW is large) and a shallow one (a burst above 6 packets
/// loses and waits for a retransmission timeout).
const DEEP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 7);
const SHALLOW: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 7);

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ccp-agent-learn-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `agent.toml` with `[iw.learning]` over a two-subnet feature file, in `dir`.
fn config(dir: &Path, learning: &str) -> Config {
    std::fs::write(
        dir.join("geo.csv"),
        "start,end,subnet,isp,province\n\
         10.0.0.0,10.0.0.255,S0,fibre,P0\n\
         10.0.1.0,10.0.1.255,S1,mobile,P1\n",
    )
    .unwrap();
    let text = format!(
        "[iw]\ndefault_iw = 10\nmax_iw = 100\nlearn = true\n[iw.learning]\ngeo = \"geo.csv\"\n\
         {learning}\n"
    );
    Config::parse(&text, dir, &dir.join("agent.toml")).unwrap()
}

fn learner(config: &Config, clock: Arc<ManualClock>) -> (Arc<Learner>, IwSource) {
    let iw = config.iw.clone().unwrap();
    let source = IwSource::new(Some((iw.table, IpByteOrder::Host)));
    let learner = Learner::new(
        iw.learning.unwrap(),
        clock,
        Publish {
            iw: source.clone(),
            order: IpByteOrder::Host,
            kernel: None,
            kernel_cca: None,
        },
    )
    .unwrap();
    let learner = Arc::new(learner);
    source.set_learner(Some(learner.clone()));
    (learner, source)
}

/// A 300-packet transfer with IW `iw` on one of the two paths, slow start as a continuous
/// model (`log2(size / iw + 1)` round trips): (response time, srtt, packets lost), µs.
fn transfer(deep: bool, iw: u32) -> (u64, f64, u64) {
    let rounds = (300.0 / f64::from(iw) + 1.0).log2();
    if deep {
        let rtt = 40_000.0 + f64::from(iw) * 20.0;
        ((rounds * rtt) as u64, rtt, 0)
    } else {
        let rtt = 40_000.0 + f64::from(iw.min(6)) * 500.0;
        let lost = u64::from(iw.saturating_sub(6));
        ((rounds * rtt) as u64 + lost * 200_000, rtt, lost)
    }
}

fn record(client: Ipv4Addr, iw: u32, end_us: u64) -> AgentFlowRecord {
    let (response_time_us, srtt_us, lost_pkts) = transfer(client == DEEP, iw);
    let size_bytes = 300 * 1448;
    AgentFlowRecord {
        client,
        dst_port: 443,
        end_us,
        mss_bytes: 1448,
        iw_pkts: iw,
        size_bytes,
        response_time_us,
        throughput_bytes_per_sec: size_bytes as f64 * 1e6 / response_time_us as f64,
        min_rtt_us: 40_000,
        mean_rtt_us: srtt_us,
        last_rtt_us: srtt_us as u64,
        srtt_us,
        lost_pkts,
        loss_rate: lost_pkts as f64 / (lost_pkts + 300) as f64,
        timeouts: u64::from(lost_pkts > 0),
        complete: true,
    }
}

fn iw_of(source: &IwSource, client: Ipv4Addr) -> u32 {
    source.current().unwrap().0.lookup(client)
}

#[test]
fn two_groups_learn_opposite_iws_and_the_table_follows() {
    let dir = temp_dir("two-groups");
    let c = config(
        &dir,
        "iteration_secs = 600\nbin_secs = 600\ngrouping_period_secs = 1800\nmin_samples = 10\n\
         max_jitter = 10.0\nrecords = \"flows.csv\"\nsave_table = \"learned.csv\"",
    );
    let clock = Arc::new(ManualClock::new(1_000 * 10 * MIN));
    let (learner, source) = learner(&c, clock.clone());
    assert_eq!(
        iw_of(&source, DEEP),
        10,
        "the configured table until an iteration ends"
    );
    let mut history: Vec<(u32, u32)> = Vec::new();
    for _ in 0..60 {
        // One iteration: 20 flows per subnet, each with the IW a new flow would get now.
        for _ in 0..20 {
            for client in [DEEP, SHALLOW] {
                clock.advance(Duration::from_secs(10));
                learner.submit(record(client, iw_of(&source, client), clock.now_us()));
            }
        }
        clock.advance(Duration::from_secs(200));
        let tick = learner.tick();
        assert_eq!(tick.iterations, 1);
        assert_eq!(tick.written, 40);
        assert!(tick.published.is_some());
        history.push((iw_of(&source, DEEP), iw_of(&source, SHALLOW)));
    }
    let groups: Vec<String> = learner.groups().into_iter().map(|g| g.name).collect();
    assert!(
        groups.iter().any(|g| g.contains("S0")) && groups.iter().any(|g| g.contains("S1")),
        "one group per subnet: {groups:?}"
    );
    let last = &history[history.len() - 10..];
    let mean = |f: fn(&(u32, u32)) -> u32| f64::from(last.iter().map(f).sum::<u32>()) / 10.0;
    let (deep, shallow) = (mean(|h| h.0), mean(|h| h.1));
    // The deep path's IW climbed past the initial arms [5, 20]; the shallow one stayed low.
    assert!(deep > 30.0, "deep-buffer IW {deep}: {history:?}");
    assert!(shallow <= 8.0, "shallow-buffer IW {shallow}: {history:?}");

    // The saved table is the published one, in the format `iw.table` is read in.
    let saved = crate::config::read_table(&dir.join("learned.csv"), 10, 100).unwrap();
    assert_eq!(saved.lookup(DEEP), iw_of(&source, DEEP));
    assert_eq!(saved.lookup(SHALLOW), iw_of(&source, SHALLOW));
    assert_eq!(
        saved.lookup(Ipv4Addr::new(8, 8, 8, 8)),
        iw_of(&source, Ipv4Addr::new(8, 8, 8, 8))
    );
    let csv = std::fs::read_to_string(dir.join("flows.csv")).unwrap();
    assert_eq!(csv.lines().next(), Some(RECORDS_HEADER));
    assert_eq!(csv.lines().count(), 1 + 60 * 40);
    assert!(
        csv.lines()
            .nth(1)
            .unwrap()
            .contains(",10.0.0.7,P0,fibre,S0,All,443,")
    );
    assert!(
        csv.lines()
            .last()
            .unwrap()
            .contains(",10.0.1.7,P1,mobile,S1,All/")
    );
    let c = learner.counters();
    assert_eq!(c.records.load(Ordering::Relaxed), 2400);
    assert_eq!(c.written.load(Ordering::Relaxed), 2400);
    assert_eq!(c.tables.load(Ordering::Relaxed), 60);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn records_beyond_the_cap_are_dropped_and_counted() {
    let dir = temp_dir("cap");
    let c = config(&dir, "levels = []\nmax_records_per_iteration = 5");
    let clock = Arc::new(ManualClock::new(0));
    let (learner, _) = learner(&c, clock.clone());
    for _ in 0..8 {
        learner.submit(record(DEEP, 10, clock.now_us()));
    }
    let c = learner.counters();
    assert_eq!(c.records.load(Ordering::Relaxed), 5);
    assert_eq!(c.dropped.load(Ordering::Relaxed), 3);
    clock.advance(Duration::from_mins(10));
    assert_eq!(learner.tick().iterations, 1);
    learner.submit(record(DEEP, 10, clock.now_us()));
    assert_eq!(
        c.records.load(Ordering::Relaxed),
        6,
        "a new iteration, a new cap"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_tracker_builds_the_record_from_creation_reports_and_close() {
    let dir = temp_dir("tracker");
    let c = config(&dir, "levels = []\nlong_flow_secs = 5\nrecords = \"r.csv\"");
    let clock = Arc::new(ManualClock::new(1_000_000));
    let (learner, _) = learner(&c, clock.clone());
    let open = FlowOpen {
        client: DEEP,
        dst_port: 80,
        mss_bytes: 1000,
        iw_pkts: 20,
    };
    let report = |acked, lost, rtt| Measurement {
        acked_bytes: acked,
        lost_pkts: lost,
        rtt_us: rtt,
        min_rtt_us: rtt,
        ..Measurement::default()
    };
    let mut t = FlowTracker::new(learner.clone(), open);
    clock.advance(Duration::from_millis(100));
    t.observe(&report(20_000, 0, 40_000));
    clock.advance(Duration::from_millis(100));
    t.observe(&report(30_000, 2, 60_000));
    clock.advance(Duration::from_millis(100));
    t.observe(&report(0, 0, 0)); // nothing acknowledged: not the last ACK
    clock.advance(Duration::from_millis(100));
    t.close();
    t.close(); // once only
    let (r, group) = learner.lock().pending[0].clone();
    assert_eq!(group, "All");
    assert_eq!(
        (r.client, r.dst_port, r.iw_pkts, r.mss_bytes),
        (DEEP, 80, 20, 1000)
    );
    assert_eq!((r.size_bytes, r.response_time_us), (50_000, 200_000));
    assert!((r.throughput_bytes_per_sec - 250_000.0).abs() < 1e-6);
    assert_eq!(
        (r.min_rtt_us, r.last_rtt_us, r.lost_pkts),
        (40_000, 60_000, 2)
    );
    assert!((r.mean_rtt_us - 50_000.0).abs() < 1e-6);
    assert!((r.srtt_us - 42_500.0).abs() < 1e-6, "{}", r.srtt_us);
    assert!((r.loss_rate - 2.0 / 52.0).abs() < 1e-9);
    assert!(r.complete);
    assert_eq!(r.end_us, 1_400_000);

    // A long flow is recorded at `long_flow_secs`, once, marked incomplete.
    let mut long = FlowTracker::new(learner.clone(), open);
    clock.advance(Duration::from_secs(3));
    long.observe(&report(10_000, 0, 40_000));
    clock.advance(Duration::from_secs(3));
    long.observe(&report(10_000, 0, 40_000));
    long.close();
    // A flow that never got an ACK gives no record.
    FlowTracker::new(learner.clone(), open).close();
    let pending = learner.lock().pending.clone();
    assert_eq!(pending.len(), 2);
    assert!(!pending[1].0.complete);
    assert_eq!(pending[1].0.size_bytes, 20_000);
    assert_eq!(learner.counters().unusable.load(Ordering::Relaxed), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unwritable_records_file_is_logged_and_counted_not_fatal() {
    let dir = temp_dir("unwritable");
    std::fs::create_dir_all(dir.join("t")).unwrap();
    let c = config(
        &dir,
        "levels = []\nrecords = \"flows.csv\"\nsave_table = \"t/learned.csv\"",
    );
    let clock = Arc::new(ManualClock::new(0));
    let (learner, source) = learner(&c, clock.clone());
    // Both files become impossible to write after the config was accepted.
    std::fs::remove_file(dir.join("flows.csv")).unwrap();
    std::fs::create_dir_all(dir.join("flows.csv")).unwrap();
    std::fs::remove_dir_all(dir.join("t")).unwrap();
    learner.submit(record(DEEP, 10, 0));
    clock.advance(Duration::from_mins(10));
    let tick = learner.tick();
    assert_eq!((tick.iterations, tick.written), (1, 0));
    let c = learner.counters();
    assert_eq!(c.write_errors.load(Ordering::Relaxed), 1);
    assert_eq!(c.save_errors.load(Ordering::Relaxed), 1);
    assert!(
        tick.published.is_some(),
        "the table is still published to new flows"
    );
    assert!(
        [5, 10, 15, 20].contains(&iw_of(&source, DEEP)),
        "an arm after the first step"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_learning_settings_are_config_errors_naming_the_field() {
    let dir = temp_dir("bad");
    std::fs::write(
        dir.join("bad-geo.csv"),
        "start,end,subnet,isp,province\n10.0.0.0,10.0.0.300,S,I,P\n",
    )
    .unwrap();
    for (text, needle) in [
        (
            "[iw]\nlearn = true\n[iw.learning]\ngeo = \"bad-geo.csv\"",
            "line 2",
        ),
        (
            "[iw]\nlearn = true\n[iw.learning]\ngeo = \"none.csv\"",
            "iw.learning.geo",
        ),
        ("[iw]\n[iw.learning]\nalpha = 0.5", "iw.learn = true"),
        (
            "[iw]\nlearn = true\n[iw.learning]\nalpha = 1.5",
            "iw.learning.alpha",
        ),
        (
            "[iw]\nlearn = true\n[iw.learning]\ngamma = 0",
            "iw.learning.gamma",
        ),
        (
            "[iw]\nlearn = true\n[iw.learning]\nxi = -1",
            "iw.learning.xi",
        ),
        (
            "[iw]\nlearn = true\n[iw.learning]\ninitial_arms = []",
            "initial_arms",
        ),
        (
            "[iw]\nlearn = true\nmax_iw = 50\n[iw.learning]\ninitial_arms = [5, 60]",
            "initial_arms",
        ),
        (
            "[iw]\nlearn = true\n[iw.learning]\niteration_secs = 0",
            "iteration_secs",
        ),
        (
            "[iw]\nlearn = true\n[iw.learning]\nlevels = [\"city\"]",
            "iw.learning.levels",
        ),
        (
            "[iw]\nlearn = true\n[iw.learning]\nmin_samples = 0",
            "min_samples",
        ),
        (
            "[iw]\nlearn = true\n[iw.learning]\nbin_secs = 60\ngrouping_period_secs = 30",
            "grouping_period_secs",
        ),
        (
            "[iw]\nlearn = true\n[iw.learning]\nrecords = \"no/such/dir/f.csv\"",
            "iw.learning.records",
        ),
        (
            "[iw]\nlearn = true\n[iw.learning]\nsave_table = \"no/such/t.csv\"",
            "iw.learning.save_table",
        ),
        (
            "[iw]\nlearn = true\n[iw.learning]\nmax_records_per_iteration = 0",
            "max_records",
        ),
        (
            "[iw]\nlearn = true\n[iw.learning]\nlong_flow_secs = -1",
            "long_flow_secs",
        ),
        ("[iw]\nlearn = true\n[iw.learning]\nalpah = 0.5", "alpah"),
    ] {
        let e = Config::parse(text, &dir, &dir.join("agent.toml"))
            .err()
            .unwrap_or_else(|| panic!("accepted: {text}"))
            .to_string();
        assert!(e.contains(needle), "{needle} not in: {e}");
    }
    // Defaults are the paper's.
    let c = Config::parse("[iw]\nlearn = true", &dir, &dir.join("agent.toml")).unwrap();
    let l = c.iw.unwrap().learning.unwrap();
    assert_eq!(l.controller, iw_controller::IwConfig::default());
    assert!(l.geo.is_empty() && l.records.is_none() && l.save_table.is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn absurd_reports_do_not_panic() {
    let dir = temp_dir("absurd");
    let c = config(&dir, "levels = []");
    let clock = Arc::new(ManualClock::new(u64::MAX - 10));
    let (learner, _) = learner(&c, clock.clone());
    let open = FlowOpen {
        client: DEEP,
        dst_port: 0,
        mss_bytes: 1,
        iw_pkts: 1,
    };
    let mut t = FlowTracker::new(learner.clone(), open);
    let m = Measurement {
        acked_bytes: u64::MAX,
        lost_pkts: u64::MAX,
        timeout: true,
        rtt_us: u64::MAX,
        min_rtt_us: u64::MAX,
        ..Measurement::default()
    };
    t.observe(&m);
    t.observe(&m);
    clock.set(u64::MAX);
    t.close();
    learner.tick();
    let c = learner.counters();
    let seen = c.records.load(Ordering::Relaxed) + c.rejected.load(Ordering::Relaxed);
    assert_eq!(seen, 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
