/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Where syscalls sleep: switch-outs, wakers, and the sleep slots of the call
 * in flight.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * stat.h, whose definitions it uses.
 */
#ifndef SYSRAY_SLEEP_H
#define SYSRAY_SLEEP_H

/* Adds an off-CPU interval to the sleep slot for its stack. */
static __always_inline void account_sleep(struct task_state *st, __u64 dur)
{
	__u32 n = st->sleep.sl.n;
	int idx = -1;

#pragma unroll
	for (int i = 0; i < MAX_SLEEPS; i++) {
		if (i < n && st->sleep.sl.s[i].kstack == st->sleep.off_kstack && st->sleep.sl.s[i].preempted == st->sleep.off_preempted) {
			idx = i;
			break;
		}
	}
	if (idx < 0) {
		if (n < MAX_SLEEPS) {
			idx = n;
			st->sleep.sl.n = n + 1;
		} else {
			/* Full: the shortest place gives way to a longer one. */
			int min = 0;
#pragma unroll
			for (int i = 1; i < MAX_SLEEPS; i++)
				if (st->sleep.sl.s[i].dur < st->sleep.sl.s[min].dur)
					min = i;
			if (dur <= st->sleep.sl.s[min].dur)
				return;
			idx = min;
		}
		idx &= MAX_SLEEPS - 1;
		struct sleep *sp = &st->sleep.sl.s[idx];
		sp->dur = 0;
		sp->count = 0;
		sp->kstack = st->sleep.off_kstack;
		sp->preempted = st->sleep.off_preempted;
		sp->waker_pid = 0;
		sp->waker_tid = 0;
		sp->waker_kstack = -1;
		sp->waker_comm[0] = 0;
	}
	idx &= MAX_SLEEPS - 1;
	struct sleep *sp = &st->sleep.sl.s[idx];
	sp->dur += dur;
	sp->count++;
	if (st->sleep.have_waker) {
		sp->waker_pid = st->sleep.waker_pid;
		sp->waker_tid = st->sleep.waker_tid;
		sp->waker_kstack = st->sleep.waker_kstack;
		__builtin_memcpy(sp->waker_comm, st->sleep.waker_comm, TASK_COMM_LEN);
	}
}

/*
 * A sleep a signal ends: TASK_INTERRUPTIBLE (1) without TASK_UNINTERRUPTIBLE
 * (2), which a killable sleep adds (the values have not changed since 2.6).
 * A wait by design waits so; what sleeps uninterruptibly inside one is
 * something else: the audit backlog (audit_log_start), a lock, I/O.
 */
static __always_inline bool interruptible(unsigned int state)
{
	return (state & 3) == 1;
}

/* Out of line: sys_exit needs it only for a switch-in that was not seen. */
static __noinline void account_missed(struct task_state *st, __u64 dur)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&unseen, &zero);
	if (n)
		(*n)++;
	if (st->sleep.off_kstack == STACK_DEFERRED)
		st->sleep.off_kstack = -1; /* running again: the sleep's stack is gone */
	account_sleep(st, dur);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = 0;
	struct task_state *st = bpf_task_storage_get(&tstate, prev, 0, 0);
	/* The doctor: a call on the fast path moves here at its first switch-out. */
	if (fast_doctor() && !(st && st->call.active))
		st = fast_migrate(prev, st);
	if (st && st->call.active) {
		now = bpf_ktime_get_ns();
		if (st->sleep.sl_owner != st->call.seq) {
			/* first switch-out of this syscall: the slots held an earlier one's */
			st->sleep.sl_owner = st->call.seq;
			st->sleep.sl.n = 0;
			st->sleep.sl.ustack = -1; /* taken at the exit of a call slow enough to carry its sleeps */
			st->sleep.runq = 0;
		}
		/*
		 * The waker of this sleep is recorded from here on, by
		 * sched_waking on another CPU as soon as it sees off_ts: clear
		 * the last one's first, or a quick wakeup is overwritten.
		 */
		st->sleep.have_waker = 0;
		asm volatile("" ::: "memory");
		st->sleep.off_ts = now;
		st->sleep.off_preempted = preempt || prev_state == 0;
		/*
		 * prev is current here: its stacks show the way into schedule().
		 * A call that waits by design, asleep interruptibly, is waiting
		 * where it was told to, nearly always briefly: its stack waits
		 * until it wakes (STACK_DEFERRED). On redis, redis-server's
		 * epoll_wait sleeps were most of the doctor's switch-outs, each
		 * an unwind and a hash of its stack.
		 */
		bool deferred = !st->sleep.off_preempted && interruptible(prev_state) && waits_by_design(st->call.nr);
		st->sleep.off_kstack = deferred ? STACK_DEFERRED : stack_id(ctx, STK_SWITCH, 0);
	}
	st = bpf_task_storage_get(&tstate, next, 0, 0);
	if (st && st->call.active && st->sleep.off_ts) {
		if (!now)
			now = bpf_ktime_get_ns();
		__u64 d = now - st->sleep.off_ts;
		/*
		 * next has not run since it slept: its stack is still the
		 * sleep's, less the scheduler's own functions (__sched), which
		 * the kernel leaves out of a sleeping task's stack.
		 */
		if (st->sleep.off_kstack == STACK_DEFERRED)
			st->sleep.off_kstack = d >= cfg_defer_ns ? task_stack_id(next, STK_SWITCH) : -1;
		account_sleep(st, d);
		if (st->sleep.off_preempted)
			st->sleep.runq += d;
		st->sleep.off_ts = 0;
	}
	faultwait_switch(ctx, prev, next, prev_state);
	return 0;
}

/* The waker is current here (sched_wakeup may run on the sleeper's CPU instead). */
SEC("tp_btf/sched_waking")
int BPF_PROG(sched_waking, struct task_struct *p)
{
	struct task_state *st = bpf_task_storage_get(&tstate, p, 0, 0);
	if (!st || !st->call.active || !st->sleep.off_ts)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	st->sleep.have_waker = 1;
	st->sleep.waker_pid = id >> 32;
	st->sleep.waker_tid = (__u32)id;
	bpf_get_current_comm(st->sleep.waker_comm, sizeof(st->sleep.waker_comm));
	/*
	 * The waker's stack is most of this program's cost (a walk, and a hash
	 * of 1 KiB to find its id): on redis, sched_waking took 3.9 µs a run
	 * with it. Its readers are people reading trace and record --stacks;
	 * no detector reads it.
	 */
	st->sleep.waker_kstack = cfg_lean_stacks ? -1 : stack_id(ctx, STK_WAKING, 0);
	return 0;
}

#endif
