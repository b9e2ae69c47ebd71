// SPDX-License-Identifier: GPL-2.0
/*
 * sysray's kernel half: one record per completed syscall, plus the page
 * faults, vsyscall emulations, signals and process lifecycle events that
 * explain why a program died or slowed down.
 *
 * Cost model: an unselected syscall costs one hash lookup at entry and one
 * empty task-storage lookup at exit. Selection (pids, cgroups, syscalls,
 * minimum latency) is decided here so nothing unwanted crosses to user space.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "sysray.h"

char LICENSE[] SEC("license") = "GPL";

/*
 * BTF keeps only the types of globals, maps and functions, not of locals:
 * these unused pointers keep every record type in the object, so bpf2go
 * emits them and internal/probe checks decode.go's offsets against them.
 */
const struct fault_rec *rec_fault __attribute__((unused));
const struct vsys_rec *rec_vsys __attribute__((unused));
const struct sig_rec *rec_sig __attribute__((unused));
const struct fork_rec *rec_fork __attribute__((unused));
const struct exec_rec *rec_exec __attribute__((unused));
const struct exit_rec *rec_exit __attribute__((unused));
const struct recent_rec *rec_recent __attribute__((unused));
const struct reclaim_rec *rec_reclaim __attribute__((unused));
const struct blocked_rec *rec_blocked __attribute__((unused));
const enum kind *rec_kind __attribute__((unused));

#define SIGILL 4
#define SIGTRAP 5
#define SIGBUS 7
#define SIGFPE 8
#define SIGSEGV 11
#define SIGSYS 31
#define SECCOMP_MODE_FILTER 2

#define ERESTARTSYS 512
#define ENOENT 2
#define EBUSY 16
#define EFAULT 14
#define ENOSPC 28
#define ERESTART_RESTARTBLOCK 516

#define CLOCK_MONOTONIC 1

#define VSYSCALL_ADDR 0xffffffffff600000UL

/*
 * Budgeted timing. A thread's syscalls share 32 budgets by number mod 32:
 * two syscalls that collide only share a budget, which still times a
 * random share of each.
 */
#define BUDGET_SLOTS 32
/*
 * A call that crossed a timer tick and may have taken this long is counted
 * on its own, timed or not, instead of through the sample that stands for
 * it: so a rare slow call in a busy thread is never lost to sampling. It
 * is far above what a fast call's bound reaches in a thread busy enough to
 * be sampled (a few microseconds: the calls since its last clock read).
 */
#define LONG_NS 1000000ULL

/* pids map values */
#define SEL_ACTIVE 1
#define SEL_FOLLOW 2  /* new processes forked by this one are selected too */
#define SEL_PENDING 4 /* selected from its next execve on (sysray's own child) */
#define SEL_LAUNCH 8  /* on sysray's own tgid while it starts the command: its child is SEL_PENDING */

/* Set by the loader before load; constants let the verifier drop dead branches. */
volatile const __u32 cfg_self;       /* sysray's own tgid, never traced */
volatile const __u8 cfg_pids;        /* only tgids in pids */
volatile const __u8 cfg_cgroups;     /* only cgroups in cgroups */
volatile const __u8 cfg_syscalls;    /* only syscalls in sys_mask */
volatile const __u8 cfg_all_faults;  /* every user page fault, not only the ones that matter */
volatile const __u64 cfg_min_latency;
volatile const __u8 cfg_stacks;      /* track where syscalls sleep */
volatile const __u8 cfg_stat;        /* count syscalls in the kernel instead of emitting them */
volatile const __u32 cfg_sample;     /* stat mode: still emit failures, the call after one, slow calls
				      * (>= cfg_slow) and 1 in cfg_sample others (a power of two; 0: none) */
volatile const __u64 cfg_sample_gap; /* and at most one such sample per thread per this many ns */
volatile const __u64 cfg_tick_ns;    /* lean and budgeted timing: one jiffy; lean: 0 times every call with the clock */
volatile const __u32 cfg_budget;     /* budgeted timing (stat without samples): calls of a syscall a
				      * thread has timed by the clock per jiffy; 0 times every call */
volatile const __u32 cfg_every_shift; /* budgeted timing: past the budget, 1 in 2^this is timed */
volatile const __u64 cfg_slow;       /* emit sleep stacks for syscalls at least this slow */
volatile const __u64 cfg_wakeup_bytes; /* wake the reader once this much is queued */
volatile const __u32 cfg_nr_execve;
volatile const __u32 cfg_nr_execveat;
volatile const __u32 cfg_nr_rt_sigreturn;
volatile const __u64 sys_mask[MAX_SYSCALL / 64];
volatile const struct cap_rule cap_rules[MAX_SYSCALL];

struct task_state {
	__u64 ts;
	__u64 args[6];
	__u32 nr;
	__u8 active;
	__u8 held; /* returned -ERESTART*: emit once we know whether it reached user space */
	__u8 pad[2];
	__s64 held_ret;
	__u64 held_end;
	/* where the syscall in flight is sleeping (cfg_stacks) */
	__u64 off_ts; /* switched out at; 0 while on CPU */
	__s32 off_kstack;
	__u8 off_preempted;
	__u8 have_waker;
	__u8 prev_failed; /* the thread's previous syscall failed: emit this one (retries) */
	__u8 pad2;
	__u32 tick;      /* lean mode: calls seen, for 1-in-cfg_sample sampling */
	__u32 tgid;      /* cached for the stats key while cg_gen is current */
	__u64 cg;        /* cgroup id, likewise */
	__u64 cg_gen;    /* cgroup_gen when tgid and cg were read; 0: never */
	__u64 seq;       /* syscalls entered: names the call in flight */
	__u64 gen;       /* attach_gen when the thread last entered a call */
	__u64 sl_owner;  /* seq of the syscall the sleep slots belong to */
	__u64 jts;       /* lean timing: jiffies at entry */
	__u64 p1;        /* lean timing: clock at the call's first switch-out */
	__u64 j1;        /* lean timing: jiffies then */
	__u64 sampled_at; /* lean mode: when the thread's last sampled call ended */
	__u64 record_at;  /* sampled mode: when the thread's last record call crossed over */
	__u64 runq;       /* ns the call in flight spent preempted (valid while sl_owner == seq) */
	/* lean mode: the thread's last calls, for a death by signal (most are not emitted) */
	__u32 nrecent;
	__u32 pad3;
	struct recent_call recent[RECENT];
	__u32 waker_pid;
	__u32 waker_tid;
	__s32 waker_kstack;
	char waker_comm[TASK_COMM_LEN];
	struct sleeps sl;
	/* last page fault, kept until a fault signal shows whether it mattered */
	__u64 fault_ts;
	__u64 fault_addr;
	__u64 fault_ip;
	__u64 fault_err;
	__u64 fault_sp;
	__u64 reclaim_ts; /* in memory-cgroup reclaim since; 0: not */
	/* budgeted timing */
	__u64 last_clk;  /* the thread's last clock read */
	__u64 prev_clk;  /* the one before the call in flight's entry, when it was timed */
	__u64 rng;       /* picks the calls timed past the budget */
	__u32 weight;    /* calls the call in flight stands for if short: 0 when not timed */
	__u32 budget[BUDGET_SLOTS]; /* per syscall slot: jiffies << 8 | calls in that jiffy */
};

/*
 * Bumped whenever a task changes cgroup. Reading the cgroup id costs a helper
 * call and four pointer loads per syscall; a task caches it with the
 * generation it read it in, and reads it again only after a move.
 */
volatile __u64 cgroup_gen = 1;

/*
 * Bumped by user space each time it attaches sys_enter and sys_exit again
 * (the agent's duty cycling). A call a thread entered under an earlier
 * attach, or while they were off, is none of this attach's business: its
 * state is stale, and an exit without a seen entry is no seccomp refusal.
 */
volatile __u64 attach_gen = 1;

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_state);
} tstate SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u8);
} cgroups SEC(".maps");

struct ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
};

/* One ring per CPU: producers on different CPUs never contend. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct ring);
} rings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

struct sys_big {
	struct sys_rec r;
	char data[DATA_SLOTS * DATA_SLOT];
};

/* A slow syscall's record: where it slept, then its captured arguments. */
struct sys_slow {
	struct sys_rec r;
	struct sleeps sl;
	char data[DATA_SLOTS * DATA_SLOT];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sys_slow); /* also used as a struct sys_big */
} scratch SEC(".maps");

/*
 * Stacks are kept once each and named by an id, as a stack map would, but
 * deduplicated by their whole content. The kernel's stack map puts a stack
 * in the bucket its hash picks and fails (EEXIST) when another stack holds
 * it: collisions came far more often than 16384 buckets suggest (a run with
 * three stacks in the map lost every hrtimer waker stack), and the only cure
 * it offers, BPF_F_REUSE_STACKID, silently renames older stacks.
 */
struct stack_buf {
	__u64 ips[STACK_DEPTH];
};

#define STACK_MAX 16384

/*
 * Preallocated: new stacks come in bursts (a process's first sleeps), and
 * the allocator behind BPF_F_NO_PREALLOC refills its per-CPU cache only
 * later, from an irq_work, so a burst lost stacks to ENOMEM.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, STACK_MAX); /* 1 when stacks are off */
	__type(key, struct stack_buf);
	__type(value, __u32);
} stack_ids SEC(".maps");

/* Read by user space: the stack of each id. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STACK_MAX); /* 1 when stacks are off */
	__type(key, __u32);
	__type(value, struct stack_buf);
} stacks SEC(".maps");

/*
 * Where each program unwinds: one slot per program, since a program does
 * not nest in itself on a CPU, while another may interrupt it (a wakeup in
 * a timer interrupt, a sample in an NMI).
 */
enum { STK_SWITCH, STK_WAKING, STK_PROFILE, STK_RECLAIM, STK_SLOTS };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STK_SLOTS);
	__type(key, __u32);
	__type(value, struct stack_buf);
} stack_scratch SEC(".maps");

__u32 stack_next;

/* The id of the current stack (kernel, or user with BPF_F_USER_STACK); < 0 if there is none or no room. */
static __always_inline __s32 stack_id(void *ctx, __u32 slot, __u64 flags)
{
	struct stack_buf *b = bpf_map_lookup_elem(&stack_scratch, &slot);
	if (!b)
		return -ENOENT;
	/* The helper zeroes what the stack does not fill: equal stacks are equal keys. */
	long n = bpf_get_stack(ctx, b->ips, sizeof(b->ips), flags);
	if (n <= 0)
		return n < 0 ? n : -EFAULT;
	__u32 *known = bpf_map_lookup_elem(&stack_ids, b);
	if (known)
		return *known;
	__u32 id = __sync_fetch_and_add(&stack_next, 1);
	if (id >= STACK_MAX)
		return -ENOSPC;
	/* The stack first, then its id: whoever finds the id finds the stack. */
	if (bpf_map_update_elem(&stacks, &id, b, BPF_ANY))
		return -ENOSPC;
	if (bpf_map_update_elem(&stack_ids, b, &id, BPF_NOEXIST)) {
		/* Another CPU named it first (its id wins), or the map is busy. */
		known = bpf_map_lookup_elem(&stack_ids, b);
		return known ? *known : -EBUSY;
	}
	return id;
}

/*
 * Syscall records are staged per CPU and handed to the ring STAGE_BYTES at a
 * time: one ring reservation costs more here than building the record, so
 * paying it once per batch instead of once per syscall nearly halves the
 * cost of sys_exit. A timer flushes a partial batch within STAGE_NS.
 */
#define STAGE_BYTES 4096
#define STAGE_NS 1000000

struct stage {
	struct bpf_timer timer;
	__u64 busy; /* try-lock: the timer or a preempting program may race us */
	__u32 len;
	__u8 armed;
	__u8 inited;
	__u8 pad[2];
	__u8 buf[STAGE_BYTES];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* one per possible CPU, set at load */
	__type(key, __u32);
	__type(value, struct stage);
} stages SEC(".maps");

static __always_inline void count_drops(__u64 k)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&drops, &zero);
	if (n)
		*n += k;
}

static __always_inline void count_drop(void)
{
	count_drops(1);
}

static __always_inline void *cpu_ring(void)
{
	__u32 cpu = bpf_get_smp_processor_id();
	return bpf_map_lookup_elem(&rings, &cpu);
}

/* Waking the reader per record costs more than the record; wake it in bulk. */
static __always_inline __u64 wake_flags(void *rb)
{
	return bpf_ringbuf_query(rb, BPF_RB_AVAIL_DATA) >= cfg_wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									     : BPF_RB_NO_WAKEUP;
}

static __always_inline void fill_hdr(struct hdr *h, __u8 kind, __u16 size, __u64 ts)
{
	__u64 id = bpf_get_current_pid_tgid();
	h->kind = kind;
	h->flags = 0;
	h->size = size;
	h->cpu = bpf_get_smp_processor_id();
	h->pid = id >> 32;
	h->tid = (__u32)id;
	h->ts = ts;
	h->cgroup = bpf_get_current_cgroup_id();
	bpf_get_current_comm(h->comm, sizeof(h->comm));
}

/*
 * fill_hdr for the current task's syscall records: its ids and name read
 * straight from the task, its cgroup from the cache stat_account keeps. The
 * helpers for these cost more than the rest of a record together.
 */
static __always_inline void fill_hdr_st(struct hdr *h, struct task_state *st, __u8 kind, __u16 size,
					__u64 ts)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u64 gen = cgroup_gen;
	if (st->cg_gen != gen) {
		st->cg = bpf_get_current_cgroup_id();
		st->tgid = t->tgid;
		st->cg_gen = gen;
	}
	h->kind = kind;
	h->flags = 0;
	h->size = size;
	h->cpu = bpf_get_smp_processor_id();
	h->pid = t->tgid;
	h->tid = t->pid;
	h->ts = ts;
	h->cgroup = st->cg;
	__builtin_memcpy(h->comm, t->comm, TASK_COMM_LEN);
}

static __always_inline __u64 task_cgroup(struct task_struct *t)
{
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
}

/* For records about a task that is not current (the unfinished-syscall iterator). */
static __always_inline void fill_hdr_task(struct hdr *h, struct task_struct *t, __u8 kind, __u16 size,
					  __u64 ts)
{
	h->kind = kind;
	h->flags = 0;
	h->size = size;
	h->cpu = bpf_get_smp_processor_id();
	h->pid = BPF_CORE_READ(t, tgid);
	h->tid = BPF_CORE_READ(t, pid);
	h->ts = ts;
	h->cgroup = task_cgroup(t);
	BPF_CORE_READ_STR_INTO(&h->comm, t, comm);
}

static __always_inline bool tgid_selected(__u32 tgid)
{
	if (tgid == cfg_self)
		return false;
	if (cfg_pids) {
		__u8 *v = bpf_map_lookup_elem(&pids, &tgid);
		if (!v || !(*v & SEL_ACTIVE))
			return false;
	}
	return true;
}

static __always_inline bool selected(void)
{
	if (!tgid_selected(bpf_get_current_pid_tgid() >> 32))
		return false;
	if (cfg_cgroups) {
		__u64 cg = bpf_get_current_cgroup_id();
		if (!bpf_map_lookup_elem(&cgroups, &cg))
			return false;
	}
	return true;
}

static __always_inline bool task_selected(struct task_struct *t)
{
	if (!tgid_selected(BPF_CORE_READ(t, tgid)))
		return false;
	if (cfg_cgroups) {
		__u64 cg = task_cgroup(t);
		if (!bpf_map_lookup_elem(&cgroups, &cg))
			return false;
	}
	return true;
}

/*
 * Budgeted timing: stat, top and the agent. The clock is half of what
 * counting a call costs; it times every call of a syscall while the thread
 * has made fewer than cfg_budget of them in the current jiffy, then a random
 * 1 in 2^cfg_every_shift, and the histogram weighs each timed call by the
 * calls it stands for. Counts and failures stay exact.
 */
static __always_inline bool budget_timing(void)
{
	return cfg_stat && cfg_budget;
}

/* Lean timing: the doctor's stat mode with sleep tracking and a known tick. */
static __always_inline bool lean_timing(void)
{
	return cfg_stat && cfg_sample && cfg_stacks && cfg_tick_ns && !cfg_budget;
}

static __always_inline bool syscall_wanted(__u32 nr)
{
	if (!cfg_syscalls)
		return true;
	if (nr >= MAX_SYSCALL)
		return false;
	return (sys_mask[nr / 64] >> (nr % 64)) & 1;
}

static __always_inline void load_args(struct task_state *st, struct pt_regs *regs)
{
	st->args[0] = BPF_CORE_READ(regs, di);
	st->args[1] = BPF_CORE_READ(regs, si);
	st->args[2] = BPF_CORE_READ(regs, dx);
	st->args[3] = BPF_CORE_READ(regs, r10);
	st->args[4] = BPF_CORE_READ(regs, r8);
	st->args[5] = BPF_CORE_READ(regs, r9);
}

/* Copies the arguments the user asked to see as strings or addresses. */
static __always_inline __u32 capture_args(struct sys_rec *r, char *data, struct task_state *st, long ret)
{
	__u32 nr = st->nr;
	__u32 off = 0;

	if (nr >= MAX_SYSCALL)
		return 0;
	/* After a successful execve the old memory is gone; the exec record names the file. */
	if (ret == 0 && (nr == cfg_nr_execve || nr == cfg_nr_execveat))
		return 0;

#pragma unroll
	for (int i = 0; i < DATA_SLOTS; i++) {
		__u8 kind = cap_rules[nr].kind[i];
		__u32 arg = cap_rules[nr].arg[i];
		__u32 lenarg = cap_rules[nr].lenarg[i];
		long n = 0;

		r->dlen[i] = 0;
		if (!kind || arg >= 6 || lenarg >= 6)
			continue;
		const void *ptr = (const void *)st->args[arg];
		if (!ptr)
			continue;
		if (off > DATA_SLOT)
			off = DATA_SLOT;
		char *dst = data + off;

		if (kind == CAP_PATH) {
			n = bpf_probe_read_user_str(dst, DATA_SLOT, ptr);
			if (n > 0) {
				n--; /* drop the NUL */
				if (n == DATA_SLOT - 1)
					r->dtrunc |= 1 << i;
			}
		} else {
			__u32 len;
			if (kind == CAP_SOCKADDR) {
				len = st->args[lenarg];
			} else {
				if (ret < 0)
					continue;
				if (bpf_probe_read_user(&len, sizeof(len), (void *)st->args[lenarg]))
					continue;
			}
			if (len == 0)
				continue;
			if (len > 128)
				len = 128;
			/* keep clang from reusing the unclamped register */
			asm volatile("" : "+r"(len));
			len &= 0xff;
			n = bpf_probe_read_user(dst, len, ptr) ? 0 : len;
		}
		if (n < 0 || (n == 0 && kind != CAP_PATH))
			continue;
		r->dset |= 1 << i;
		r->dlen[i] = n;
		r->darg[i] = arg;
		off += n;
	}
	return off;
}

static __always_inline void fill_sys(struct sys_rec *r, struct task_state *st, long ret, __u64 now)
{
	r->latency = now - st->ts;
	r->ret = ret;
	r->nr = st->nr;
#pragma unroll
	for (int i = 0; i < 6; i++)
		r->args[i] = st->args[i];
	/*
	 * The doctor fits latency against the process's mappings; counting the
	 * mmap calls it sees would miss the ones it did not sample. Only calls
	 * that cross over pay for the read, and only in lean mode.
	 */
	r->maps = 0;
	if (lean_timing()) {
		struct task_struct *t = bpf_get_current_task_btf();
		if (t->mm)
			r->maps = t->mm->map_count;
	}
}

static __always_inline bool has_captures(__u32 nr)
{
	return nr < MAX_SYSCALL && cap_rules[nr].kind[0];
}

static __always_inline void stage_flush(struct stage *sg)
{
	__u32 len = sg->len;
	if (len == 0 || len > STAGE_BYTES)
		return;
	void *rb = cpu_ring();
	if (!rb || bpf_ringbuf_output(rb, sg->buf, len, wake_flags(rb)))
		count_drops(len / sizeof(struct sys_rec)); /* events, not batches */
	sg->len = 0;
}

static int stage_timer(void *map, __u32 *key, struct stage *sg)
{
	if (__sync_val_compare_and_swap(&sg->busy, 0, 1) != 0) {
		/* a producer holds it; try again shortly */
		bpf_timer_start(&sg->timer, STAGE_NS / 4, 0);
		return 0;
	}
	stage_flush(sg);
	sg->armed = 0;
	__sync_lock_test_and_set(&sg->busy, 0); /* release, as a full barrier */
	return 0;
}

/* Stages a syscall record; false when the caller must emit it directly. */
static __always_inline bool stage_syscall(struct task_state *st, long ret, __u64 now, __u8 flags)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct stage *sg = bpf_map_lookup_elem(&stages, &cpu);
	if (!sg)
		return false;
	if (__sync_val_compare_and_swap(&sg->busy, 0, 1) != 0)
		return false;
	if (!sg->inited) {
		bpf_timer_init(&sg->timer, &stages, CLOCK_MONOTONIC);
		bpf_timer_set_callback(&sg->timer, stage_timer);
		sg->inited = 1;
	}
	__u32 off = sg->len;
	if (off > STAGE_BYTES - sizeof(struct sys_rec)) {
		stage_flush(sg);
		off = 0;
	}
	struct sys_rec *r = (void *)(sg->buf + off);
	fill_hdr_st(&r->h, st, K_SYSCALL, sizeof(*r), st->ts);
	r->h.flags = flags;
	fill_sys(r, st, ret, now);
	r->dlen[0] = 0;
	r->dlen[1] = 0;
	r->dtrunc = 0;
	r->dset = 0;
	sg->len = off + sizeof(*r);
	if (!sg->armed) {
		sg->armed = 1;
		bpf_timer_start(&sg->timer, STAGE_NS, BPF_F_TIMER_CPU_PIN);
	}
	__sync_lock_test_and_set(&sg->busy, 0); /* release, as a full barrier */
	return true;
}

/* Emits the syscall held in st. task is NULL when it is the current task. */
static __always_inline void emit_syscall(struct task_state *st, long ret, __u64 now, __u8 flags,
					 struct task_struct *task)
{
	bool plain = !has_captures(st->nr) || (flags & F_UNFINISHED) || task;
	if (plain && !task && stage_syscall(st, ret, now, flags))
		return;

	void *rb = cpu_ring();
	if (!rb) {
		count_drop();
		return;
	}

	if (plain) {
		struct sys_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
		if (!r) {
			count_drop();
			return;
		}
		if (task)
			fill_hdr_task(&r->h, task, K_SYSCALL, sizeof(*r), st->ts);
		else
			fill_hdr(&r->h, K_SYSCALL, sizeof(*r), st->ts);
		r->h.flags = flags;
		fill_sys(r, st, ret, now);
		if (task)
			r->maps = 0; /* fill_sys read the current task's, not this one's */
		r->dlen[0] = 0;
		r->dlen[1] = 0;
		r->dtrunc = 0;
		r->dset = 0;
		bpf_ringbuf_submit(r, wake_flags(rb));
		return;
	}

	__u32 zero = 0;
	struct sys_big *b = bpf_map_lookup_elem(&scratch, &zero);
	if (!b)
		return;
	b->r.dtrunc = 0;
	b->r.dset = 0;
	__u32 n = capture_args(&b->r, b->data, st, ret);
	__u32 size = sizeof(b->r) + n;
	if (size > sizeof(*b))
		size = sizeof(*b);
	fill_hdr(&b->r.h, K_SYSCALL, size, st->ts);
	b->r.h.flags = flags;
	fill_sys(&b->r, st, ret, now);
	if (bpf_ringbuf_output(rb, b, size, wake_flags(rb)))
		count_drop();
}

/* Emits a slow syscall with the places it slept. */
static __always_inline void emit_slow(struct task_state *st, long ret, __u64 now, __u8 flags)
{
	void *rb = cpu_ring();
	__u32 zero = 0;
	struct sys_slow *b = bpf_map_lookup_elem(&scratch, &zero);
	if (!rb || !b) {
		count_drop();
		return;
	}
	b->r.dtrunc = 0;
	b->r.dset = 0;
	b->r.dlen[0] = 0;
	b->r.dlen[1] = 0;
	__u32 n = 0;
	if (has_captures(st->nr))
		n = capture_args(&b->r, b->data, st, ret);
	__builtin_memcpy(&b->sl, &st->sl, sizeof(b->sl));
	__u32 size = sizeof(b->r) + sizeof(b->sl) + n;
	if (size > sizeof(*b))
		size = sizeof(*b);
	fill_hdr(&b->r.h, K_SYSCALL, size, st->ts);
	b->r.h.flags = F_SLEEPS | flags;
	fill_sys(&b->r, st, ret, now);
	if (bpf_ringbuf_output(rb, b, size, wake_flags(rb)))
		count_drop();
}

/* Budgeted timing: whether the clock times this call, and what it stands for. */
static __always_inline void budget_entry(struct task_state *st, __u32 nr)
{
	__u64 j = bpf_jiffies64();
	st->jts = j;
	__u32 *b = &st->budget[nr & (BUDGET_SLOTS - 1)];
	__u32 tag = (__u32)j << 8, v = *b;
	if ((v & ~0xffu) != tag)
		v = tag; /* a new jiffy: a new budget */
	__u32 n = v & 0xff;
	if (n < 0xff)
		v++;
	*b = v;
	__u32 w = 1;
	if (n >= cfg_budget) {
		/* Random, not every Nth: a loop's calls alternate (a read that fills, one that finds nothing). */
		st->rng = st->rng * 6364136223846793005ULL + 1442695040888963407ULL;
		w = (st->rng >> (64 - cfg_every_shift)) == 0 ? 1u << cfg_every_shift : 0;
	}
	st->weight = w;
	if (!w) {
		st->ts = 0;
		return;
	}
	__u64 now = bpf_ktime_get_ns();
	st->prev_clk = st->last_clk;
	st->last_clk = now;
	st->ts = now;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	if (!syscall_wanted(id))
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
		if (!st)
			return 0;
	}
	if (st->held) {
		/* The interrupted call did return to user space (a handler ran, or it is being restarted). */
		st->held = 0;
		emit_syscall(st, st->held_ret, st->held_end, 0, NULL);
	}
	st->nr = id;
	/*
	 * Stat mode reads the arguments at exit, and only for the calls it
	 * emits: the registers still hold them then (signal restarts are set
	 * up after the sys_exit tracepoint).
	 */
	if (!cfg_stat) {
		st->args[0] = regs->di;
		st->args[1] = regs->si;
		st->args[2] = regs->dx;
		st->args[3] = regs->r10;
		st->args[4] = regs->r8;
		st->args[5] = regs->r9;
	}
	/* The sleep slots are reset by the first switch-out of this call (sl_owner). */
	st->active = 1;
	st->seq++;
	st->gen = attach_gen;
	if (lean_timing()) {
		/*
		 * The clock costs more than everything else here put together.
		 * Time one call in cfg_sample with it; the rest by jiffies, which
		 * sum to the right total, and by the clock from their first
		 * switch-out on if they sleep.
		 */
		st->jts = bpf_jiffies64();
		st->ts = (st->tick++ & (cfg_sample - 1)) == 0 ? bpf_ktime_get_ns() : 0;
		return 0;
	}
	if (budget_timing()) {
		budget_entry(st, id);
		if (cfg_sample && st->prev_failed && !st->ts) {
			/*
			 * The call after a failure crosses over, and its time is
			 * evidence (a retry that waits): time it, but let it
			 * weigh what the budget gave it, so the histogram stays
			 * a fair sample.
			 */
			__u64 now = bpf_ktime_get_ns();
			st->prev_clk = st->last_clk;
			st->last_clk = now;
			st->ts = now;
		}
		return 0;
	}
	st->ts = bpf_ktime_get_ns();
	return 0;
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 32768);
	__type(key, struct stat_key);
	__type(value, struct stat_val);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct errno_key);
	__type(value, __u64);
} errnos SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct pcount);
} pcounts SEC(".maps");

static __always_inline struct pcount *pcount_of(__u32 pid)
{
	struct pcount *c = bpf_map_lookup_elem(&pcounts, &pid);
	if (c)
		return c;
	struct pcount zero = {};
	bpf_map_update_elem(&pcounts, &pid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&pcounts, &pid);
}

/* Keys the stats map had no room for. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} stat_lost SEC(".maps");

/* A sample crosses over only if the thread's last one did cfg_sample_gap ago. */
static __always_inline bool sample_gap(struct task_state *st, __u64 now)
{
	if (now - st->sampled_at < cfg_sample_gap)
		return false;
	st->sampled_at = now;
	return true;
}

/*
 * True once every cfg_sample calls of the thread, at most once per
 * cfg_sample_gap: a thread in a tight loop would otherwise send the reader
 * tens of thousands of samples a second, and on a small host the reader's
 * CPU is the traced program's.
 */
static __always_inline bool sample_tick(struct task_state *st, __u64 now)
{
	return (st->tick++ & (cfg_sample - 1)) == 0 && sample_gap(st, now);
}

/* Lean timing: how long the call in flight has run, in whole jiffies. */
static __always_inline __u64 jiffy_latency(struct task_state *st)
{
	return (bpf_jiffies64() - st->jts) * cfg_tick_ns;
}

/* Lean and budgeted timing: a call in flight that the clock did not time gets an entry time from jiffies. */
static __always_inline void untimed_entry(struct task_state *st, __u64 now)
{
	if ((lean_timing() || budget_timing()) && !st->ts)
		st->ts = now - jiffy_latency(st);
}

/* Lean mode: the arguments of a call about to be emitted, from its registers. */
static __always_inline void late_args(struct task_state *st, struct pt_regs *regs, long ret)
{
	/* A successful execve or a sigreturn replaced the registers; sigreturn has no arguments. */
	if ((ret == 0 && (st->nr == cfg_nr_execve || st->nr == cfg_nr_execveat)) ||
	    st->nr == cfg_nr_rt_sigreturn) {
#pragma unroll
		for (int i = 0; i < 6; i++)
			st->args[i] = 0;
		return;
	}
	load_args(st, regs);
}

/* A new key starts from this (too large for the BPF stack). */
volatile const struct stat_val stat_zero;

static __always_inline __u32 hist_bucket(__u64 v)
{
	if (v < 8)
		return v;
	__u32 msb = 0;
	__u64 x = v;
	if (x >> 32) {
		msb += 32;
		x >>= 32;
	}
	if (x >> 16) {
		msb += 16;
		x >>= 16;
	}
	if (x >> 8) {
		msb += 8;
		x >>= 8;
	}
	if (x >> 4) {
		msb += 4;
		x >>= 4;
	}
	if (x >> 2) {
		msb += 2;
		x >>= 2;
	}
	if (x >> 1)
		msb += 1;
	__u32 idx = msb * 4 + ((v >> (msb - 2)) & 3) - 4;
	return idx < HIST_BUCKETS ? idx : HIST_BUCKETS - 1;
}

/*
 * Counts the call; returns true for the first calls of its syscall in its
 * process on this CPU (the 1st, 2nd, 4th, 8th... up to the 64th), which
 * lean mode emits besides its 1-in-cfg_sample sample, so that a syscall a
 * process makes 30 times still shows how its latency moves (a fork that
 * slows as mappings grow), at a cost bounded by log2 per process.
 */
/* What stat_account saw of a call. */
#define ACC_FIRST 1  /* one of its cell's first calls (the 1st, 2nd, 4th, ... 64th) */
#define ACC_RECORD 2 /* slower than any call of its cell before, on this CPU */

/*
 * hw is what the call weighs in the histogram (0: its latency is not
 * known well enough); tw in the total and the max (0: not at all).
 */
static __always_inline __u32 stat_account(struct task_state *st, long ret, __u64 lat, __u32 hw, __u32 tw)
{
	__u64 gen = cgroup_gen;
	if (st->cg_gen != gen) {
		st->cg = bpf_get_current_cgroup_id();
		st->tgid = bpf_get_current_pid_tgid() >> 32;
		st->cg_gen = gen;
	}
	__u32 nr = st->nr;
	struct stat_key k = {
		.cgroup = st->cg,
		.pid = st->tgid,
		.nr = nr,
	};
	struct stat_val *v = bpf_map_lookup_elem(&stats, &k);
	if (!v) {
		if (bpf_map_update_elem(&stats, &k, (void *)&stat_zero, BPF_NOEXIST) && bpf_map_lookup_elem(&stats, &k) == NULL) {
			__u32 z = 0;
			__u64 *lost = bpf_map_lookup_elem(&stat_lost, &z);
			if (lost)
				(*lost)++;
			return 0;
		}
		v = bpf_map_lookup_elem(&stats, &k);
		if (!v)
			return 0;
	}
	/* Per-CPU values: no atomics needed. */
	v->count++;
	v->total += lat * tw;
	if (cfg_stacks && st->sl_owner == st->seq)
		v->runq += st->runq;
	__u32 acc = 0;
	if (tw && lat > v->max) {
		v->max = lat;
		acc |= ACC_RECORD;
	}
	if (hw) { /* lean timing: the histogram is of the calls timed by the clock */
		v->timed++;
		__u32 b = hist_bucket(lat);
		if (b < HIST_BUCKETS)
			v->hist[b] += hw;
	}
	if (ret < 0 && ret >= -4095) {
		v->errors++;
		struct errno_key ek = {.pid = k.pid, .nr = nr, .err = -ret};
		__u64 *n = bpf_map_lookup_elem(&errnos, &ek);
		if (n) {
			(*n)++;
		} else {
			__u64 one = 1;
			bpf_map_update_elem(&errnos, &ek, &one, BPF_NOEXIST);
		}
	}
	__u64 c = v->count;
	if (c <= 64 && (c & (c - 1)) == 0)
		acc |= ACC_FIRST;
	return acc;
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
	long id = BPF_CORE_READ(regs, orig_ax);
	if (id < 0 || !syscall_wanted(id))
		return; /* a filtered-out call: its entry was skipped by us, not by seccomp */
	struct task_struct *task = bpf_get_current_task_btf();
	if (BPF_CORE_READ(task, seccomp.mode) != SECCOMP_MODE_FILTER)
		return;
	__u64 now = bpf_ktime_get_ns();
	st->nr = id;
	st->seq++; /* a call of its own: no sleeps of the last one */
	st->ts = now;
	load_args(st, regs);
	if (cfg_stat) {
		stat_account(st, ret, 0, 1, 1);
		if (!cfg_sample)
			return;
		st->prev_failed = true;
	}
	if (cfg_min_latency)
		return;
	emit_syscall(st, ret, now, F_REFUSED, NULL);
}

/* Adds an off-CPU interval to the sleep slot for its stack. */
static __always_inline void account_sleep(struct task_state *st, __u64 dur)
{
	__u32 n = st->sl.n;
	int idx = -1;

#pragma unroll
	for (int i = 0; i < MAX_SLEEPS; i++) {
		if (i < n && st->sl.s[i].kstack == st->off_kstack && st->sl.s[i].preempted == st->off_preempted) {
			idx = i;
			break;
		}
	}
	if (idx < 0) {
		if (n < MAX_SLEEPS) {
			idx = n;
			st->sl.n = n + 1;
		} else {
			/* Full: the shortest place gives way to a longer one. */
			int min = 0;
#pragma unroll
			for (int i = 1; i < MAX_SLEEPS; i++)
				if (st->sl.s[i].dur < st->sl.s[min].dur)
					min = i;
			if (dur <= st->sl.s[min].dur)
				return;
			idx = min;
		}
		idx &= MAX_SLEEPS - 1;
		struct sleep *sp = &st->sl.s[idx];
		sp->dur = 0;
		sp->count = 0;
		sp->kstack = st->off_kstack;
		sp->preempted = st->off_preempted;
		sp->waker_pid = 0;
		sp->waker_tid = 0;
		sp->waker_kstack = -1;
		sp->waker_comm[0] = 0;
	}
	idx &= MAX_SLEEPS - 1;
	struct sleep *sp = &st->sl.s[idx];
	sp->dur += dur;
	sp->count++;
	if (st->have_waker) {
		sp->waker_pid = st->waker_pid;
		sp->waker_tid = st->waker_tid;
		sp->waker_kstack = st->waker_kstack;
		__builtin_memcpy(sp->waker_comm, st->waker_comm, TASK_COMM_LEN);
	}
}

/* Out of line: sys_exit needs it only for a switch-in that was not seen. */
static __noinline void account_missed(struct task_state *st, __u64 dur)
{
	account_sleep(st, dur);
}

/*
 * Budgeted timing: the call's latency and its weight in the histogram. A
 * short call weighs what budget_entry gave it; a call that crossed a tick
 * and may have taken LONG_NS counts as itself, timed or not: untimed, its
 * latency is bounded by the thread's last clock read, which in a thread busy
 * enough to be sampled is a few calls back. The test for "long" reads the
 * same things for timed and untimed calls, so none is counted both in person
 * and through a sample. A short untimed call's latency is unknown: 0, and
 * weight 0. *now is the clock if it was read, else 0.
 */
static __always_inline __u64 budget_latency(struct task_state *st, __u64 *now, __u32 *w)
{
	__u64 d = bpf_jiffies64() - st->jts;
	*now = 0;
	*w = 0;
	if (!st->ts && !d)
		return 0;
	__u64 t = bpf_ktime_get_ns();
	__u64 bound = t - (st->ts ? st->prev_clk : st->last_clk);
	/* It began in jiffy jts: a stale last read cannot make it longer. */
	if (cfg_tick_ns && bound > (d + 1) * cfg_tick_ns)
		bound = (d + 1) * cfg_tick_ns;
	st->last_clk = t;
	*now = t;
	*w = d && bound >= LONG_NS ? 1 : st->weight;
	return st->ts ? t - st->ts : bound;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	struct task_state *st = bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0, 0);
	if (!st)
		return 0;
	if (st->gen != attach_gen) {
		/* Entered before this attach (or never since the probe loaded). */
		st->active = 0;
		return 0;
	}
	if (!st->active) {
		/* gen: the thread has entered a call since we attached, so it was not inside one then. */
		if (ret < 0 && ret >= -4095)
			refused(st, regs, ret);
		return 0;
	}
	st->active = 0;
	if (st->sl_owner == st->seq && st->off_ts) {
		/*
		 * Running, yet the switch back in was not seen: now and then the
		 * kernel does not run sched_switch's program for a switch (under
		 * load, about one in 5,000 here). The sleep ended by now at the
		 * latest; without this the call would look as if it ran on the CPU.
		 * (off_ts is set only with sl_owner: a call that never switched
		 * out has none to clear.)
		 */
		account_missed(st, bpf_ktime_get_ns() - st->off_ts);
		st->off_ts = 0;
	}
	__u64 now = 0;
	__u8 flags = 0;
	if (cfg_stat) {
		__u64 lat;
		bool timed = true;
		__u32 hw = 1;
		if (budget_timing()) {
			lat = budget_latency(st, &now, &hw);
			timed = st->ts != 0;
		} else if (!lean_timing() || st->ts) {
			now = bpf_ktime_get_ns();
			lat = now - st->ts;
		} else if (st->sl_owner == st->seq) {
			/* It slept: the clock from its first switch-out, jiffies before. */
			now = bpf_ktime_get_ns();
			__u64 before = (st->j1 - st->jts) * cfg_tick_ns;
			lat = now - st->p1 + before;
			timed = before == 0;
		} else {
			lat = jiffy_latency(st);
			timed = false;
		}
		if (!timed)
			flags = F_APPROX;
		__u32 acc = budget_timing() ? stat_account(st, ret, lat, hw, hw) : stat_account(st, ret, lat, timed, 1);
		if (!cfg_sample)
			return 0;
		struct recent_call *rc = &st->recent[st->nrecent++ & (RECENT - 1)];
		rc->ts = st->ts;
		rc->latency = lat;
		rc->ret = ret;
		rc->nr = st->nr;
		/* Everything is counted; only what explains something crosses over. */
		bool failed = ret < 0 && ret >= -4095;
		bool after_failure = st->prev_failed;
		st->prev_failed = failed;
		bool sampled;
		if (lean_timing()) {
			sampled = (st->ts && sample_gap(st, now)) || (acc & ACC_FIRST);
		} else {
			/*
			 * Exact timing samples one call in cfg_sample, far apart;
			 * a call slower than any of its process's before crosses
			 * too (at most one a millisecond per thread): for a
			 * latency that grows with the process every call is one,
			 * for a steady one a few dozen in a run.
			 */
			sampled = timed && sample_tick(st, now);
			if (!sampled && (acc & ACC_RECORD) && now - st->record_at >= 1000000) {
				st->record_at = now;
				sampled = true;
			}
		}
		if (!failed && !after_failure && lat < cfg_slow && !sampled)
			return 0;
		late_args(st, regs, ret);
		if (!now)
			now = bpf_ktime_get_ns();
		st->ts = now - lat; /* the entry, as near as it is known */
		rc->ts = st->ts;    /* names the event this call becomes */
	} else {
		now = bpf_ktime_get_ns();
	}
	if (now - st->ts < cfg_min_latency)
		return 0;
	if (ret <= -ERESTARTSYS && ret >= -ERESTART_RESTARTBLOCK) {
		/*
		 * A signal interrupted the call. If the signal kills the thread the
		 * call never returned (strace shows it unfinished); otherwise the
		 * thread's next syscall entry emits it. Hold it until then.
		 */
		st->held = 1;
		st->held_ret = ret;
		st->held_end = now;
		return 0;
	}
	if (cfg_stacks && st->sl_owner == st->seq && st->sl.n && now - st->ts >= cfg_slow) {
		emit_slow(st, ret, now, flags);
		return 0;
	}
	emit_syscall(st, ret, now, flags, NULL);
	return 0;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(page_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	if (!selected())
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 ip = regs->ip;
	bool vsys = (address & ~0xfffUL) == VSYSCALL_ADDR;

	if (cfg_stat) {
		struct pcount *c = pcount_of(bpf_get_current_pid_tgid() >> 32);
		if (c)
			c->faults++;
		if (!cfg_sample)
			return 0;
	}

	if (!cfg_all_faults && !vsys) {
		/* Keep it; a fault signal will tell whether it mattered. */
		struct task_state *st = bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0,
							     BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (st) {
			st->fault_ts = now;
			st->fault_addr = address;
			st->fault_ip = ip;
			st->fault_err = error_code;
			st->fault_sp = regs->sp;
		}
		return 0;
	}

	void *rb = cpu_ring();
	if (!rb)
		return 0;
	struct fault_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count_drop();
		return 0;
	}
	fill_hdr(&r->h, K_FAULT, sizeof(*r), now);
	r->addr = address;
	r->ip = ip;
	r->error = error_code;
	r->sp = regs->sp;
	bpf_ringbuf_submit(r, wake_flags(rb));
	return 0;
}

SEC("tp_btf/emulate_vsyscall")
int BPF_PROG(emulate_vsyscall, int nr)
{
	if (!selected())
		return 0;
	if (cfg_stat) {
		struct pcount *c = pcount_of(bpf_get_current_pid_tgid() >> 32);
		if (c)
			c->vsyscalls++;
		if (!cfg_sample)
			return 0;
	}
	void *rb = cpu_ring();
	if (!rb)
		return 0;
	struct vsys_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count_drop();
		return 0;
	}
	fill_hdr(&r->h, K_VSYSCALL, sizeof(*r), bpf_ktime_get_ns());
	r->nr = nr;
	r->pad = 0;
	/* The call instruction left the caller's return address on top of the user stack. */
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	__u64 sp = BPF_CORE_READ(regs, sp);
	if (bpf_probe_read_user(&r->caller, sizeof(r->caller), (void *)sp))
		r->caller = 0;
	bpf_ringbuf_submit(r, wake_flags(rb));
	return 0;
}

static __always_inline bool fault_signal(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP;
}

static __always_inline void emit_kept_fault(struct task_state *st)
{
	void *rb = cpu_ring();
	if (!rb)
		return;
	struct fault_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count_drop();
		return;
	}
	fill_hdr(&r->h, K_FAULT, sizeof(*r), st->fault_ts);
	r->addr = st->fault_addr;
	r->ip = st->fault_ip;
	r->error = st->fault_err;
	r->sp = st->fault_sp;
	bpf_ringbuf_submit(r, wake_flags(rb));
}

static __always_inline void sig_fields(struct sig_rec *r, int sig, struct kernel_siginfo *info)
{
	r->sig = sig;
	r->code = 0;
	r->addr = 0;
	r->syscall = -1;
	r->arch = 0;
	/* SEND_SIG_NOINFO (0) and SEND_SIG_PRIV (1) are not pointers. */
	if ((unsigned long)info > 1) {
		r->code = BPF_CORE_READ(info, si_code);
		if (fault_signal(sig))
			r->addr = (__u64)BPF_CORE_READ(info, _sifields._sigfault._addr);
		if (sig == SIGSYS) { /* seccomp's RET_KILL or RET_TRAP: which call, from where */
			r->addr = (__u64)BPF_CORE_READ(info, _sifields._sigsys._call_addr);
			r->syscall = BPF_CORE_READ(info, _sifields._sigsys._syscall);
			r->arch = BPF_CORE_READ(info, _sifields._sigsys._arch);
		}
	} else if ((unsigned long)info == 1) {
		r->code = 0x80; /* SI_KERNEL */
	}
}

SEC("tp_btf/signal_generate")
int BPF_PROG(signal_generate, int sig, struct kernel_siginfo *info, struct task_struct *task, int group,
	     int result)
{
	if (!selected() && !task_selected(task))
		return 0;
	__u32 target_pid = BPF_CORE_READ(task, tgid);
	__u32 target_tid = BPF_CORE_READ(task, pid);
	__u64 now = bpf_ktime_get_ns();

	/* A fault signal the thread raised itself: emit the fault that caused it first. */
	if (!cfg_all_faults && fault_signal(sig) && target_tid == (__u32)bpf_get_current_pid_tgid()) {
		struct task_state *st = bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0, 0);
		if (st && st->fault_ts && now - st->fault_ts < 1000000000ULL) {
			emit_kept_fault(st);
			st->fault_ts = 0;
		}
	}

	void *rb = cpu_ring();
	if (!rb)
		return 0;
	struct sig_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count_drop();
		return 0;
	}
	fill_hdr(&r->h, K_SIG_GEN, sizeof(*r), now);
	if (group)
		r->h.flags |= F_GROUP;
	sig_fields(r, sig, info);
	r->sender = bpf_get_current_pid_tgid() >> 32;
	r->target_pid = target_pid;
	r->target_tid = target_tid;
	r->result = result;
	r->handler = 0;
	bpf_ringbuf_submit(r, wake_flags(rb));
	return 0;
}

SEC("tp_btf/signal_deliver")
int BPF_PROG(signal_deliver, int sig, struct kernel_siginfo *info, struct k_sigaction *ka)
{
	if (!selected())
		return 0;
	void *rb = cpu_ring();
	if (!rb)
		return 0;
	struct sig_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count_drop();
		return 0;
	}
	__u64 id = bpf_get_current_pid_tgid();
	fill_hdr(&r->h, K_SIG_DELIVER, sizeof(*r), bpf_ktime_get_ns());
	sig_fields(r, sig, info);
	r->sender = 0;
	if ((unsigned long)info > 1)
		r->sender = BPF_CORE_READ(info, _sifields._kill._pid);
	r->target_pid = id >> 32;
	r->target_tid = (__u32)id;
	r->result = 0;
	r->handler = (__u64)BPF_CORE_READ(ka, sa.sa_handler);
	bpf_ringbuf_submit(r, wake_flags(rb));
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = bpf_get_current_pid_tgid() >> 32;
	__u32 ctgid = child->tgid;

	if (cfg_pids && ctgid != ptgid) {
		__u8 *v = bpf_map_lookup_elem(&pids, &ptgid);
		if (v && (*v & SEL_FOLLOW) && (*v & SEL_ACTIVE)) {
			__u8 nv = SEL_ACTIVE | SEL_FOLLOW;
			bpf_map_update_elem(&pids, &ctgid, &nv, BPF_ANY);
		} else if (v && (*v & SEL_LAUNCH)) {
			/*
			 * sysray forks the command it runs: trace the child from its
			 * execve on. No helper process has to wait for sysray to
			 * select it, so the command starts at once.
			 */
			__u8 nv = SEL_PENDING | SEL_FOLLOW;
			bpf_map_update_elem(&pids, &ctgid, &nv, BPF_ANY);
		}
	}
	if (!selected())
		return 0;
	void *rb = cpu_ring();
	if (!rb)
		return 0;
	struct fork_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count_drop();
		return 0;
	}
	fill_hdr(&r->h, K_FORK, sizeof(*r), bpf_ktime_get_ns());
	if (ctgid == ptgid)
		r->h.flags |= F_THREAD;
	r->child_pid = ctgid;
	r->child_tid = child->pid;
	bpf_probe_read_kernel_str(r->child_comm, sizeof(r->child_comm), child->comm);
	bpf_ringbuf_submit(r, wake_flags(rb));
	return 0;
}

/* kernfs_node.parent became __parent in 6.15. */
struct kernfs_node___old {
	struct kernfs_node *parent;
};

static __always_inline struct kernfs_node *kn_parent(struct kernfs_node *kn)
{
	if (bpf_core_field_exists(kn->__parent))
		return BPF_CORE_READ(kn, __parent);
	return BPF_CORE_READ((struct kernfs_node___old *)kn, parent);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 now = bpf_ktime_get_ns();

	if (cfg_pids) {
		__u8 *v = bpf_map_lookup_elem(&pids, &tgid);
		if (v && (*v & SEL_PENDING)) {
			/*
			 * sysray's child was waiting for this execve: trace from here
			 * and count the execve itself, whose entry we could not see.
			 */
			*v = SEL_ACTIVE | SEL_FOLLOW;
			struct task_state *st = bpf_task_storage_get(&tstate, p, 0,
								     BPF_LOCAL_STORAGE_GET_F_CREATE);
			if (st) {
				struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(p);
				st->nr = BPF_CORE_READ(regs, orig_ax);
				load_args(st, regs);
				st->ts = now;
				st->seq++;
				st->gen = attach_gen;
				st->active = syscall_wanted(st->nr);
			}
		}
	}
	if (!selected())
		return 0;
	void *rb = cpu_ring();
	if (!rb)
		return 0;
	struct exec_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count_drop();
		return 0;
	}
	fill_hdr(&r->h, K_EXEC, sizeof(*r), now);
	r->old_tid = old_pid;
	long n = bpf_probe_read_kernel_str(r->filename, sizeof(r->filename), BPF_CORE_READ(bprm, filename));
	r->flen = n > 0 ? n - 1 : 0;
	struct mm_struct *mm = p->mm;
	unsigned long start = BPF_CORE_READ(mm, arg_start);
	unsigned long end = BPF_CORE_READ(mm, arg_end);
	__u32 alen = end - start;
	if (alen > ARGV_LEN)
		alen = ARGV_LEN;
	r->alen = 0;
	if (alen && !bpf_probe_read_user(r->argv, alen, (void *)start))
		r->alen = alen;
	struct kernfs_node *kn = BPF_CORE_READ(p, cgroups, dfl_cgrp, kn);
#pragma unroll
	for (int i = 0; i < CG_LEVELS; i++) {
		r->cgroup[i][0] = 0;
		if (!kn)
			continue;
		bpf_probe_read_kernel_str(r->cgroup[i], CG_NAME, BPF_CORE_READ(kn, name));
		kn = kn_parent(kn);
	}
	bpf_ringbuf_submit(r, wake_flags(rb));
	return 0;
}

static __always_inline void emit_recent(void *rb, struct task_state *st, __u64 now)
{
	struct recent_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count_drop();
		return;
	}
	fill_hdr(&r->h, K_RECENT, sizeof(*r), now);
	__u32 total = st->nrecent;
	__u32 n = total < RECENT ? total : RECENT;
	r->n = n;
	r->pad = 0;
#pragma unroll
	for (int i = 0; i < RECENT; i++) {
		__u32 idx = (total - n + i) & (RECENT - 1);
		if (i < n)
			r->c[i] = st->recent[idx];
		else
			__builtin_memset(&r->c[i], 0, sizeof(r->c[i]));
	}
	bpf_ringbuf_submit(r, wake_flags(rb));
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *task, bool group_dead)
{
	if (!selected())
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct task_state *st = bpf_task_storage_get(&tstate, task, 0, 0);
	/* exit and exit_group never return; neither does a syscall cut off by a fatal signal. */
	if (st && (st->active || st->held)) {
		if (cfg_stat && st->active) {
			late_args(st, (struct pt_regs *)bpf_task_pt_regs(task), 0);
			untimed_entry(st, now);
		}
		st->active = 0;
		st->held = 0;
		emit_syscall(st, 0, now, F_UNFINISHED, NULL);
	}

	void *rb = cpu_ring();
	/* Killed by a signal in lean mode: what it last did, since few calls were emitted. */
	if (rb && cfg_sample && st && st->nrecent && (BPF_CORE_READ(task, exit_code) & 0x7f))
		emit_recent(rb, st, now);
	if (rb) {
		struct exit_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
		if (r) {
			fill_hdr(&r->h, K_EXIT, sizeof(*r), now);
			if (group_dead)
				r->h.flags |= F_GROUP_DEAD;
			/* exit_code is the whole process's status once the group is dying */
			r->code = BPF_CORE_READ(task, exit_code);
			if (group_dead) {
				int gcode = BPF_CORE_READ(task, signal, group_exit_code);
				unsigned int sflags = BPF_CORE_READ(task, signal, flags);
				if (sflags & 0x4 /* SIGNAL_GROUP_EXIT */)
					r->code = gcode;
			}
			r->pad = 0;
			bpf_ringbuf_submit(r, wake_flags(rb));
		} else {
			count_drop();
		}
	}
	if (group_dead && cfg_pids) {
		__u32 tgid = bpf_get_current_pid_tgid() >> 32;
		bpf_map_delete_elem(&pids, &tgid);
	}
	return 0;
}

/* Run once at stop: syscalls still in flight are emitted as unfinished. */
SEC("iter/task")
int inflight(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	if (!task)
		return 0;
	struct task_state *st = bpf_task_storage_get(&tstate, task, 0, 0);
	if (!st || !(st->active || st->held))
		return 0;
	if (!st->held && st->gen != attach_gen)
		return 0; /* a call entered under an earlier attach: its state is stale */
	if (!task_selected(task))
		return 0;
	if (st->held) {
		st->held = 0;
		emit_syscall(st, st->held_ret, st->held_end, 0, task);
	} else {
		__u64 now = bpf_ktime_get_ns();
		if (cfg_stat) {
			late_args(st, (struct pt_regs *)bpf_task_pt_regs(task), 0);
			untimed_entry(st, now);
		}
		st->active = 0;
		emit_syscall(st, 0, now, F_UNFINISHED, task);
	}
	return 0;
}

/* task_struct.state became __state in 5.14. */
struct task_struct___old {
	long state;
};

static __always_inline unsigned int task_state_of(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___old *)t, state);
}

#define TASK_UNINTERRUPTIBLE 2

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct blocked_rec);
} blocked_scratch SEC(".maps");

/*
 * Run on demand (the doctor, a few times a second while audit is on): every
 * task in uninterruptible sleep, with its kernel stack and the syscall it is
 * in. The doctor looks there for audit_log_start: the tasks waiting for room
 * in a full audit backlog, traced or not, found without a file per task.
 */
SEC("iter/task")
int blocked(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	if (!task || task_state_of(task) != TASK_UNINTERRUPTIBLE)
		return 0;
	__u32 zero = 0;
	struct blocked_rec *r = bpf_map_lookup_elem(&blocked_scratch, &zero);
	if (!r)
		return 0;
	long n = bpf_get_task_stack(task, r->ips, sizeof(r->ips), 0);
	if (n <= 0)
		return 0;
	r->nframes = n / sizeof(r->ips[0]);
	r->pid = BPF_CORE_READ(task, tgid);
	r->tid = BPF_CORE_READ(task, pid);
	r->nr = -1;
	if (BPF_CORE_READ(task, mm)) {
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
		r->nr = BPF_CORE_READ(regs, orig_ax);
	}
	BPF_CORE_READ_STR_INTO(&r->comm, task, comm);
	bpf_seq_write(ctx->meta->seq, r, sizeof(*r));
	return 0;
}

SEC("tp_btf/cgroup_attach_task")
int BPF_PROG(cgroup_attach_task, struct cgroup *dst, const char *path, struct task_struct *task, bool threadgroup)
{
	__sync_fetch_and_add(&cgroup_gen, 1);
	return 0;
}

SEC("tp_btf/cgroup_transfer_tasks")
int BPF_PROG(cgroup_transfer_tasks, struct cgroup *dst, const char *path, struct task_struct *task, bool threadgroup)
{
	__sync_fetch_and_add(&cgroup_gen, 1);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = 0;
	struct task_state *st = bpf_task_storage_get(&tstate, prev, 0, 0);
	if (st && st->active) {
		now = bpf_ktime_get_ns();
		if (st->sl_owner != st->seq) {
			/* first switch-out of this syscall: the slots held an earlier one's */
			st->sl_owner = st->seq;
			st->sl.n = 0;
			st->sl.ustack = -2; /* not taken yet */
			st->runq = 0;
			st->p1 = now; /* lean timing: the clock from here on */
			st->j1 = bpf_jiffies64();
		}
		/*
		 * The waker of this sleep is recorded from here on, by
		 * sched_waking on another CPU as soon as it sees off_ts: clear
		 * the last one's first, or a quick wakeup is overwritten.
		 */
		st->have_waker = 0;
		asm volatile("" ::: "memory");
		st->off_ts = now;
		/* prev is current here: its stacks show the way into schedule(). */
		st->off_kstack = stack_id(ctx, STK_SWITCH, 0);
		st->off_preempted = preempt || prev_state == 0;
		if (st->sl.ustack == -2)
			st->sl.ustack = stack_id(ctx, STK_SWITCH, BPF_F_USER_STACK);
	}
	st = bpf_task_storage_get(&tstate, next, 0, 0);
	if (st && st->active && st->off_ts) {
		if (!now)
			now = bpf_ktime_get_ns();
		account_sleep(st, now - st->off_ts);
		if (st->off_preempted)
			st->runq += now - st->off_ts;
		st->off_ts = 0;
	}
	return 0;
}

/* The waker is current here (sched_wakeup may run on the sleeper's CPU instead). */
SEC("tp_btf/sched_waking")
int BPF_PROG(sched_waking, struct task_struct *p)
{
	struct task_state *st = bpf_task_storage_get(&tstate, p, 0, 0);
	if (!st || !st->active || !st->off_ts)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	st->have_waker = 1;
	st->waker_pid = id >> 32;
	st->waker_tid = (__u32)id;
	bpf_get_current_comm(st->waker_comm, sizeof(st->waker_comm));
	st->waker_kstack = stack_id(ctx, STK_WAKING, 0);
	return 0;
}

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
	r->nr = st->active ? (__s32)st->nr : -1;
	/* Says what asked for it: a charge at the limit, or a write to memory.reclaim or memory.high. */
	r->kstack = cfg_stacks ? stack_id(ctx, STK_RECLAIM, 0) : -1;
	bpf_ringbuf_submit(r, wake_flags(rb));
	return 0;
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct prof_key);
	__type(value, __u64);
} profile SEC(".maps");

/* Counts samples that overflow the profile map, so a report can say so. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} prof_lost SEC(".maps");

/* CPU-clock (or cycles) sampling: counted per stack in the kernel, read once at the end. */
SEC("perf_event")
int on_cpu(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	if (id >> 32 == 0 || !selected()) /* idle */
		return 0;
	struct prof_key k = {};
	k.pid = id >> 32;
	k.kstack = stack_id(ctx, STK_PROFILE, 0);
	k.ustack = stack_id(ctx, STK_PROFILE, BPF_F_USER_STACK);
	struct task_state *st = bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0, 0);
	if (st && st->active)
		k.syscall = st->nr + 1;
	bpf_get_current_comm(k.comm, sizeof(k.comm));
	__u64 *n = bpf_map_lookup_elem(&profile, &k);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return 0;
	}
	__u64 one = 1;
	if (bpf_map_update_elem(&profile, &k, &one, BPF_NOEXIST)) {
		n = bpf_map_lookup_elem(&profile, &k);
		if (n)
			__sync_fetch_and_add(n, 1);
		else {
			__u32 zero = 0;
			__u64 *lost = bpf_map_lookup_elem(&prof_lost, &zero);
			if (lost)
				(*lost)++;
		}
	}
	return 0;
}
