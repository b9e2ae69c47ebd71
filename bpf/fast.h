/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Stat's fast path: counting a call without task storage.
 *
 * Plain `sysray stat` and `top` (budgeted timing; no samples, stacks, pid or
 * cgroup filter) keep a thread's call in flight, its budgets and its
 * pending counts in a row of fast_rows chosen by the address of the
 * thread's saved registers. The tracepoints are handed that address for
 * free, and it is unique to a live thread: the registers sit at the top of
 * its kernel stack. Two task storage lookups a call were most of what stat
 * cost over empty programs (BENCHMARKS.md, "Stop 25"); an array lookup is
 * inlined by the verifier, and the row moves with its thread from CPU to
 * CPU as its task storage would.
 *
 * A row is a thread's while the thread lives (sched_process_exit frees it)
 * or until another thread that hashes to it takes it over while it is
 * idle, first adding the pending counts to the map under the old owner's
 * key. A thread that finds its row in another thread's call takes the task
 * storage path for this call, as every other mode does: a collision costs
 * what every call cost before, and loses nothing.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * stat.h, whose definitions it uses.
 */
#ifndef SYSRAY_FAST_H
#define SYSRAY_FAST_H

/*
 * fast_row.owner is the owner's registers' address while it is in a call,
 * and that + FAST_IDLE between calls (they are 8-byte aligned: the bit is
 * free). Added, not or-ed: the verifier lets a pointer be compared, stored
 * and moved by a constant, and no more.
 */
#define FAST_IDLE 1ULL

static __always_inline bool fast_stat(void)
{
	return budget_timing() && !cfg_sample && !cfg_stacks && !cfg_pids && !cfg_cgroups;
}

static __always_inline struct fast_row *fast_row_of(__u64 regs)
{
	/*
	 * The low half of the address is all the verifier lets us compute
	 * with (a 32-bit move of a pointer is a number). Kernel stacks are 16
	 * KiB aligned; the bits above that, hashed, spread threads over the
	 * rows. Only the row is picked by the low half: the owner is the
	 * whole address.
	 */
	__u32 lo;
	/* A 32-bit move, said outright: left to itself the compiler shifts the pointer's register. */
	asm volatile("%[lo] = %[p]" : [lo] "=w"(lo) : [p] "w"((__u32)regs));
	__u32 i = ((lo >> 14) * 2654435761u) >> cfg_fast_shift;
	return bpf_map_lookup_elem(&fast_rows, &i);
}

/*
 * Takes the row for the thread entering a call; false leaves the call to the
 * task storage path.
 */
static __always_inline bool fast_enter(struct pt_regs *regs, long id)
{
	/* They never return: the thread's exit finds them in its task storage (F_UNFINISHED). */
	if (id == cfg_nr_exit || id == cfg_nr_exit_group)
		return false;
	__u64 me = (__u64)regs;
	struct fast_row *r = fast_row_of(me);
	if (!r)
		return false;
	__u64 o = r->owner;
	bool mine = (o & ~FAST_IDLE) == me;
	/*
	 * In a call and not ours: another thread's call, unless it was
	 * entered under an earlier attach, whose exit this attach will not
	 * see. (Ours and in a call: an exit we did not see, for that reason.)
	 */
	if (!mine && o && !(o & FAST_IDLE) && r->gen == attach_gen)
		return false;
	/* Atomic: another thread that hashes here may be taking the row at this moment. */
	if (__sync_val_compare_and_swap(&r->owner, o, me) != o)
		return false;
	if (!mine && r->ids.cg_gen) {
		/* The old owner's counts go to its key; its budgets and clock reads are still fair bounds. */
		pend_flush(&r->ids, &r->pend, false);
		r->ids.cg_gen = 0;
	}
	r->nr = id;
	r->gen = attach_gen;
	budget_entry(&r->timing, &r->ts, id);
	return true;
}

/*
 * Counts the call the thread's row holds; false leaves the exit to the task
 * storage path (a call entered there, or one the row never saw).
 */
static __always_inline bool fast_exit(struct pt_regs *regs, long ret)
{
	__u64 me = (__u64)regs;
	struct fast_row *r = fast_row_of(me);
	if (!r)
		return false;
	if (r->owner != me) {
		if (r->owner == me + FAST_IDLE && r->gen == attach_gen && ret < 0 && ret >= -4095) {
			/*
			 * The thread entered a call since the attach and is in
			 * none: a failure with no entry may be a seccomp filter's
			 * refusal (refused()), which needs the thread's storage
			 * to say so.
			 */
			struct task_state *st = bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0,
								      BPF_LOCAL_STORAGE_GET_F_CREATE);
			if (st && !st->call.active)
				st->call.gen = attach_gen;
		}
		return false;
	}
	if (r->gen == attach_gen) {
		__u64 now;
		__u32 hw;
		__u64 lat = budget_latency(&r->timing, r->ts, &now, &hw);
		refresh_ids(&r->ids, &r->pend);
		if (r->ids.tgid != cfg_self)
			count_call(&r->ids, &r->pend, r->nr, ret, lat, hw, hw, false, 0);
	}
	/* Last, and atomic: once idle, the row may be taken over. */
	__sync_lock_test_and_set(&r->owner, me + FAST_IDLE);
	return true;
}

/* A thread's exit frees its row: a new thread may be given its stack, and with it the row. */
static __always_inline void fast_release(struct task_struct *task)
{
	__u64 me = (__u64)bpf_task_pt_regs(task);
	struct fast_row *r = fast_row_of(me);
	if (!r)
		return;
	__u64 o = r->owner;
	if ((o & ~FAST_IDLE) != me)
		return;
	if (r->ids.cg_gen)
		pend_flush(&r->ids, &r->pend, false);
	r->ids.cg_gen = 0;
	__sync_val_compare_and_swap(&r->owner, o, 0);
}

/* A read of the counts first takes every row's pending ones to the map (Probe.Stats). */
SEC("iter/bpf_map_elem")
int flush_fast(struct bpf_iter__bpf_map_elem *ctx)
{
	__u32 *k = ctx->key;
	if (!k || !fast_stat())
		return 0;
	__u32 i = *k;
	struct fast_row *r = bpf_map_lookup_elem(&fast_rows, &i);
	if (r && r->ids.cg_gen)
		pend_flush(&r->ids, &r->pend, true);
	return 0;
}

#endif
