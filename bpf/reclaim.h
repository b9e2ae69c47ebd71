/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Memory-cgroup reclaim a task made to charge memory.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * lifecycle.h, whose definitions it uses.
 */
#ifndef SYSRAY_RECLAIM_H
#define SYSRAY_RECLAIM_H

/*
 * Memory-cgroup reclaim. Its tracepoints fire only when a charge finds the
 * cgroup at its limit, so they cost nothing on a healthy host.
 */
SEC("tp_btf/mm_vmscan_memcg_reclaim_begin")
int BPF_PROG(memcg_reclaim_begin, int order, gfp_t gfp_flags)
{
	if (!selected())
		return 0;
	struct task_state *st =
		bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (st)
		st->reclaim_ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_end")
int BPF_PROG(memcg_reclaim_end, unsigned long nr_reclaimed)
{
	struct task_state *st = bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0, 0);
	if (!st || !st->reclaim_ts)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 begin = st->reclaim_ts;
	st->reclaim_ts = 0;
	if (cfg_stat && !cfg_sample)
		return 0;
	void *rb = cpu_ring();
	if (!rb)
		return 0;
	struct reclaim_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count_drop();
		return 0;
	}
	fill_hdr(&r->h, K_RECLAIM, sizeof(*r), now);
	r->dur = now - begin;
	r->pages = nr_reclaimed;
	r->nr = st->call.active ? (__s32)st->call.nr : fast_call_nr();
	/* Says what asked for it: a charge at the limit, or a write to memory.reclaim or memory.high. */
	r->kstack = cfg_stacks ? stack_id(ctx, STK_RECLAIM, 0) : -1;
	bpf_ringbuf_submit(r, wake_flags(rb));
	return 0;
}

#endif
