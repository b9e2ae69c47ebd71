/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The fast path: a syscall's entry and exit without task storage.
 *
 * Stat, top, trace and record without sleep stacks (and stat without
 * samples) keep a thread's call in flight, its
 * cached ids and, in stat, its budgets and pending counts in a row of
 * fast_rows chosen by the address of the thread's saved registers. The
 * tracepoints are handed that address for free, and it is unique to a live
 * thread: the registers sit at the top of its kernel stack. Two task
 * storage lookups a call were most of what stat cost over empty programs
 * (bench/HISTORY.md, "stop 25"); an array lookup is inlined by the verifier,
 * and the row moves with its thread from CPU to CPU as its task storage
 * would.
 *
 * A row is a thread's while the thread lives: sched_process_exit adds its
 * pending counts to the map and frees it. A thread that finds its row
 * taken by another live thread takes the task storage path, as every other
 * mode does: a collision costs what every call cost before, and loses
 * nothing. (Rows were once taken over between their owner's calls; under
 * constant collisions that lost a count in about 20 runs of
 * TestStatFastPathExact, and a table sized for the host rarely collides.)
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
/*
 * + FAST_GONE: the row is being written by something other than a call of
 * its owner (the owner's exit, its execve's selection), and then handed
 * back or freed. Nothing takes it meanwhile: a row changes hands only by a
 * cmpxchg on owner, and only that cmpxchg's winner writes the row.
 */
#define FAST_GONE 3ULL

/* Stat's fast path: budgeted timing, and nothing that needs a thread's storage. */
static __always_inline bool fast_stat(void)
{
	return budget_timing() && !cfg_sample && !cfg_stacks;
}

/* Trace and record's: every call emitted, no sleep stacks. */
static __always_inline bool fast_record(void)
{
	return !cfg_stat && !cfg_stacks;
}

static __always_inline bool fast_path(void)
{
	return fast_stat() || fast_record();
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
 * The row's ids, read again after a cgroup move or for a new owner, and with
 * them whether the thread is selected: selection is by process and cgroup,
 * and it changes only with them, or at the execve of the command sysray
 * starts (sched_process_exec clears cg_gen then).
 */
static __always_inline void fast_ids(struct fast_row *r)
{
	if (r->ids.cg_gen == cgroup_gen)
		return;
	refresh_ids(&r->ids, &r->pend);
	bool sel = tgid_selected(r->ids.tgid);
	if (sel && cfg_cgroups)
		sel = bpf_map_lookup_elem(&cgroups, &r->ids.cg) != NULL;
	r->ids.sel = sel;
}

/* The row holds the thread's ids, still valid, and they say it is not traced. */
static __always_inline bool fast_unselected(struct fast_row *r, __u64 me)
{
	return r->owner == me + FAST_IDLE && r->ids.cg_gen == cgroup_gen && !r->ids.sel;
}

/*
 * The call a row holds for its owner (o, regs): one it is in, entered under
 * this attach, or one a signal interrupted.
 */
static __always_inline bool row_has_call(struct fast_row *r, __u64 o, __u64 regs)
{
	return (o == regs && r->call.gen == attach_gen) || r->call.held;
}

/*
 * Takes the row for the thread entering a call; false leaves the call to the
 * task storage path.
 */
static __always_inline bool fast_enter(struct pt_regs *regs, long id)
{
	__u64 me = (__u64)regs;
	struct fast_row *r = fast_row_of(me);
	if (!r)
		return false;
	if (id == cfg_nr_exit || id == cfg_nr_exit_group) {
		/*
		 * They never return: the thread's exit finds them in its task
		 * storage (F_UNFINISHED). A call held before them did return.
		 * (A row holding a call is its owner's alone: no one takes it.)
		 */
		if (r->owner == me + FAST_IDLE && r->call.held) {
			r->call.held = 0;
			emit_call(&r->call, &r->ids, r->call.held_ret, r->call.held_end, 0, NULL);
		}
		return false;
	}
	/* A thread not traced costs this much and no more, once its row knows it. */
	if (fast_unselected(r, me))
		return true;
	__u64 o = r->owner;
	/*
	 * Another live thread's row (in a call, between calls, or being
	 * freed: + FAST_GONE): not ours to take. Its owner's exit frees it.
	 * A free row was left with no counts, no held call and its ids to
	 * read again (fast_release); its last owner's budgets and clock
	 * reads are still fair bounds.
	 */
	if (o && (o & ~FAST_IDLE) != me)
		return false;
	/* Atomic: another thread that hashes here may be taking the row at this moment. */
	if (__sync_val_compare_and_swap(&r->owner, o, me) != o)
		return false;
	if (r->call.held) {
		/* The interrupted call did return to user space (a handler ran, or it is being restarted). */
		r->call.held = 0;
		emit_call(&r->call, &r->ids, r->call.held_ret, r->call.held_end, 0, NULL);
	}
	r->call.nr = id;
	r->call.gen = attach_gen;
	if (fast_stat()) {
		budget_entry(&r->timing, &r->call.ts, id);
		return true;
	}
	entry_args(&r->call, regs);
	r->call.ts = bpf_ktime_get_ns();
	return true;
}

/* Record: emits the row's call, or holds it if a signal interrupted it. */
static __always_inline void fast_emit(struct fast_row *r, long ret)
{
	__u64 now = bpf_ktime_get_ns();
	if (now - r->call.ts < cfg_min_latency)
		return;
	if (restarting(ret)) {
		r->call.held = 1;
		r->call.held_ret = ret;
		r->call.held_end = now;
		return;
	}
	emit_call(&r->call, &r->ids, ret, now, 0, NULL);
}

/*
 * Counts or emits the call the thread's row holds; false leaves the exit to
 * the task storage path (a call entered there, or one the row never saw).
 */
static __always_inline bool fast_exit(struct pt_regs *regs, long ret)
{
	__u64 me = (__u64)regs;
	struct fast_row *r = fast_row_of(me);
	if (!r)
		return false;
	if (fast_unselected(r, me))
		return true;
	if (r->owner != me) {
		if (r->owner == me + FAST_IDLE && r->call.gen == attach_gen && r->ids.cg_gen == cgroup_gen &&
		    r->ids.sel && ret < 0 && ret >= -4095) {
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
	if (r->call.gen == attach_gen) {
		fast_ids(r);
		if (!r->ids.sel) {
			/* Not traced: its next entry will not take the row (fast_unselected). */
		} else if (fast_stat()) {
			__u64 now;
			__u32 hw;
			__u64 lat = budget_latency(&r->timing, r->call.ts, &now, &hw);
			count_call(&r->ids, &r->pend, r->call.nr, ret, lat, hw, hw, false, 0);
		} else {
			fast_emit(r, ret);
		}
	}
	/* Last, and atomic: the exit (fast_release) and the execve's selection take an idle row with a cmpxchg. */
	__sync_lock_test_and_set(&r->owner, me + FAST_IDLE);
	return true;
}

/*
 * The row's call, if the thread (regs) is in one this attach saw enter, or
 * holds an interrupted one: for its exit and for the stop's in-flight walk.
 */
static __always_inline struct fast_row *fast_pending_call(__u64 regs)
{
	struct fast_row *r = fast_row_of(regs);
	if (!r)
		return NULL;
	__u64 o = r->owner;
	if ((o & ~FAST_IDLE) != regs || !row_has_call(r, o, regs))
		return NULL;
	return r;
}

/*
 * A thread's exit frees its row: a new thread may be given its stack, and
 * with it the row. In record, a call it was in never returns: it is
 * emitted unfinished, as the task storage path does.
 */
static __always_inline void fast_release(struct task_struct *task)
{
	__u64 me = (__u64)bpf_task_pt_regs(task);
	struct fast_row *r = fast_row_of(me);
	if (!r)
		return;
	__u64 o = r->owner;
	if ((o & ~FAST_IDLE) != me) /* also not while + FAST_GONE */
		return;
	/* Taken first, so no one else writes the row meanwhile (FAST_GONE). */
	if (__sync_val_compare_and_swap(&r->owner, o, me + FAST_GONE) != o)
		return;
	if (fast_record() && row_has_call(r, o, me)) {
		fast_ids(r);
		if (r->ids.sel)
			emit_call(&r->call, &r->ids, 0, bpf_ktime_get_ns(), F_UNFINISHED, NULL);
	}
	if (budget_timing() && r->ids.cg_gen)
		pend_flush(&r->ids, &r->pend, false);
	r->ids.cg_gen = 0;
	r->ids.name_gen = 0;
	r->call.held = 0;
	__sync_lock_test_and_set(&r->owner, 0);
}

/* The syscall the current thread is in, from its row; -1: none, or not on the fast path. */
static __always_inline __s32 fast_call_nr(void)
{
	if (!fast_path())
		return -1;
	__u64 me = (__u64)bpf_task_pt_regs(bpf_get_current_task_btf());
	struct fast_row *r = fast_row_of(me);
	if (!r || r->owner != me || r->call.gen != attach_gen || !r->ids.sel)
		return -1;
	return r->call.nr;
}

/*
 * The command sysray started reaches its execve and is traced from here:
 * its row must read its selection again. True when the execve itself is in
 * the row (its exit emits it); false leaves it to the task storage path.
 */
static __always_inline bool fast_selected_now(struct task_struct *p)
{
	__u64 me = (__u64)bpf_task_pt_regs(p);
	struct fast_row *r = fast_row_of(me);
	if (!r)
		return false;
	__u64 o = r->owner;
	if ((o & ~FAST_IDLE) != me) /* also not while + FAST_GONE */
		return false;
	bool in_row = o == me && r->call.gen == attach_gen;
	/* In a call of this attach, the row is ours alone; otherwise take it while we write. */
	if (!in_row && __sync_val_compare_and_swap(&r->owner, o, me + FAST_GONE) != o)
		return false;
	if (budget_timing() && r->ids.cg_gen)
		pend_flush(&r->ids, &r->pend, false);
	r->ids.cg_gen = 0;
	if (!in_row)
		__sync_lock_test_and_set(&r->owner, me + FAST_IDLE); /* its execve is task storage's */
	return in_row;
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
