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

/*
 * The doctor's (sampled stat with sleep stacks and budgeted timing): a call
 * is counted, sampled and, if it crosses over, emitted from the row. Its
 * first switch-out moves it to the thread's task storage (fast_migrate),
 * where the sleep tracking keeps its sleeps, and its exit takes the task
 * storage path; so do futex calls, which futex.h sums from there. On a
 * call that neither sleeps nor is preempted, the two task storage lookups
 * were most of what the doctor cost over stat (bench/HISTORY.md,
 * 2026-11-29).
 */
static __always_inline bool fast_doctor(void)
{
	return budget_timing() && cfg_sample && cfg_stacks;
}

static __always_inline bool fast_path(void)
{
	return fast_stat() || fast_record() || fast_doctor();
}

static __always_inline __u32 fast_row_index(__u64 regs)
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
	return ((lo >> 14) * 2654435761u) >> cfg_fast_shift;
}

static __always_inline struct fast_row *fast_row_of(__u64 regs)
{
	__u32 i = fast_row_index(regs);
	return bpf_map_lookup_elem(&fast_rows, &i);
}

/*
 * The doctor: the row of the thread (regs) while it is between calls, or
 * in one that the task storage path holds. Its timing, its last call's
 * failure and its recent calls are the thread's: the task storage path
 * borrows them (sys_enter, sys_exit), so that sampling, the call after a
 * failure and the ring of recent calls see one thread, whichever path
 * each call took.
 */
static __always_inline struct fast_row *doctor_row(__u64 regs)
{
	if (!fast_doctor())
		return NULL;
	struct fast_row *r = fast_row_of(regs);
	if (!r || r->owner != regs + FAST_IDLE)
		return NULL;
	return r;
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
			emit_current(&r->call, &r->ids, r->call.held_ret, r->call.held_end, 0);
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
		emit_current(&r->call, &r->ids, r->call.held_ret, r->call.held_end, 0);
	}
	r->call.nr = id;
	r->call.gen = attach_gen;
	if (fast_stat() || fast_doctor()) {
		budget_entry(&r->timing, &r->call.ts, id);
		/* The call after a failure crosses over timed, as in sys_enter. */
		if (fast_doctor() && r->call.prev_failed && !r->call.ts)
			clock_entry(&r->timing, &r->call.ts);
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
	emit_current(&r->call, &r->ids, ret, now, 0);
}

/* The doctor: the row's call joins its thread's recent calls. */
static __always_inline void row_recent_add(struct fast_row *r, __u64 lat, long ret)
{
	struct recent_calls *rr = &r->recent;
	struct recent_call *rc = &rr->c[rr->n++ & (RECENT - 1)];
	rc->ts = r->call.ts;
	rc->latency = lat;
	rc->ret = ret;
	rc->nr = r->call.nr;
}

/*
 * The doctor: the row's call crosses over. Out of line, and its registers
 * and return value read again from the tracepoint's arguments: what the
 * tests before it learned of them (a failure, a sample) does not make the
 * verifier walk it once more. now: the clock at the exit, 0 if unread.
 */
static __noinline void row_cross(struct fast_row *r, __u64 *ctx, __u64 lat, __u64 now)
{
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	long ret = (long)ctx[1];
	__u8 flags = r->call.ts ? 0 : F_APPROX;
	late_args(&r->call, regs, ret);
	if (!now)
		now = bpf_ktime_get_ns();
	r->call.ts = now - lat; /* the entry, as near as it is known */
	row_recent_add(r, lat, ret); /* its time names the event this call becomes */
	if (now - r->call.ts < cfg_min_latency)
		return;
	r->call.queued = 0; /* never switched out */
	if (restarting(ret)) {
		r->call.held = 1;
		r->call.held_ret = ret;
		r->call.held_end = now;
		return;
	}
	emit_current(&r->call, &r->ids, ret, now, flags);
}

/*
 * The doctor: counts the row's call, which never switched out (fast_migrate
 * would have moved it), and lets it cross over as sys_exit's stat mode
 * does: failed, after a failure, slow, sampled, one of its cell's first
 * or slowest, or a call on a resolver's socket (dnswatch.h). Inline: every
 * call the doctor sees on the fast path comes here, and out of line the call,
 * its frame and the arguments read again from ctx cost about 8 ns a call
 * (bench/bpflines.sh); the verifier walks it once per path into it, as it
 * would a subprogram's body, and sys_exit's longest walk stays near 44,000
 * instructions (tests/verifier_test.go). What is rare, crossing over, stays
 * out of line (row_cross).
 */
static __always_inline void fast_doctor_exit(struct fast_row *r, __u64 *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	long ret = (long)ctx[1];
	__u64 now;
	__u32 hw;
	__u64 lat = budget_latency(&r->timing, r->call.ts, &now, &hw);
	bool timed = r->call.ts != 0;
	__u32 acc = count_call(&r->ids, &r->pend, r->call.nr, ret, lat, hw, hw, false, 0);
	bool failed = ret < 0 && ret >= -4095;
	bool after_failure = r->call.prev_failed;
	r->call.prev_failed = failed;
	bool sampled = (timed && sample_tick(&r->timing, now)) || (cfg_firsts && (acc & ACC_FIRST));
	if (!sampled && (acc & ACC_RECORD) && now - r->timing.record_at >= 1000000) {
		r->timing.record_at = now;
		sampled = true;
	}
	/* A resolver's socket's sends, reads and close (dnswatch.h). */
	bool watched = dns_watch(r->call.nr, regs, ret);
	if (!failed && !after_failure && lat < cfg_slow && !sampled && !watched) {
		row_recent_add(r, lat, ret);
		return;
	}
	row_cross(r, ctx, lat, now);
}

/*
 * The thread entered a call since the attach and is in none: a failure
 * with no entry may be a seccomp filter's refusal (refused()), which needs
 * the thread's storage to say so. Out of line, and the return value read
 * again from the tracepoint's arguments: the test of it does not narrow
 * sys_exit's own copy, or the verifier would walk the task storage path
 * that follows once for a failure and once more for the rest (in the
 * doctor, 880,000 instructions against a budget of 500,000).
 */
static __noinline void row_entered(__u64 *ctx)
{
	long ret = (long)ctx[1];
	if (ret >= 0 || ret < -4095)
		return;
	struct task_state *st =
		bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (st && !st->call.active)
		st->call.gen = attach_gen;
}

/*
 * Counts or emits the call the thread's row holds; false leaves the exit to
 * the task storage path (a call entered there, or one the row never saw).
 */
static __always_inline bool fast_exit(__u64 *ctx, struct pt_regs *regs, long ret)
{
	__u64 me = (__u64)regs;
	struct fast_row *r = fast_row_of(me);
	if (!r)
		return false;
	if (fast_unselected(r, me))
		return true;
	if (r->owner != me) {
		if (r->owner == me + FAST_IDLE && r->call.gen == attach_gen && r->ids.cg_gen == cgroup_gen &&
		    r->ids.sel && owns())
			row_entered(ctx);
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
		} else if (fast_doctor()) {
			fast_doctor_exit(r, ctx);
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
	if ((fast_record() || fast_doctor()) && row_has_call(r, o, me)) {
		fast_ids(r);
		if (r->ids.sel) {
			__u64 now = bpf_ktime_get_ns();
			if (fast_doctor() && !r->call.held) {
				/* As sched_process_exit does for the task storage path's call. */
				late_args(&r->call, (struct pt_regs *)me, 0);
				untimed_entry(&r->call, &r->timing, now);
			}
			emit_current(&r->call, &r->ids, 0, now, F_UNFINISHED);
		}
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

/*
 * The doctor: the thread (prev, current) switches out in a call the row
 * holds. The call moves to its task storage, where sched_switch and
 * sched_waking follow its sleeps and sys_exit takes it; the row stays the
 * thread's, idle. Returns the thread's storage, made if need be (NULL: none).
 */
static __always_inline struct task_state *fast_migrate(struct task_struct *prev, struct task_state *st)
{
	__u64 me = (__u64)bpf_task_pt_regs(prev);
	struct fast_row *r = fast_row_of(me);
	if (!r || r->owner != me || r->call.gen != attach_gen)
		return st;
	fast_ids(r);
	if (!r->ids.sel)
		return st; /* its exit in the row lets it go (fast_exit) */
	if (!st) {
		st = bpf_task_storage_get(&tstate, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!st)
			return NULL; /* the call stays in the row, its sleeps untold */
	}
	__u32 nr = r->call.nr;
	__u64 ts = r->call.ts;
	if (st->call.held) {
		/*
		 * A call held in the task storage (hold_in_row) changes places
		 * with this one: the row's next entry emits it, its ids fresh
		 * now.
		 */
		r->call.nr = st->call.nr;
		r->call.ts = st->call.ts;
		r->call.held_ret = st->call.held_ret;
		r->call.held_end = st->call.held_end;
		r->call.queued = st->call.queued;
#pragma unroll
		for (int i = 0; i < 6; i++)
			r->call.args[i] = st->call.args[i];
		st->call.held = 0;
		r->call.held = 1;
	}
	st->call.nr = nr;
	st->call.ts = ts;
	st->call.gen = attach_gen;
	st->call.prev_failed = r->call.prev_failed;
	st->call.seq++;
	st->call.active = 1;
	st->timing = r->timing;
	/* Last: an idle row sends the call's exit to the task storage path. */
	__sync_lock_test_and_set(&r->owner, me + FAST_IDLE);
	return st;
}

static long flush_row(__u64 i, void *ctx)
{
	__u32 k = i;
	struct fast_row *r = bpf_map_lookup_elem(&fast_rows, &k);
	if (r && r->ids.cg_gen)
		pend_flush(&r->ids, &r->pend, true);
	return 0;
}

/*
 * Budgeted timing: a read of the counts first takes every thread's pending
 * ones to the map (Probe.Stats): those in task storage, one task at a time,
 * and, in the walk's last call (no task), those of the fast path's rows.
 * The rows are walked here rather than by an iterator over fast_rows's
 * elements: some kernels refuse map-element iterators (EPERM before the
 * verifier's first instruction, even for an empty program, from a root
 * loader with CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN, under lockdown
 * "integrity") while they load task iterators.
 */
SEC("iter/task")
int flush_pending(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	if (!budget_timing())
		return 0;
	if (!task) {
		if ((fast_stat() || fast_doctor()) && cfg_fast_shift > 0 && cfg_fast_shift < 32)
			bpf_loop(1U << (32 - cfg_fast_shift), flush_row, NULL, 0);
		return 0;
	}
	struct task_state *st = bpf_task_storage_get(&tstate, task, 0, 0);
	if (st && st->ids.cg_gen)
		pend_flush(&st->ids, &st->pend, true);
	return 0;
}

#endif
