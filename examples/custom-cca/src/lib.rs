//! A template for a researcher's own congestion control algorithm: everything in this file,
//! nothing in the suite's crates. Copy the folder, rename `Capped`, change the rule in
//! [`Capped::on_report`], and `cargo run --bin my-ccp-eval -- run quick --out results/quick`
//! runs it beside every other scheme; `my-ccp-agent` serves it to real flows; it is a
//! selector candidate too. `docs/writing-a-cca.md` walks through it.
//!
//! **The algorithm** (a template, not a published design): Reno's window growth (RFC 5681
//! §3.1: slow start below `ssthresh`, one MSS per window above it; halve on loss, one MSS
//! after a timeout) with a delay cap in the spirit of LEDBAT's (RFC 6817 §2.4.2): when the
//! latest RTT exceeds the path's minimum by more than `target_delay_us`, the window stops
//! growing and shrinks by 1/8 once per round trip. Left out: everything else LEDBAT does (its
//! base-delay history, the proportional controller), fast recovery's inflation, pacing.

use ccp_algorithms::programs::PER_RTT;
use ccp_algorithms::{
    Algorithm, AlgorithmConfig, Control, FlowStart, Handoff, Measurement, Pacing, ProgramSpec,
    Registry, registry::RegistryError,
};

/// The configuration, which is also the factory of per-flow state.
#[derive(Debug, Clone, Copy)]
pub struct CappedConfig {
    /// Queueing delay above the path's minimum RTT at which the window backs off, µs.
    pub target_delay_us: u64,
}

impl Default for CappedConfig {
    fn default() -> Self {
        // LEDBAT's TARGET is at most 100 ms (RFC 6817 §2.5); a tighter cap suits a template.
        Self {
            target_delay_us: 25_000,
        }
    }
}

impl AlgorithmConfig for CappedConfig {
    const NAME: &'static str = "capped";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        // The suite's shared once-per-RTT report (datapaths hold few programs: reuse).
        static PROGRAMS: [&ProgramSpec; 1] = [&PER_RTT];
        &PROGRAMS
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        let mss = start.mss_bytes.max(1);
        Box::new(Capped {
            cfg: *self,
            mss,
            cwnd: f64::from(start.init_cwnd_bytes.max(2 * mss)),
            ssthresh: f64::from(u32::MAX),
            min_rtt_us: u64::MAX,
            srtt_us: 0,
            last_cut_us: None,
            now_us: 0,
            in_first_slow_start: true,
        })
    }
}

/// One flow's state.
#[derive(Debug)]
pub struct Capped {
    cfg: CappedConfig,
    mss: u32,
    cwnd: f64,
    ssthresh: f64,
    min_rtt_us: u64,
    srtt_us: u64,
    last_cut_us: Option<u64>,
    now_us: u64,
    in_first_slow_start: bool,
}

impl Capped {
    fn window(&self) -> u32 {
        self.cwnd
            .clamp(2.0 * f64::from(self.mss), f64::from(u32::MAX)) as u32
    }

    /// Cuts the window to `factor` of itself at most once per smoothed RTT.
    fn cut(&mut self, now_us: u64, factor: f64) {
        if self
            .last_cut_us
            .is_some_and(|t| now_us.saturating_sub(t) < self.srtt_us.max(1))
        {
            return;
        }
        self.cwnd = (self.cwnd * factor).max(2.0 * f64::from(self.mss));
        self.ssthresh = self.cwnd;
        self.last_cut_us = Some(now_us);
        self.in_first_slow_start = false;
    }
}

impl Algorithm for Capped {
    fn name(&self) -> &'static str {
        CappedConfig::NAME
    }

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        self.cfg.programs()
    }

    fn activate(&mut self, h: &Handoff) -> Control {
        self.cwnd = f64::from(h.cwnd_bytes.max(2 * self.mss));
        self.ssthresh = f64::from(h.ssthresh_bytes.max(2 * self.mss));
        self.min_rtt_us = if h.min_rtt_us == 0 {
            u64::MAX
        } else {
            h.min_rtt_us
        };
        self.srtt_us = h.srtt_us;
        self.now_us = h.now_us;
        self.last_cut_us = h.last_loss_us;
        self.in_first_slow_start = h.in_first_slow_start;
        Control::cwnd(self.window()).with_pacing(Pacing::Unpaced)
    }

    fn on_report(&mut self, m: &Measurement) -> Control {
        self.now_us = m.now_us;
        if m.rtt_us > 0 {
            self.min_rtt_us = self.min_rtt_us.min(m.rtt_us);
            self.srtt_us = if self.srtt_us == 0 {
                m.rtt_us
            } else {
                (7 * self.srtt_us + m.rtt_us) / 8
            };
        }
        let mss = f64::from(self.mss);
        if m.timeout {
            self.ssthresh = (self.cwnd / 2.0).max(2.0 * mss);
            self.cwnd = mss;
            self.in_first_slow_start = false;
        } else if m.lost_pkts > 0 {
            self.cut(m.now_us, 0.5);
        } else if m.rtt_us > 0
            && m.rtt_us.saturating_sub(self.min_rtt_us) > self.cfg.target_delay_us
        {
            self.cut(m.now_us, 7.0 / 8.0);
        } else {
            let acked = m.acked_bytes as f64;
            if self.cwnd < self.ssthresh {
                self.cwnd += acked;
            } else {
                self.cwnd += mss * acked / self.cwnd;
            }
        }
        Control::cwnd(self.window())
    }

    fn handoff(&self) -> Handoff {
        Handoff {
            now_us: self.now_us,
            cwnd_bytes: self.window(),
            ssthresh_bytes: self.ssthresh.min(f64::from(u32::MAX)) as u32,
            pacing: Pacing::Unpaced,
            srtt_us: self.srtt_us,
            min_rtt_us: if self.min_rtt_us == u64::MAX {
                0
            } else {
                self.min_rtt_us
            },
            delivery_rate_bytes_per_sec: 0,
            last_loss_us: self.last_cut_us,
            in_first_slow_start: self.in_first_slow_start,
        }
    }
}

/// The suite's algorithms and this one: what the binaries run with.
pub fn registry() -> Result<Registry, RegistryError> {
    Registry::builtin().with(
        CappedConfig::default(),
        "Reno with a 25 ms queueing-delay cap (a template, examples/custom-cca)",
    )
}
