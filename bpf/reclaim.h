/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Memory-cgroup reclaim a task made to charge memory, and the global direct
 * reclaim and direct compaction the page allocator made it do.
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

/*
 * Emits one reclaim_rec for a pass that began at begin: memory-cgroup
 * reclaim, global direct reclaim or direct compaction (what).
 */
static __always_inline void emit_reclaim(void *ctx, struct task_state *st, __u64 begin, __u16 what, __s16 order,
					 __u64 pages, __s32 status)
{
	__u64 now = bpf_ktime_get_ns();
	if (cfg_stat && !cfg_sample)
		return;
	void *rb = cpu_ring();
	if (!rb)
		return;
	struct reclaim_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count_drop();
		return;
	}
	fill_hdr(&r->h, K_RECLAIM, sizeof(*r), now);
	r->dur = now - begin;
	r->pages = pages;
	r->nr = st->call.active ? (__s32)st->call.nr : fast_call_nr();
	/*
	 * Outside a syscall the pass is a user page fault's: the fault kept
	 * last (faults.h) is the one in progress when it came before the pass.
	 */
	r->addr = (r->nr < 0 && st->fault.ts && st->fault.ts <= begin) ? st->fault.addr : 0;
	r->what = what;
	r->order = order;
	r->status = status;
	/* Says what asked for it: a charge at the limit, or a write to memory.reclaim or memory.high. */
	r->kstack = cfg_stacks ? stack_id(ctx, STK_RECLAIM, 0) : -1;
	bpf_ringbuf_submit(r, wake_flags(rb));
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_end")
int BPF_PROG(memcg_reclaim_end, unsigned long nr_reclaimed)
{
	struct task_state *st = bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0, 0);
	if (!st || !st->reclaim_ts)
		return 0;
	__u64 begin = st->reclaim_ts;
	st->reclaim_ts = 0;
	emit_reclaim(ctx, st, begin, RECLAIM_MEMCG, 0, nr_reclaimed, 0);
	return 0;
}

/*
 * Global direct reclaim and direct compaction: the page allocator's slow
 * path, run by the thread that asked for memory (a page fault, a syscall)
 * when free memory is below the watermark or too fragmented for the order.
 * Their tracepoints fire only then, and compaction's also in kcompactd
 * and proactive compaction, which are kernel threads and not counted here:
 * only what a thread of the traced processes waits for is.
 */
#define RECLAIM_PF_KTHREAD 0x00200000

SEC("tp_btf/mm_vmscan_direct_reclaim_begin")
int BPF_PROG(direct_reclaim_begin, int order, gfp_t gfp_flags)
{
	struct task_struct *t = bpf_get_current_task_btf();
	if ((t->flags & RECLAIM_PF_KTHREAD) || !selected())
		return 0;
	struct task_state *st = bpf_task_storage_get(&tstate, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (st) {
		st->dreclaim_ts = bpf_ktime_get_ns();
		st->dreclaim_order = order;
	}
	return 0;
}

SEC("tp_btf/mm_vmscan_direct_reclaim_end")
int BPF_PROG(direct_reclaim_end, unsigned long nr_reclaimed)
{
	struct task_state *st = bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0, 0);
	if (!st || !st->dreclaim_ts)
		return 0;
	__u64 begin = st->dreclaim_ts;
	st->dreclaim_ts = 0;
	emit_reclaim(ctx, st, begin, RECLAIM_DIRECT, (__s16)st->dreclaim_order, nr_reclaimed, 0);
	return 0;
}

SEC("tp_btf/mm_compaction_begin")
int BPF_PROG(compaction_begin, struct compact_control *cc, unsigned long zone_start, unsigned long zone_end, bool sync)
{
	struct task_struct *t = bpf_get_current_task_btf();
	if ((t->flags & RECLAIM_PF_KTHREAD) || !BPF_CORE_READ(cc, direct_compaction) || !selected())
		return 0;
	struct task_state *st = bpf_task_storage_get(&tstate, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (st)
		st->compact_ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/mm_compaction_end")
int BPF_PROG(compaction_end, struct compact_control *cc, unsigned long zone_start, unsigned long zone_end, bool sync,
	     int status)
{
	struct task_state *st = bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0, 0);
	if (!st || !st->compact_ts)
		return 0;
	__u64 begin = st->compact_ts;
	st->compact_ts = 0;
	emit_reclaim(ctx, st, begin, RECLAIM_COMPACT, (__s16)BPF_CORE_READ(cc, order),
		     BPF_CORE_READ(cc, total_migrate_scanned), status);
	return 0;
}

#endif
