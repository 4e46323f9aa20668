//! The simulated TCP-like sender.
//!
//! Every transmission gets a fresh packet number (so every RTT sample is unambiguous) and
//! carries one segment of the byte stream. An ACK names the packets the receiver got since
//! its previous ACK ([`super::receiver`] decides when it acknowledges: Linux's delayed ACKs or
//! every packet), which gives the sender a complete SACK scoreboard. Loss detection is Linux's
//! RACK-TLP with [`Sender::rack_tlp`] ([`super::rack`]: the reordering window and timer, the
//! tail loss probe); without it, RFC 9002 §6.1's packet and time thresholds: a packet is lost
//! once a packet sent 3 or more later is acknowledged, or once it is older than 9/8 of the RTT
//! when a later one is acknowledged. The retransmission timer follows RFC 6298 with Linux's 200 ms floor
//! on the variance term (`srtt + max(4 rttvar, 200 ms)`, [`Sender::linux_rto`]; off: RFC
//! 6298's `max(srtt + 4 rttvar, 200 ms)`) and exponential backoff; on expiry everything in flight is lost and the window drops to one
//! segment, as the kernel does before congestion control reacts. Delivery rate is sampled per
//! ACK as Linux's `tcp_rate.c` does.
//!
//! Loss recovery around the built-in congestion controls (sequence-based, PRR) is
//! [`super::recovery`]'s. New data is sent only within the receiver's window when one is
//! modelled ([`Sender::set_rwnd_edge_seg`], [`super::rwnd`]). Left out: Nagle, TSO/GSO bursts, SACK reneging, F-RTO and the
//! spurious-retransmission undo.

use std::collections::VecDeque;

use super::rack::{self, Rack};
use crate::runtime::Primitives;

/// Linux's minimum retransmission timeout.
pub const MIN_RTO_NS: u64 = 200_000_000;
/// RFC 6298 initial timeout.
pub const INITIAL_RTO_NS: u64 = 1_000_000_000;
/// RFC 9002 §6.1.1 packet threshold.
const PACKET_THRESHOLD: u64 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PktState {
    InFlight,
    Acked,
    /// Acknowledged by the ACK being processed (within [`Sender::on_ack_many`] only).
    AckedNow,
    Lost,
}

#[derive(Debug, Clone, Copy)]
struct SentPacket {
    seg: u64,
    bytes: u32,
    sent_ns: u64,
    state: PktState,
    /// Rate-sample snapshot at send time (`tcp_rate.c`).
    delivered_at_send: u64,
    delivered_ns_at_send: u64,
    first_tx_ns_at_send: u64,
}

/// What one ACK did, for the congestion controller and the metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct AckOutcome {
    /// Measurements in the form the CCP runtime takes.
    pub prims: Primitives,
    /// RTT sample, ns (0 if the packet was already resolved).
    pub rtt_ns: u64,
    /// The flow's last byte has now been delivered.
    pub completed: bool,
    /// Packets this ACK newly acknowledged or SACKed, each counted once (Linux's
    /// `acked_sacked`, `tcp_newly_delivered`): a segment SACKed earlier and now covered by the
    /// cumulative ACK is not counted again, unlike in `prims.packets_acked`.
    pub delivered_pkts: u32,
}

/// Sender state of one flow.
// Independent switches and flags of the TCP model, not a state machine in disguise.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug)]
pub struct Sender {
    mss_bytes: u32,
    /// Total bytes to send (`None`: unlimited).
    size_bytes: Option<u64>,
    /// Congestion window, bytes.
    pub cwnd_bytes: u32,
    /// Pacing rate, bytes/s (`None`: unpaced).
    pub pacing_bytes_per_sec: Option<u64>,
    /// The application has no new data for now (retransmissions still go).
    pub app_paused: bool,
    next_pn: u64,
    packets: VecDeque<SentPacket>,
    base_pn: u64,
    next_new_seg: u64,
    retx: VecDeque<u64>,
    /// Lowest segment not yet delivered.
    cum_seg: u64,
    /// Delivery flags of segments from `cum_seg` on.
    seg_acked: VecDeque<bool>,
    inflight_bytes: u64,
    inflight_pkts: u32,
    largest_acked_pn: Option<u64>,
    srtt_ns: u64,
    rttvar_ns: u64,
    latest_rtt_ns: u64,
    /// Smallest RTT seen, ns.
    pub min_rtt_ns: u64,
    rto_backoff: u32,
    /// When the retransmission timer fires, if armed.
    pub rto_deadline_ns: Option<u64>,
    /// Earliest time pacing allows the next send.
    pub next_send_ns: u64,
    delivered_bytes: u64,
    delivered_ns: u64,
    first_tx_ns: u64,
    pending_timeout: bool,
    /// Segments retransmitted.
    pub retransmits: u64,
    /// Packets declared lost.
    pub lost_pkts: u64,
    /// Timeouts.
    pub timeouts: u64,
    /// Packets sent (new and retransmitted).
    sent_total: u64,
    /// Linux's retransmission timeout, `srtt + max(4 rttvar, 200 ms)` (`__tcp_set_rto` with
    /// `rttvar_us` at least `tcp_rto_min`), instead of RFC 6298's `max(srtt + 4 rttvar,
    /// 200 ms)`.
    pub linux_rto: bool,
    /// RACK-TLP loss detection as Linux's ([`super::rack`]) instead of RFC 9002's packet and
    /// time thresholds with no probe.
    pub rack_tlp: bool,
    rack: Rack,
    /// Segments above `cum_seg` delivered (`sacked_out`).
    sacked: u32,
    /// Linux's recovery point while in Recovery or Loss (`high_seq`), for RACK's window.
    ca_high_seq: Option<u64>,
    /// When RACK's reordering timer fires, if armed.
    reo_deadline_ns: Option<u64>,
    /// When the loss probe fires, if armed.
    pto_deadline_ns: Option<u64>,
    /// `tlp_high_seq`: a probe is outstanding until `snd_una` reaches this segment.
    tlp_high_seq: Option<u64>,
    /// The next send is a loss probe: it may exceed the window.
    probe_quota: bool,
    /// A probe that sent the last segment again: that segment and the packet of its earlier
    /// copy (Linux's skb is one; acknowledging either copy acknowledges both).
    tlp_retx: Option<(u64, u64)>,
    /// Packets the reordering timer marked lost (in no ACK's loss sample).
    pub timer_lost_pkts: u64,
    /// Loss probes sent.
    pub probes: u64,
    /// The receiver's window: new segments below this one may be sent (`None`: no window).
    rwnd_edge_seg: Option<u64>,
}

/// Which of the sender's timers fired ([`Sender::on_timer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerEvent {
    /// The retransmission timeout: everything in flight is lost ([`Sender::on_rto`]).
    Rto,
    /// RACK's reordering timer marked this many packets lost.
    Reorder(u32),
    /// The tail loss probe: one segment may go out beyond the window.
    Probe,
}

impl Sender {
    /// A sender with segment size `mss_bytes`, initial window `init_cwnd_bytes` and `size_bytes`
    /// to send (`None`: forever).
    pub fn new(mss_bytes: u32, init_cwnd_bytes: u32, size_bytes: Option<u64>) -> Self {
        Self {
            mss_bytes: mss_bytes.max(1),
            size_bytes,
            cwnd_bytes: init_cwnd_bytes.max(mss_bytes),
            pacing_bytes_per_sec: None,
            app_paused: false,
            next_pn: 0,
            packets: VecDeque::new(),
            base_pn: 0,
            next_new_seg: 0,
            retx: VecDeque::new(),
            cum_seg: 0,
            seg_acked: VecDeque::new(),
            inflight_bytes: 0,
            inflight_pkts: 0,
            largest_acked_pn: None,
            srtt_ns: 0,
            rttvar_ns: 0,
            latest_rtt_ns: 0,
            min_rtt_ns: u64::MAX,
            rto_backoff: 0,
            rto_deadline_ns: None,
            next_send_ns: 0,
            delivered_bytes: 0,
            delivered_ns: 0,
            first_tx_ns: 0,
            pending_timeout: false,
            retransmits: 0,
            lost_pkts: 0,
            timeouts: 0,
            sent_total: 0,
            linux_rto: false,
            rack_tlp: false,
            rack: Rack::default(),
            sacked: 0,
            ca_high_seq: None,
            reo_deadline_ns: None,
            pto_deadline_ns: None,
            tlp_high_seq: None,
            probe_quota: false,
            tlp_retx: None,
            timer_lost_pkts: 0,
            probes: 0,
            rwnd_edge_seg: None,
        }
    }

    /// Whether Linux would be in Recovery or Loss (losses marked, recovery point not yet
    /// acknowledged).
    pub fn in_recovery(&self) -> bool {
        self.ca_high_seq.is_some()
    }

    /// When the sender's next timer (RTO, loss probe or RACK's reordering timer) is due, ns.
    /// As Linux's single retransmission timer: an armed reordering timer stands for the
    /// others; a probe is never later than the RTO.
    pub fn timer_deadline_ns(&self) -> Option<u64> {
        if let Some(r) = self.reo_deadline_ns {
            return Some(r);
        }
        match (self.pto_deadline_ns, self.rto_deadline_ns) {
            (Some(p), Some(r)) => Some(p.min(r)),
            (p, r) => p.or(r),
        }
    }

    /// The timer due at `now_ns` fired; `None` if none is due. The caller sends what the
    /// window (and a probe's one extra segment) allows afterwards.
    pub fn on_timer(&mut self, now_ns: u64) -> Option<TimerEvent> {
        let due = self.timer_deadline_ns().filter(|&d| d <= now_ns)?;
        if self.reo_deadline_ns == Some(due) {
            self.reo_deadline_ns = None;
            let lost = self.detect_losses_rack(now_ns);
            self.lost_pkts += u64::from(lost);
            self.timer_lost_pkts += u64::from(lost);
            return Some(TimerEvent::Reorder(lost));
        }
        if self.pto_deadline_ns == Some(due) && self.rto_deadline_ns.is_none_or(|r| due <= r) {
            self.pto_deadline_ns = None;
            if self.tlp_high_seq.is_none() && self.inflight_pkts > 0 {
                if self
                    .next_segment()
                    .is_none_or(|seg| seg < self.next_new_seg)
                {
                    // No new data: send the last segment again (`skb_rb_last`).
                    if let Some(last) = self.next_new_seg.checked_sub(1)
                        && last >= self.cum_seg
                    {
                        let orig = self
                            .packets
                            .iter()
                            .rposition(|p| p.seg == last && p.state == PktState::InFlight);
                        if let Some(i) = orig {
                            self.tlp_retx = Some((last, self.base_pn + i as u64));
                        }
                        self.mark_for_retransmission(last);
                    }
                }
                self.probe_quota = self.next_segment().is_some();
            }
            self.rto_deadline_ns = Some(now_ns + self.rto_ns());
            return Some(TimerEvent::Probe);
        }
        self.on_rto(now_ns);
        Some(TimerEvent::Rto)
    }

    /// `tcp_schedule_loss_probe`: in the Open state with data in flight, the probe fires
    /// [`rack::pto_ns`] from `now_ns`, never after the RTO.
    fn schedule_probe(&mut self, now_ns: u64) {
        self.pto_deadline_ns = None;
        if !self.rack_tlp || self.in_recovery() || self.inflight_pkts == 0 {
            return;
        }
        let out = (self.next_new_seg - self.cum_seg).min(u64::from(u32::MAX)) as u32;
        let pto = rack::pto_ns(self.srtt_ns, out, MIN_RTO_NS, INITIAL_RTO_NS);
        let at = now_ns + pto;
        self.pto_deadline_ns = Some(self.rto_deadline_ns.map_or(at, |r| r.min(at)));
    }

    /// Packets sent so far (new and retransmitted).
    pub fn sent_total(&self) -> u64 {
        self.sent_total
    }

    /// Lowest segment not yet delivered in order (`snd_una`).
    pub fn snd_una_seg(&self) -> u64 {
        self.cum_seg
    }

    /// Next new segment (`snd_nxt`).
    pub fn snd_nxt_seg(&self) -> u64 {
        self.next_new_seg
    }

    /// Packets in flight (sent, neither acknowledged nor declared lost).
    pub fn inflight_pkts(&self) -> u32 {
        self.inflight_pkts
    }

    /// The segment packet `pn` carries, while the sender still tracks it.
    pub fn seg_of(&self, pn: u64) -> Option<u64> {
        let i = pn.checked_sub(self.base_pn)?;
        self.packets.get(i as usize).map(|p| p.seg)
    }

    /// Segment size, bytes.
    pub fn mss_bytes(&self) -> u32 {
        self.mss_bytes
    }

    /// Bytes delivered to the receiver so far (in order or not).
    pub fn delivered_bytes(&self) -> u64 {
        self.delivered_bytes
    }

    /// Smoothed RTT, ns (0 before the first sample).
    pub fn srtt_ns(&self) -> u64 {
        self.srtt_ns
    }

    /// Segments delivered out of order, above `snd_una` (Linux's `sacked_out`).
    pub fn sacked_pkts(&self) -> u32 {
        self.seg_acked.iter().filter(|&&a| a).count() as u32
    }

    /// Bytes in flight.
    pub fn inflight_bytes(&self) -> u64 {
        self.inflight_bytes
    }

    fn total_segs(&self) -> Option<u64> {
        self.size_bytes
            .map(|s| s.div_ceil(u64::from(self.mss_bytes)))
    }

    fn seg_bytes(&self, seg: u64) -> u32 {
        match self.size_bytes {
            Some(size) => {
                let start = seg * u64::from(self.mss_bytes);
                (size.saturating_sub(start)).min(u64::from(self.mss_bytes)) as u32
            }
            None => self.mss_bytes,
        }
    }

    /// Bytes the application has not handed to the network yet (capped to `u32`).
    pub fn bytes_pending(&self) -> u32 {
        match self.size_bytes {
            Some(size) => size
                .saturating_sub(self.next_new_seg * u64::from(self.mss_bytes))
                .min(u64::from(u32::MAX)) as u32,
            None => u32::MAX,
        }
    }

    /// All data delivered.
    pub fn is_complete(&self) -> bool {
        self.total_segs().is_some_and(|n| self.cum_seg >= n)
    }

    fn next_segment(&self) -> Option<u64> {
        if let Some(&s) = self.retx.front() {
            return Some(s);
        }
        if self.app_paused {
            return None;
        }
        match self.total_segs() {
            Some(n) if self.next_new_seg >= n => None,
            // tcp_snd_wnd_test: new data must fit in the receiver's window.
            _ if self.rwnd_edge_seg.is_some_and(|e| self.next_new_seg >= e) => None,
            _ => Some(self.next_new_seg),
        }
    }

    /// The receiver advertised a window ending before segment `edge_seg` (the edge only moves
    /// forward: a receiver does not shrink its window).
    pub fn set_rwnd_edge_seg(&mut self, edge_seg: u64) {
        self.rwnd_edge_seg = Some(self.rwnd_edge_seg.map_or(edge_seg, |e| e.max(edge_seg)));
    }

    /// Starts over with the receiver's initial window ending before segment `edge_seg`
    /// (`None`: no receive window).
    pub fn reset_rwnd(&mut self, edge_seg: Option<u64>) {
        self.rwnd_edge_seg = edge_seg;
    }

    /// When the sender could send next: `Some(now)` if it can send now, a later time if only
    /// pacing holds it back, `None` if the window is full or there is no data.
    pub fn send_time(&self, now_ns: u64) -> Option<u64> {
        let seg = self.next_segment()?;
        if self.inflight_bytes + u64::from(self.seg_bytes(seg)) > u64::from(self.cwnd_bytes)
            && self.inflight_pkts > 0
            && !self.probe_quota
        {
            return None;
        }
        Some(self.next_send_ns.max(now_ns))
    }

    /// Sends the next segment (a retransmission first). Returns (packet number, bytes).
    /// Call only when [`Sender::send_time`] returned `now_ns`.
    pub fn send(&mut self, now_ns: u64) -> Option<(u64, u32)> {
        let seg = self.next_segment()?;
        let is_retx = self.retx.front() == Some(&seg);
        if is_retx {
            self.retx.pop_front();
            self.retransmits += 1;
        } else {
            self.next_new_seg += 1;
        }
        let bytes = self.seg_bytes(seg);
        if self.inflight_pkts == 0 {
            // tcp_rate.c: restart the sampling intervals when nothing is in flight.
            self.first_tx_ns = now_ns;
            self.delivered_ns = now_ns;
        }
        let pn = self.next_pn;
        self.next_pn += 1;
        self.sent_total += 1;
        self.packets.push_back(SentPacket {
            seg,
            bytes,
            sent_ns: now_ns,
            state: PktState::InFlight,
            delivered_at_send: self.delivered_bytes,
            delivered_ns_at_send: self.delivered_ns,
            first_tx_ns_at_send: self.first_tx_ns,
        });
        self.inflight_bytes += u64::from(bytes);
        self.inflight_pkts += 1;
        if let Some(rate) = self.pacing_bytes_per_sec.filter(|&r| r > 0) {
            let gap = u128::from(bytes) * 1_000_000_000 / u128::from(rate);
            self.next_send_ns = now_ns + gap as u64;
        }
        if self.rto_deadline_ns.is_none() {
            self.rto_deadline_ns = Some(now_ns + self.rto_ns());
        }
        if std::mem::take(&mut self.probe_quota) {
            self.probes += 1;
            self.tlp_high_seq = Some(self.next_new_seg);
        } else if !is_retx && self.reo_deadline_ns.is_none() {
            // tcp_write_xmit: new data re-arms the probe.
            self.schedule_probe(now_ns);
        }
        Some((pn, bytes))
    }

    fn rto_ns(&self) -> u64 {
        let base = if self.srtt_ns == 0 {
            INITIAL_RTO_NS
        } else if self.linux_rto {
            self.srtt_ns + (4 * self.rttvar_ns).max(MIN_RTO_NS)
        } else {
            (self.srtt_ns + 4 * self.rttvar_ns).max(MIN_RTO_NS)
        };
        base.saturating_mul(1 << self.rto_backoff.min(6))
    }

    fn packet_mut(&mut self, pn: u64) -> Option<&mut SentPacket> {
        let i = pn.checked_sub(self.base_pn)?;
        self.packets.get_mut(i as usize)
    }

    /// Packet `pn` was acknowledged at `now_ns` (an ACK covering one packet).
    pub fn on_ack(&mut self, pn: u64, now_ns: u64) -> AckOutcome {
        self.on_ack_many(&[pn], now_ns)
    }

    /// One ACK covering packets `pns` (in the order they arrived at the receiver) reached the
    /// sender at `now_ns`. As Linux's `tcp_clean_rtx_queue`: the RTT sample that feeds the
    /// smoothed RTT (and [`AckOutcome::rtt_ns`]) is the oldest newly acknowledged packet's
    /// (`seq_rtt`, which carries the receiver's ACK delay), the one reported to congestion
    /// control and the minimum RTT is the newest's (`ca_rtt`, `rate_sample.rtt_us`), and the
    /// delivery-rate sample is taken from the most recently sent packet (`tcp_rate.c`).
    pub fn on_ack_many(&mut self, pns: &[u64], now_ns: u64) -> AckOutcome {
        let mut out = AckOutcome::default();
        let mut oldest_sent: Option<u64> = None;
        let mut newest: Option<SentPacket> = None;
        let mut bytes_acked = 0u64;
        let mut packets_acked = 0u32;
        // Pass 1: each newly delivered packet (marked `AckedNow` until pass 3).
        for &pn in pns {
            let Some(p) = self.packet_mut(pn).map(|p| *p) else {
                continue;
            };
            if matches!(p.state, PktState::Acked | PktState::AckedNow) {
                continue;
            }
            let idx = p.seg.checked_sub(self.cum_seg);
            let duplicate =
                idx.is_none_or(|i| self.seg_acked.get(i as usize).copied().unwrap_or(false));
            if let Some(pk) = self.packet_mut(pn) {
                pk.state = if duplicate {
                    PktState::Acked
                } else {
                    PktState::AckedNow
                };
            }
            if p.state == PktState::InFlight {
                self.inflight_bytes -= u64::from(p.bytes);
                self.inflight_pkts -= 1;
            }
            if duplicate {
                // Another copy of the segment (a probe's, or the original of a spurious
                // retransmission) got there first: nothing newly delivered (a D-SACK).
                continue;
            }
            self.settle_probe_copy(p.seg, pn);
            if self.rack_tlp {
                self.rack.advance(p.sent_ns, pn, now_ns);
            }
            self.largest_acked_pn = Some(self.largest_acked_pn.map_or(pn, |l| l.max(pn)));
            oldest_sent = Some(oldest_sent.map_or(p.sent_ns, |o| o.min(p.sent_ns)));
            if newest.is_none_or(|n| p.sent_ns >= n.sent_ns) {
                newest = Some(p);
            }
            self.delivered_bytes += u64::from(p.bytes);
            out.delivered_pkts += 1;
            if let Some(idx) = p.seg.checked_sub(self.cum_seg) {
                let idx = idx as usize;
                if self.seg_acked.len() <= idx {
                    self.seg_acked.resize(idx + 1, false);
                }
                self.seg_acked[idx] = true;
                self.sacked += 1;
            }
        }
        let (Some(oldest_sent), Some(p)) = (oldest_sent, newest) else {
            return self.finish_ack(out);
        };
        // Pass 2: the cumulative advance.
        while self.seg_acked.front() == Some(&true) {
            self.seg_acked.pop_front();
            self.sacked -= 1;
            bytes_acked += u64::from(self.seg_bytes(self.cum_seg));
            packets_acked += 1;
            self.cum_seg += 1;
        }
        let (bytes_sacked, packets_sacked) = self.settle_newly_delivered(pns, now_ns);
        out.prims.bytes_acked = bytes_acked.min(u64::from(u32::MAX)) as u32;
        out.prims.packets_acked = packets_acked;
        out.prims.bytes_misordered = bytes_sacked;
        out.prims.packets_misordered = packets_sacked;

        // RTT (RFC 6298 §2) from the oldest newly acknowledged packet.
        let rtt = now_ns.saturating_sub(oldest_sent).max(1);
        let ca_rtt = now_ns.saturating_sub(p.sent_ns).max(1);
        out.rtt_ns = rtt;
        self.latest_rtt_ns = ca_rtt;
        self.min_rtt_ns = self.min_rtt_ns.min(ca_rtt);
        if self.srtt_ns == 0 {
            self.srtt_ns = rtt;
            self.rttvar_ns = rtt / 2;
        } else {
            self.rttvar_ns = (3 * self.rttvar_ns + self.srtt_ns.abs_diff(rtt)) / 4;
            self.srtt_ns = (7 * self.srtt_ns + rtt) / 8;
        }
        self.rto_backoff = 0;

        // Delivery-rate sample (tcp_rate.c) from the most recently sent packet.
        self.delivered_ns = now_ns;
        self.first_tx_ns = p.sent_ns;
        let delivered = self.delivered_bytes - p.delivered_at_send;
        let send_elapsed = p.sent_ns.saturating_sub(p.first_tx_ns_at_send);
        let ack_elapsed = now_ns.saturating_sub(p.delivered_ns_at_send);
        let interval = send_elapsed.max(ack_elapsed);
        let scaled = delivered * 1_000_000_000;
        out.prims.rate_incoming = scaled.checked_div(interval).unwrap_or(0);
        out.prims.rate_outgoing = scaled
            .checked_div(send_elapsed)
            .unwrap_or(out.prims.rate_incoming);

        out.prims.rtt_sample_us = (ca_rtt / 1_000).max(1);
        self.rto_deadline_ns = if self.inflight_pkts > 0 {
            Some(now_ns + self.rto_ns())
        } else {
            None
        };
        out.prims.lost_pkts_sample = self.detect_after_ack(now_ns, packets_acked > 0);
        out.completed = self.is_complete();
        self.finish_ack(out)
    }

    /// Segment `seg` arrived in packet `pn`: if a probe sent it again, its other copy is
    /// acknowledged too (Linux's skb is one).
    fn settle_probe_copy(&mut self, seg: u64, pn: u64) {
        let Some((probed, orig)) = self.tlp_retx else {
            return;
        };
        if probed != seg {
            return;
        }
        self.tlp_retx = None;
        if orig != pn
            && let Some(o) = self.packet_mut(orig)
            && o.state == PktState::InFlight
        {
            o.state = PktState::Acked;
            let bytes = o.bytes;
            self.inflight_bytes -= u64::from(bytes);
            self.inflight_pkts -= 1;
        }
    }

    /// Pass 3 of an ACK: the newly delivered packets (`AckedNow`) become `Acked`; those beyond
    /// the cumulative point are SACKed (returned: bytes, packets). `RACK.rtt` is the last one's
    /// in Linux's processing order: the SACKed ones, then the cumulatively acknowledged ones,
    /// each in sequence order.
    fn settle_newly_delivered(&mut self, pns: &[u64], now_ns: u64) -> (u32, u32) {
        let (mut bytes_sacked, mut packets_sacked) = (0u32, 0u32);
        // (segment, send time) of the highest segment SACKed and cumulatively acknowledged.
        let mut last_sacked: Option<(u64, u64)> = None;
        let mut last_cum: Option<(u64, u64)> = None;
        let cum = self.cum_seg;
        for &pn in pns {
            if let Some(pk) = self.packet_mut(pn)
                && pk.state == PktState::AckedNow
            {
                pk.state = PktState::Acked;
                let (seg, sent) = (pk.seg, pk.sent_ns);
                let slot = if seg >= cum {
                    bytes_sacked += pk.bytes;
                    packets_sacked += 1;
                    &mut last_sacked
                } else {
                    &mut last_cum
                };
                if slot.is_none_or(|(s, _)| seg > s) {
                    *slot = Some((seg, sent));
                }
            }
        }
        if self.rack_tlp
            && let Some((_, sent)) = last_cum.or(last_sacked)
        {
            self.rack.set_rtt_ns(now_ns.saturating_sub(sent));
        }
        // Recovery and the probe end when `snd_una` reaches their points.
        if self.ca_high_seq.is_some_and(|h| self.cum_seg >= h) {
            self.ca_high_seq = None;
        }
        if self.tlp_high_seq.is_some_and(|h| self.cum_seg >= h) {
            self.tlp_high_seq = None;
        }
        (bytes_sacked, packets_sacked)
    }

    /// Loss detection after an ACK (`acked_data`: it advanced `snd_una`); returns the packets
    /// it marked lost (the ACK's loss sample).
    fn detect_after_ack(&mut self, now_ns: u64, acked_data: bool) -> u32 {
        if !self.rack_tlp {
            return self.detect_losses(now_ns);
        }
        let lost = if self.rack.take_advanced() {
            self.detect_losses_rack(now_ns)
        } else {
            0
        };
        self.lost_pkts += u64::from(lost);
        // FLAG_SET_XMIT_TIMER: an ACK that acknowledged data re-arms the probe (or the RTO),
        // unless RACK just armed its reordering timer.
        if acked_data && self.reo_deadline_ns.is_none() {
            self.schedule_probe(now_ns);
        }
        lost
    }

    /// Forgets packets at the front that are acknowledged or lost.
    fn drop_resolved_front(&mut self) {
        while self
            .packets
            .front()
            .is_some_and(|p| p.state != PktState::InFlight)
        {
            self.packets.pop_front();
            self.base_pn += 1;
        }
    }

    fn finish_ack(&mut self, mut out: AckOutcome) -> AckOutcome {
        self.drop_resolved_front();
        out.prims.was_timeout = std::mem::take(&mut self.pending_timeout);
        out.prims.bytes_in_flight = self.inflight_bytes.min(u64::from(u32::MAX)) as u32;
        out.prims.packets_in_flight = self.inflight_pkts;
        out.prims.snd_cwnd = self.cwnd_bytes;
        out.prims.snd_rate = self.pacing_bytes_per_sec.unwrap_or(0);
        out.prims.bytes_pending = self.bytes_pending();
        out
    }

    /// RFC 9002 §6.1: packet and time thresholds against the largest acknowledged packet.
    fn detect_losses(&mut self, now_ns: u64) -> u32 {
        let Some(largest) = self.largest_acked_pn else {
            return 0;
        };
        let delay = (self.srtt_ns.max(self.latest_rtt_ns) * 9 / 8).max(1_000_000);
        let mut lost = 0;
        let end = (largest.saturating_sub(self.base_pn) as usize).min(self.packets.len());
        for i in 0..end {
            let p = self.packets[i];
            if p.state != PktState::InFlight {
                continue;
            }
            let pn = self.base_pn + i as u64;
            if largest - pn >= PACKET_THRESHOLD || p.sent_ns + delay <= now_ns {
                self.packets[i].state = PktState::Lost;
                self.inflight_bytes -= u64::from(p.bytes);
                self.inflight_pkts -= 1;
                self.mark_for_retransmission(p.seg);
                lost += 1;
            }
        }
        self.lost_pkts += u64::from(lost);
        lost
    }

    /// RACK (`tcp_rack_detect_loss`): marks lost every packet in flight sent before the most
    /// recently sent delivered one whose `RACK.rtt + reo_wnd` has passed; arms the reordering
    /// timer for the rest (or disarms it). Enters recovery on a loss. Returns the packets
    /// marked.
    fn detect_losses_rack(&mut self, now_ns: u64) -> u32 {
        let reo_wnd = rack::reo_wnd_ns(
            if self.min_rtt_ns == u64::MAX {
                0
            } else {
                self.min_rtt_ns
            },
            self.srtt_ns,
            self.sacked,
            self.in_recovery(),
        );
        let mut lost = 0;
        let mut wait: i64 = 0;
        for i in 0..self.packets.len() {
            let p = self.packets[i];
            let pn = self.base_pn + i as u64;
            if !self.rack.sent_before_latest(p.sent_ns, pn) {
                break;
            }
            if p.state != PktState::InFlight {
                continue;
            }
            let remaining = self.rack.remaining_ns(p.sent_ns, reo_wnd, now_ns);
            if remaining <= 0 {
                self.packets[i].state = PktState::Lost;
                self.inflight_bytes -= u64::from(p.bytes);
                self.inflight_pkts -= 1;
                self.mark_for_retransmission(p.seg);
                lost += 1;
            } else {
                wait = wait.max(remaining);
            }
        }
        self.reo_deadline_ns = (wait > 0).then(|| now_ns + rack::reo_timer_ns(wait as u64));
        if self.reo_deadline_ns.is_some() {
            self.pto_deadline_ns = None;
        }
        if lost > 0 && self.ca_high_seq.is_none() {
            self.ca_high_seq = Some(self.next_new_seg);
            self.pto_deadline_ns = None;
        }
        lost
    }

    fn mark_for_retransmission(&mut self, seg: u64) {
        let delivered = seg
            .checked_sub(self.cum_seg)
            .is_none_or(|i| self.seg_acked.get(i as usize).copied().unwrap_or(false));
        if !delivered {
            let pos = self.retx.partition_point(|&s| s < seg);
            if self.retx.get(pos) != Some(&seg) {
                self.retx.insert(pos, seg);
            }
        }
    }

    /// The retransmission timer fired at `now_ns`: everything in flight is lost, the window
    /// falls to one segment, the timer backs off.
    pub fn on_rto(&mut self, now_ns: u64) {
        self.timeouts += 1;
        for i in 0..self.packets.len() {
            let p = self.packets[i];
            if p.state == PktState::InFlight {
                self.packets[i].state = PktState::Lost;
                self.mark_for_retransmission(p.seg);
                self.lost_pkts += 1;
            }
        }
        self.inflight_bytes = 0;
        self.inflight_pkts = 0;
        self.cwnd_bytes = self.mss_bytes;
        self.pending_timeout = true;
        self.ca_high_seq = Some(self.next_new_seg);
        self.reo_deadline_ns = None;
        self.pto_deadline_ns = None;
        self.tlp_high_seq = None;
        self.probe_quota = false;
        self.tlp_retx = None;
        self.rto_backoff += 1;
        self.rto_deadline_ns = Some(now_ns + self.rto_ns());
        self.next_send_ns = now_ns;
        self.drop_resolved_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_acks_advance_and_measure_rtt() {
        let mut s = Sender::new(1000, 3000, Some(2500));
        assert_eq!(s.send(0), Some((0, 1000)));
        assert_eq!(s.send(0), Some((1, 1000)));
        assert_eq!(s.send(0), Some((2, 500)));
        assert_eq!(s.send_time(0), None, "no data left");
        let a = s.on_ack(0, 10_000_000);
        assert_eq!(a.prims.bytes_acked, 1000);
        assert_eq!(a.prims.rtt_sample_us, 10_000);
        assert_eq!(a.prims.bytes_in_flight, 1500);
        s.on_ack(1, 10_000_000);
        let a = s.on_ack(2, 10_000_000);
        assert!(a.completed);
    }

    #[test]
    fn a_hole_is_lost_after_three_later_acks_and_retransmitted() {
        let mut s = Sender::new(1000, 10_000, None);
        for _ in 0..5 {
            s.send(0);
        }
        let a = s.on_ack(1, 1_000_000);
        assert_eq!((a.prims.bytes_acked, a.prims.bytes_misordered), (0, 1000));
        s.on_ack(2, 1_000_000);
        let a = s.on_ack(3, 1_000_000);
        assert_eq!(
            a.prims.lost_pkts_sample, 1,
            "packet 0 is 3 behind the largest acked"
        );
        assert_eq!(
            s.send(1_000_000),
            Some((5, 1000)),
            "segment 0 goes again first"
        );
        let a = s.on_ack(5, 2_000_000);
        assert_eq!(a.prims.bytes_acked, 4000, "segments 0-3 are now in order");
    }

    #[test]
    fn timeout_loses_everything_and_backs_off() {
        let mut s = Sender::new(1000, 4000, None);
        for _ in 0..4 {
            s.send(0);
        }
        assert_eq!(s.rto_deadline_ns, Some(INITIAL_RTO_NS));
        s.on_rto(INITIAL_RTO_NS);
        assert_eq!(s.inflight_bytes(), 0);
        assert_eq!(s.cwnd_bytes, 1000);
        assert_eq!(s.rto_deadline_ns, Some(3 * INITIAL_RTO_NS));
        assert_eq!(s.send(INITIAL_RTO_NS), Some((4, 1000)));
        let a = s.on_ack(4, INITIAL_RTO_NS + 1_000_000);
        assert!(a.prims.was_timeout);
        assert_eq!(a.prims.bytes_acked, 1000);
    }

    #[test]
    fn delivery_rate_matches_the_ack_clock() {
        // One packet a millisecond, each acked 10 ms after it left: 1000 B/ms delivered.
        let mut s = Sender::new(1000, 100_000, None);
        let mut last = AckOutcome::default();
        for t in 0..100u64 {
            let now = t * 1_000_000;
            if t >= 10 {
                last = s.on_ack(t - 10, now);
            }
            s.send(now);
        }
        let r = last.prims.rate_incoming;
        assert!((950_000..=1_050_000).contains(&r), "{:?}", last.prims);
        assert_eq!(last.prims.rtt_sample_us, 10_000);
    }

    const MS: u64 = 1_000_000;

    /// A RACK sender with five packets sent at 0 and the first acknowledged at 20 ms
    /// (srtt = min RTT = 20 ms).
    fn rack_sender() -> Sender {
        let mut s = Sender::new(1000, 10_000, None);
        s.rack_tlp = true;
        for _ in 0..5 {
            s.send(0);
        }
        s.on_ack(0, 20 * MS);
        s
    }

    /// RFC 8985 §6.2 with Linux's window: one hole and one SACK (fewer than three) is not a
    /// loss yet; the reordering timer fires `RACK.rtt + min_rtt / 4` after the hole was sent
    /// (rounded up to jiffies, plus `TCP_TIMEOUT_MIN`) and marks it lost, in no ACK's sample.
    #[test]
    fn rack_waits_a_quarter_min_rtt_for_reordering_then_its_timer_marks_the_loss() {
        let mut s = rack_sender();
        let a = s.on_ack(2, 20 * MS + MS / 2);
        assert_eq!(a.prims.lost_pkts_sample, 0, "within the reordering window");
        // Expiry at 0 + 20.5 + 5 ms: 5 ms from now -> 2 jiffies + TCP_TIMEOUT_MIN = 16 ms.
        assert_eq!(s.timer_deadline_ns(), Some(20 * MS + MS / 2 + 16 * MS));
        assert_eq!(s.on_timer(36 * MS), None, "not yet");
        assert_eq!(s.on_timer(36 * MS + MS / 2), Some(TimerEvent::Reorder(1)));
        assert!(s.in_recovery());
        assert_eq!(s.timer_lost_pkts, 1);
        assert_eq!(s.send(37 * MS), Some((5, 1000)), "segment 1 goes again");
        let a = s.on_ack(3, 38 * MS);
        assert_eq!(
            a.prims.lost_pkts_sample, 0,
            "the timer's loss is in no ACK's sample"
        );
    }

    /// With three segments SACKed (`tcp_reordering`) the window is 0: the hole is lost on the
    /// ACK, as RFC 5681's `DupThresh` would have it.
    #[test]
    fn rack_marks_the_hole_at_once_after_three_sacks() {
        let mut s = rack_sender();
        let t = 20 * MS + MS / 2;
        assert_eq!(s.on_ack(2, t).prims.lost_pkts_sample, 0);
        assert_eq!(s.on_ack(3, t).prims.lost_pkts_sample, 0);
        assert_eq!(s.on_ack(4, t).prims.lost_pkts_sample, 1);
        assert!(s.in_recovery());
    }

    /// RFC 8985 §7: a tail loss (the last two segments of a transfer) is recovered without an
    /// RTO. The probe fires 2 srtt (+ `TCP_TIMEOUT_MIN`) after the last ACK and sends the last
    /// segment again; its ACK lets RACK mark the other one lost, which goes again.
    #[test]
    fn a_tail_loss_is_recovered_by_the_probe_without_an_rto() {
        let mut s = Sender::new(1000, 10_000, Some(10_000));
        s.rack_tlp = true;
        for _ in 0..10 {
            s.send(0);
        }
        for pn in 0..8 {
            s.on_ack(pn, 20 * MS);
        }
        let pto = 20 * MS + 40 * MS + rack::TIMEOUT_MIN_NS;
        assert_eq!(
            s.timer_deadline_ns(),
            Some(pto),
            "PTO = 2 srtt, before the RTO"
        );
        assert_eq!(s.on_timer(pto), Some(TimerEvent::Probe));
        assert_eq!(s.send_time(pto), Some(pto), "the probe may go");
        assert_eq!(s.send(pto), Some((10, 1000)));
        assert_eq!(s.seg_of(10), Some(9), "the last segment again");
        assert_eq!(s.probes, 1);
        let a = s.on_ack(10, pto + 20 * MS);
        assert_eq!(a.prims.lost_pkts_sample, 1, "segment 8, not the probed one");
        assert_eq!(s.send(pto + 20 * MS), Some((11, 1000)));
        assert_eq!(s.seg_of(11), Some(8));
        assert!(s.on_ack(11, pto + 40 * MS).completed);
        assert_eq!((s.timeouts, s.retransmits), (0, 2));
    }

    /// One ACK for two packets (a delayed ACK): both are acknowledged, the RTT that feeds the
    /// smoothed RTT is the older packet's (it waited for the second), the one reported to
    /// congestion control the newer's.
    #[test]
    fn a_delayed_ack_covers_two_packets() {
        let mut s = Sender::new(1000, 10_000, None);
        s.send(0);
        s.send(1_000_000);
        let a = s.on_ack_many(&[0, 1], 21_000_000);
        assert_eq!((a.prims.bytes_acked, a.prims.packets_acked), (2000, 2));
        assert_eq!(a.prims.packets_misordered, 0);
        assert_eq!(a.rtt_ns, 21_000_000, "seq_rtt: the oldest");
        assert_eq!(a.prims.rtt_sample_us, 20_000, "ca_rtt: the newest");
        assert_eq!(s.srtt_ns(), 21_000_000);
        // Out of order within one ACK: a SACKed segment that the same ACK then covers
        // cumulatively counts as acknowledged, once.
        s.send(2_000_000);
        s.send(2_000_000);
        let a = s.on_ack_many(&[3, 2], 30_000_000);
        assert_eq!((a.prims.packets_acked, a.prims.packets_misordered), (2, 0));
    }
}
