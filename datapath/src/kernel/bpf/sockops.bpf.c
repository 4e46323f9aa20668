// SPDX-License-Identifier: MIT
/*
 * `ccp_sockops`: a sockops program, attached to a cgroup v2, that sets each new TCP
 * connection's congestion control by policy and its initial window from a table user space
 * publishes (src/kernel/sockops.rs).
 *
 * Both happen in the ESTABLISHED callbacks (ACTIVE_ on the connecting side, PASSIVE_ on the
 * accepted socket). That is where the kernel allows TCP_BPF_IW: `tcp_init_transfer` has just
 * set the initial cwnd and no data segment has gone out yet (TCP_BPF_IW is refused with EINVAL
 * once `data_segs_out > syn_data`). Setting TCP_CONGESTION there initialises the new CCA at
 * once (the socket is no longer in CLOSE/LISTEN). The IW is set first so the CCA's `init` sees
 * it; neither reno, cubic, bbr nor `ccp` changes cwnd in `init`.
 *
 * - `cca_policy`: service port (host order) -> CCA name; key 0 is the default for any port.
 *   The service port is the remote port of an active open and the local port of a passive
 *   one. No entry: the socket keeps the CCA it has (the system default).
 * - `iw_table`: LPM trie, remote IPv4 prefix -> IW in packets. No match: the kernel default IW
 *   stays. IPv4-mapped IPv6 peers (::ffff:a.b.c.d) are looked up by their IPv4 address.
 * - `sockops_counters`: see the COUNT_* indices; mirrored in sockops.rs.
 *
 * Built by datapath/build.rs like ccp.bpf.c.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif
#ifndef SOL_TCP
#define SOL_TCP 6
#endif
#ifndef TCP_CONGESTION
#define TCP_CONGESTION 13
#endif
#define CCP_TCP_BPF_IW 1001 /* TCP_BPF_IW in uapi/linux/bpf.h */
#define CCA_NAME_MAX 16 /* TCP_CA_NAME_MAX */

#define COUNT_CONNS 0 /* established callbacks seen */
#define COUNT_CCA_SET 1 /* TCP_CONGESTION set by policy */
#define COUNT_CCA_FAILED 2 /* policy named a CCA the kernel refused (e.g. not registered) */
#define COUNT_IW_SET 3 /* TCP_BPF_IW set from the table */
#define COUNT_IW_FAILED 4 /* the kernel refused TCP_BPF_IW */
#define COUNT_IW_MISS 5 /* IPv4 peer with no table entry: kernel default IW */
#define COUNT_NOT_IPV4 6 /* peer not IPv4 (nor IPv4-mapped): no IW lookup */
#define COUNT_N 8

struct cca_name {
	char name[CCA_NAME_MAX]; /* NUL-terminated */
};

struct iw_key {
	__u32 prefixlen;
	__u32 addr; /* network order */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct cca_name);
} cca_policy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct iw_key);
	__type(value, __u32);
} iw_table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, COUNT_N);
	__type(key, __u32);
	__type(value, __u64);
} sockops_counters SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&sockops_counters, &idx);
	if (v)
		__sync_fetch_and_add(v, 1);
}

/* The peer's IPv4 address (network order) in *addr; 0 if the peer is not IPv4. Every field is
 * read up front with a volatile load: otherwise clang merges the two address loads into one at
 * a computed offset, which the verifier refuses for a ctx pointer. */
static __always_inline int remote_ipv4(struct bpf_sock_ops *skops, __u32 *addr)
{
	__u32 family = *(volatile __u32 *)&skops->family;
	__u32 v4 = *(volatile __u32 *)&skops->remote_ip4;
	__u32 w0 = *(volatile __u32 *)&skops->remote_ip6[0];
	__u32 w1 = *(volatile __u32 *)&skops->remote_ip6[1];
	__u32 w2 = *(volatile __u32 *)&skops->remote_ip6[2];
	__u32 w3 = *(volatile __u32 *)&skops->remote_ip6[3];

	if (family == AF_INET) {
		*addr = v4;
		return 1;
	}
	if (family == AF_INET6 && w0 == 0 && w1 == 0 && w2 == bpf_htonl(0xffff)) {
		*addr = w3;
		return 1;
	}
	return 0;
}

static __always_inline void set_cca(struct bpf_sock_ops *skops, __u32 port)
{
	struct cca_name *p = bpf_map_lookup_elem(&cca_policy, &port);
	if (!p) {
		__u32 any = 0;
		p = bpf_map_lookup_elem(&cca_policy, &any);
	}
	if (!p)
		return;
	struct cca_name name = *p;
	name.name[CCA_NAME_MAX - 1] = 0;
	if (bpf_setsockopt(skops, SOL_TCP, TCP_CONGESTION, name.name, sizeof(name.name)) == 0)
		count(COUNT_CCA_SET);
	else
		count(COUNT_CCA_FAILED);
}

static __always_inline void set_iw(struct bpf_sock_ops *skops)
{
	struct iw_key key = { .prefixlen = 32 };
	if (!remote_ipv4(skops, &key.addr)) {
		count(COUNT_NOT_IPV4);
		return;
	}
	__u32 *iw = bpf_map_lookup_elem(&iw_table, &key);
	if (!iw) {
		count(COUNT_IW_MISS);
		return;
	}
	int val = *iw;
	if (val > 0 && bpf_setsockopt(skops, SOL_TCP, CCP_TCP_BPF_IW, &val, sizeof(val)) == 0)
		count(COUNT_IW_SET);
	else
		count(COUNT_IW_FAILED);
}

SEC("sockops")
int ccp_sockops(struct bpf_sock_ops *skops)
{
	__u32 port;
	switch (skops->op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		port = bpf_ntohl(skops->remote_port);
		break;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		port = skops->local_port;
		break;
	default:
		return 1;
	}
	count(COUNT_CONNS);
	/* IW first: setting the CCA runs its `init`, which then sees the IW (BBR records it as
	 * its initial cwnd, `ccp` reports it in its INIT record); no CCA offered resets cwnd. */
	set_iw(skops);
	set_cca(skops, port);
	return 1;
}
