//! Linux's `tcp_cubic` congestion avoidance (`net/ipv4/tcp_cubic.c`: `bictcp_update`,
//! `bictcp_recalc_ssthresh`, `bictcp_reset`; `net/ipv4/tcp_cong.c`: `tcp_cong_avoid_ai`),
//! replayed ACK by ACK over one report, in whole segments.
//!
//! Per acknowledgement of `acked` segments, with the window `cwnd` (integer segments):
//! 1. `ack_cnt += acked`; while the window is unchanged, `cnt` is recomputed at most every
//!    1/32 s ([`CNT_REFRESH_US`]);
//! 2. at the first acknowledgement of an epoch: `epoch_start = now`, `ack_cnt = acked`,
//!    `tcp_cwnd = cwnd`, and `K = cbrt((W_max - cwnd) / C)` with origin `W_max` (or `K = 0`
//!    and origin `cwnd` above `W_max`);
//! 3. `target = origin +- floor(C |t - K|^3)` with `t = now - epoch_start + min RTT`;
//!    `cnt = cwnd / (target - cwnd)` above the window, else `100 cwnd`; at most 20 before any
//!    loss (`W_max = 0`: 5 % per RTT);
//! 4. Reno friendliness: `tcp_cwnd` gains one segment per `cwnd x beta_scale / 8` acknowledged
//!    (`beta_scale = 8 (1024 + beta) / 3 / (1024 - beta)`, 15 for `beta = 717/1024`), and when
//!    `tcp_cwnd > cwnd`, `cnt = min(cnt, cwnd / (tcp_cwnd - cwnd))`;
//! 5. `cnt >= 2` (at most 1.5x per RTT);
//! 6. `tcp_cong_avoid_ai(cnt, acked)`: `cwnd_cnt += acked`, and every `cnt` of it add a segment.
//!
//! On a reduction: `W_max = cwnd (1024 + beta) / 2048` below the previous `W_max` (fast
//! convergence) else `cwnd`; `ssthresh = max(cwnd beta / 1024, 2)`; the epoch ends and
//! `cwnd_cnt = 0`. A timeout resets everything, `W_max` included.
//!
//! Time is in microseconds, not jiffies, and a report's acknowledgements are spread evenly over
//! the time since the previous report (a report of more than [`MAX_STEPS`] segments is
//! replayed in that many equal steps).

use super::CubicConfig;
use crate::window::{Segments, WindowState};

/// Linux `BICTCP_BETA_SCALE`: `beta` is counted in 1/1024.
pub const BETA_SCALE: u32 = 1024;
/// Linux: before the first loss `cnt` is at most 20 (5 % growth per RTT).
pub const INITIAL_MAX_CNT: u32 = 20;
/// Linux: with the window unchanged, `cnt` is recomputed at most every `HZ / 32`, µs.
pub const CNT_REFRESH_US: u64 = 31_250;
/// Most per-ACK steps one report is replayed in.
pub const MAX_STEPS: u64 = 4096;

/// Linux Cubic's per-flow state (`struct bictcp` and `snd_cwnd_cnt`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinuxCubic {
    /// Segments to acknowledge per one-segment increase.
    pub cnt: u32,
    /// `W_max`, segments (0: no loss yet, or a timeout since).
    pub last_max_cwnd: u32,
    /// Window at the last `cnt` computation, segments.
    pub last_cwnd: u32,
    /// Time of the last `cnt` computation, µs.
    pub last_time_us: u64,
    /// Origin of the cubic curve, segments.
    pub origin_point: u32,
    /// `K`, seconds.
    pub k_s: f64,
    /// Start of the epoch, µs (`None`: the next acknowledgement starts one).
    pub epoch_start_us: Option<u64>,
    /// Acknowledged segments not yet counted into `tcp_cwnd`.
    pub ack_cnt: u32,
    /// Linux's estimate of Reno's window, segments.
    pub tcp_cwnd: u32,
    /// `snd_cwnd_cnt`: acknowledged segments towards the next increase.
    pub cwnd_cnt: u32,
    /// Fraction of a segment acknowledged and not yet applied.
    acked_frac: f64,
    /// Time of the latest report with acknowledged data, µs.
    pub(super) last_report_us: u64,
    /// Time of the report before it: its ACKs are spread from here, µs.
    pub(super) acks_from_us: u64,
}

/// `beta` in 1/1024 (717 for 0.7), within [1, 1023].
pub fn beta_1024(cfg: &CubicConfig) -> u32 {
    ((cfg.beta * f64::from(BETA_SCALE)).round() as u32).clamp(1, BETA_SCALE - 1)
}

/// Linux `beta_scale = 8 (1024 + beta) / 3 / (1024 - beta)` in integer arithmetic (15 for
/// 717): the Reno estimate gains a segment per `cwnd x beta_scale / 8` acknowledged.
pub fn beta_scale(cfg: &CubicConfig) -> u32 {
    let b = beta_1024(cfg);
    8 * (BETA_SCALE + b) / 3 / (BETA_SCALE - b)
}

impl LinuxCubic {
    /// `bictcp_recalc_ssthresh`: ends the epoch, sets `W_max` and returns `ssthresh`, segments.
    pub fn recalc_ssthresh(&mut self, cfg: &CubicConfig, cwnd: f64) -> f64 {
        let cwnd = whole(cwnd);
        let b = beta_1024(cfg);
        self.epoch_start_us = None;
        self.last_max_cwnd = if cfg.fast_convergence && cwnd < self.last_max_cwnd {
            mul_div(cwnd, BETA_SCALE + b, 2 * BETA_SCALE)
        } else {
            cwnd
        };
        f64::from(mul_div(cwnd, b, BETA_SCALE).max(2))
    }

    /// Entering recovery: the increase credit is dropped (`tcp_init_cwnd_reduction`).
    pub fn on_reduction(&mut self) {
        self.epoch_start_us = None;
        self.cwnd_cnt = 0;
    }

    /// A timeout: `bictcp_reset` (everything, `W_max` included) and `snd_cwnd_cnt = 0`.
    pub fn on_timeout(&mut self) {
        *self = Self {
            last_report_us: self.last_report_us,
            acks_from_us: self.acks_from_us,
            ..Self::default()
        };
    }

    /// Congestion avoidance for `acked` segments reported at `now_us`.
    pub(super) fn avoid(
        &mut self,
        cfg: &CubicConfig,
        w: &mut WindowState<Segments>,
        acked: f64,
        now_us: u64,
    ) {
        let total = self.acked_frac + acked.max(0.0);
        let n = total.floor();
        self.acked_frac = total - n;
        if n < 1.0 {
            return;
        }
        let n = n.min(f64::from(u32::MAX)) as u64;
        let mut cwnd = whole(w.cwnd);
        let steps = n.min(MAX_STEPS);
        let (base, extra) = (n / steps, n % steps);
        let from = self.acks_from_us.min(now_us);
        let span = now_us - from;
        let delay_min_us = w.rtt.min_rtt_us();
        for i in 0..steps {
            let t_us = from
                + u64::try_from(u128::from(span) * u128::from(i + 1) / u128::from(steps))
                    .unwrap_or(span);
            let a = u32::try_from(base + u64::from(i < extra)).unwrap_or(u32::MAX);
            self.update(cfg, cwnd, a, t_us, delay_min_us);
            cwnd = self.cong_avoid_ai(cwnd, a);
        }
        w.cwnd = w.clamp(f64::from(cwnd));
    }

    /// `bictcp_update`: `cnt` for the window `cwnd` after `acked` segments at `now_us`.
    pub fn update(
        &mut self,
        cfg: &CubicConfig,
        cwnd: u32,
        acked: u32,
        now_us: u64,
        delay_min_us: u64,
    ) {
        self.ack_cnt = self.ack_cnt.saturating_add(acked);
        if self.last_cwnd == cwnd && now_us.saturating_sub(self.last_time_us) <= CNT_REFRESH_US {
            return;
        }
        self.last_cwnd = cwnd;
        self.last_time_us = now_us;
        if self.epoch_start_us.is_none() {
            self.epoch_start_us = Some(now_us);
            self.ack_cnt = acked;
            self.tcp_cwnd = cwnd;
            if self.last_max_cwnd <= cwnd {
                self.k_s = 0.0;
                self.origin_point = cwnd;
            } else {
                self.k_s = (f64::from(self.last_max_cwnd - cwnd) / cfg.c).cbrt();
                self.origin_point = self.last_max_cwnd;
            }
        }
        let epoch_start = self.epoch_start_us.unwrap_or(now_us);
        let t_s = now_us
            .saturating_sub(epoch_start)
            .saturating_add(delay_min_us) as f64
            / 1e6;
        let offs = (t_s - self.k_s).abs();
        let delta = (cfg.c * offs.powi(3)).floor().min(f64::from(u32::MAX)) as u32;
        let target = if t_s < self.k_s {
            self.origin_point.saturating_sub(delta)
        } else {
            self.origin_point.saturating_add(delta)
        };
        self.cnt = if target > cwnd {
            cwnd / (target - cwnd)
        } else {
            cwnd.saturating_mul(100)
        };
        if self.last_max_cwnd == 0 && self.cnt > INITIAL_MAX_CNT {
            self.cnt = INITIAL_MAX_CNT;
        }
        if cfg.reno_friendly {
            let per_segment = mul_div(cwnd, beta_scale(cfg), 8).max(1);
            if self.ack_cnt > per_segment {
                let gained = (self.ack_cnt - 1) / per_segment;
                self.ack_cnt -= gained * per_segment;
                self.tcp_cwnd = self.tcp_cwnd.saturating_add(gained);
            }
            if self.tcp_cwnd > cwnd {
                let max_cnt = cwnd / (self.tcp_cwnd - cwnd);
                self.cnt = self.cnt.min(max_cnt);
            }
        }
        self.cnt = self.cnt.max(2);
    }

    /// `tcp_cong_avoid_ai(cnt, acked)`: the window after `acked` segments.
    pub fn cong_avoid_ai(&mut self, mut cwnd: u32, acked: u32) -> u32 {
        let w = self.cnt.max(1);
        if self.cwnd_cnt >= w {
            self.cwnd_cnt = 0;
            cwnd = cwnd.saturating_add(1);
        }
        self.cwnd_cnt = self.cwnd_cnt.saturating_add(acked);
        if self.cwnd_cnt >= w {
            let delta = self.cwnd_cnt / w;
            self.cwnd_cnt -= delta * w;
            cwnd = cwnd.saturating_add(delta);
        }
        cwnd
    }
}

/// A window in whole segments (Linux's `snd_cwnd`), at least 2.
fn whole(cwnd: f64) -> u32 {
    if cwnd.is_nan() {
        return 2;
    }
    (cwnd.floor().min(f64::from(u32::MAX)) as u32).max(2)
}

/// `a * b / c` without overflow, saturating.
fn mul_div(a: u32, b: u32, c: u32) -> u32 {
    u32::try_from(u64::from(a) * u64::from(b) / u64::from(c.max(1))).unwrap_or(u32::MAX)
}
