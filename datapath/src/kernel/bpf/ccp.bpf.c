// SPDX-License-Identifier: MIT
/*
 * `ccp`: a BPF tcp_congestion_ops that hands congestion control to user space (the CCP
 * datapath runtime in ccp-datapath, driven by a portus agent).
 *
 * Per ACK (`cong_control`) it emits one `struct ccp_record` into the `records` ring buffer and
 * applies the cwnd / pacing rate user space last wrote for the flow into the `controls` map.
 * When user space has not written for a flow within FALLBACK_TIMEOUT_NS (or never has), a
 * built-in Reno rule (slow start, AIMD, halve on loss) runs instead, so the flow never stalls.
 *
 * Flow ids are assigned in `init` from a global counter and kept in the socket's CA private
 * area. The record and control layouts are mirrored in src/kernel/record.rs; change both.
 * Built by datapath/build.rs against the running kernel's BTF (vmlinux.h, CO-RE).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define FALLBACK_TIMEOUT_NS 500000000ULL
#define USEC_PER_SEC 1000000ULL
#define MIN_CWND 2
#define MAX_FLOWS 4096

/* Record kinds. */
#define CCP_REC_ACK 0
#define CCP_REC_INIT 1
#define CCP_REC_RELEASE 2

/* Record flags. */
#define CCP_F_TIMEOUT 1 /* in TCP_CA_Loss (retransmission timeout) */
#define CCP_F_RECOVERY 2 /* in TCP_CA_Recovery (fast recovery) */
#define CCP_F_FALLBACK 4 /* the in-BPF fallback rule set cwnd on this ACK */
#define CCP_F_APP_LIMITED 8

struct ccp_record {
	__u32 flow_id;
	__u16 kind;
	__u16 flags;
	__u64 now_ns;
	__u32 mss;
	__u32 bytes_acked;
	__u32 packets_acked;
	__u32 packets_misordered;
	__u32 lost_pkts;
	__u32 rtt_us;
	__u64 rate_incoming; /* delivery rate, bytes/s */
	__u64 rate_outgoing; /* send rate, bytes/s */
	__u32 bytes_in_flight;
	__u32 packets_in_flight;
	__u32 cwnd_bytes;
	__u32 ssthresh_pkts;
	__u64 pacing_rate; /* bytes/s */
	__u32 saddr; /* network order */
	__u32 daddr; /* network order */
	__u16 sport; /* host order */
	__u16 dport; /* host order */
	__u32 ca_state;
};

/* The layout src/kernel/record.rs decodes. */
_Static_assert(sizeof(struct ccp_record) == 96, "ccp_record size");
_Static_assert(__builtin_offsetof(struct ccp_record, rate_incoming) == 40, "ccp_record layout");
_Static_assert(__builtin_offsetof(struct ccp_record, pacing_rate) == 72, "ccp_record layout");
_Static_assert(__builtin_offsetof(struct ccp_record, ca_state) == 92, "ccp_record layout");

/* Written by user space; `updated_ns` is CLOCK_MONOTONIC (bpf_ktime_get_ns) at the write. */
struct ccp_control {
	__u32 cwnd_bytes; /* 0: leave the window to the fallback rule */
	__u32 _pad;
	__u64 rate_bytes_per_sec; /* 0: no pacing from user space */
	__u64 updated_ns;
};

_Static_assert(sizeof(struct ccp_control) == 24, "ccp_control size");

/* Per-socket state in icsk_ca_priv (at most 104 bytes). */
struct ccp_ca {
	__u32 flow_id;
	__u32 user_paced; /* we set SK_PACING_NEEDED for user space's rate */
	__u64 prev_bytes_acked;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} records SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FLOWS);
	__type(key, __u32);
	__type(value, struct ccp_control);
} controls SEC(".maps");

/* Counters user space reads: [0] records dropped (ring full), [1] ACKs under user control,
 * [2] ACKs under the fallback rule. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

__u32 next_flow_id = 0;

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline struct ccp_ca *ca_of(const struct sock *sk)
{
	return (struct ccp_ca *)inet_csk(sk)->icsk_ca_priv;
}

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);
	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline __u32 in_flight_pkts(const struct tcp_sock *tp)
{
	__u32 left = tp->sacked_out + tp->lost_out;
	__u32 out = tp->packets_out;
	return (out > left ? out - left : 0) + tp->retrans_out;
}

static __always_inline __u32 max_u32(__u32 a, __u32 b)
{
	return a > b ? a : b;
}

static __always_inline __u32 min_u32(__u32 a, __u32 b)
{
	return a < b ? a : b;
}

static __always_inline void fill_common(struct ccp_record *r, struct sock *sk, __u16 kind,
					__u64 now)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 mss = tp->mss_cache;
	__u32 pkts = in_flight_pkts(tp);
	__u8 state = inet_csk(sk)->icsk_ca_state;

	__builtin_memset(r, 0, sizeof(*r));
	r->flow_id = ca_of(sk)->flow_id;
	r->kind = kind;
	r->now_ns = now;
	r->mss = mss;
	r->packets_in_flight = pkts;
	r->bytes_in_flight = pkts * mss;
	r->cwnd_bytes = tp->snd_cwnd * mss;
	r->ssthresh_pkts = tp->snd_ssthresh;
	r->pacing_rate = sk->sk_pacing_rate;
	r->saddr = sk->__sk_common.skc_rcv_saddr;
	r->daddr = sk->__sk_common.skc_daddr;
	r->sport = sk->__sk_common.skc_num;
	r->dport = __builtin_bswap16(sk->__sk_common.skc_dport);
	r->ca_state = state;
	if (state == TCP_CA_Loss)
		r->flags |= CCP_F_TIMEOUT;
	else if (state == TCP_CA_Recovery)
		r->flags |= CCP_F_RECOVERY;
}

static __always_inline void emit_simple(struct sock *sk, __u16 kind)
{
	struct ccp_record *r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
	if (!r) {
		count(0);
		return;
	}
	fill_common(r, sk, kind, bpf_ktime_get_ns());
	bpf_ringbuf_submit(r, 0);
}

/* Reno (RFC 5681): slow start below ssthresh, one MSS per window above it; cwnd comes down to
 * ssthresh (set by `ssthresh` on entering recovery/loss) while in fast recovery. */
static __always_inline void fallback_reno(struct sock *sk, __u32 acked, __u8 state)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 cwnd = tp->snd_cwnd;

	if (state == TCP_CA_Recovery) {
		if (cwnd > tp->snd_ssthresh)
			cwnd = max_u32(tp->snd_ssthresh, MIN_CWND);
	} else if (state <= TCP_CA_CWR || state == TCP_CA_Loss) {
		/* TCP_CA_Open, Disorder, CWR, and Loss after the RTO reset (cwnd = in flight + 1). */
		/* Grow only when the window limits sending (tcp_is_cwnd_limited). */
		int in_ss = cwnd < tp->snd_ssthresh;
		if (!tp->is_cwnd_limited && !(in_ss && cwnd < 2 * tp->max_packets_out))
			acked = 0;
		if (acked == 0) {
			/* nothing to grow */
		} else if (in_ss) {
			cwnd += acked;
		} else {
			__u32 cnt = tp->snd_cwnd_cnt + acked;
			if (cnt >= cwnd) {
				cwnd += cnt / cwnd;
				cnt = cnt % cwnd;
			}
			tp->snd_cwnd_cnt = cnt;
		}
	}
	cwnd = max_u32(cwnd, MIN_CWND);
	tp->snd_cwnd = min_u32(cwnd, tp->snd_cwnd_clamp);
}

SEC("struct_ops")
void BPF_PROG(ccp_init, struct sock *sk)
{
	struct ccp_ca *ca = ca_of(sk);

	ca->flow_id = __sync_fetch_and_add(&next_flow_id, 1) + 1;
	ca->user_paced = 0;
	ca->prev_bytes_acked = tcp_sk(sk)->bytes_acked;
	emit_simple(sk, CCP_REC_INIT);
}

SEC("struct_ops")
void BPF_PROG(ccp_release, struct sock *sk)
{
	__u32 id = ca_of(sk)->flow_id;

	if (id == 0)
		return; /* closed before `init` ran: user space never saw it */
	emit_simple(sk, CCP_REC_RELEASE);
	bpf_map_delete_elem(&controls, &id);
}

SEC("struct_ops")
void BPF_PROG(ccp_cong_control, struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp_ca *ca = ca_of(sk);
	__u64 now = bpf_ktime_get_ns();
	__u32 id = ca->flow_id;
	__u32 mss = tp->mss_cache;
	__u8 state = inet_csk(sk)->icsk_ca_state;
	__u64 bytes_acked = tp->bytes_acked;
	__u32 acked_pkts = rs->acked_sacked;
	struct ccp_control *ctl;
	struct ccp_record *r;
	int fallback = 1;

	if (id == 0) {
		/* The ACK of a SYN-ACK is processed before `init` runs (tcp_rcv_synsent_state_process
		 * calls tcp_ack before tcp_finish_connect): the flow has no id yet. Nothing to report;
		 * the window is the initial one. */
		ca->prev_bytes_acked = bytes_acked;
		return;
	}
	ctl = bpf_map_lookup_elem(&controls, &id);
	if (ctl && now - ctl->updated_ns < FALLBACK_TIMEOUT_NS && mss > 0) {
		__u32 cwnd_bytes = ctl->cwnd_bytes;
		__u64 rate = ctl->rate_bytes_per_sec;

		if (cwnd_bytes > 0) {
			__u32 pkts = max_u32(cwnd_bytes / mss, MIN_CWND);
			tp->snd_cwnd = min_u32(pkts, tp->snd_cwnd_clamp);
			fallback = 0;
		}
		if (rate > 0) {
			__u64 max_rate = sk->sk_max_pacing_rate;
			sk->sk_pacing_rate = rate < max_rate ? rate : max_rate;
			sk->sk_pacing_status = SK_PACING_NEEDED;
			ca->user_paced = 1;
		}
	}
	if (fallback) {
		if (ca->user_paced) {
			/* User space is gone: stop pacing at its stale rate. */
			sk->sk_pacing_status = SK_PACING_NONE;
			ca->user_paced = 0;
		}
		fallback_reno(sk, acked_pkts, state);
		count(2);
	} else {
		count(1);
	}

	r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
	if (!r) {
		count(0);
		ca->prev_bytes_acked = bytes_acked;
		return;
	}
	fill_common(r, sk, CCP_REC_ACK, now);
	if (fallback)
		r->flags |= CCP_F_FALLBACK;
	if (rs->is_app_limited)
		r->flags |= CCP_F_APP_LIMITED;
	r->bytes_acked = (__u32)(bytes_acked - ca->prev_bytes_acked);
	ca->prev_bytes_acked = bytes_acked;
	r->packets_acked = acked_pkts;
	r->packets_misordered = tp->sacked_out;
	r->lost_pkts = rs->losses > 0 ? rs->losses : 0;
	r->rtt_us = rs->rtt_us > 0 ? (__u32)rs->rtt_us : 0;
	if (rs->delivered > 0 && mss > 0) {
		__u64 bytes = (__u64)rs->delivered * mss * USEC_PER_SEC;
		if (rs->interval_us > 0)
			r->rate_incoming = bytes / (__u64)rs->interval_us;
		if (rs->snd_interval_us > 0)
			r->rate_outgoing = bytes / (__u64)rs->snd_interval_us;
	}
	bpf_ringbuf_submit(r, 0);
}

SEC("struct_ops")
__u32 BPF_PROG(ccp_ssthresh, struct sock *sk)
{
	/* Reno: half the window, at least 2 (tcp_reno_ssthresh). */
	return max_u32(tcp_sk(sk)->snd_cwnd >> 1, MIN_CWND);
}

SEC("struct_ops")
__u32 BPF_PROG(ccp_undo_cwnd, struct sock *sk)
{
	/* A spurious loss: restore the window from before the reduction (tcp_reno_undo_cwnd). */
	struct tcp_sock *tp = tcp_sk(sk);
	return max_u32(tp->snd_cwnd, tp->prior_cwnd);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops ccp_ops = {
	.init = (void *)ccp_init,
	.release = (void *)ccp_release,
	.cong_control = (void *)ccp_cong_control,
	.ssthresh = (void *)ccp_ssthresh,
	.undo_cwnd = (void *)ccp_undo_cwnd,
	.name = "ccp",
};
