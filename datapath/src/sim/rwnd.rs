//! The receive window a Linux receiver advertises, with its receive-buffer autotuning.
//!
//! Follows Linux 6.18's receiver (`net/ipv4/tcp_input.c`, `tcp_output.c`) for a bulk
//! transfer whose application reads every byte as soon as it is in order:
//! - **The buffer** starts at `tcp_rmem[1]` (128 KiB); the window a buffer holds is
//!   `space x scaling_ratio / 256` (`tcp_win_from_space`), where the ratio is payload over
//!   `truesize` of the received packets ([`SCALING_RATIO`], measured on the testbed).
//! - **Dynamic right-sizing** (`tcp_rcv_space_adjust`, `tcp_rcvbuf_grow`): once per receiver
//!   RTT, if the bytes read in the last RTT (`copied`) exceed the previous measure
//!   (`rcvq_space.space`), the buffer grows to hold `2 copied`, plus `4 copied x (copied -
//!   old) / old` while the sender is still growing (slow start), plus the out-of-order span;
//!   at most `tcp_rmem[2]`. Out-of-order data grows it too (`tcp_data_queue_ofo`: the same
//!   rule with `copied` unchanged). The buffer never shrinks.
//! - **The receiver's RTT** (`tcp_rcv_rtt_measure_ts`, `tcp_rcv_rtt_update`): from the
//!   timestamp echo, i.e. the time from the receiver's ACK to data sent after it: a sample
//!   smaller than the estimate replaces it, a larger one moves it by 1/8; at most one sample
//!   per millisecond (the timestamp clock's tick).
//! - **`rcv_ssthresh`** (`tcp_grow_window`): starts at the initial window (64 KiB rounded down
//!   to whole segments) and grows by two segments per arriving segment, in order or not, up to
//!   the window the buffer holds less what out-of-order data occupies.
//! - **The advertised window** (`__tcp_select_window`, `tcp_select_window`): the free space
//!   (the buffer's window less the out-of-order data), at most `rcv_ssthresh`, rounded up to
//!   the window scale; zero when the free space falls below 1/16 of the buffer's window or
//!   one segment; the right edge never moves back.
//!
//! Left out: memory pressure, pruning of the out-of-order queue (the sender respects the window,
//! so the buffer does not overflow), a reader slower than the network (the receive queue is
//! always empty), the SYN's unscaled window, and the `truesize` of the first packets (the
//! ratio is the measured one from the first segment on).

/// `tcp_rmem[1]`: the buffer a connection starts with, bytes.
pub const RMEM_DEFAULT_BYTES: u64 = 131_072;
/// `TCP_DEFAULT_SCALING_RATIO`: the payload share of the buffer before any packet was
/// measured (it sizes the initial window), /256.
const DEFAULT_SCALING_RATIO: u64 = 128;
/// The payload share of the buffer once packets arrive, /256 (`tcp_measure_rcv_mss`:
/// `len x 256 / truesize`), as the testbed's receivers measure it for full-sized segments
/// (`docs/calibration.md`, "The receive window").
pub const SCALING_RATIO: u64 = 160;
/// `net.core.rmem_max` (the window scale is chosen for the larger of it and `tcp_rmem[2]`).
const CORE_RMEM_MAX_BYTES: u64 = 4_194_304;
/// The largest window scale (`TCP_MAX_WSCALE`).
const MAX_WSCALE: u32 = 14;

fn win_from_space(space: u64, ratio: u64) -> u64 {
    space * ratio / 256
}

fn space_from_win(win: u64, ratio: u64) -> u64 {
    win * 256 / ratio.max(1)
}

/// A receiver's window state, in bytes of the byte stream.
#[derive(Debug, Clone)]
pub struct RecvWindow {
    mss: u64,
    rmem_max: u64,
    wscale: u32,
    ratio: u64,
    rcvbuf: u64,
    window_clamp: u64,
    rcv_ssthresh: u64,
    /// `rcvq_space`: the last measure of bytes read per RTT, and where and when it started.
    space: u64,
    space_seq: u64,
    space_time_ns: Option<u64>,
    /// `rcv_rtt_est.rtt_us`, x8, ns (0: no sample yet).
    rtt8_ns: u64,
    last_rtt_sample_ns: Option<u64>,
    /// `rcv_wup + rcv_wnd`: the right edge last advertised.
    edge: u64,
}

impl RecvWindow {
    /// A receiver for segments of `mss_bytes` whose buffer may grow to `rmem_max_bytes`
    /// (`tcp_rmem[2]`).
    pub fn new(mss_bytes: u32, rmem_max_bytes: u64) -> Self {
        let mss = u64::from(mss_bytes.max(1));
        let rmem_max = rmem_max_bytes.max(RMEM_DEFAULT_BYTES);
        // tcp_select_initial_window: the full space at the default ratio, whole segments.
        let mut init = win_from_space(RMEM_DEFAULT_BYTES, DEFAULT_SCALING_RATIO);
        if init > mss {
            init -= init % mss;
        }
        let wscale = (rmem_max.max(CORE_RMEM_MAX_BYTES).ilog2().saturating_sub(15)).min(MAX_WSCALE);
        let ratio = SCALING_RATIO;
        let window_clamp = win_from_space(RMEM_DEFAULT_BYTES, ratio);
        Self {
            mss,
            rmem_max,
            wscale,
            ratio,
            rcvbuf: RMEM_DEFAULT_BYTES,
            window_clamp,
            rcv_ssthresh: init.min(window_clamp),
            // tcp_init_buffer_space: min(rcv_ssthresh, rcv_wnd, TCP_INIT_CWND x advmss).
            space: init.min(10 * mss),
            space_seq: 0,
            space_time_ns: None,
            rtt8_ns: 0,
            last_rtt_sample_ns: None,
            edge: init,
        }
    }

    /// The receive buffer, bytes (`sk_rcvbuf`).
    pub fn rcvbuf_bytes(&self) -> u64 {
        self.rcvbuf
    }

    /// The right edge of the window last advertised, bytes of the stream.
    pub fn edge_bytes(&self) -> u64 {
        self.edge
    }

    /// The receiver's RTT estimate, ns (0 before a sample).
    pub fn rtt_ns(&self) -> u64 {
        self.rtt8_ns / 8
    }

    /// `tcp_space`: the window the free part of the buffer holds, with `ofo_segs` segments
    /// out of order in it.
    fn free_space(&self, ofo_segs: u64) -> u64 {
        win_from_space(self.rcvbuf, self.ratio).saturating_sub(ofo_segs * self.mss)
    }

    /// A segment arrived at `now_ns`, `rtt_sample_ns` after the receiver's ACK it echoes;
    /// `in_order`: it advanced `rcv_nxt` (now `rcv_nxt_bytes`), else it waits out of order;
    /// `ofo_segs` and `ofo_end_bytes`: the out-of-order queue after it (its size, and the end
    /// of its last segment, `rcv_nxt_bytes` when it is empty).
    pub fn on_segment(
        &mut self,
        now_ns: u64,
        rtt_sample_ns: u64,
        in_order: bool,
        rcv_nxt_bytes: u64,
        ofo_segs: u64,
        ofo_end_bytes: u64,
    ) {
        self.space_time_ns.get_or_insert(now_ns);
        self.rtt_sample(now_ns, rtt_sample_ns);
        self.grow_window(ofo_segs);
        if in_order {
            self.space_adjust(now_ns, rcv_nxt_bytes, ofo_end_bytes);
        } else {
            self.rcvbuf_grow(self.space, rcv_nxt_bytes, ofo_end_bytes);
        }
    }

    fn rtt_sample(&mut self, now_ns: u64, sample_ns: u64) {
        if self
            .last_rtt_sample_ns
            .is_some_and(|t| now_ns < t + 1_000_000)
        {
            return;
        }
        self.last_rtt_sample_ns = Some(now_ns);
        let m = sample_ns.max(1) * 8;
        self.rtt8_ns = if self.rtt8_ns == 0 || m < self.rtt8_ns {
            m
        } else {
            self.rtt8_ns - self.rtt8_ns / 8 + sample_ns
        };
    }

    /// `tcp_grow_window`.
    fn grow_window(&mut self, ofo_segs: u64) {
        let room = self.window_clamp.min(self.free_space(ofo_segs));
        if room > self.rcv_ssthresh {
            self.rcv_ssthresh += (room - self.rcv_ssthresh).min(2 * self.mss);
        }
    }

    /// `tcp_rcv_space_adjust` after the application read up to `rcv_nxt_bytes`.
    fn space_adjust(&mut self, now_ns: u64, rcv_nxt_bytes: u64, ofo_end: u64) {
        let start = self.space_time_ns.unwrap_or(now_ns);
        if self.rtt8_ns == 0 || now_ns - start < self.rtt8_ns / 8 {
            return;
        }
        let copied = rcv_nxt_bytes.saturating_sub(self.space_seq);
        if copied > self.space {
            self.rcvbuf_grow(copied, rcv_nxt_bytes, ofo_end);
        }
        self.space_seq = rcv_nxt_bytes;
        self.space_time_ns = Some(now_ns);
    }

    /// `tcp_rcvbuf_grow(newval)`.
    fn rcvbuf_grow(&mut self, newval: u64, rcv_nxt_bytes: u64, ofo_end: u64) {
        let old = self.space.max(1);
        self.space = newval;
        let mut rcvwin = newval * 2;
        if newval > old {
            rcvwin += 2 * rcvwin * (newval - old) / old;
        }
        rcvwin += ofo_end.saturating_sub(rcv_nxt_bytes);
        let rcvbuf = space_from_win(rcvwin, self.ratio).min(self.rmem_max);
        if rcvbuf > self.rcvbuf {
            self.rcvbuf = rcvbuf;
            self.window_clamp = win_from_space(rcvbuf, self.ratio);
        }
    }

    /// The receiver sends an ACK for everything up to `rcv_nxt_bytes`, with `ofo_segs`
    /// segments out of order: the right edge it advertises (`tcp_select_window`), bytes.
    pub fn advertise(&mut self, rcv_nxt_bytes: u64, ofo_segs: u64) -> u64 {
        let allowed = win_from_space(self.rcvbuf, self.ratio);
        let full = self.window_clamp.min(allowed);
        let unit = 1u64 << self.wscale;
        let free = self.free_space(ofo_segs) / unit * unit;
        let window = if free < full / 16 && (free < allowed / 16 || free < self.mss) {
            0
        } else {
            free.min(self.rcv_ssthresh).div_ceil(unit) * unit
        };
        self.edge = self.edge.max(rcv_nxt_bytes + window);
        self.edge
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1448;
    const MS: u64 = 1_000_000;

    /// Delivers `n` in-order segments evenly over `[t, t + rtt)`, one ACK per two, to a
    /// sender in slow start (each acknowledged segment lets two of the next round go): returns the
    /// smallest margin, in segments, of the window advertised over what that sender has
    /// outstanding after each ACK (negative: the window holds it back).
    fn flight(w: &mut RecvWindow, nxt: &mut u64, n: u64, t: u64, rtt: u64) -> i64 {
        let mut least = i64::MAX;
        for i in 0..n {
            *nxt += MSS;
            w.on_segment(t + i * rtt / n, rtt, true, *nxt, 0, *nxt);
            if i % 2 == 1 {
                let window = ((w.advertise(*nxt, 0) - *nxt) / MSS) as i64;
                let outstanding = (n - i - 1 + 2 * (i + 1)) as i64;
                least = least.min(window - outstanding);
            }
        }
        least
    }

    #[test]
    fn the_first_window_is_64_kib_in_whole_segments() {
        let w = RecvWindow::new(1448, 32 << 20);
        assert_eq!(w.edge_bytes(), 45 * 1448);
        assert_eq!(w.rcvbuf_bytes(), RMEM_DEFAULT_BYTES);
    }

    #[test]
    fn a_sender_doubling_every_rtt_is_not_held_back_on_a_clean_path() {
        let mut w = RecvWindow::new(1448, 32 << 20);
        let (rtt, mut nxt) = (100 * MS, 0);
        let mut n = 10;
        for k in 0..10 {
            let least = flight(&mut w, &mut nxt, n, k * rtt, rtt);
            assert!(
                least >= 0,
                "round {k}: the window holds back by {} segments",
                -least
            );
            n *= 2;
        }
        assert!(w.rcvbuf_bytes() > 4 << 20, "{}", w.rcvbuf_bytes());
        assert!((99 * MS..=101 * MS).contains(&w.rtt_ns()), "{}", w.rtt_ns());
    }

    #[test]
    fn the_buffer_stops_at_tcp_rmem_max() {
        let mut w = RecvWindow::new(1448, 1 << 20);
        let (rtt, mut nxt) = (50 * MS, 0);
        for k in 0..8 {
            flight(&mut w, &mut nxt, 10 << k, k * rtt, rtt);
        }
        assert_eq!(w.rcvbuf_bytes(), 1 << 20);
        assert!(w.advertise(nxt, 0) - nxt <= win_from_space(1 << 20, SCALING_RATIO));
    }

    #[test]
    fn out_of_order_data_takes_its_room_and_the_edge_never_moves_back() {
        let mut w = RecvWindow::new(1448, 32 << 20);
        let (rtt, mut nxt) = (100 * MS, 0);
        for k in 0..4 {
            flight(&mut w, &mut nxt, 10 << k, k * rtt, rtt);
        }
        let t = 4 * rtt;
        let open = w.advertise(nxt, 0) - nxt;
        let free = win_from_space(w.rcvbuf_bytes(), SCALING_RATIO);
        // A hole at `nxt`, then 30 segments behind it.
        for i in 1..=30 {
            w.on_segment(t + i * MS, rtt, false, nxt, i, nxt + (i + 1) * MSS);
        }
        let edge = w.edge_bytes();
        let grown = win_from_space(w.rcvbuf_bytes(), SCALING_RATIO);
        assert!(
            grown >= free,
            "out-of-order data grows the buffer: {grown} < {free}"
        );
        // The 30 segments occupy their room in the buffer ...
        assert_eq!(w.free_space(30) + 30 * MSS, w.free_space(0));
        // ... but an edge already offered stays.
        assert!(w.advertise(nxt, 30) >= edge.max(nxt + open));
    }
}
