/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Waiting for a CPU: time a thread spends runnable without one, from its
 * wake-up (sched_wakeup, sched_wakeup_new) or its preemption (switched out
 * still runnable) to the switch that gives it a CPU. Totals are kept per
 * thread in its own task storage and handed over as summary records; a
 * wait of at least RUNQ_LONG_NS is a record of its own, naming the task
 * that had the CPU when the waiter got it.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * emit.h. Its programs, sched_switch's own among them, attach only when
 * user space asks (probe.Config.RunQueue).
 */
#ifndef SYSRAY_RUNQ_H
#define SYSRAY_RUNQ_H

#define PF_KTHREAD 0x00200000

volatile const __u8 cfg_runq; /* follow waits for a CPU (the programs here are attached) */
const struct runq_rec *rec_runq __attribute__((unused));

/*
 * A wait this long is a record of its own. The scheduler's base slice on
 * these hosts is 0.7 ms scaled by 1 + log2(CPUs, at most 8): 1.4 ms on 2
 * CPUs, 2.8 ms on 8 or more. A wait of 4 ms is more than a slice given to
 * another task everywhere: someone held the CPU past its turn, or many did.
 * A thread can wait that long at most 250 times a second, which bounds the
 * records.
 */
#define RUNQ_LONG_NS 4000000ULL
/*
 * A thread's totals go to user space when one of its waits ends at least
 * this long after its last summary, and when it exits: its last quarter of
 * a second before sysray stops is not counted. As often as the doctor
 * reads the kernel's syscall counts.
 */
#define RUNQ_FLUSH_NS 250000000ULL

struct runq_task {
	__u64 since;  /* runnable without a CPU since; 0: on a CPU or asleep */
	__u64 on;     /* on a CPU since; 0: not, or not seen switched in */
	__u64 sum_at; /* last summary; 0: none yet */
	__u8 woken;   /* the wait in progress began at a wake-up, not a preemption */
	__u8 pad[7];
	struct runq_sum s;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct runq_task);
} runq_tasks SEC(".maps");

/*
 * Each CPU's last switches: who got it and when. A long wait's end reads
 * back through them for who ran on the CPU while it waited: the task
 * switched out as the waiter gets the CPU is only the last of them, and
 * on a busy host rarely the one that took most of the wait. 16 switches
 * cover a wait of 16 slices of others; a longer one is told from its
 * last 16.
 */
#define RUNQ_RING 16

struct runq_slot {
	__u64 ts; /* switched in at */
	struct runq_holder h; /* h.ns unused */
};

struct runq_cpu {
	__u32 head; /* the next slot to write */
	__u32 pad;
	struct runq_slot s[RUNQ_RING];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct runq_cpu);
} runq_cpus SEC(".maps");

/*
 * t is runnable from now and not on a CPU. A task not seen before gets
 * storage only if it is selected: this runs on every wake-up of the host,
 * so what is not selected costs a storage lookup, a read of its tgid and,
 * with a pid selection, one hash lookup. Kernel threads are no process's.
 */
static __always_inline void runq_ready(struct task_struct *t, bool woken, __u64 now)
{
	struct runq_task *rt = bpf_task_storage_get(&runq_tasks, t, 0, 0);
	if (!rt) {
		if ((t->flags & PF_KTHREAD) || !task_selected(t))
			return;
		rt = bpf_task_storage_get(&runq_tasks, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!rt)
			return;
		if (!now)
			now = bpf_ktime_get_ns();
		rt->sum_at = now; /* the first summary a span after this */
	}
	rt->since = now ? now : bpf_ktime_get_ns();
	rt->woken = woken;
}

static __always_inline void runq_fill(struct runq_rec *r, struct task_struct *t, __u8 sum, __u64 now)
{
	r->h.kind = K_RUNQ;
	r->h.flags = 0;
	r->h.size = sizeof(*r);
	r->h.cpu = bpf_get_smp_processor_id();
	r->h.pid = t->tgid;
	r->h.tid = t->pid;
	r->h.ts = now;
	r->h.cgroup = task_cgroup(t);
	__builtin_memcpy(r->h.comm, t->comm, TASK_COMM_LEN);
	r->sum = sum;
	r->prio = t->prio;
	r->policy = t->policy;
	r->nr_allowed = t->nr_cpus_allowed;
	r->allowed = BPF_CORE_READ(t, cpus_ptr, bits[0]);
	r->group = (__u64)t->sched_task_group;
}

/* t's totals since its last summary, and a fresh start. */
static __always_inline void runq_summary(struct runq_task *rt, struct task_struct *t, __u64 now)
{
	rt->sum_at = now;
	if (!rt->s.waits && !rt->s.run)
		return;
	if (cfg_stat && !cfg_sample)
		return;
	void *rb = cpu_ring();
	if (!rb)
		return;
	struct runq_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count_drop();
		return;
	}
	__builtin_memset(r, 0, sizeof(*r));
	runq_fill(r, t, 1, now);
	r->nr = -1;
	r->s = rt->s;
	bpf_ringbuf_submit(r, wake_flags(rb));
	__builtin_memset(&rt->s, 0, sizeof(rt->s));
}

/*
 * Who ran on this CPU in [since, now], the most first, from its ring; and
 * how long it was idle. Out of line: only long waits read it.
 */
static __noinline void runq_holders(struct runq_rec *r, __u64 since, __u64 now)
{
	__u32 zero = 0;
	struct runq_cpu *c = bpf_map_lookup_elem(&runq_cpus, &zero);
	if (!c)
		return;
	__u64 end = now;
	__u32 head = c->head;
	for (int i = 0; i < RUNQ_RING; i++) {
		struct runq_slot *sl = &c->s[(head - 1 - i) & (RUNQ_RING - 1)];
		__u64 start = sl->ts;
		if (!start || end <= since)
			break;
		__u64 ns = end - (start > since ? start : since);
		end = start;
		if (start > now || ns > now - since)
			break; /* a slot written meanwhile by a program on this CPU */
		if (!sl->h.tid) {
			r->idle_ns += ns;
			continue;
		}
		int at = -1, least = 0;
#pragma unroll
		for (int k = 0; k < RUNQ_HOLDERS; k++) {
			if (r->held[k].tid == sl->h.tid || (at < 0 && !r->held[k].tid))
				at = k;
			if (r->held[k].ns < r->held[least].ns)
				least = k;
		}
		if (at < 0) {
			/* Full: the least of them gives way to a longer one. */
			if (ns <= r->held[least].ns)
				continue;
			at = least;
		}
		if (at < 0 || at >= RUNQ_HOLDERS)
			continue;
		struct runq_holder *h = &r->held[at];
		if (h->tid != sl->h.tid) {
			*h = sl->h;
			h->ns = 0;
		}
		h->ns += ns;
	}
}

/* next gets this CPU now: the slot the next long wait reads back to. */
static __always_inline void runq_mark(struct task_struct *next, __u64 now)
{
	__u32 zero = 0;
	struct runq_cpu *c = bpf_map_lookup_elem(&runq_cpus, &zero);
	if (!c)
		return;
	struct runq_slot *sl = &c->s[c->head & (RUNQ_RING - 1)];
	c->head++;
	sl->ts = now;
	sl->h.tid = next->pid;
	sl->h.pid = next->tgid;
	if (!sl->h.tid)
		return; /* idle */
	sl->h.prio = next->prio;
	sl->h.policy = next->policy;
	sl->h.nr_allowed = next->nr_cpus_allowed;
	sl->h.allowed = next->cpus_ptr->bits[0];
	sl->h.cgroup = next->cgroups->dfl_cgrp->kn->id;
	/* Nice weighs tasks only within one group: this says which. */
	sl->h.group = (__u64)next->sched_task_group;
	__builtin_memcpy(sl->h.comm, next->comm, TASK_COMM_LEN);
}

/*
 * One wait of next's ended: it has the CPU, from prev. Out of line, so
 * sched_switch's walk does not grow with it.
 */
static __noinline void runq_end(struct runq_task *rt, struct task_struct *prev, struct task_struct *next, __u64 now)
{
	__u64 d = now - rt->since;
	bool woken = rt->woken;
	rt->since = 0;
	rt->s.waits++;
	if (woken)
		rt->s.wait_woken += d;
	else
		rt->s.wait_preempted += d;
	/*
	 * The CPU came from idle: it was not held by another task when the
	 * wait ended. A wake-up on an idle CPU waits microseconds so; a long
	 * such wait is not a queue (a throttled cgroup's tasks wait for quota
	 * on an idle CPU).
	 */
	bool idle = prev->pid == 0;
	if (idle)
		rt->s.wait_idle += d;
	__s32 nr = -1;
	struct task_state *st = bpf_task_storage_get(&tstate, next, 0, 0);
	if (st && st->call.active) {
		nr = st->call.nr;
		rt->s.wait_sys += d;
	}
	if (d > rt->s.max)
		rt->s.max = d;
	/* Powers of 4 from 16 µs: 16, 64, 256 µs, 1, 4, 16, 64 ms. */
	__u64 v = d >> 14;
	__u32 b = 0;
#pragma unroll
	for (int i = 0; i < RUNQ_BUCKETS - 1; i++) {
		if (v) {
			b++;
			v >>= 2;
		}
	}
	rt->s.hist[b & (RUNQ_BUCKETS - 1)]++;

	if (d >= RUNQ_LONG_NS && !(cfg_stat && !cfg_sample)) {
		void *rb = cpu_ring();
		struct runq_rec *r = rb ? bpf_ringbuf_reserve(rb, sizeof(*r), 0) : NULL;
		if (r) {
			__builtin_memset(r, 0, sizeof(*r));
			runq_fill(r, next, 0, now);
			r->wait = d;
			r->woken = woken;
			r->nr = nr;
			/* next's cfs_rq is on this CPU's run queue. */
			r->nr_running = BPF_CORE_READ(next, se.cfs_rq, rq, nr_running);
			runq_holders(r, now - d, now);
			bpf_ringbuf_submit(r, wake_flags(rb));
		} else if (rb) {
			count_drop();
		}
	}
	if (now - rt->sum_at >= RUNQ_FLUSH_NS)
		runq_summary(rt, next, now);
}

/* sched_switch's part: prev leaves its CPU, next gets it. */
static __always_inline void runq_switch(bool preempt, struct task_struct *prev, struct task_struct *next,
					unsigned int prev_state)
{
	if (!cfg_runq)
		return;
	__u64 now = bpf_ktime_get_ns();
	bool runnable = preempt || prev_state == 0;
	struct runq_task *rt = bpf_task_storage_get(&runq_tasks, prev, 0, 0);
	if (rt) {
		if (rt->on)
			rt->s.run += now - rt->on;
		rt->on = 0;
		rt->since = runnable ? now : 0;
		rt->woken = 0;
	} else if (runnable) {
		runq_ready(prev, false, now);
	}
	rt = bpf_task_storage_get(&runq_tasks, next, 0, 0);
	if (rt) {
		rt->on = now;
		if (rt->since)
			runq_end(rt, prev, next, now);
	}
	runq_mark(next, now);
}

/* p is woken: runnable from now. The waker is current, not p. */
/*
 * A program of its own on sched_switch, not a call from sleep.h's: the
 * verifier then walks each alone. Inlined in one program the two walks
 * multiplied (141k instructions), and the doctor took 0.6 s longer to
 * attach.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(runq_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	if (!owns())
		return 0; /* another probe's now (owns) */
	runq_switch(preempt, prev, next, prev_state);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(runq_wakeup, struct task_struct *p)
{
	if (!owns())
		return 0;
	/* Woken while still on its CPU (about to sleep): it never left. */
	if (p->on_cpu)
		return 0;
	runq_ready(p, true, 0);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(runq_wakeup_new, struct task_struct *p)
{
	if (!owns())
		return 0;
	runq_ready(p, true, 0);
	return 0;
}

/* The thread's last totals, before its storage goes with it. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(runq_exit, struct task_struct *task, bool group_dead)
{
	if (!owns())
		return 0;
	struct runq_task *rt = bpf_task_storage_get(&runq_tasks, task, 0, 0);
	if (!rt)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (rt->on)
		rt->s.run += now - rt->on;
	rt->on = 0;
	runq_summary(rt, task, now);
	return 0;
}

#endif
