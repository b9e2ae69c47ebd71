/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Time asleep outside syscalls: nearly always inside a page fault (a file
 * page read from disk, a folio locked under I/O, the mmap lock), which the
 * syscall-boundary view cannot see. Each thread's sleeps add up in its own
 * task storage, by kernel stack, and cross over as one record per window
 * (FW_WINDOW_NS), at the thread's exit and when tracing stops (fw_flush).
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * emit.h and fast.h, whose definitions it uses (sleep.h calls it).
 */
#ifndef SYSRAY_FAULTWAIT_H
#define SYSRAY_FAULTWAIT_H

/* Set by the loader: follow fault sleeps (probe.Config.FaultWait). */
volatile const __u8 cfg_faultwait;

#define FW_SLOTS 4 /* distinct kernel stacks kept per window: a thrashing reader has one or two */
/*
 * A window short enough that tracing stopped mid-run loses little (the
 * last one is flushed, but one ending after the cut is dropped with the
 * events after it), long enough that a thread faulting all the time sends
 * four records a second.
 */
#define FW_WINDOW_NS 250000000ULL

/* task->flags: kernel threads take no user faults (include/linux/sched.h). */
#define FW_PF_KTHREAD 0x00200000
/* __TASK_STOPPED, __TASK_TRACED: a signal or ptrace stop, not a fault. */
#define FW_STOPPED 0x000c

/* One kernel stack the thread slept at outside syscalls. */
struct fw_slot {
	__u64 dur;   /* ns asleep here */
	__u32 count; /* sleeps here */
	__s32 kstack;
	__u64 addr;  /* the user fault address of the last sleep here (0: none kept) */
};

/* A window of a thread's sleeps outside syscalls. */
struct fw_rec {
	struct hdr h;  /* ts: the end of the window's last sleep */
	__u64 start;   /* the start of its first sleep */
	__u64 dur;     /* ns asleep in all */
	__u32 count;   /* sleeps */
	__u32 n;       /* slots used */
	__u64 majflt;  /* the thread's major faults over the window (task->maj_flt) */
	__u64 minflt;
	__u64 lo, hi;  /* lowest and highest fault address slept on */
	struct fw_slot s[FW_SLOTS];
};

_Static_assert(sizeof(struct fw_slot) == 24, "fw_slot");
_Static_assert(sizeof(struct fw_rec) == 200, "fw_rec");

const struct fw_rec *rec_fw __attribute__((unused));

struct fw_task {
	__u64 off_ts;   /* switched out asleep outside a syscall at; 0: not */
	__u64 off_addr;
	__s32 off_kstack;
	__u32 counting;   /* maj0 and min0 are set: from the first sleep on, each window starts where the last ended */
	__u64 maj0, min0; /* the counters when the window began */
	struct fw_rec w;  /* the window; w.start 0: none open */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct fw_task);
} fw_tasks SEC(".maps");

/* Sends the window and opens the next one. */
static __noinline void fw_send(struct task_struct *t, struct fw_task *fw)
{
	if (!t || !fw)
		return;
	if (!fw->w.start)
		return;
	__u64 maj = BPF_CORE_READ(t, maj_flt), min = BPF_CORE_READ(t, min_flt);
	fw->w.majflt = maj - fw->maj0;
	fw->w.minflt = min - fw->min0;
	fw->maj0 = maj;
	fw->min0 = min;
	void *rb = cpu_ring();
	if (rb) {
		struct fw_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
		if (r) {
			__builtin_memcpy(r, &fw->w, sizeof(*r));
			r->h.kind = K_FAULTWAIT;
			r->h.flags = 0;
			r->h.size = sizeof(*r);
			r->h.cpu = bpf_get_smp_processor_id();
			r->h.pid = BPF_CORE_READ(t, tgid);
			r->h.tid = BPF_CORE_READ(t, pid);
			r->h.cgroup = task_cgroup(t);
			BPF_CORE_READ_STR_INTO(&r->h.comm, t, comm);
			bpf_ringbuf_submit(r, wake_flags(rb));
		} else {
			count_drop();
		}
	}
	__builtin_memset(&fw->w, 0, sizeof(fw->w));
}

/*
 * The one call sched_switch makes. prev is current. A selected user thread
 * switched out asleep while in no syscall is, nearly always, in a page
 * fault (its last entry into the kernel was page_fault_user, which keeps
 * the fault in its state); otherwise in the return to user space (a
 * memory.high penalty). The kernel stack says which; user space reads it.
 */
static __always_inline void faultwait_switch(void *ctx, struct task_struct *prev, struct task_struct *next,
					     unsigned int prev_state)
{
	if (!cfg_faultwait)
		return;
	__u64 now = 0;
	if ((prev_state & 3) && !(prev_state & FW_STOPPED) && !(prev->flags & FW_PF_KTHREAD)) {
		struct task_state *st = bpf_task_storage_get(&tstate, prev, 0, 0);
		/* fault.ts: a user fault was seen, so the thread is selected and not a kernel thread. */
		if (st && !st->call.active && st->fault.ts) {
			struct fw_task *fw = bpf_task_storage_get(&fw_tasks, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
			if (fw) {
				now = bpf_ktime_get_ns();
				fw->off_ts = now;
				fw->off_addr = st->fault.addr;
				fw->off_kstack = stack_id(ctx, STK_SWITCH, 0);
			}
		}
	}
	struct fw_task *fw = bpf_task_storage_get(&fw_tasks, next, 0, 0);
	if (!fw || !fw->off_ts)
		return;
	if (!now)
		now = bpf_ktime_get_ns();
	__u64 d = now - fw->off_ts;
	if (!fw->w.start) {
		fw->w.start = fw->off_ts;
		if (!fw->counting) {
			/* The fault in progress is counted at its end, in this window. */
			fw->counting = 1;
			fw->maj0 = BPF_CORE_READ(next, maj_flt);
			fw->min0 = BPF_CORE_READ(next, min_flt);
		}
	}
	fw->w.h.ts = now;
	fw->w.dur += d;
	fw->w.count++;
	__u64 a = fw->off_addr;
	if (a) {
		if (!fw->w.lo || a < fw->w.lo)
			fw->w.lo = a;
		if (a > fw->w.hi)
			fw->w.hi = a;
	}
	__u32 n = fw->w.n;
	int idx = -1;
#pragma unroll
	for (int i = 0; i < FW_SLOTS; i++) {
		if (i < n && fw->w.s[i].kstack == fw->off_kstack) {
			idx = i;
			break;
		}
	}
	if (idx < 0) {
		if (n < FW_SLOTS) {
			idx = n;
			fw->w.n = n + 1;
		} else {
			/* Full: the shortest place gives way (its time stays in w.dur). */
			int min = 0;
#pragma unroll
			for (int i = 1; i < FW_SLOTS; i++)
				if (fw->w.s[i].dur < fw->w.s[min].dur)
					min = i;
			idx = min;
		}
		idx &= FW_SLOTS - 1;
		fw->w.s[idx].dur = 0;
		fw->w.s[idx].count = 0;
		fw->w.s[idx].kstack = fw->off_kstack;
	}
	idx &= FW_SLOTS - 1;
	fw->w.s[idx].dur += d;
	fw->w.s[idx].count++;
	if (a)
		fw->w.s[idx].addr = a;
	fw->off_ts = 0;
	if (now - fw->w.start >= FW_WINDOW_NS)
		fw_send(next, fw);
}

/*
 * Sends a thread's last window, at its exit or when tracing stops. With
 * none open, the faults since the last one still go, in a window of no
 * time: a major fault whose read completed before the fault waited for
 * the page (a fast device) never sleeps, and a thread's last faults may
 * all be such.
 */
static __always_inline void fw_last(struct task_struct *t, struct fw_task *fw)
{
	if (!fw->w.start && fw->counting &&
	    (BPF_CORE_READ(t, maj_flt) != fw->maj0 || BPF_CORE_READ(t, min_flt) != fw->min0)) {
		__u64 now = bpf_ktime_get_ns();
		fw->w.start = now;
		fw->w.h.ts = now;
	}
	fw_send(t, fw);
}

/* Attached only with cfg_faultwait: a thread's last window goes with it. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(fw_exit, struct task_struct *p)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct fw_task *fw = bpf_task_storage_get(&fw_tasks, t, 0, 0);
	if (fw)
		fw_last(t, fw);
	return 0;
}

/* When tracing stops: every thread's open window. */
SEC("iter/task")
int fw_flush(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	if (!task)
		return 0;
	struct fw_task *fw = bpf_task_storage_get(&fw_tasks, task, 0, 0);
	if (fw)
		fw_last(task, fw);
	return 0;
}

#endif
