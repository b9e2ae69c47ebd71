/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Futex waits and wakes, counted in the kernel by thread and address, for
 * the doctor's lock-convoy detector.
 *
 * A contended pthread mutex is a FUTEX_WAIT by every thread that finds it
 * taken and a FUTEX_WAKE by the holder as it lets go; each lasts a few
 * microseconds, far under the slow bar (--slow) that makes a call cross
 * over as an event with its sleeps. So the calls are summed here, at
 * futex's exit, into one cell per (process, thread, address), which user
 * space reads every 250 ms (internal/probe/futex.go) and hands on as
 * events (kind futex). Keyed by thread, a cell has one writer: no atomics.
 *
 * Only futex(2) and futex_wait/futex_wake(2) take this path, and only when
 * cfg_futex is set (the doctor, record --stacks): the verifier drops it for
 * every other mode, and for any other syscall it costs a compare of the
 * number the exit has already loaded. The time asleep comes from the sleep
 * tracking (sleep.h), so it needs cfg_stacks.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * sleep.h, whose definitions it uses.
 */
#ifndef SYSRAY_FUTEX_H
#define SYSRAY_FUTEX_H

volatile const __u8 cfg_futex;         /* count futex waits and wakes by address */
volatile const __u32 cfg_nr_futex;      /* futex(2) */
volatile const __u32 cfg_nr_futex_wait; /* futex_wait(2), 0 where the table has none */
volatile const __u32 cfg_nr_futex_wake; /* futex_wake(2) */

#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define FUTEX_REQUEUE 3
#define FUTEX_CMP_REQUEUE 4
#define FUTEX_WAKE_OP 5
#define FUTEX_LOCK_PI 6
#define FUTEX_UNLOCK_PI 7
#define FUTEX_WAIT_BITSET 9
#define FUTEX_WAKE_BITSET 10
#define FUTEX_WAIT_REQUEUE_PI 11
#define FUTEX_LOCK_PI2 13
#define FUTEX_CMD_MASK 0x7f /* less FUTEX_PRIVATE_FLAG (128) and FUTEX_CLOCK_REALTIME (256) */
#define ETIMEDOUT 110
#define EAGAIN 11

struct ftx_key {
	__u32 pid; /* tgid: a private futex's address means something only in its process */
	__u32 tid;
	__u64 uaddr;
};

struct ftx_val {
	__u64 waits;    /* calls that wait: FUTEX_WAIT(_BITSET), FUTEX_LOCK_PI(2), FUTEX_WAIT_REQUEUE_PI, futex_wait */
	__u64 slept;    /* of them, the ones that went to sleep */
	__u64 woken;    /* returned 0 after sleeping: woken (or the PI lock handed over) */
	__u64 timeouts; /* -ETIMEDOUT */
	__u64 again;    /* -EAGAIN: the word had changed already, no sleep */
	__u64 by_proc;  /* slept, and last woken by another thread of the same process */
	__u64 wait_ns;  /* asleep (not preempted) in these waits */
	__u64 max_ns;   /* the longest of them */
	__u64 wakes;    /* calls that wake: FUTEX_WAKE(_BITSET), FUTEX_WAKE_OP, FUTEX_UNLOCK_PI, requeues, futex_wake */
	__u64 woke;     /* threads they woke (their results; for requeues, woken and moved; a FUTEX_UNLOCK_PI that succeeded, one) */
	__u64 woke_one; /* wake calls that woke exactly one thread */
	__s32 wait_stack; /* user stack of the first wait that slept; -1 none */
	__s32 wake_stack; /* user stack of the first wake that woke someone; -1 none */
	__u32 waker_tid;  /* the last thread that woke a wait of this cell */
	__u32 pad;
	__u64 cgroup;     /* the thread's cgroup when the cell was made */
};

/*
 * Bounded: a thread's cell per address it used. An idle Go program has a
 * cell per M (each parks on its own note); a thread pool two per worker.
 * The least recently used cell goes when it is full, so a long run keeps
 * its busy addresses.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct ftx_key);
	__type(value, struct ftx_val);
} futexes SEC(".maps");

const struct ftx_val futex_zero;

static __always_inline bool futex_call(__u32 nr)
{
	return nr == cfg_nr_futex || (cfg_nr_futex_wait && (nr == cfg_nr_futex_wait || nr == cfg_nr_futex_wake));
}

/*
 * Which way a call goes: 1 waits, 2 wakes, 0 neither (FUTEX_FD, the
 * trylock, an unknown op). futex_wait and futex_wake(2) have no op.
 */
static __always_inline int futex_dir(__u32 nr, __u64 op)
{
	if (nr == cfg_nr_futex_wait)
		return 1;
	if (nr == cfg_nr_futex_wake)
		return 2;
	switch (op & FUTEX_CMD_MASK) {
	case FUTEX_WAIT:
	case FUTEX_WAIT_BITSET:
	case FUTEX_LOCK_PI:
	case FUTEX_LOCK_PI2:
	case FUTEX_WAIT_REQUEUE_PI:
		return 1;
	case FUTEX_WAKE:
	case FUTEX_WAKE_BITSET:
	case FUTEX_WAKE_OP:
	case FUTEX_UNLOCK_PI:
	case FUTEX_REQUEUE:
	case FUTEX_CMP_REQUEUE:
		return 2;
	}
	return 0;
}

/*
 * Out of line: sys_exit's verification stays what it was for the other
 * calls. The user stack is taken once per cell and role (a walk and a
 * 1 KiB hash each), so its cost is bounded by the cells, not the calls.
 */
static __noinline void futex_exit(void *ctx, struct task_state *st, struct pt_regs *regs, long ret)
{
	__u32 nr = st->call.nr;
	__u64 op = BPF_CORE_READ(regs, si);
	int dir = futex_dir(nr, op);
	if (!dir)
		return;
	__u64 id = bpf_get_current_pid_tgid();
	struct ftx_key k = {.pid = id >> 32, .tid = (__u32)id, .uaddr = BPF_CORE_READ(regs, di)};
	struct ftx_val *v = bpf_map_lookup_elem(&futexes, &k);
	if (!v) {
		struct ftx_val z = futex_zero;
		z.wait_stack = -1;
		z.wake_stack = -1;
		z.cgroup = bpf_get_current_cgroup_id();
		bpf_map_update_elem(&futexes, &k, &z, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&futexes, &k);
		if (!v)
			return;
	}
	if (dir == 2) {
		v->wakes++;
		/*
		 * FUTEX_UNLOCK_PI returns 0, not a count: glibc calls it only
		 * when the word says a thread waits, and the kernel hands the
		 * lock to that one.
		 */
		if (nr == cfg_nr_futex && (op & FUTEX_CMD_MASK) == FUTEX_UNLOCK_PI && ret == 0)
			ret = 1;
		if (ret > 0) {
			v->woke += ret;
			if (ret == 1)
				v->woke_one++;
			if (v->wake_stack < 0)
				v->wake_stack = stack_id(ctx, STK_EXIT, BPF_F_USER_STACK);
		}
		return;
	}
	v->waits++;
	if (ret == -EAGAIN)
		v->again++;
	else if (ret == -ETIMEDOUT)
		v->timeouts++;
	if (st->sleep.sl_owner != st->call.seq || !st->sleep.sl.n)
		return; /* never switched out */
	__u64 asleep = 0;
	__u32 n = st->sleep.sl.n;
#pragma unroll
	for (int i = 0; i < MAX_SLEEPS; i++)
		if (i < n && !st->sleep.sl.s[i].preempted)
			asleep += st->sleep.sl.s[i].dur;
	if (!asleep)
		return; /* only preempted */
	v->slept++;
	v->wait_ns += asleep;
	if (asleep > v->max_ns)
		v->max_ns = asleep;
	if (ret == 0)
		v->woken++;
	if (st->sleep.have_waker) {
		v->waker_tid = st->sleep.waker_tid;
		if (st->sleep.waker_pid == k.pid && st->sleep.waker_tid != k.tid)
			v->by_proc++;
	}
	if (v->wait_stack < 0)
		v->wait_stack = stack_id(ctx, STK_EXIT, BPF_F_USER_STACK);
}

#endif
