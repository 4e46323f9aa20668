//! The IW learning loop (issue 6, TCP-RL §IV "Deployment"): with `iw.learn = true` the agent
//! records every flow it sees, feeds the records to an [`IwController`] and publishes the
//! table the controller learns, to flow creation ([`IwSource`]) and, with
//! `iw.kernel_cgroup`, to the kernel's sockops map.
//!
//! # What a flow record holds, and where it comes from
//! A [`FlowTracker`] follows each flow from its CREATE (destination address and port, MSS, the
//! IW the flow was given) through the measurements its algorithm decodes from the datapath's
//! reports ([`ccp_algorithms::MeasuredFlow`]) to its close (a MEASURE without fields). It sums
//! the bytes acknowledged and the packets lost, counts timeouts, and keeps the smallest, the
//! mean and the latest RTT sample and a smoothed RTT (gain 1/8 over the reports' latest
//! samples). Times are the agent's [`Clock`]: the *response time* runs from the CREATE to the
//! report that acknowledged the last bytes (TCP-RL measures first data sent to last ACK; the
//! agent sees neither, so this is later by the report delay at both ends). *Throughput* is
//! bytes acknowledged / response time. Bytes acknowledged in the last report interval before
//! the close are not seen when the datapath does not report at close.
//!
//! A flow still open `long_flow_secs` after its CREATE is recorded then, with what it has so
//! far (marked `complete = false`), and not again at its close: the IW shapes a flow's first
//! round trips, and a flow that lasts minutes must not wait that long to count.
//!
//! A flow without any acknowledged byte or RTT sample gives no record (counted as unusable).
//!
//! # The loop
//! [`Learner::submit`] (portus's thread, at a flow's close) hands the record to the controller
//! at once (it keeps running sums only) and queues it for the records CSV; at most
//! `max_records_per_iteration` per iteration are taken, the rest are counted and dropped, so
//! memory stays bounded whatever the flow rate. [`Learner::tick`] (the learning thread,
//! [`spawn_learning`], or a test with a [`ManualClock`]) reads the clock, appends the queued
//! records to the CSV, advances the controller and, when an iteration or grouping period
//! ended, publishes the new table: to new flows, to the kernel, and to `save_table`. Errors
//! there (an unwritable file, a kernel that refuses the map) are logged and counted; the loop
//! goes on.

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use iw_controller::{FlowRecord, IwController, IwTable};
use tracing::{info, warn};

use crate::config::{ConfigError, IpByteOrder, LearnSettings};
use crate::kernel::KernelIw;

/// Where the learning loop reads the time, µs (injectable so tests need not sleep).
///
/// Not the datapath's `ccp_datapath::runtime::Clock`, whose contract differs: that one is
/// monotonic nanoseconds from an arbitrary origin (virtual time in the simulator) and never goes
/// back; this one is wall-clock time since the Unix epoch, so that iteration boundaries fall on
/// the wall clock and records carry wall-clock times, and it follows the system clock when that
/// is set. It is also shared with the learning thread (`Send + Sync`), and the agent depends on
/// `ccp-datapath` only with the `kernel` feature.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time, µs on this clock's line.
    fn now_us(&self) -> u64;
}

/// Wall-clock time, µs since the Unix epoch (the controller's iteration boundaries are then
/// multiples of the iteration on the wall clock).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }
}

/// A clock that moves only when told to (tests).
#[derive(Debug, Default)]
pub struct ManualClock {
    now_us: AtomicU64,
}

impl ManualClock {
    /// A clock at `now_us`.
    pub fn new(now_us: u64) -> Self {
        Self {
            now_us: AtomicU64::new(now_us),
        }
    }

    /// Sets the time.
    pub fn set(&self, now_us: u64) {
        self.now_us.store(now_us, Ordering::SeqCst);
    }

    /// Moves the time forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_micros()).unwrap_or(u64::MAX);
        self.now_us.fetch_add(by, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> u64 {
        self.now_us.load(Ordering::SeqCst)
    }
}

/// One flow as the agent saw it: TCP-RL Table III as far as the agent can know it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentFlowRecord {
    /// Destination (client) address.
    pub client: Ipv4Addr,
    /// Destination port.
    pub dst_port: u16,
    /// When the record was made (close, or `long_flow_secs`), µs on the learner's clock.
    pub end_us: u64,
    /// Segment size, bytes.
    pub mss_bytes: u32,
    /// The IW the flow was created with, packets.
    pub iw_pkts: u32,
    /// Bytes acknowledged (in order), as reported.
    pub size_bytes: u64,
    /// CREATE to the report acknowledging the last bytes, µs.
    pub response_time_us: u64,
    /// `size_bytes` / response time, bytes/s.
    pub throughput_bytes_per_sec: f64,
    /// Smallest RTT sample, µs.
    pub min_rtt_us: u64,
    /// Mean of the reports' latest RTT samples, µs.
    pub mean_rtt_us: f64,
    /// Latest RTT sample, µs.
    pub last_rtt_us: u64,
    /// Smoothed RTT at the end (gain 1/8 over the reports), µs.
    pub srtt_us: f64,
    /// Packets detected lost.
    pub lost_pkts: u64,
    /// Lost packets / (lost + acknowledged packets).
    pub loss_rate: f64,
    /// Retransmission timeouts seen.
    pub timeouts: u64,
    /// `false` for a flow recorded at `long_flow_secs` while still open.
    pub complete: bool,
}

impl AgentFlowRecord {
    /// The controller's view of it.
    pub fn flow_record(&self) -> FlowRecord {
        FlowRecord {
            client: self.client,
            end_us: self.end_us,
            size_bytes: self.size_bytes,
            response_time_us: self.response_time_us,
            mss_bytes: self.mss_bytes,
            throughput_bytes_per_sec: self.throughput_bytes_per_sec,
            srtt_us: self.srtt_us,
            loss_rate: self.loss_rate,
            iw_pkts: self.iw_pkts,
        }
    }
}

/// What the agent knows of a flow at its CREATE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowOpen {
    /// Destination address.
    pub client: Ipv4Addr,
    /// Destination port.
    pub dst_port: u16,
    /// Segment size, bytes.
    pub mss_bytes: u32,
    /// The IW given to the flow, packets.
    pub iw_pkts: u32,
}

/// Follows one flow and makes its record (see the module doc).
#[derive(Debug)]
pub struct FlowTracker {
    learner: Arc<Learner>,
    open: FlowOpen,
    start_us: u64,
    last_ack_us: u64,
    acked_bytes: u64,
    lost_pkts: u64,
    timeouts: u64,
    min_rtt_us: u64,
    last_rtt_us: u64,
    rtt_sum_us: f64,
    rtt_samples: u64,
    srtt_us: f64,
    done: bool,
}

impl FlowTracker {
    /// Starts following a flow created now.
    pub fn new(learner: Arc<Learner>, open: FlowOpen) -> Self {
        let start_us = learner.clock.now_us();
        Self {
            learner,
            open,
            start_us,
            last_ack_us: start_us,
            acked_bytes: 0,
            lost_pkts: 0,
            timeouts: 0,
            min_rtt_us: 0,
            last_rtt_us: 0,
            rtt_sum_us: 0.0,
            rtt_samples: 0,
            srtt_us: 0.0,
            done: false,
        }
    }

    /// One decoded report of the flow. A flow reaching `long_flow_secs` is recorded here.
    pub fn observe(&mut self, m: &ccp_algorithms::Measurement) {
        if self.done {
            return;
        }
        let now = self.learner.clock.now_us();
        if m.acked_bytes > 0 {
            self.acked_bytes = self.acked_bytes.saturating_add(m.acked_bytes);
            self.last_ack_us = now;
        }
        self.lost_pkts = self.lost_pkts.saturating_add(m.lost_pkts);
        self.timeouts = self.timeouts.saturating_add(u64::from(m.timeout));
        self.min_rtt_us = ccp_algorithms::rtt::lower_min(self.min_rtt_us, [m.min_rtt_us, m.rtt_us]);
        if m.rtt_us > 0 {
            let rtt = m.rtt_us as f64;
            self.srtt_us = if self.rtt_samples == 0 {
                rtt
            } else {
                self.srtt_us + (rtt - self.srtt_us) / 8.0
            };
            self.last_rtt_us = m.rtt_us;
            self.rtt_sum_us += rtt;
            self.rtt_samples = self.rtt_samples.saturating_add(1);
        }
        if now.saturating_sub(self.start_us) >= self.learner.settings.long_flow_us {
            self.finish(now, false);
        }
    }

    /// The flow closed: its record goes to the learner (unless it was recorded already).
    pub fn close(&mut self) {
        let now = self.learner.clock.now_us();
        self.finish(now, true);
    }

    fn finish(&mut self, now_us: u64, complete: bool) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        match self.record(now_us, complete) {
            Some(r) => self.learner.submit(r),
            None => {
                self.learner
                    .counters
                    .unusable
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The record so far (`None`: no byte acknowledged or no RTT sample).
    fn record(&self, now_us: u64, complete: bool) -> Option<AgentFlowRecord> {
        if self.acked_bytes == 0 || self.rtt_samples == 0 {
            return None;
        }
        let response_time_us = self.last_ack_us.saturating_sub(self.start_us).max(1);
        let mss = u64::from(self.open.mss_bytes.max(1));
        let acked_pkts = self.acked_bytes.div_ceil(mss);
        Some(AgentFlowRecord {
            client: self.open.client,
            dst_port: self.open.dst_port,
            end_us: now_us,
            mss_bytes: self.open.mss_bytes,
            iw_pkts: self.open.iw_pkts,
            size_bytes: self.acked_bytes,
            response_time_us,
            throughput_bytes_per_sec: self.acked_bytes as f64 * 1e6 / response_time_us as f64,
            min_rtt_us: self.min_rtt_us,
            mean_rtt_us: self.rtt_sum_us / self.rtt_samples as f64,
            last_rtt_us: self.last_rtt_us,
            srtt_us: self.srtt_us,
            lost_pkts: self.lost_pkts,
            loss_rate: self.lost_pkts as f64 / self.lost_pkts.saturating_add(acked_pkts) as f64,
            timeouts: self.timeouts,
            complete,
        })
    }
}

/// Counters of the learning loop (all monotonic).
#[derive(Debug, Default)]
pub struct LearnCounters {
    /// Records taken (handed to the controller).
    pub records: AtomicU64,
    /// Records dropped because the iteration's cap was reached.
    pub dropped: AtomicU64,
    /// Records the controller refused (bad field values).
    pub rejected: AtomicU64,
    /// Flows that closed without an acknowledged byte or an RTT sample.
    pub unusable: AtomicU64,
    /// Records appended to the records CSV.
    pub written: AtomicU64,
    /// Failed appends to the records CSV (their records are lost).
    pub write_errors: AtomicU64,
    /// Tables published.
    pub tables: AtomicU64,
    /// Failed saves of the learned table.
    pub save_errors: AtomicU64,
    /// Tables the kernel refused.
    pub kernel_errors: AtomicU64,
}

/// What one [`Learner::tick`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TickReport {
    /// Iteration boundaries crossed.
    pub iterations: u64,
    /// Whether the grouping reran.
    pub regrouped: bool,
    /// The table published, if one was.
    pub published: Option<Arc<IwTable>>,
    /// Records appended to the records CSV.
    pub written: usize,
}

/// A published table and how CREATE encodes the addresses looked up in it.
type Published = Option<(Arc<IwTable>, IpByteOrder)>;

/// The table new flows are looked up in, replaceable at reload; `None`: leave `init_cwnd`.
/// With learning on, it also holds the [`Learner`] that new flows report to.
///
/// It lives here, beside the learner that publishes into it; flow creation's side
/// ([`IwSource::adjust`], [`crate::iw::WithIw`]) is in [`crate::iw`], which depends on this
/// module and never the reverse.
#[derive(Debug, Clone, Default)]
pub struct IwSource {
    slot: Arc<RwLock<Published>>,
    learner: Arc<RwLock<Option<Arc<Learner>>>>,
}

impl IwSource {
    /// A source with `table` (or none).
    pub fn new(table: Option<(IwTable, IpByteOrder)>) -> Self {
        let s = Self::default();
        s.replace(table);
        s
    }

    /// Replaces the table for flows created from now on.
    pub fn replace(&self, table: Option<(IwTable, IpByteOrder)>) {
        *self.slot.write().unwrap_or_else(PoisonError::into_inner) =
            table.map(|(t, o)| (Arc::new(t), o));
    }

    /// Replaces the table with an already shared one (the learner's).
    pub fn publish(&self, table: Option<(Arc<IwTable>, IpByteOrder)>) {
        *self.slot.write().unwrap_or_else(PoisonError::into_inner) = table;
    }

    /// The learner new flows report to (`None`: learning is off).
    pub fn learner(&self) -> Option<Arc<Learner>> {
        self.learner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Installs (or removes) the learner; returns the previous one.
    pub fn set_learner(&self, learner: Option<Arc<Learner>>) -> Option<Arc<Learner>> {
        std::mem::replace(
            &mut *self.learner.write().unwrap_or_else(PoisonError::into_inner),
            learner,
        )
    }

    /// The current table and address encoding.
    pub fn current(&self) -> Published {
        self.slot
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Where a learned table goes.
#[derive(Debug)]
pub struct Publish {
    /// New flows' table.
    pub iw: IwSource,
    /// How CREATE encodes addresses.
    pub order: IpByteOrder,
    /// The kernel's sockops map, with `iw.kernel_cgroup`.
    pub kernel: Option<Arc<KernelIw>>,
    /// `iw.kernel_cca`.
    pub kernel_cca: Option<String>,
}

struct State {
    controller: IwController,
    /// Records waiting for the CSV, with the group each was counted in.
    pending: Vec<(AgentFlowRecord, String)>,
    /// Records taken in the current iteration.
    taken: usize,
}

/// The learning loop of one `[iw.learning]` configuration (see the module doc).
pub struct Learner {
    settings: LearnSettings,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    publish: Publish,
    counters: LearnCounters,
}

impl std::fmt::Debug for Learner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Learner")
            .field("settings", &self.settings)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl Learner {
    /// A learner with a fresh controller. It publishes nothing until its first iteration
    /// ends: new flows keep the table `publish.iw` holds.
    pub fn new(
        settings: LearnSettings,
        clock: Arc<dyn Clock>,
        publish: Publish,
    ) -> Result<Self, ConfigError> {
        let controller = IwController::new(settings.controller.clone(), settings.geo.clone())
            .map_err(|e| ConfigError::Field {
                field: "iw.learning".into(),
                message: e.to_string(),
            })?;
        Ok(Self {
            settings,
            clock,
            state: Mutex::new(State {
                controller,
                pending: Vec::new(),
                taken: 0,
            }),
            publish,
            counters: LearnCounters::default(),
        })
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &LearnSettings {
        &self.settings
    }

    /// Whether it publishes with this address encoding and kernel CCA (a reload that changes
    /// either starts a new learner).
    pub fn publishes_like(&self, order: IpByteOrder, kernel_cca: Option<&str>) -> bool {
        self.publish.order == order && self.publish.kernel_cca.as_deref() == kernel_cca
    }

    /// Its counters.
    pub fn counters(&self) -> &LearnCounters {
        &self.counters
    }

    /// How often the learning thread should call [`Learner::tick`]: a tenth of an iteration,
    /// between 10 ms and 1 s.
    pub fn poll_interval(&self) -> Duration {
        Duration::from_micros(self.settings.controller.iteration_us / 10)
            .clamp(Duration::from_millis(10), Duration::from_secs(1))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes one flow record (dropped and counted beyond the iteration's cap).
    pub fn submit(&self, record: AgentFlowRecord) {
        let mut s = self.lock();
        if s.taken >= self.settings.max_records_per_iteration {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        s.taken += 1;
        if s.controller.record(&record.flow_record()).is_err() {
            self.counters.rejected.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.counters.records.fetch_add(1, Ordering::Relaxed);
        if self.settings.records.is_some() {
            let group = s
                .controller
                .group_of(record.client)
                .unwrap_or("(standard IW)")
                .to_string();
            s.pending.push((record, group));
        }
    }

    /// A snapshot of the controller's groups.
    pub fn groups(&self) -> Vec<iw_controller::controller::GroupInfo> {
        self.lock().controller.groups()
    }

    /// Reads the clock, writes queued records, advances the controller and publishes the new
    /// table when an iteration or grouping period ended.
    pub fn tick(&self) -> TickReport {
        let now_us = self.clock.now_us();
        let (pending, outcome, table) = {
            let mut s = self.lock();
            let pending = std::mem::take(&mut s.pending);
            let outcome = s.controller.tick(now_us);
            let changed = outcome.iterations > 0 || outcome.regrouped;
            if outcome.iterations > 0 {
                s.taken = 0;
            }
            (pending, outcome, changed.then(|| s.controller.table()))
        };
        let mut report = TickReport {
            iterations: outcome.iterations,
            regrouped: outcome.regrouped,
            published: None,
            written: 0,
        };
        if !pending.is_empty() {
            report.written = self.write_records(&pending);
        }
        if let Some(table) = table {
            self.publish_table(&table, now_us);
            report.published = Some(table);
        }
        report
    }

    /// Writes what is queued (called when the learner is replaced or the agent stops).
    pub fn flush(&self) {
        let pending = std::mem::take(&mut self.lock().pending);
        if !pending.is_empty() {
            self.write_records(&pending);
        }
    }

    fn write_records(&self, pending: &[(AgentFlowRecord, String)]) -> usize {
        let Some(path) = &self.settings.records else {
            return 0;
        };
        match append_records(path, pending, &self.settings.geo) {
            Ok(()) => {
                self.counters
                    .written
                    .fetch_add(pending.len() as u64, Ordering::Relaxed);
                pending.len()
            }
            Err(e) => {
                self.counters
                    .write_errors
                    .fetch_add(pending.len() as u64, Ordering::Relaxed);
                warn!(
                    file = %path.display(),
                    error = %e,
                    records = pending.len(),
                    "cannot append flow records; they are lost"
                );
                0
            }
        }
    }

    fn publish_table(&self, table: &Arc<IwTable>, now_us: u64) {
        let p = &self.publish;
        p.iw.publish(Some((table.clone(), p.order)));
        self.counters.tables.fetch_add(1, Ordering::Relaxed);
        if let Some(k) = &p.kernel
            && let Err(e) = k.publish(Some(table), p.kernel_cca.as_deref())
        {
            self.counters.kernel_errors.fetch_add(1, Ordering::Relaxed);
            warn!(error = %e, "the kernel refused the learned IW table; it keeps the previous one");
        }
        if let Some(path) = &self.settings.save_table
            && let Err(e) = save_table(
                path,
                table,
                self.settings.controller.default_iw_pkts,
                now_us,
            )
        {
            self.counters.save_errors.fetch_add(1, Ordering::Relaxed);
            warn!(file = %path.display(), error = %e, "cannot save the learned IW table");
        }
        let c = &self.counters;
        info!(
            ranges = table.len(),
            default_iw = table.default_iw(),
            records = c.records.load(Ordering::Relaxed),
            dropped = c.dropped.load(Ordering::Relaxed),
            unusable = c.unusable.load(Ordering::Relaxed),
            "IW table learned and published"
        );
    }
}

/// Columns of the records CSV.
pub const RECORDS_HEADER: &str = "end_us,client,province,isp,subnet,group,dst_port,mss_bytes,\
iw_pkts,size_bytes,response_time_us,throughput_bytes_per_sec,min_rtt_us,mean_rtt_us,\
last_rtt_us,srtt_us,lost_pkts,loss_rate,timeouts,complete";

/// A CSV field: quoted when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn append_records(
    path: &Path,
    pending: &[(AgentFlowRecord, String)],
    geo: &iw_controller::GeoDb,
) -> std::io::Result<()> {
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    let mut out = String::new();
    if file.metadata()?.len() == 0 {
        out.push_str(RECORDS_HEADER);
        out.push('\n');
    }
    for (r, group) in pending {
        let f = geo.lookup(r.client).and_then(|id| geo.features(id));
        let (province, isp, subnet) = f.map_or(("", "", ""), |f| {
            (f.province.as_ref(), f.isp.as_ref(), f.subnet.as_ref())
        });
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{:.1},{},{:.1},{},{:.1},{},{:.6},{},{}",
            r.end_us,
            r.client,
            csv_field(province),
            csv_field(isp),
            csv_field(subnet),
            csv_field(group),
            r.dst_port,
            r.mss_bytes,
            r.iw_pkts,
            r.size_bytes,
            r.response_time_us,
            r.throughput_bytes_per_sec,
            r.min_rtt_us,
            r.mean_rtt_us,
            r.last_rtt_us,
            r.srtt_us,
            r.lost_pkts,
            r.loss_rate,
            r.timeouts,
            r.complete
        );
    }
    file.write_all(out.as_bytes())
}

/// Writes `table` in the format of `iw.table` (`<path>.tmp`, then renamed). Addresses in no
/// range get the table's default; when it differs from `default_iw` (what a loader of the file
/// assumes), the gaps between ranges are written too, so the file means the same table.
pub fn save_table(
    path: &Path,
    table: &IwTable,
    default_iw: u32,
    now_us: u64,
) -> std::io::Result<()> {
    let mut ranges: Vec<(u32, u32, u32)> = table
        .ranges()
        .map(|(s, e, iw)| (u32::from(s), u32::from(e), iw))
        .collect();
    ranges.sort_unstable();
    let fill = table.default_iw();
    let mut out = format!(
        "# learned by ccp-agent (iw.learn) at {now_us} us; addresses in no range: IW {fill}\n\
         start,end,iw\n"
    );
    let mut next: Option<u32> = Some(0);
    let line = |out: &mut String, s: u32, e: u32, iw: u32| {
        let _ = writeln!(out, "{},{},{iw}", Ipv4Addr::from(s), Ipv4Addr::from(e));
    };
    for &(s, e, iw) in &ranges {
        if fill != default_iw
            && let Some(n) = next
            && n < s
        {
            line(&mut out, n, s - 1, fill);
        }
        line(&mut out, s, e, iw);
        next = e.checked_add(1);
    }
    if fill != default_iw
        && let Some(n) = next
    {
        line(&mut out, n, u32::MAX, fill);
    }
    let tmp = PathBuf::from(format!("{}.tmp", path.display()));
    std::fs::write(&tmp, out)?;
    std::fs::rename(&tmp, path)
}

/// Starts the thread that ticks the current learner of `iw` (if any) every
/// [`Learner::poll_interval`] (100 ms while learning is off).
pub fn spawn_learning(iw: IwSource) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("ccp-agent-iw-learn".to_string())
        .spawn(move || {
            loop {
                let wait = match iw.learner() {
                    Some(l) => {
                        l.tick();
                        l.poll_interval()
                    }
                    None => Duration::from_millis(100),
                };
                std::thread::sleep(wait);
            }
        })
}

#[cfg(test)]
#[path = "learn_tests.rs"]
mod tests;
