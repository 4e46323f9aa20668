//! Unit tests of each RFC 9438 step (the RFC variant) and of Linux's arithmetic (the default).

use super::*;
use crate::api::{Measurement, Pacing};

const MSS: u32 = 1000;

fn cubic() -> Cubic {
    Cubic::new(
        CubicConfig::default().variant(CubicVariant::Rfc9438),
        &FlowStart {
            sock_id: 1,
            mss_bytes: MSS,
            init_cwnd_bytes: 10 * MSS,
            seed: 0,
        },
    )
}

fn report(now_us: u64, acked_segments: u64) -> Measurement {
    Measurement {
        now_us,
        acked_bytes: acked_segments * u64::from(MSS),
        rtt_us: 100_000,
        min_rtt_us: 100_000,
        ..Measurement::default()
    }
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn k_is_the_time_to_climb_back_to_w_max() {
    // RFC 9438 §4.2 eq. 2: K = cbrt((W_max - cwnd_epoch) / C); 100 -> 70 with C = 0.4.
    let c = cubic();
    let k = c.k_seconds(100.0, 70.0);
    assert!(close(k, (30.0_f64 / 0.4).cbrt(), 1e-12));
    assert!(close(c.w_cubic(k, k, 100.0), 100.0, 1e-9));
    assert!(close(c.w_cubic(0.0, k, 100.0), 70.0, 1e-9));
    assert!(
        close(c.k_seconds(50.0, 70.0), 0.0, 0.0),
        "no concave region above W_max"
    );
}

#[test]
fn the_curve_is_concave_then_convex_around_w_max() {
    // §4.2: W_cubic(K - d) and W_cubic(K + d) are symmetric around W_max.
    let c = cubic();
    let k = 3.0;
    let below = c.w_cubic(k - 1.0, k, 100.0);
    let above = c.w_cubic(k + 1.0, k, 100.0);
    assert!(close(100.0 - below, above - 100.0, 1e-9));
    assert!(close(above, 100.4, 1e-9));
}

#[test]
fn loss_multiplies_by_beta_and_starts_an_epoch() {
    // §4.6: ssthresh = cwnd = 0.7 cwnd; W_max = cwnd at the first loss.
    let mut c = cubic();
    c.state.cwnd = 100.0;
    c.on_report(&Measurement {
        lost_pkts: 1,
        ..report(1_000_000, 0)
    });
    assert!(close(c.cwnd_segments(), 70.0, 1e-9));
    assert!(close(c.ssthresh_segments(), 70.0, 1e-9));
    assert!(close(c.w_max_segments(), 100.0, 1e-9));
    let e = c.rule.epoch.unwrap();
    assert_eq!(e.start_us, 1_000_000);
    assert!(close(e.k_s, (30.0_f64 / 0.4).cbrt(), 1e-12));
}

#[test]
fn fast_convergence_lowers_w_max_when_losses_come_earlier() {
    // §4.7: a loss below the previous W_max sets W_max = cwnd (1 + beta) / 2.
    let mut c = cubic();
    c.state.cwnd = 100.0;
    c.on_loss(1_000_000);
    c.state.recovery.clear();
    c.state.cwnd = 90.0;
    c.on_loss(5_000_000);
    assert!(close(c.w_max_segments(), 90.0 * 0.85, 1e-9));
    let mut no_fc = Cubic::new(
        CubicConfig::default()
            .variant(CubicVariant::Rfc9438)
            .fast_convergence(false),
        &FlowStart {
            sock_id: 1,
            mss_bytes: MSS,
            init_cwnd_bytes: 10 * MSS,
            seed: 0,
        },
    );
    no_fc.state.cwnd = 100.0;
    no_fc.on_loss(1_000_000);
    no_fc.state.recovery.clear();
    no_fc.state.cwnd = 90.0;
    no_fc.on_loss(5_000_000);
    assert!(close(no_fc.w_max_segments(), 90.0, 1e-9));
}

#[test]
fn a_second_loss_within_one_rtt_is_the_same_congestion_event() {
    let mut c = cubic();
    c.on_report(&report(0, 0));
    c.state.cwnd = 100.0;
    c.on_loss(1_000_000);
    c.on_loss(1_050_000);
    assert!(close(c.cwnd_segments(), 70.0, 1e-9));
    // Still the same event until twice the old window (100 segments) is acknowledged in order.
    c.on_report(&Measurement {
        lost_pkts: 1,
        ..report(1_150_000, 199)
    });
    assert!(
        close(c.cwnd_segments(), 70.0, 1e-9),
        "no growth, no second reduction"
    );
    c.on_report(&Measurement {
        lost_pkts: 1,
        ..report(1_160_000, 1)
    });
    assert!(
        close(c.cwnd_segments(), 49.0, 1e-9),
        "a new congestion event"
    );
}

#[test]
fn avoidance_moves_towards_w_cubic_one_rtt_ahead() {
    // §4.2: target = W_cubic(t + RTT), cwnd += (target - cwnd) * acked / cwnd.
    let mut c = cubic();
    c.on_report(&report(0, 0));
    c.state.cwnd = 100.0;
    c.on_loss(0);
    c.state.recovery.clear();
    let k = c.rule.epoch.unwrap().k_s;
    // Half a window acked, 1 s into the epoch, RTT 100 ms.
    c.on_report(&report(1_000_000, 35));
    let target = c.w_cubic(1.1, k, 100.0);
    let expect = 70.0 + (target - 70.0) * 0.5;
    assert!(
        close(c.cwnd_segments(), expect, 1e-9),
        "{} vs {expect}",
        c.cwnd_segments()
    );
}

#[test]
fn the_target_is_clamped_to_one_and_a_half_windows() {
    // §4.2: target within [cwnd, 1.5 cwnd].
    let mut c = cubic();
    c.on_report(&report(0, 0));
    c.state.cwnd = 100.0;
    c.on_loss(0);
    c.state.recovery.clear();
    // 60 s later W_cubic is far above 1.5 cwnd.
    c.on_report(&report(60_000_000, 70));
    assert!(close(c.cwnd_segments(), 105.0, 1e-9));
}

#[test]
fn the_reno_friendly_estimate_takes_over_when_cubic_is_slower() {
    // §4.3: W_est += alpha_cubic * acked / cwnd; cwnd = W_est when W_cubic(t) < W_est.
    let mut c = cubic();
    c.on_report(&report(0, 0));
    c.state.cwnd = 10.0;
    c.on_loss(0);
    c.state.recovery.clear();
    // Tiny window: K = cbrt(3 / 0.4) ~ 1.96 s, the cubic curve is nearly flat; W_est wins.
    let w0 = c.cwnd_segments();
    for i in 1..=20 {
        c.on_report(&report(i * 100_000, 7));
    }
    let k = c.rule.epoch.unwrap().k_s;
    let cubic_now = c.w_cubic(2.0, k, 10.0);
    assert!(close(ALPHA_CUBIC, 3.0 * 0.3 / 1.7, 1e-12));
    assert!(c.rule.w_est > w0 + 19.0 * ALPHA_CUBIC * 0.9);
    assert!(c.cwnd_segments() >= c.rule.w_est - 1e-9);
    assert!(c.cwnd_segments() > cubic_now);
}

#[test]
fn the_reno_friendly_increase_becomes_one_past_the_prior_window() {
    // §4.3: alpha_cubic = 1 once W_est >= cwnd_prior.
    let mut c = cubic();
    c.on_report(&report(0, 0));
    c.state.cwnd = 10.0;
    c.on_loss(0);
    c.rule.w_est = 10.0;
    let before = c.rule.w_est;
    let cwnd = c.state.cwnd;
    c.rule.avoid(&mut c.state, cwnd, 1_000_000);
    assert!(close(c.rule.w_est - before, 1.0, 1e-9));
}

#[test]
fn timeout_goes_back_to_slow_start_from_the_loss_window() {
    // §4.8.
    let mut c = cubic();
    c.state.cwnd = 100.0;
    c.on_report(&Measurement {
        timeout: true,
        ..report(1_000_000, 0)
    });
    assert!(close(c.cwnd_segments(), 2.0, 1e-9));
    assert!(close(c.ssthresh_segments(), 70.0, 1e-9));
    c.on_report(&report(3_000_000, 2));
    assert!(close(c.cwnd_segments(), 4.0, 1e-9));
}

#[test]
fn adopting_a_handoff_outside_slow_start_does_not_restart_it() {
    let mut c = cubic();
    let h = Handoff {
        now_us: 10_000_000,
        cwnd_bytes: 80 * MSS,
        in_first_slow_start: false,
        last_loss_us: Some(9_000_000),
        srtt_us: 100_000,
        ..c.handoff()
    };
    let ctl = c.activate(&h);
    assert_eq!(ctl.cwnd_bytes, Some(80 * MSS));
    assert_eq!(ctl.pacing, Some(Pacing::Unpaced));
    c.on_report(&report(10_100_000, 80));
    let w = c.cwnd_segments();
    assert!((80.0..82.0).contains(&w), "grows slowly, not doubling: {w}");
    assert!(!c.handoff().in_first_slow_start);
}

#[test]
fn adopting_a_handoff_that_saw_no_loss_keeps_slow_starting() {
    // Copa or BBR left slow start on their own signal; Cubic's threshold comes from a loss.
    let mut c = cubic();
    let h = Handoff {
        now_us: 10_000_000,
        cwnd_bytes: 80 * MSS,
        ssthresh_bytes: 80 * MSS,
        in_first_slow_start: false,
        last_loss_us: None,
        srtt_us: 100_000,
        ..c.handoff()
    };
    assert_eq!(c.activate(&h).cwnd_bytes, Some(80 * MSS));
    c.on_report(&report(10_100_000, 80));
    let w = c.cwnd_segments();
    assert!((159.0..=160.0).contains(&w), "doubles: {w}");
    assert!(c.handoff().in_first_slow_start);
}

fn linux() -> Cubic {
    Cubic::new(
        CubicConfig::default(),
        &FlowStart {
            sock_id: 1,
            mss_bytes: MSS,
            init_cwnd_bytes: 10 * MSS,
            seed: 0,
        },
    )
}

/// Linux's `tcp_cubic` as the kernel runs it, one ACK per segment, transcribed from
/// `bictcp_update` and `tcp_cong_avoid_ai` (beta 717, `beta_scale` 15, C = 0.4, no HyStart):
/// the reference the report-driven implementation must match.
struct KernelCubic {
    cwnd: u32,
    cwnd_cnt: u32,
    cnt: u32,
    last_max: u32,
    last_cwnd: u32,
    last_time_us: u64,
    origin: u32,
    k_s: f64,
    epoch_start_us: Option<u64>,
    ack_cnt: u32,
    tcp_cwnd: u32,
}

impl KernelCubic {
    fn after_loss_from(cwnd: u32) -> Self {
        Self {
            cwnd: (cwnd * 717 / 1024).max(2),
            cwnd_cnt: 0,
            cnt: 0,
            last_max: cwnd,
            last_cwnd: 0,
            last_time_us: 0,
            origin: 0,
            k_s: 0.0,
            epoch_start_us: None,
            ack_cnt: 0,
            tcp_cwnd: 0,
        }
    }

    fn ack(&mut self, now_us: u64, min_rtt_us: u64) {
        self.ack_cnt += 1;
        if !(self.last_cwnd == self.cwnd && now_us - self.last_time_us <= 31_250) {
            self.last_cwnd = self.cwnd;
            self.last_time_us = now_us;
            if self.epoch_start_us.is_none() {
                self.epoch_start_us = Some(now_us);
                self.ack_cnt = 1;
                self.tcp_cwnd = self.cwnd;
                if self.last_max <= self.cwnd {
                    self.k_s = 0.0;
                    self.origin = self.cwnd;
                } else {
                    self.k_s = (f64::from(self.last_max - self.cwnd) / 0.4).cbrt();
                    self.origin = self.last_max;
                }
            }
            let t = (now_us - self.epoch_start_us.unwrap() + min_rtt_us) as f64 / 1e6;
            let delta = (0.4 * (t - self.k_s).abs().powi(3)).floor() as u32;
            let target = if t < self.k_s {
                self.origin - delta
            } else {
                self.origin + delta
            };
            self.cnt = if target > self.cwnd {
                self.cwnd / (target - self.cwnd)
            } else {
                100 * self.cwnd
            };
            let delta = self.cwnd * 15 / 8;
            while self.ack_cnt > delta {
                self.ack_cnt -= delta;
                self.tcp_cwnd += 1;
            }
            if self.tcp_cwnd > self.cwnd {
                self.cnt = self.cnt.min(self.cwnd / (self.tcp_cwnd - self.cwnd));
            }
            self.cnt = self.cnt.max(2);
        }
        if self.cwnd_cnt >= self.cnt {
            self.cwnd_cnt = 0;
            self.cwnd += 1;
        }
        self.cwnd_cnt += 1;
        if self.cwnd_cnt >= self.cnt {
            let d = self.cwnd_cnt / self.cnt;
            self.cwnd_cnt -= d * self.cnt;
            self.cwnd += d;
        }
    }
}

/// Drives `c` and the kernel reference through the same reports after a loss at `w` segments:
/// each report acknowledges one window, one RTT after the previous one; returns both windows
/// after every report.
fn linux_and_kernel(w: u32, rtt_us: u64, reports: usize) -> Vec<(u32, u32)> {
    let mut c = linux();
    c.on_report(&Measurement {
        rtt_us,
        min_rtt_us: rtt_us,
        ..report(0, 0)
    });
    c.state.cwnd = f64::from(w);
    c.state.ssthresh = f64::from(w);
    c.on_loss(0);
    c.state.recovery.clear();
    let mut k = KernelCubic::after_loss_from(w);
    assert_eq!(c.cwnd_segments() as u32, k.cwnd, "ssthresh = cwnd * 717 / 1024");
    let mut now = 0;
    let mut out = Vec::new();
    for _ in 0..reports {
        let acked = k.cwnd;
        assert_eq!(c.cwnd_segments() as u32, acked);
        for i in 1..=u64::from(acked) {
            k.ack(now + rtt_us * i / u64::from(acked), rtt_us);
        }
        now += rtt_us;
        c.on_report(&Measurement {
            rtt_us,
            min_rtt_us: rtt_us,
            ..report(now, u64::from(acked))
        });
        out.push((c.cwnd_segments() as u32, k.cwnd));
    }
    out
}

#[test]
fn linux_variant_matches_the_kernel_ack_by_ack() {
    // tcp_cubic.c bictcp_update / tcp_cong_avoid_ai on a constructed sequence of reports: a
    // small window (Reno-friendly region) and a large one (cubic region), 100 and 20 ms.
    for (w, rtt_us, n) in [(20, 100_000, 60), (12, 20_000, 200), (400, 100_000, 80)] {
        for (i, (ours, kernel)) in linux_and_kernel(w, rtt_us, n).into_iter().enumerate() {
            assert_eq!(ours, kernel, "W {w}, RTT {rtt_us} µs, report {i}");
        }
    }
}

#[test]
fn linux_reno_estimate_grows_by_8_15_per_rtt_and_never_by_one() {
    // tcp_friendliness: one segment per cwnd x 15 / 8 acknowledged, 0.533 per RTT, also past
    // the window before the loss (RFC 9438 §4.3 would switch to 1 there).
    let trace = linux_and_kernel(12, 20_000, 300);
    let (start, end) = (trace[99].0, trace[299].0);
    let per_rtt = f64::from(end - start) / 200.0;
    assert!((0.45..=0.56).contains(&per_rtt), "{per_rtt} segments per RTT");
    assert!(
        end > 12 + 40,
        "well past the window before the loss: {end}"
    );
    // The RFC variant over the same reports grows at 1 per RTT past the prior window.
    let mut r = cubic();
    r.on_report(&report(0, 0));
    r.state.cwnd = 12.0;
    r.on_loss(0);
    r.state.recovery.clear();
    let mut now = 0;
    let mut at = Vec::new();
    for _ in 0..300 {
        let acked = r.cwnd_segments();
        now += 20_000;
        r.on_report(&Measurement {
            rtt_us: 20_000,
            min_rtt_us: 20_000,
            ..report(now, acked as u64)
        });
        at.push(r.cwnd_segments());
    }
    let rfc_per_rtt = (at[299] - at[99]) / 200.0;
    assert!(rfc_per_rtt > 0.9, "RFC 9438: {rfc_per_rtt}");
}

#[test]
fn linux_reduction_uses_integer_beta_and_fast_convergence() {
    // bictcp_recalc_ssthresh: ssthresh = max(cwnd * 717 / 1024, 2), W_max = cwnd * 1741 / 2048
    // below the previous W_max.
    let mut c = linux();
    c.state.cwnd = 100.9;
    c.on_loss(1_000_000);
    assert!(close(c.cwnd_segments(), 70.0, 0.0));
    assert!(close(c.w_max_segments(), 100.0, 0.0));
    assert_eq!(c.linux_state().epoch_start_us, None, "the epoch starts after recovery");
    c.state.recovery.clear();
    c.state.cwnd = 90.0;
    c.on_loss(5_000_000);
    assert!(close(c.w_max_segments(), f64::from(90 * 1741 / 2048), 0.0));
    assert!(close(c.cwnd_segments(), f64::from(90 * 717 / 1024), 0.0));
    // A timeout forgets W_max (bictcp_reset); growth before any loss is then 5 % per RTT.
    c.on_report(&Measurement {
        timeout: true,
        ..report(6_000_000, 0)
    });
    assert!(close(c.w_max_segments(), 0.0, 0.0));
}

#[test]
fn linux_growth_before_any_loss_is_five_percent_per_rtt() {
    // last_max_cwnd == 0: cnt <= 20.
    let mut c = linux();
    c.on_report(&report(0, 0));
    c.state.cwnd = 100.0;
    c.state.ssthresh = 100.0;
    c.on_report(&report(100_000, 100));
    assert!(close(c.cwnd_segments(), 105.0, 0.0), "{}", c.cwnd_segments());
}
