/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A resolver's sockets, followed from their connect to their close. Its
 * calls are fast and few cross over as a sample, yet they are the whole
 * evidence: Go's resolver parks on the netpoller and reads its answer (or
 * closes the socket unanswered) in fast calls, and a lookup expanded
 * through resolv.conf's search list is a train of fast queries and "no
 * such name" answers. So, with samples (the doctor, the agent), a socket
 * whose peer is port 53 is marked when it is connected, when a sendto
 * names port 53 on it (musl's unconnected socket), or when a read finds it
 * empty (a socket connected before the trace); every send, read and close
 * of a marked socket then crosses over, and its close unmarks it.
 * Answers are copied only from a marked socket (CAP_DNS_ANS, emit.h).
 *
 * Cost: a table load by syscall number on each exit, and for a connect a
 * look at the socket, for a sendto naming an address 4 bytes of it; a
 * read, send or close loads one global while no socket is marked, and one
 * array slot otherwise (dns_slots), the table only when the slot is
 * shared. Stat without samples and trace and record never come here, so
 * they mark nothing and copy no answer.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c before
 * emit.h, whose DNS captures use it.
 */
#ifndef SYSRAY_DNSWATCH_H
#define SYSRAY_DNSWATCH_H

/* What each syscall is to a resolver's socket (cfg_dns_class). */
enum dns_class {
	DNS_RD = 1,      /* read, readv, recvfrom, recvmsg: an answer, or EAGAIN */
	DNS_WR = 2,      /* write, writev, sendmsg, sendmmsg: a query on a connected socket */
	DNS_SENDTO = 3,  /* sendto: a query, naming its server or not */
	DNS_CLOSE = 4,   /* close */
	DNS_CONNECT = 5, /* connect */
};
const enum dns_class *rec_dns __attribute__((unused)); /* kept in BTF for bpf2go (config.h) */

volatile const __u8 cfg_dns_class[MAX_SYSCALL];

/* tgid << 32 | fd; LRU: a process killed with its sockets open leaves no lasting entry */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u8);
} dns_watched SEC(".maps");

/*
 * Entries put in minus those taken out: 0 lets every read and send by
 * with one load. An entry the LRU evicts is never taken out; the count
 * then stays above 0 and costs the lookups, never a missed socket.
 */
volatile __s64 dns_watching;

/*
 * Whether descriptor fd of the current task is an internet socket whose
 * peer is port 53: a connected UDP socket (glibc's resolver sends with a
 * NULL address on one) or a TCP one. Read only for a call that crosses
 * over and carries a DNS capture rule, and with samples for a connect or
 * a read that found nothing (EAGAIN), never on the counting path.
 */
static __always_inline bool fd_peer_dns(__u64 fd)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return false;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = NULL;
	if (!fds || bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return false;
	/* private_data is a struct socket only on a socket's file */
	if ((BPF_CORE_READ(f, f_inode, i_mode) & 0170000) != 0140000) /* S_IFMT, S_IFSOCK */
		return false;
	struct socket *sock = BPF_CORE_READ(f, private_data);
	if (!sock)
		return false;
	struct sock *sk = BPF_CORE_READ(sock, sk);
	if (!sk)
		return false;
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family != 2 && family != 10) /* AF_INET, AF_INET6 */
		return false;
	return BPF_CORE_READ(sk, __sk_common.skc_dport) == bpf_htons(53);
}

/*
 * Whether a send goes to port 53: the address it names (user memory,
 * sockaddr_in and sockaddr_in6 keep the port at the same offset) or, with
 * none, the socket's peer.
 */
static __always_inline bool dest_dns(const void *addr, __u64 fd)
{
	if (!addr)
		return fd_peer_dns(fd);
	__u16 sa[2];
	if (bpf_probe_read_user(sa, sizeof(sa), addr))
		return false;
	return (sa[0] == 2 || sa[0] == 10) && sa[1] == bpf_htons(53);
}

static __always_inline __u64 dns_key(__u64 fd)
{
	return (bpf_get_current_pid_tgid() & 0xffffffff00000000ULL) | (__u32)fd;
}

/*
 * Marked sockets by a hash of their key: a process that holds a
 * resolver's socket open (a forwarder's upstream socket, a resolver that
 * keeps its socket) makes every read and send of any of its descriptors
 * ask whether it is marked, and a hash table lookup there cost the doctor
 * 84 ns a read (bench/doctor-bpfstats.sh, LOOP=read-dns). An array's
 * lookup is inlined by the verifier: a slot at 0 says no at the cost of a
 * load, and only a slot some marked socket shares goes on to the table.
 * A slot an evicted entry leaves raised costs lookups, never a miss.
 */
#define DNS_SLOTS 16384
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DNS_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} dns_slots SEC(".maps");

/* The slot of a key: the top 14 bits of a multiplicative (Fibonacci) hash. */
static __always_inline __u32 dns_slot(__u64 key)
{
	return (key * 0x9E3779B97F4A7C15ULL) >> (64 - 14);
}

/* Whether descriptor fd of the current process is a marked resolver's socket. */
static __always_inline bool dns_marked(__u64 fd)
{
	if (dns_watching <= 0)
		return false;
	__u64 key = dns_key(fd);
	__u32 idx = dns_slot(key);
	__u32 *n = bpf_map_lookup_elem(&dns_slots, &idx);
	if (!n || !*n)
		return false;
	return bpf_map_lookup_elem(&dns_watched, &key) != NULL;
}

static __always_inline void dns_mark(__u64 fd)
{
	__u8 one = 1;
	__u64 key = dns_key(fd);
	if (bpf_map_update_elem(&dns_watched, &key, &one, BPF_NOEXIST))
		return;
	__sync_fetch_and_add(&dns_watching, 1);
	__u32 idx = dns_slot(key);
	__u32 *n = bpf_map_lookup_elem(&dns_slots, &idx);
	if (n)
		__sync_fetch_and_add(n, 1);
}

static __always_inline void dns_unmark(__u64 fd)
{
	__u64 key = dns_key(fd);
	if (bpf_map_delete_elem(&dns_watched, &key))
		return;
	__sync_fetch_and_add(&dns_watching, -1);
	__u32 idx = dns_slot(key);
	__u32 *n = bpf_map_lookup_elem(&dns_slots, &idx);
	if (n && *n)
		__sync_fetch_and_add(n, -1);
}

/* Whether this call (nr, returning ret) must cross over for the watch. */
static __always_inline bool dns_watch(__u32 nr, struct pt_regs *regs, long ret)
{
	if (nr >= MAX_SYSCALL)
		return false;
	__u8 cls = cfg_dns_class[nr];
	if (!cls)
		return false;
	__u64 fd = regs->di; /* a trusted pointer (tp_btf): a load, not a helper call */
	if (cls == DNS_CONNECT) {
		/* 0, or EINPROGRESS: a non-blocking TCP connect under way, its peer set */
		if ((ret == 0 || ret == -115) && fd_peer_dns(fd)) {
			dns_mark(fd);
			return true;
		}
		return false;
	}
	if (cls == DNS_SENDTO && ret >= 0) {
		const void *dest = (const void *)regs->r8;
		if (dest && dest_dns(dest, fd)) {
			dns_mark(fd);
			return true;
		}
	}
	if (cls == DNS_RD && ret == -11) { /* EAGAIN: crosses over as a failure */
		if (!dns_marked(fd) && fd_peer_dns(fd))
			dns_mark(fd);
		return false;
	}
	if (!dns_marked(fd))
		return false;
	if (cls == DNS_CLOSE)
		dns_unmark(fd);
	return true;
}

#endif
