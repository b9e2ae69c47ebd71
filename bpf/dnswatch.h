/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Sockets a resolver waits on outside the socket: Go's resolver writes
 * its query on a connected non-blocking UDP socket, reads at once
 * (EAGAIN), and parks the goroutine on the runtime's netpoller until the
 * answer or the deadline, when it closes the socket. The wait is an
 * epoll_pwait or a futex on any thread, and the read of the answer and
 * the close are fast calls that cross over only as a sample: without
 * them a query answered and one abandoned at its deadline look alike.
 * So, with samples (the doctor, the agent), a read that found nothing on
 * a socket connected to port 53 puts the socket here, and its next
 * successful read or its close cross over and take it out.
 *
 * Cost: an EAGAIN read (a failure: it crosses over anyway) reads the
 * descriptor's socket (fd_peer_dns); any other read or close tests one
 * global while nothing is watched, and looks the table up otherwise.
 * Stat without samples and trace and record never come here.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * emit.h, whose fd_peer_dns it uses.
 */
#ifndef SYSRAY_DNSWATCH_H
#define SYSRAY_DNSWATCH_H

volatile const __u32 cfg_nr_read;
volatile const __u32 cfg_nr_recvfrom;
volatile const __u32 cfg_nr_recvmsg;
volatile const __u32 cfg_nr_close;

/* tgid << 32 | fd; LRU: a process killed with its queries out leaves no lasting entry */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u8);
} dns_watched SEC(".maps");

/* Entries put in minus those taken out: 0 lets every read and close by with one load. */
volatile __s64 dns_watching;

/* Whether this call (nr, returning ret) must cross over for the watch. */
static __always_inline bool dns_watch(__u32 nr, struct pt_regs *regs, long ret)
{
	bool rd = nr == cfg_nr_read || nr == cfg_nr_recvfrom || nr == cfg_nr_recvmsg;
	if (!rd && nr != cfg_nr_close)
		return false;
	__u64 fd, key;
	if (rd && ret == -11) { /* EAGAIN: crosses over as a failure */
		__u8 one = 1;
		fd = BPF_CORE_READ(regs, di);
		key = (bpf_get_current_pid_tgid() & 0xffffffff00000000ULL) | (__u32)fd;
		if (fd_peer_dns(fd) && !bpf_map_update_elem(&dns_watched, &key, &one, BPF_NOEXIST))
			__sync_fetch_and_add(&dns_watching, 1);
		return false;
	}
	if (dns_watching <= 0 || (rd && ret <= 0))
		return false;
	fd = BPF_CORE_READ(regs, di);
	key = (bpf_get_current_pid_tgid() & 0xffffffff00000000ULL) | (__u32)fd;
	if (!bpf_map_lookup_elem(&dns_watched, &key))
		return false;
	if (!bpf_map_delete_elem(&dns_watched, &key))
		__sync_fetch_and_add(&dns_watching, -1);
	return true;
}

#endif
