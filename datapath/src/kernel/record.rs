//! The wire between the BPF program and user space: the per-ACK [`Record`] (ring buffer) and
//! the per-flow control value (hash map). Layouts mirror `struct ccp_record` and
//! `struct ccp_control` in `bpf/ccp.bpf.c`, which asserts the same sizes and offsets.

use crate::runtime::{FlowInfo, Primitives};

/// Size of `struct ccp_record`.
pub const RECORD_SIZE: usize = 96;
/// Size of `struct ccp_control`.
pub const CONTROL_SIZE: usize = 24;

/// What a record reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// One ACK (`cong_control`).
    Ack,
    /// A socket took `ccp` (`init`): a new flow id.
    Init,
    /// A socket left `ccp` or closed (`release`).
    Release,
}

/// Flag: the flow is in `TCP_CA_Loss` (a retransmission timeout).
pub const FLAG_TIMEOUT: u16 = 1;
/// Flag: the flow is in `TCP_CA_Recovery` (fast recovery).
pub const FLAG_RECOVERY: u16 = 2;
/// Flag: the in-BPF fallback rule set the window on this ACK.
pub const FLAG_FALLBACK: u16 = 4;
/// Flag: the rate sample is application limited.
pub const FLAG_APP_LIMITED: u16 = 8;

/// One event from the BPF program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Flow id assigned by the BPF program in `init` (1-based, never reused while loaded).
    pub flow_id: u32,
    /// What happened.
    pub kind: RecordKind,
    /// `FLAG_*` bits.
    pub flags: u16,
    /// `bpf_ktime_get_ns()` (`CLOCK_MONOTONIC`) when the record was made.
    pub now_ns: u64,
    /// The socket's MSS (`mss_cache`), bytes.
    pub mss_bytes: u32,
    /// Newly acked in-order bytes (`tp->bytes_acked` delta).
    pub bytes_acked: u32,
    /// Newly acked or SACKed packets (`rs->acked_sacked`).
    pub packets_acked: u32,
    /// Packets SACKed and not yet cumulatively acked (`tp->sacked_out`).
    pub packets_misordered: u32,
    /// Packets newly marked lost on this ACK (`rs->losses`).
    pub lost_pkts: u32,
    /// RTT sample, µs (0: none on this ACK).
    pub rtt_us: u32,
    /// Delivery rate sample, bytes/s (0: none).
    pub rate_incoming: u64,
    /// Send rate sample, bytes/s (0: none).
    pub rate_outgoing: u64,
    /// Bytes in flight after this ACK.
    pub bytes_in_flight: u32,
    /// Packets in flight after this ACK.
    pub packets_in_flight: u32,
    /// Congestion window after this ACK's control was applied, bytes.
    pub cwnd_bytes: u32,
    /// Slow-start threshold, packets.
    pub ssthresh_pkts: u32,
    /// Current pacing rate, bytes/s.
    pub pacing_rate: u64,
    /// Local IPv4 address, host order (0 for IPv6).
    pub src_ip: u32,
    /// Remote IPv4 address, host order (0 for IPv6).
    pub dst_ip: u32,
    /// Local port.
    pub src_port: u16,
    /// Remote port.
    pub dst_port: u16,
    /// `icsk_ca_state` (0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss).
    pub ca_state: u32,
}

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes([b[off], b[off + 1]])
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from(u32_at(b, off)) | (u64::from(u32_at(b, off + 4)) << 32)
}

impl Record {
    /// Decodes a ring-buffer sample; `None` if it is too short or of an unknown kind.
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() < RECORD_SIZE {
            return None;
        }
        let kind = match u16_at(b, 4) {
            0 => RecordKind::Ack,
            1 => RecordKind::Init,
            2 => RecordKind::Release,
            _ => return None,
        };
        // Addresses are in network order in the kernel; the bytes read as native order are
        // the big-endian value.
        let ip = |off| u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]]);
        Some(Self {
            flow_id: u32_at(b, 0),
            kind,
            flags: u16_at(b, 6),
            now_ns: u64_at(b, 8),
            mss_bytes: u32_at(b, 16),
            bytes_acked: u32_at(b, 20),
            packets_acked: u32_at(b, 24),
            packets_misordered: u32_at(b, 28),
            lost_pkts: u32_at(b, 32),
            rtt_us: u32_at(b, 36),
            rate_incoming: u64_at(b, 40),
            rate_outgoing: u64_at(b, 48),
            bytes_in_flight: u32_at(b, 56),
            packets_in_flight: u32_at(b, 60),
            cwnd_bytes: u32_at(b, 64),
            ssthresh_pkts: u32_at(b, 68),
            pacing_rate: u64_at(b, 72),
            src_ip: ip(80),
            dst_ip: ip(84),
            src_port: u16_at(b, 88),
            dst_port: u16_at(b, 90),
            ca_state: u32_at(b, 92),
        })
    }

    /// A retransmission timeout is in progress.
    pub fn was_timeout(&self) -> bool {
        self.flags & FLAG_TIMEOUT != 0
    }

    /// The in-BPF fallback rule set the window on this ACK.
    pub fn in_fallback(&self) -> bool {
        self.flags & FLAG_FALLBACK != 0
    }

    /// The CCP primitives of this ACK, for [`crate::runtime::Datapath::invoke`].
    /// `prev_sacked_out` is the flow's `sacked_out` at its previous record: the misordered
    /// (newly SACKed) packets are its increase since then, as ccp-kernel computes them and as
    /// the simulator reports them (packets first SACKed on this ACK), not the level
    /// `sacked_out` itself, which a program summing `Ack.bytes_misordered` over a report would
    /// count again on every ACK while a hole stays open.
    pub fn primitives(&self, prev_sacked_out: u32) -> Primitives {
        let sat = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        let newly_sacked = self.packets_misordered.saturating_sub(prev_sacked_out);
        Primitives {
            bytes_acked: self.bytes_acked,
            packets_acked: self.packets_acked,
            bytes_misordered: sat(u64::from(newly_sacked) * u64::from(self.mss_bytes)),
            packets_misordered: newly_sacked,
            ecn_bytes: 0,
            ecn_packets: 0,
            lost_pkts_sample: self.lost_pkts,
            was_timeout: self.was_timeout(),
            rtt_sample_us: u64::from(self.rtt_us),
            rate_outgoing: self.rate_outgoing,
            rate_incoming: self.rate_incoming,
            bytes_in_flight: self.bytes_in_flight,
            packets_in_flight: self.packets_in_flight,
            snd_cwnd: self.cwnd_bytes,
            snd_rate: self.pacing_rate,
            bytes_pending: 0,
        }
    }

    /// What the agent learns about this flow in CREATE.
    pub fn flow_info(&self, alg: Option<&str>) -> FlowInfo {
        FlowInfo {
            init_cwnd_bytes: self.cwnd_bytes,
            mss_bytes: self.mss_bytes,
            src_ip: self.src_ip,
            src_port: u32::from(self.src_port),
            dst_ip: self.dst_ip,
            dst_port: u32::from(self.dst_port),
            alg: alg.map(str::to_owned),
        }
    }
}

/// Encodes a `struct ccp_control`.
pub(crate) fn encode_control(
    cwnd_bytes: u32,
    rate_bytes_per_sec: u64,
    updated_ns: u64,
) -> [u8; CONTROL_SIZE] {
    let mut v = [0u8; CONTROL_SIZE];
    v[0..4].copy_from_slice(&cwnd_bytes.to_ne_bytes());
    v[8..16].copy_from_slice(&rate_bytes_per_sec.to_ne_bytes());
    v[16..24].copy_from_slice(&updated_ns.to_ne_bytes());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_c_layout() {
        let mut b = [0u8; RECORD_SIZE];
        b[0..4].copy_from_slice(&7u32.to_ne_bytes());
        b[4..6].copy_from_slice(&0u16.to_ne_bytes());
        b[6..8].copy_from_slice(&(FLAG_TIMEOUT | FLAG_FALLBACK).to_ne_bytes());
        b[8..16].copy_from_slice(&123_456u64.to_ne_bytes());
        b[16..20].copy_from_slice(&1448u32.to_ne_bytes());
        b[20..24].copy_from_slice(&2896u32.to_ne_bytes());
        b[28..32].copy_from_slice(&3u32.to_ne_bytes());
        b[36..40].copy_from_slice(&40_000u32.to_ne_bytes());
        b[40..48].copy_from_slice(&1_250_000u64.to_ne_bytes());
        b[64..68].copy_from_slice(&14_480u32.to_ne_bytes());
        b[80..84].copy_from_slice(&[127, 0, 0, 1]);
        b[88..90].copy_from_slice(&5000u16.to_ne_bytes());
        let r = Record::decode(&b).expect("decodes");
        assert_eq!(r.flow_id, 7);
        assert_eq!(r.kind, RecordKind::Ack);
        assert!(r.was_timeout() && r.in_fallback());
        assert_eq!(r.src_ip, 0x7f00_0001);
        assert_eq!(r.src_port, 5000);
        let p = r.primitives(0);
        assert_eq!(p.bytes_acked, 2896);
        assert_eq!(p.bytes_misordered, 3 * 1448);
        assert_eq!(p.packets_misordered, 3);
        // Three SACKed before, three now: nothing newly SACKed; fewer now: none either.
        assert_eq!(r.primitives(3).bytes_misordered, 0);
        assert_eq!(r.primitives(5).packets_misordered, 0);
        assert_eq!(r.primitives(1).bytes_misordered, 2 * 1448);
        assert_eq!(p.rtt_sample_us, 40_000);
        assert_eq!(p.rate_incoming, 1_250_000);
        assert_eq!(p.snd_cwnd, 14_480);
        assert!(p.was_timeout);
        assert!(Record::decode(&b[..50]).is_none());
    }
}
