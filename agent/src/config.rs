//! `agent.toml`: parsing and validation (the format is documented in the crate doc).
//!
//! Parsing is two steps: serde reads the raw TOML (unknown keys and wrong types are errors
//! with the line), then `Config::from_raw` checks each field and names it in the error.
//! Relative paths (`iw.table`, `selector.models`) are taken relative to the config file.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ccp_selector::{HysteresisConfig, PathChangeConfig};
use iw_controller::{DEFAULT_IW_PKTS, DEFAULT_MAX_IW_PKTS, IwTable};
use serde::Deserialize;

mod learning;

pub use learning::{DEFAULT_LONG_FLOW_SECS, DEFAULT_MAX_RECORDS_PER_ITERATION, LearnSettings};

/// Names of every algorithm of the process's registry ([`ccp_algorithms::registry::global`]:
/// the suite, and a researcher's own through `ccp_agent::main_with`), in registry order.
pub fn algorithms() -> Vec<&'static str> {
    ccp_algorithms::registry::global().names()
}

/// A config that cannot be used; every variant names the file or field at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not TOML, an unknown key, or a value of the wrong type.
    #[error("{path}: {message}")]
    Toml {
        /// The file.
        path: PathBuf,
        /// toml's message (line, column, key).
        message: String,
    },
    /// A field has a value that is not allowed.
    #[error("{field}: {message}")]
    Field {
        /// Dotted path of the field, e.g. `selector.hysteresis.dwell_rtts`.
        field: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// A line of the IW table file is wrong.
    #[error("iw.table: {path} line {line}: {message}")]
    IwTable {
        /// The table file.
        path: PathBuf,
        /// Line number, from 1 (0: the table as a whole).
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Longest congestion control name the kernel takes (`TCP_CA_NAME_MAX` less the NUL).
const KERNEL_CCA_NAME_MAX: usize = 15;

fn field(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Field {
        field: field.to_string(),
        message: message.into(),
    }
}

/// What a flow to a destination port prefers; learned policies weigh their reward with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Preference {
    /// The policy's own trade-off.
    #[default]
    Default,
    /// Low queueing delay first.
    Delay,
    /// Throughput first.
    Throughput,
}

impl Preference {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "default" => Some(Self::Default),
            "delay" => Some(Self::Delay),
            "throughput" => Some(Self::Throughput),
            _ => None,
        }
    }
}

/// Per destination port preference modes (`[preferences]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preferences {
    by_port: BTreeMap<u16, Preference>,
}

impl Preferences {
    /// The mode for flows to `dst_port` ([`Preference::Default`] when not configured).
    pub fn for_port(&self, dst_port: u16) -> Preference {
        self.by_port.get(&dst_port).copied().unwrap_or_default()
    }

    /// Every configured port and its mode.
    pub fn iter(&self) -> impl Iterator<Item = (u16, Preference)> + '_ {
        self.by_port.iter().map(|(p, m)| (*p, *m))
    }
}

impl FromIterator<(u16, Preference)> for Preferences {
    fn from_iter<T: IntoIterator<Item = (u16, Preference)>>(iter: T) -> Self {
        Self {
            by_port: iter.into_iter().collect(),
        }
    }
}

/// How the datapath encodes IPv4 addresses in CREATE's `u32` fields (read little-endian by
/// portus).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpByteOrder {
    /// The value is the address as a host-order integer, `u32::from(Ipv4Addr)`: this
    /// project's runtime (`ccp-datapath`, its simulator and eBPF datapath).
    Host,
    /// The value is the address's network-order bytes copied into a native `u32`: ccp-kernel
    /// (`inet_daddr`) on a little-endian machine.
    Network,
}

impl IpByteOrder {
    /// The address a CREATE `u32` stands for.
    pub fn decode(self, v: u32) -> Ipv4Addr {
        match self {
            Self::Host => Ipv4Addr::from(v),
            Self::Network => Ipv4Addr::from(v.to_le_bytes()),
        }
    }
}

/// The `[iw]` section, validated.
#[derive(Debug, Clone)]
pub struct IwSettings {
    /// The table (ranges from `iw.table`, or uniform `default_iw`).
    pub table: IwTable,
    /// Address encoding; `None`: the IPC's usual one.
    pub ip_byte_order: Option<IpByteOrder>,
    /// `iw.kernel_cgroup`: a cgroup v2 (absolute, or relative to the cgroup2 mount) the agent
    /// creates at start, attaching the sockops program of `ccp-datapath` to it, and where it
    /// publishes the table for real kernel TCP connections (`TCP_BPF_IW`). Read at start only.
    pub kernel_cgroup: Option<PathBuf>,
    /// `iw.kernel_cca`: the congestion control (`TCP_CONGESTION`) the sockops program gives
    /// every connection in `kernel_cgroup` (its policy for port 0); `None`: the system default.
    pub kernel_cca: Option<String>,
    /// `iw.learn = true`: the `[iw.learning]` settings; the agent then learns the table from
    /// the flows it sees (`table` is only the starting point).
    pub learning: Option<LearnSettings>,
}

/// A validated `agent.toml`.
#[derive(Debug, Clone)]
pub struct Config {
    /// `selector.policy`, e.g. `rein` or `static:cubic`.
    pub policy: String,
    /// `selector.candidates`, in order.
    pub candidates: Vec<&'static str>,
    /// `selector.hysteresis`.
    pub hysteresis: HysteresisConfig,
    /// `[selector.path_change]`; `None`: `enabled = false`.
    pub path_change: Option<PathChangeConfig>,
    /// `selector.models`, resolved against the config's folder.
    pub models: Option<PathBuf>,
    /// `[preferences]`.
    pub preferences: Preferences,
    /// `[iw]`; `None`: the datapath's own initial window is left alone.
    pub iw: Option<IwSettings>,
    /// `[selector.online]` with `enabled = true`: Antelope's online retraining.
    pub online: Option<OnlineSettings>,
}

/// `[selector.online]`: Antelope's online learning (`ccp_selector::antelope::OnlineLearner`),
/// for `selector.policy = "antelope"` only. Off unless `enabled = true`.
#[derive(Debug, Clone, PartialEq)]
pub struct OnlineSettings {
    /// `period_secs` (default 60): how often the models are refitted from the new samples.
    pub period: Duration,
    /// `window` (default 20,000): the most recent online samples a refit uses.
    pub window: usize,
    /// `base_samples`: a `samples.csv` of `ccp-eval gen-data` (the offline training data) that
    /// every refit starts from; without it a refit sees only the agent's own flows, which
    /// carry labels only for the candidates the policy chose.
    pub base_samples: Option<PathBuf>,
    /// `save_models`: a folder each refit's models are written to (replaced whole).
    pub save_models: Option<PathBuf>,
}

/// Default refit period of `[selector.online]`, seconds.
pub const DEFAULT_ONLINE_PERIOD_SECS: f64 = 60.0;
/// Default sample window of `[selector.online]`.
pub const DEFAULT_ONLINE_WINDOW: usize = 20_000;

impl Default for Config {
    fn default() -> Self {
        Self {
            policy: "static:cubic".to_string(),
            candidates: algorithms(),
            hysteresis: HysteresisConfig::default(),
            path_change: Some(PathChangeConfig::default()),
            models: None,
            preferences: Preferences::default(),
            iw: None,
            online: None,
        }
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    selector: RawSelector,
    #[serde(default)]
    preferences: BTreeMap<String, String>,
    iw: Option<RawIw>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSelector {
    policy: Option<String>,
    candidates: Option<Vec<String>>,
    models: Option<PathBuf>,
    #[serde(default)]
    hysteresis: RawHysteresis,
    #[serde(default)]
    path_change: RawPathChange,
    online: Option<RawOnline>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPathChange {
    enabled: Option<bool>,
    rise: Option<f64>,
    min_rise_ms: Option<f64>,
    step_rtts: Option<f64>,
    settle_rtts: Option<f64>,
    window_rtts: Option<f64>,
    min_window_ms: Option<f64>,
    flat: Option<f64>,
    slowdown: Option<f64>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawOnline {
    enabled: Option<bool>,
    period_secs: Option<f64>,
    window: Option<i64>,
    base_samples: Option<PathBuf>,
    save_models: Option<PathBuf>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawHysteresis {
    agreeing_decisions: Option<i64>,
    dwell_rtts: Option<f64>,
    loss_hold_rtts: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIw {
    table: Option<PathBuf>,
    default_iw: Option<i64>,
    max_iw: Option<i64>,
    ip_byte_order: Option<String>,
    kernel_cgroup: Option<PathBuf>,
    kernel_cca: Option<String>,
    learn: Option<bool>,
    learning: Option<learning::RawLearning>,
}

impl Config {
    /// Reads and validates the file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path.parent().unwrap_or(Path::new(".")), path)
    }

    /// Validates `text`; relative paths are taken from `base`, errors name `origin`.
    pub fn parse(text: &str, base: &Path, origin: &Path) -> Result<Self, ConfigError> {
        let raw: Raw = toml::from_str(text).map_err(|e| ConfigError::Toml {
            path: origin.to_path_buf(),
            message: e.to_string(),
        })?;
        Self::from_raw(raw, base)
    }

    fn from_raw(raw: Raw, base: &Path) -> Result<Self, ConfigError> {
        let defaults = Self::default();
        let s = raw.selector;
        let policy = s.policy.unwrap_or(defaults.policy);
        if policy.trim().is_empty() {
            return Err(field("selector.policy", "must not be empty"));
        }
        let candidates = match s.candidates {
            None => defaults.candidates,
            Some(list) => {
                let mut out: Vec<&'static str> = Vec::new();
                let registry = ccp_algorithms::registry::global();
                for name in &list {
                    let n = registry
                        .resolve(name)
                        .map_err(|e| field("selector.candidates", e.to_string()))?;
                    if out.contains(&n) {
                        return Err(field(
                            "selector.candidates",
                            format!("{name:?} is listed twice"),
                        ));
                    }
                    out.push(n);
                }
                if out.is_empty() {
                    return Err(field("selector.candidates", "needs at least one algorithm"));
                }
                out
            }
        };
        let h = s.hysteresis;
        let mut hysteresis = HysteresisConfig::default();
        if let Some(m) = h.agreeing_decisions {
            hysteresis.agreeing_decisions = u32::try_from(m)
                .ok()
                .filter(|m| *m >= 1)
                .ok_or_else(|| field("selector.hysteresis.agreeing_decisions", "must be >= 1"))?;
        }
        for (name, value, slot) in [
            ("dwell_rtts", h.dwell_rtts, &mut hysteresis.dwell_rtts),
            (
                "loss_hold_rtts",
                h.loss_hold_rtts,
                &mut hysteresis.loss_hold_rtts,
            ),
        ] {
            if let Some(v) = value {
                *slot = non_negative(&format!("selector.hysteresis.{name}"), v, None)?;
            }
        }
        let path_change = path_change_settings(&s.path_change)?;
        let models = s.models.map(|m| base.join(m));
        if let Some(m) = &models
            && !m.is_dir()
        {
            return Err(field(
                "selector.models",
                format!("{} is not a folder", m.display()),
            ));
        }
        let mut preferences = Preferences::default();
        for (port, mode) in &raw.preferences {
            let key = format!("preferences.{port}");
            let p = port
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| field(&key, "the key must be a destination port, 1-65535"))?;
            let m = Preference::parse(mode).ok_or_else(|| {
                field(
                    &key,
                    format!("unknown mode {mode:?} (known: default, delay, throughput)"),
                )
            })?;
            preferences.by_port.insert(p, m);
        }
        let iw = raw.iw.map(|iw| iw_settings(iw, base)).transpose()?;
        let online = match s.online {
            Some(o) if o.enabled == Some(true) => Some(online_settings(o, &policy, base)?),
            _ => None,
        };
        Ok(Self {
            policy,
            candidates,
            hysteresis,
            path_change,
            models,
            preferences,
            iw,
            online,
        })
    }
}

/// `[selector.path_change]`: every number checked (finite; ratios >= 0, `slowdown` <= 1;
/// times in 0..=60 s); `None` when `enabled = false`.
fn path_change_settings(raw: &RawPathChange) -> Result<Option<PathChangeConfig>, ConfigError> {
    if raw.enabled == Some(false) {
        return Ok(None);
    }
    let key = |name: &str| format!("selector.path_change.{name}");
    let mut c = PathChangeConfig::default();
    let ratios = [
        ("rise", raw.rise, &mut c.rise, None),
        ("step_rtts", raw.step_rtts, &mut c.step_rtts, None),
        ("settle_rtts", raw.settle_rtts, &mut c.settle_rtts, None),
        ("window_rtts", raw.window_rtts, &mut c.window_rtts, None),
        ("flat", raw.flat, &mut c.flat, None),
        ("slowdown", raw.slowdown, &mut c.slowdown, Some(1.0)),
    ];
    for (name, value, slot, max) in ratios {
        if let Some(v) = value {
            *slot = non_negative(&key(name), v, max)?;
        }
    }
    for (name, value, slot) in [
        ("min_rise_ms", raw.min_rise_ms, &mut c.min_rise_us),
        ("min_window_ms", raw.min_window_ms, &mut c.min_window_us),
    ] {
        if let Some(v) = value {
            *slot = (non_negative(&key(name), v, Some(60_000.0))? * 1e3) as u64;
        }
    }
    Ok(Some(c))
}

/// `v` if it is a finite number >= 0 (and at most `max`), else the error naming `key`.
fn non_negative(key: &str, v: f64, max: Option<f64>) -> Result<f64, ConfigError> {
    if v.is_finite() && v >= 0.0 && max.is_none_or(|m| v <= m) {
        return Ok(v);
    }
    let range = max.map_or_else(|| ">= 0".to_string(), |m| format!("in 0..={m}"));
    Err(field(
        key,
        format!("must be a finite number {range}, got {v}"),
    ))
}

fn online_settings(
    raw: RawOnline,
    policy: &str,
    base: &Path,
) -> Result<OnlineSettings, ConfigError> {
    if policy.trim() != "antelope" {
        return Err(field(
            "selector.online",
            format!(
                "online learning is Antelope's: it needs selector.policy = \"antelope\", not {policy:?}"
            ),
        ));
    }
    let secs = raw.period_secs.unwrap_or(DEFAULT_ONLINE_PERIOD_SECS);
    if !(secs.is_finite() && (0.001..=365.0 * 24.0 * 3600.0).contains(&secs)) {
        return Err(field(
            "selector.online.period_secs",
            format!("must be between 0.001 and one year, got {secs}"),
        ));
    }
    let window = match raw.window {
        None => DEFAULT_ONLINE_WINDOW,
        Some(w) => usize::try_from(w)
            .ok()
            .filter(|w| (1..=10_000_000).contains(w))
            .ok_or_else(|| field("selector.online.window", "must be in 1..=10000000 samples"))?,
    };
    let base_samples = raw.base_samples.map(|p| base.join(p));
    if let Some(p) = &base_samples
        && !p.is_file()
    {
        return Err(field(
            "selector.online.base_samples",
            format!("{} is not a file", p.display()),
        ));
    }
    let save_models = raw.save_models.map(|p| base.join(p));
    if let Some(p) = &save_models
        && !p.parent().is_some_and(Path::is_dir)
    {
        return Err(field(
            "selector.online.save_models",
            format!("the folder {} is in does not exist", p.display()),
        ));
    }
    Ok(OnlineSettings {
        period: Duration::from_secs_f64(secs),
        window,
        base_samples,
        save_models,
    })
}

fn iw_settings(raw: RawIw, base: &Path) -> Result<IwSettings, ConfigError> {
    let max_iw = match raw.max_iw {
        None => DEFAULT_MAX_IW_PKTS,
        Some(m) => u32::try_from(m)
            .ok()
            .filter(|m| (1..=u32::from(u16::MAX)).contains(m))
            .ok_or_else(|| field("iw.max_iw", "must be in 1..=65535 packets"))?,
    };
    let default_iw = match raw.default_iw {
        None => DEFAULT_IW_PKTS.min(max_iw),
        Some(d) => u32::try_from(d)
            .ok()
            .filter(|d| (1..=max_iw).contains(d))
            .ok_or_else(|| field("iw.default_iw", format!("must be in 1..={max_iw} (max_iw)")))?,
    };
    let ip_byte_order = match raw.ip_byte_order.as_deref() {
        None => None,
        Some("host") => Some(IpByteOrder::Host),
        Some("network") => Some(IpByteOrder::Network),
        Some(other) => {
            return Err(field(
                "iw.ip_byte_order",
                format!("unknown order {other:?} (known: host, network)"),
            ));
        }
    };
    let learning = match (raw.learn, raw.learning) {
        (Some(true), l) => Some(learning::learn_settings(
            l.unwrap_or_default(),
            base,
            default_iw,
            max_iw,
        )?),
        (None | Some(false), Some(_)) => {
            return Err(field(
                "iw.learning",
                "is only read with iw.learn = true (set it, or remove the section)",
            ));
        }
        (None | Some(false), None) => None,
    };
    let saved = learning.as_ref().and_then(|l| l.save_table.as_deref());
    let table = match raw.table {
        None => IwTable::uniform(default_iw, max_iw),
        // The learned table is saved where the table is read: missing before the first save.
        Some(p) if Some(base.join(&p).as_path()) == saved && !base.join(&p).exists() => {
            IwTable::uniform(default_iw, max_iw)
        }
        Some(p) => read_table(&base.join(p), default_iw, max_iw)?,
    };
    let kernel_cgroup = match raw.kernel_cgroup {
        None => None,
        Some(p) if p.as_os_str().is_empty() => {
            return Err(field("iw.kernel_cgroup", "must not be empty"));
        }
        Some(p) if p.components().any(|c| c.as_os_str() == "..") => {
            return Err(field("iw.kernel_cgroup", "must not contain \"..\""));
        }
        Some(p) => Some(p),
    };
    let kernel_cca = match raw.kernel_cca {
        None => None,
        Some(_) if kernel_cgroup.is_none() => {
            return Err(field("iw.kernel_cca", "needs iw.kernel_cgroup"));
        }
        Some(c)
            if c.is_empty()
                || c.len() > KERNEL_CCA_NAME_MAX
                || !c.is_ascii()
                || c.contains('\0') =>
        {
            return Err(field(
                "iw.kernel_cca",
                format!("{c:?}: 1 to {KERNEL_CCA_NAME_MAX} ASCII bytes"),
            ));
        }
        Some(c) => Some(c),
    };
    Ok(IwSettings {
        table,
        ip_byte_order,
        kernel_cgroup,
        kernel_cca,
        learning,
    })
}

/// Reads `start,end,iw` lines (IPv4 addresses, inclusive range, IW in packets; `#` comments,
/// blank lines and a `start,end,iw` header are skipped). IWs above `max_iw` are an error.
pub fn read_table(path: &Path, default_iw: u32, max_iw: u32) -> Result<IwTable, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::IwTable {
        path: path.to_path_buf(),
        line: 0,
        message: e.to_string(),
    })?;
    parse_table(&text, path, default_iw, max_iw)
}

/// Parses the text of an IW table file (the format of [`read_table`]); errors name `path`.
pub fn parse_table(
    text: &str,
    path: &Path,
    default_iw: u32,
    max_iw: u32,
) -> Result<IwTable, ConfigError> {
    let err = |line: usize, message: String| ConfigError::IwTable {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut ranges = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() || line.replace(' ', "") == "start,end,iw" {
            continue;
        }
        let cols: Vec<&str> = line.split(',').map(str::trim).collect();
        let [start, end, iw] = cols.as_slice() else {
            return Err(err(i + 1, format!("expected start,end,iw, got {line:?}")));
        };
        let addr = |s: &str| {
            s.parse::<Ipv4Addr>()
                .map_err(|_| err(i + 1, format!("{s:?} is not an IPv4 address")))
        };
        let iw_pkts: u32 = iw
            .parse()
            .ok()
            .filter(|v| (1..=max_iw).contains(v))
            .ok_or_else(|| err(i + 1, format!("iw {iw:?} must be in 1..={max_iw} (max_iw)")))?;
        ranges.push((addr(start)?, addr(end)?, iw_pkts));
    }
    IwTable::new(ranges, default_iw, max_iw).map_err(|e| err(0, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(
            text,
            Path::new(env!("CARGO_MANIFEST_DIR")),
            Path::new("t.toml"),
        )
    }

    /// The error for `text`, which must fail and name `field`.
    fn fails_on(text: &str, field: &str) -> String {
        let e = parse(text)
            .err()
            .unwrap_or_else(|| panic!("accepted: {text}"));
        let msg = e.to_string();
        assert!(msg.contains(field), "{field} not named in: {msg}");
        msg
    }

    #[test]
    fn empty_config_is_the_defaults() {
        let c = parse("").unwrap();
        assert_eq!(c.policy, "static:cubic");
        assert_eq!(c.candidates, algorithms());
        assert_eq!(c.hysteresis, HysteresisConfig::default());
        assert!(c.iw.is_none() && c.models.is_none());
        assert_eq!(c.preferences.for_port(443), Preference::Default);
    }

    #[test]
    fn the_shipped_example_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("agent.example.toml");
        let c = Config::load(&path).unwrap();
        assert_eq!(c.policy, "rein");
        assert_eq!(c.candidates.len(), 9);
        assert_eq!(c.hysteresis.agreeing_decisions, 2);
        assert_eq!(c.preferences.for_port(443), Preference::Throughput);
        assert_eq!(c.preferences.for_port(5004), Preference::Delay);
        assert_eq!(c.preferences.for_port(80), Preference::Default);
        let iw = c.iw.unwrap();
        assert_eq!(iw.table.lookup(Ipv4Addr::new(10, 0, 0, 9)), 40);
        assert_eq!(iw.table.lookup(Ipv4Addr::new(192, 168, 7, 1)), 4);
        assert_eq!(iw.table.lookup(Ipv4Addr::new(8, 8, 8, 8)), 10);
        assert_eq!(iw.table.max_iw(), 200);
        assert_eq!(iw.ip_byte_order, None);
    }

    #[test]
    fn online_learning_is_off_unless_enabled_and_checked_when_on() {
        let off = parse("[selector]\npolicy = \"antelope\"\n[selector.online]\nwindow = 5\n");
        assert!(off.unwrap().online.is_none());
        let on = parse(
            "[selector]\npolicy = \"antelope\"\n[selector.online]\nenabled = true\n\
             period_secs = 2.5\nbase_samples = \"Cargo.toml\"\nsave_models = \"src/online\"\n",
        )
        .unwrap()
        .online
        .unwrap();
        assert_eq!(on.period, Duration::from_millis(2_500));
        assert_eq!(on.window, DEFAULT_ONLINE_WINDOW);
        assert!(on.base_samples.unwrap().ends_with("Cargo.toml"));
        assert!(on.save_models.unwrap().ends_with("src/online"));
        let m = fails_on(
            "[selector]\npolicy = \"outcome\"\n[selector.online]\nenabled = true\n",
            "selector.online",
        );
        assert!(m.contains("antelope"), "{m}");
        let head = "[selector]\npolicy = \"antelope\"\n[selector.online]\nenabled = true\n";
        fails_on(
            &format!("{head}period_secs = 0\n"),
            "selector.online.period_secs",
        );
        fails_on(
            &format!("{head}period_secs = nan\n"),
            "selector.online.period_secs",
        );
        fails_on(&format!("{head}window = 0\n"), "selector.online.window");
        fails_on(
            &format!("{head}base_samples = \"nope.csv\"\n"),
            "selector.online.base_samples",
        );
        fails_on(
            &format!("{head}save_models = \"no/such/dir/m\"\n"),
            "selector.online.save_models",
        );
        fails_on(&format!("{head}windw = 3\n"), "windw");
    }

    #[test]
    fn path_change_is_on_by_default_off_when_disabled_and_checked() {
        assert_eq!(
            parse("").unwrap().path_change,
            Some(PathChangeConfig::default())
        );
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("agent.example.toml");
        assert_eq!(
            Config::load(&example).unwrap().path_change,
            Some(PathChangeConfig::default())
        );
        let off = parse("[selector.path_change]\nenabled = false\nrise = -1\n").unwrap();
        assert_eq!(off.path_change, None);
        let c = parse(
            "[selector.path_change]\nrise = 0.8\nmin_rise_ms = 2.5\nstep_rtts = 4\n\
             settle_rtts = 5\nwindow_rtts = 12\nmin_window_ms = 250\nflat = 0.2\n\
             slowdown = 0.5\n",
        )
        .unwrap()
        .path_change
        .unwrap();
        assert_eq!(
            c,
            PathChangeConfig {
                rise: 0.8,
                min_rise_us: 2_500,
                step_rtts: 4.0,
                settle_rtts: 5.0,
                window_rtts: 12.0,
                min_window_us: 250_000,
                flat: 0.2,
                slowdown: 0.5,
            }
        );
        for bad in [
            "rise = -0.1",
            "rise = nan",
            "flat = inf",
            "settle_rtts = -2",
            "slowdown = 1.5",
            "min_rise_ms = -1",
            "min_window_ms = 1e9",
        ] {
            let key = bad.split(' ').next().unwrap_or_default();
            fails_on(
                &format!("[selector.path_change]\n{bad}\n"),
                &format!("selector.path_change.{key}"),
            );
        }
        fails_on("[selector.path_change]\nraise = 1\n", "raise");
    }

    #[test]
    fn every_field_is_read() {
        let c = parse(
            r#"
            [selector]
            policy = "static:vegas"
            candidates = ["vegas", "reno"]
            models = "src"
            [selector.hysteresis]
            agreeing_decisions = 3
            dwell_rtts = 0.5
            loss_hold_rtts = 0
            [preferences]
            80 = "delay"
            [iw]
            default_iw = 4
            max_iw = 50
            ip_byte_order = "network"
            "#,
        )
        .unwrap();
        assert_eq!(c.candidates, vec!["vegas", "reno"]);
        assert_eq!(c.hysteresis.agreeing_decisions, 3);
        assert!((c.hysteresis.dwell_rtts - 0.5).abs() < f64::EPSILON);
        assert!(c.hysteresis.loss_hold_rtts.abs() < f64::EPSILON);
        assert!(c.models.unwrap().ends_with("src"));
        assert_eq!(c.preferences.for_port(80), Preference::Delay);
        let iw = c.iw.unwrap();
        assert_eq!(iw.table.lookup(Ipv4Addr::new(1, 2, 3, 4)), 4);
        assert_eq!(iw.ip_byte_order, Some(IpByteOrder::Network));
        assert_eq!((iw.kernel_cgroup, iw.kernel_cca), (None, None));
        let iw = parse("[iw]\nkernel_cgroup = \"/sys/fs/cgroup/ccp\"\nkernel_cca = \"ccp\"")
            .unwrap()
            .iw
            .unwrap();
        assert_eq!(iw.kernel_cgroup, Some(PathBuf::from("/sys/fs/cgroup/ccp")));
        assert_eq!(iw.kernel_cca.as_deref(), Some("ccp"));
    }

    #[test]
    fn each_bad_field_is_named() {
        fails_on("[selector]\npolicy = \"\"", "selector.policy");
        fails_on(
            "[selector]\ncandidates = [\"cubic\", \"tahoe\"]",
            "selector.candidates",
        );
        fails_on("[selector]\ncandidates = []", "selector.candidates");
        fails_on(
            "[selector]\ncandidates = [\"bbr\", \"bbr\"]",
            "selector.candidates",
        );
        fails_on("[selector]\nmodels = \"no-such-dir\"", "selector.models");
        fails_on(
            "[selector.hysteresis]\nagreeing_decisions = 0",
            "selector.hysteresis.agreeing_decisions",
        );
        fails_on(
            "[selector.hysteresis]\ndwell_rtts = -1.0",
            "selector.hysteresis.dwell_rtts",
        );
        fails_on(
            "[selector.hysteresis]\nloss_hold_rtts = nan",
            "selector.hysteresis.loss_hold_rtts",
        );
        fails_on("[preferences]\nhttp = \"delay\"", "preferences.http");
        fails_on("[preferences]\n0 = \"delay\"", "preferences.0");
        fails_on("[preferences]\n443 = \"fast\"", "preferences.443");
        fails_on("[iw]\nmax_iw = 0", "iw.max_iw");
        fails_on("[iw]\nmax_iw = 20\ndefault_iw = 30", "iw.default_iw");
        fails_on("[iw]\nip_byte_order = \"middle\"", "iw.ip_byte_order");
        fails_on("[iw]\ntable = \"missing.csv\"", "iw.table");
        fails_on("[iw]\nkernel_cgroup = \"\"", "iw.kernel_cgroup");
        fails_on("[iw]\nkernel_cgroup = \"a/../b\"", "iw.kernel_cgroup");
        fails_on("[iw]\nkernel_cca = \"ccp\"", "iw.kernel_cca");
        fails_on(
            "[iw]\nkernel_cgroup = \"x\"\nkernel_cca = \"a-very-long-cca-name\"",
            "iw.kernel_cca",
        );
        // Wrong types and unknown keys: toml's message names the key and the line.
        fails_on("[selector]\npolcy = \"rein\"", "polcy");
        fails_on("[selector.hysteresis]\ndwell_rtts = \"two\"", "dwell_rtts");
        fails_on("[iw]\ndefault_iw = 1.5", "default_iw");
    }

    #[test]
    fn bad_table_lines_are_named() {
        let dir = std::env::temp_dir().join(format!("ccp-agent-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (body, needle) in [
            ("10.0.0.0,10.0.0.9\n", "line 1"),
            ("# c\n10.0.0.0,10.0.0.9,20\n10.0.0.x,10.0.1.0,5\n", "line 3"),
            ("10.0.0.0,10.0.0.9,500\n", "line 1"),
            ("10.0.0.0,10.0.0.9,0\n", "line 1"),
            ("10.0.0.9,10.0.0.0,5\n", "inverted"),
            ("10.0.0.0,10.0.0.9,5\n10.0.0.5,10.0.0.20,6\n", "overlaps"),
        ] {
            let p = dir.join("t.csv");
            std::fs::write(&p, body).unwrap();
            let e = read_table(&p, 10, 200).err().unwrap().to_string();
            assert!(e.contains("iw.table") && e.contains(needle), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
