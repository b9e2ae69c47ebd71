/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sys_enter and sys_exit, and calls a seccomp filter refused.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * sleep.h, whose definitions it uses.
 */
#ifndef SYSRAY_SYSCALLS_H
#define SYSRAY_SYSCALLS_H

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	/*
	 * Another probe takes new calls now (owns); this one finishes its
	 * own. After the filter: a filtered-out call reads no more.
	 */
	if (!syscall_wanted(id) || !owns())
		return 0;
	/* The doctor sums futex calls by address from the task storage path (futex.h). */
	if (fast_path() && !(fast_doctor() && cfg_futex && futex_call(id)) && fast_enter(regs, id))
		return 0;
	/*
	 * A task has state only once it has been selected (selection never
	 * shrinks while a task lives), so a task we follow skips the pid and
	 * cgroup lookups.
	 */
	struct task_struct *task = bpf_get_current_task_btf();
	struct task_state *st = bpf_task_storage_get(&tstate, task, 0, 0);
	if (!st) {
		if (!selected())
			return 0;
		st = bpf_task_storage_get(&tstate, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!st) {
			lost_call(id);
			return 0;
		}
	}
	if (st->call.held) {
		/* The interrupted call did return to user space (a handler ran, or it is being restarted). */
		st->call.held = 0;
		emit_syscall(st, st->call.held_ret, st->call.held_end, 0, NULL);
	}
	st->call.nr = id;
	/*
	 * Stat mode reads the arguments at exit, and only for the calls it
	 * emits: the registers still hold them then (signal restarts are set
	 * up after the sys_exit tracepoint).
	 */
	if (!cfg_stat)
		entry_args(&st->call, regs);
	/* The sleep slots are reset by the first switch-out of this call (sl_owner). */
	st->call.active = 1;
	st->call.seq++;
	st->call.gen = attach_gen;
	if (budget_timing()) {
		struct fast_row *dr = doctor_row((__u64)regs);
		if (dr) {
			/* The thread's timing and last failure are its row's (doctor_row); sys_exit hands them back. */
			st->timing = dr->timing;
			st->call.prev_failed = dr->call.prev_failed;
		}
		budget_entry(&st->timing, &st->call.ts, id);
		if (cfg_sample && st->call.prev_failed && !st->call.ts) {
			/*
			 * The call after a failure crosses over, and its time is
			 * evidence (a retry that waits): time it, but let it
			 * weigh what the budget gave it, so the histogram stays
			 * a fair sample.
			 */
			clock_entry(&st->timing, &st->call.ts);
		}
		return 0;
	}
	st->call.ts = bpf_ktime_get_ns();
	return 0;
}

/*
 * A seccomp filter that answers a call itself (SECCOMP_RET_ERRNO, or a
 * supervisor's reply to SECCOMP_RET_USER_NOTIF) skips the syscall and its
 * sys_enter tracepoint, but not sys_exit. So a failed exit with no entry,
 * in a thread under a filter, is a call its policy refused: the one sign in
 * the kernel of a container profile older than the program's libc.
 */
static __noinline void refused(struct task_state *st, struct pt_regs *regs, long ret)
{
	/* sys_exit has already let go of numbers the filter excludes, whose entry we skipped, not seccomp. */
	long id = BPF_CORE_READ(regs, orig_ax);
	if (id < 0)
		return;
	struct task_struct *task = bpf_get_current_task_btf();
	if (BPF_CORE_READ(task, seccomp.mode) != SECCOMP_MODE_FILTER)
		return;
	__u64 now = bpf_ktime_get_ns();
	st->call.nr = id;
	st->call.seq++; /* a call of its own: no sleeps of the last one */
	st->call.ts = now;
	load_args(&st->call, regs);
	if (cfg_stat) {
		stat_account(st, ret, 0, 1, 1);
		if (!cfg_sample)
			return;
		st->call.prev_failed = true;
	}
	if (cfg_min_latency)
		return;
	emit_syscall(st, ret, now, F_REFUSED, NULL);
}

/*
 * Sampled stat: the call joins its thread's recent calls, in the doctor's
 * row if the thread has one (doctor_row), else in its task storage. Out of
 * line, like hold_in_row: a pointer that may be either stays out of
 * sys_exit's verification.
 */
static __noinline void recent_add(struct task_state *st, __u64 regs, __u64 lat, long ret)
{
	struct recent_calls *ring = &st->recent;
	struct fast_row *dr = doctor_row(regs);
	if (dr)
		ring = &dr->recent;
	struct recent_call *rc = &ring->c[ring->n++ & (RECENT - 1)];
	rc->ts = st->call.ts;
	rc->latency = lat;
	rc->ret = ret;
	rc->nr = st->call.nr;
}

/*
 * The doctor: a call interrupted by a signal waits in the thread's row,
 * whose next entry emits it (fast_enter), as its task storage's next entry
 * would. False: the thread has no row, or its row's ids are stale (their
 * refresh would flush the row's pending counts here, a walk sys_exit's
 * verification cannot afford): it waits in the task storage, and the
 * thread's next switch-out in a call moves it to the row (fast_migrate).
 */
static __noinline bool hold_in_row(struct task_state *st, __u64 regs, long ret, __u64 now)
{
	struct fast_row *r = doctor_row(regs);
	if (!r || r->ids.cg_gen != cgroup_gen)
		return false;
	call_queued(st);
	r->call.nr = st->call.nr;
	r->call.ts = st->call.ts;
	r->call.queued = st->call.queued;
#pragma unroll
	for (int i = 0; i < 6; i++)
		r->call.args[i] = st->call.args[i];
	r->call.held_ret = ret;
	r->call.held_end = now;
	r->call.held = 1;
	return true;
}

/*
 * A call's exit on the task storage path. Out of line: what sys_exit does
 * after it (the doctor's hand-back) is walked once, not once for each of
 * its ends.
 */
static __noinline void exit_stored(void *ctx, struct pt_regs *regs, long ret, struct task_state *st)
{
	if (!st->call.active) {
		/* gen: the thread has entered a call since we attached, so it was not inside one then. */
		if (ret < 0 && ret >= -4095)
			refused(st, regs, ret);
		return;
	}
	st->call.active = 0;
	if (st->sleep.sl_owner == st->call.seq && st->sleep.off_ts) {
		/*
		 * Running, yet the switch back in was not seen: now and then
		 * neither sched_waking's program nor sched_switch's ran for the
		 * end of a sleep (under go build -a, 11 of 18,100 2 ms sleeps;
		 * recursion_misses stayed 0). The sleep ended by now at the
		 * latest; without this the call would look as if it ran on the
		 * CPU. Counted in unseen (maps.h).
		 * (off_ts is set only with sl_owner: a call that never switched
		 * out has none to clear.)
		 */
		__u64 d = bpf_ktime_get_ns() - st->sleep.off_ts;
		account_missed(st, d);
		if (st->sleep.off_preempted)
			st->sleep.runq += d;
		st->sleep.off_ts = 0;
	}
	if (cfg_futex && futex_call(st->call.nr))
		futex_exit(ctx, st, regs, ret); /* counted by address (futex.h) */
	__u64 now = 0;
	__u8 flags = 0;
	if (cfg_stat) {
		__u64 lat;
		bool timed = true;
		__u32 hw = 1;
		if (budget_timing()) {
			lat = budget_latency(&st->timing, st->call.ts, &now, &hw);
			timed = st->call.ts != 0;
		} else {
			now = bpf_ktime_get_ns();
			lat = now - st->call.ts;
		}
		if (!timed)
			flags = F_APPROX;
		__u32 acc = stat_account(st, ret, lat, hw, hw);
		if (!cfg_sample)
			return;
		/* Everything is counted; only what explains something crosses over. */
		bool failed = ret < 0 && ret >= -4095;
		bool after_failure = st->call.prev_failed;
		st->call.prev_failed = failed;
		/*
		 * One timed call in cfg_sample crosses, far apart; so does a
		 * call slower than any of its process's before (at most one a
		 * millisecond per thread): for a latency that grows with the
		 * process every call is one, for a steady one a few dozen in a
		 * run. With cfg_firsts (`sysray doctor`), so do a process's first
		 * calls of a syscall on a CPU (ACC_FIRST: a syscall it makes 30
		 * times still shows how its latency moves, at about seven events
		 * per process, syscall and CPU; an agent on a host that runs
		 * hundreds of programs a second would pay that for each).
		 */
		bool sampled = (timed && sample_tick(&st->timing, now)) || (cfg_firsts && (acc & ACC_FIRST));
		if (!sampled && (acc & ACC_RECORD) && now - st->timing.record_at >= 1000000) {
			st->timing.record_at = now;
			sampled = true;
		}
		bool watched = dns_watch(st->call.nr, regs, ret);
		if (!failed && !after_failure && lat < cfg_slow && !sampled && !watched) {
			recent_add(st, (__u64)regs, lat, ret);
			return;
		}
		late_args(&st->call, regs, ret);
		if (!now)
			now = bpf_ktime_get_ns();
		st->call.ts = now - lat; /* the entry, as near as it is known */
		recent_add(st, (__u64)regs, lat, ret); /* its time names the event this call becomes */
	} else {
		now = bpf_ktime_get_ns();
		refresh_ids(&st->ids, &st->pend); /* what the record's header is filled from */
	}
	if (now - st->call.ts < cfg_min_latency)
		return;
	if (restarting(ret)) {
		/*
		 * A signal interrupted the call. If the signal kills the thread the
		 * call never returned (strace shows it unfinished); otherwise the
		 * thread's next syscall entry emits it. Hold it until then.
		 */
		if (hold_in_row(st, (__u64)regs, ret, now))
			return;
		st->call.held = 1;
		st->call.held_ret = ret;
		st->call.held_end = now;
		return;
	}
	if (cfg_stacks && st->sleep.sl_owner == st->call.seq && st->sleep.sl.n && now - st->call.ts >= cfg_slow) {
		/*
		 * The user stack is the same from entry to exit, so it is taken
		 * here, for the calls that carry their sleeps, and not at every
		 * call's first switch-out (a user walk and a 1 KiB hash, for
		 * calls nearly all too quick to be kept). A successful exec's
		 * is the new program's: none.
		 */
		if (!cfg_lean_stacks && !(ret == 0 && (st->call.nr == cfg_nr_execve || st->call.nr == cfg_nr_execveat)))
			st->sleep.sl.ustack = stack_id(ctx, STK_EXIT, BPF_F_USER_STACK);
		emit_slow(st, ret, now, flags);
		return;
	}
	emit_syscall(st, ret, now, flags, NULL);
	return;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	if (renamer && renamer == (__u64)regs) {
		/* Another thread's new name is written by now (renamer). */
		renamer = 0;
		__sync_fetch_and_add(&name_gen, 1);
	}
	if (cfg_syscalls) {
		/*
		 * A call filtered out at entry left no state: say so before
		 * the task storage lookup, which costs a filtered-out call
		 * more than everything else here. orig_ax is -1 once
		 * rt_sigreturn restored the registers: only a number is
		 * trusted.
		 */
		long id = regs->orig_ax;
		if (id >= 0 && !syscall_wanted(id))
			return 0;
	}
	if (fast_path() && fast_exit(ctx, regs, ret))
		return 0;
	struct task_state *st = bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0, 0);
	if (!st)
		return 0;
	if (st->call.gen != attach_gen) {
		/* Entered before this attach (or never since the probe loaded). */
		st->call.active = 0;
		return 0;
	}
	/*
	 * Handing over (owns): the calls this probe saw enter end here; an
	 * exit without one is the new owner's, and no seccomp refusal.
	 */
	if (!st->call.active && !owns())
		return 0;
	exit_stored(ctx, regs, ret, st);
	struct fast_row *dr = doctor_row((__u64)regs);
	if (dr) {
		/* Handed back: the row's next call goes on from here (doctor_row). */
		dr->timing = st->timing;
		dr->call.prev_failed = st->call.prev_failed;
	}
	return 0;
}

#endif
