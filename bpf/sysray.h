/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Records shared between the BPF programs and internal/probe. Every record
 * starts with struct hdr; Go decodes them by hand (internal/probe/decode.go),
 * so any change here must be mirrored there and in the record tests.
 */
#ifndef SYSRAY_H
#define SYSRAY_H

#define TASK_COMM_LEN 16
#define MAX_SYSCALL 512
#define DATA_SLOT 256  /* bytes copied per captured argument */
#define DATA_SLOTS 2   /* captured arguments per syscall */
#define ARGV_LEN 512   /* bytes of argv copied on exec */

enum kind {
	K_SYSCALL = 1,
	K_FAULT = 2,
	K_VSYSCALL = 3,
	K_SIG_GEN = 4,
	K_SIG_DELIVER = 5,
	K_FORK = 6,
	K_EXEC = 7,
	K_EXIT = 8,
	/* 9 is a drop, made in user space */
	K_RECENT = 10, /* the doctor's mode: a thread's last syscalls, just before its exit record */
	K_RECLAIM = 11, /* a task reclaimed memory from its memory cgroup */
	K_RUNQ = 12,    /* a thread waited for a CPU: one long wait, or its totals (bpf/runq.h) */
	K_FAULTWAIT = 13, /* a window of a thread's sleeps outside syscalls (faultwait.h) */
};

/* hdr.flags */
enum hdr_flag {
	F_UNFINISHED = 1, /* syscall cut off by thread exit or capture stop */
	F_THREAD = 2,     /* fork: child is a thread */
	F_GROUP_DEAD = 4, /* exit: last thread of the process */
	F_GROUP = 8,      /* signal: sent to the thread group */
	F_SLEEPS = 16,    /* syscall: a struct sleeps block follows the record */
	F_APPROX = 32,    /* syscall: latency estimated, not timed by the clock (budgeted timing) */
	F_REFUSED = 64,   /* syscall: answered by a seccomp filter, never run (no sys_enter) */
};

struct hdr {
	__u8 kind;
	__u8 flags;
	__u16 size; /* whole record, bytes */
	__u32 cpu;
	__u32 pid;
	__u32 tid;
	__u64 ts;
	__u64 cgroup;
	char comm[TASK_COMM_LEN];
};

/* Captured-argument kinds, as in internal/event.CaptureKind. */
enum cap_kind {
	CAP_PATH = 1,
	CAP_SOCKADDR = 2,
	CAP_SOCKADDR_OUT = 3,
	CAP_DNS = 4,      /* a send buffer, only when the call goes to port 53 */
	CAP_DNS_MMSG = 5, /* sendmmsg's first message's first iovec, only for port 53 */
	CAP_DNS_IOV = 6,  /* a query writev sends over TCP after its length, only for port 53 */
	CAP_DNS_ANS = 7,  /* a read buffer, the ret bytes read, only from a resolver's socket (dnswatch.h) */
};

#define DNS_QUERY_MAX 128 /* the header and a question: a name is at most 255 bytes, but few are over 100 */

struct cap_rule {
	__u8 kind[DATA_SLOTS];
	__u8 arg[DATA_SLOTS];
	__u8 lenarg[DATA_SLOTS];
};

struct sys_rec {
	struct hdr h;
	__u64 latency;
	__s64 ret;
	__u64 args[6];
	__u32 nr;
	__u16 dlen[DATA_SLOTS]; /* bytes in each slot; 0 = not captured */
	__u8 darg[DATA_SLOTS];  /* argument index of each slot */
	__u8 dtrunc;            /* bit i: slot i was cut at DATA_SLOT */
	__u8 dset;              /* bit i: slot i holds data (an empty string has dlen 0) */
	__u32 maps;             /* the doctor's mode: the process's memory mappings at exit (mm->map_count); 0: not read */
	__u64 queued;           /* ns the call spent runnable without a CPU (preempted); known only where switches are followed (stacks), else 0 */
	/* followed by dlen[0] bytes, then dlen[1] bytes */
};

#define MAX_SLEEPS 4    /* distinct places one slow syscall slept, kept in full */
#define STACK_DEPTH 64

/* One place a syscall slept (kernel stack at switch-out) and who woke it. */
struct sleep {
	__u64 dur;        /* ns off CPU here */
	__u32 count;      /* switch-outs here */
	__s32 kstack;     /* stack map id, <0 if none */
	__u32 waker_pid;
	__u32 waker_tid;
	__s32 waker_kstack;
	__u8 preempted;   /* switched out while runnable */
	__u8 pad[3];
	char waker_comm[TASK_COMM_LEN];
};

/* Follows a sys_rec whose hdr.flags has F_SLEEPS, before any captured data. */
struct sleeps {
	__s32 ustack;     /* user stack of the call (taken at its exit); <0: none */
	__u32 n;
	struct sleep s[MAX_SLEEPS];
};

/* On-CPU sample counts, aggregated in the kernel by this key. */
struct prof_key {
	__u32 pid;
	__s32 kstack;  /* <0: the sample hit user space */
	__s32 ustack;
	__u32 syscall; /* syscall in progress + 1; 0 when none */
	char comm[TASK_COMM_LEN];
};

/*
 * Stat mode: syscalls are counted in the kernel, by cgroup, process and
 * syscall, with a log-linear latency histogram: values below 8 ns exactly,
 * then 4 buckets per power of two (a bucket is at most 25% of its lower
 * bound wide: its midpoint is within 12.5% of any value in it).
 */
#define HIST_BUCKETS 160

/* Calls that went uncounted, by why (stat_lost in maps.h). */
struct lost {
	__u64 full;  /* the stats map was full */
	__u64 nomem; /* no memory for a cell, and the spill was full too */
};

struct stat_key {
	__u64 cgroup;
	__u32 pid;
	__u32 nr;
};

struct stat_val {
	__u64 count;
	__u64 errors;
	__u64 total; /* ns */
	__u64 max;   /* ns */
	__u64 runq;  /* ns of total spent preempted, waiting for a CPU (with stacks) */
	__u64 timed; /* calls whose latency was measured (budgeted timing: the rest are counted only) */
	__u32 hist[HIST_BUCKETS]; /* budgeted timing: weighted, so the counts sum to about count */
};

/* Stat mode: per-process counts of what is not a syscall. */
struct pcount {
	__u64 faults;    /* user page faults */
	__u64 vsyscalls; /* legacy vsyscall emulations */
};

struct errno_key {
	__u32 pid;
	__u32 nr;
	__s32 err; /* positive errno */
	__u32 pad;
};

struct fault_rec {
	struct hdr h;
	__u64 addr;
	__u64 ip;
	__u64 error;
	__u64 sp; /* user stack pointer: a fault just below it is a stack overflow */
};

struct vsys_rec {
	struct hdr h;
	__u64 caller;
	__u32 nr;
	__u32 pad;
};

struct sig_rec {
	struct hdr h;
	__s32 sig;
	__s32 code;
	__u32 sender;
	__u32 target_pid;
	__u32 target_tid;
	__s32 result;
	__u64 addr;
	__u64 handler;
	__s32 syscall; /* SIGSYS from seccomp: the refused call, and its audit arch */
	__u32 arch;
};

struct fork_rec {
	struct hdr h;
	__u32 child_pid;
	__u32 child_tid;
	char child_comm[TASK_COMM_LEN];
};

#define CG_LEVELS 4 /* cgroup path components kept, leaf first */
#define CG_NAME 80   /* "docker-<64 hex>.scope" fits */

struct exec_rec {
	struct hdr h;
	__u32 old_tid;
	__u16 flen;
	__u16 alen;
	char filename[DATA_SLOT];
	char argv[ARGV_LEN];
	/* The cgroup's last components, leaf first: a container that dies
	 * young has no cgroup left to look up by the time anyone asks. */
	char cgroup[CG_LEVELS][CG_NAME];
};

struct exit_rec {
	struct hdr h;
	__s32 code;
	__u32 pad;
};

/* What a reclaim_rec timed. */
enum reclaim_what {
	RECLAIM_MEMCG = 0,   /* memory-cgroup reclaim (try_to_free_mem_cgroup_pages) */
	RECLAIM_DIRECT = 1,  /* global direct reclaim in the page allocator (try_to_free_pages) */
	RECLAIM_COMPACT = 2, /* direct compaction of one zone in the page allocator (compact_zone) */
};

/*
 * One pass of memory-cgroup reclaim (try_to_free_mem_cgroup_pages) a task
 * made to charge memory, or of global direct reclaim or direct compaction
 * the page allocator made it do: its whole time, on and off the CPU, which
 * sleep stacks alone cannot show (all three mostly run on the CPU).
 */
struct reclaim_rec {
	struct hdr h;   /* ts: when the reclaim ended */
	__u64 dur;      /* ns from begin to end */
	__u64 pages;    /* reclaimed (reclaim); pages the migration scanner looked at (compaction) */
	__s32 nr;       /* the syscall in flight; -1: none (a fault in user mode, or on the way back to it) */
	__s32 kstack;   /* stack id where it reclaimed (with stacks), < 0 if none */
	__u64 addr;     /* with nr -1: the address of the user fault in progress, when kept (faults.h); else 0 */
	__u16 what;     /* enum reclaim_what */
	__s16 order;    /* of the allocation (compaction, direct reclaim); 0 for memcg reclaim */
	__s32 status;   /* compaction: the kernel's enum compact_result at the end; else 0 */
};

#define RUNQ_BUCKETS 8 /* a power of two */

/* A thread's time runnable without a CPU, and on one, over a span (bpf/runq.h). */
struct runq_sum {
	__u64 run;            /* ns on a CPU */
	__u64 wait_woken;     /* ns runnable without a CPU after a wake-up */
	__u64 wait_preempted; /* ns runnable without a CPU after a preemption */
	__u64 wait_idle;      /* of the waits, ns of those that ended with the CPU coming from idle */
	__u64 wait_sys;       /* of the waits, ns inside a syscall */
	__u64 max;            /* longest wait, ns */
	__u32 waits;
	__u32 hist[RUNQ_BUCKETS]; /* waits by length: < 16 µs, then powers of 4 (64, 256 µs, 1, 4, 16, 64 ms, more) */
	__u32 pad;
};

#define RUNQ_HOLDERS 3 /* the tasks a long wait names */

/* A task that ran on the CPU while another waited for it. */
struct runq_holder {
	__u64 ns;       /* of the wait */
	__u64 cgroup;
	__u64 allowed;  /* CPUs it may run on (the first 64) */
	__u64 group;    /* its scheduling group (task_group: a cgroup's, or its session's autogroup), as an opaque id */
	__u32 pid;
	__u32 tid;
	__u32 nr_allowed;
	__u8 prio;
	__u8 policy;
	__u8 pad[2];
	char comm[TASK_COMM_LEN];
};

/*
 * A thread waited for a CPU. sum 0: one wait of at least RUNQ_LONG_NS, with
 * who ran on that CPU meanwhile; sum 1: the
 * thread's totals since its last summary. hdr names the waiting thread;
 * hdr.cpu is where it got the CPU, hdr.ts when.
 */
struct runq_rec {
	struct hdr h;
	__u64 wait;        /* this wait, ns (sum 0) */
	__u8 sum;
	__u8 woken;        /* the wait began at a wake-up, not a preemption */
	__u8 prio;         /* the waiter's (kernel scale: 120 + nice for the normal policies) */
	__u8 policy;
	__s32 nr;          /* syscall in flight; -1: none, or not known (sum 1) */
	__u64 allowed;     /* CPUs the waiter may run on (the first 64) */
	__u32 nr_allowed;
	__u32 nr_running;  /* tasks on this CPU's run queue as the wait ended */
	__u64 idle_ns;     /* of the wait, ns this CPU was idle (sum 0) */
	__u64 group;       /* the waiter's scheduling group, as runq_holder.group */
	struct runq_holder held[RUNQ_HOLDERS]; /* who ran on this CPU during the wait, most first; pid 0 ends */
	struct runq_sum s; /* sum 1 */
};

#define RECENT 8 /* a power of two */

struct recent_call {
	__u64 ts;
	__u64 latency;
	__s64 ret;
	__u32 nr;
	__u32 pad;
};

/* Oldest first. */
struct recent_rec {
	struct hdr h;
	__u32 n;
	__u32 pad;
	struct recent_call c[RECENT];
};


/* A task in uninterruptible sleep (the blocked iterator). */
struct blocked_rec {
	__u32 pid;
	__u32 tid;
	__s32 nr;      /* syscall in progress; -1 for a kernel thread */
	__u32 nframes; /* of ips */
	char comm[TASK_COMM_LEN];
	__u64 ips[STACK_DEPTH]; /* kernel stack, innermost first */
};

/* internal/probe/decode.go hard-codes these sizes and the field offsets. */
_Static_assert(sizeof(struct hdr) == 48, "hdr");
_Static_assert(sizeof(struct sys_rec) == 136, "sys_rec");
_Static_assert(sizeof(struct fault_rec) == 80, "fault_rec");
_Static_assert(sizeof(struct vsys_rec) == 64, "vsys_rec");
_Static_assert(sizeof(struct sig_rec) == 96, "sig_rec");
_Static_assert(sizeof(struct fork_rec) == 72, "fork_rec");
_Static_assert(sizeof(struct exec_rec) == 1144, "exec_rec");
_Static_assert(sizeof(struct exit_rec) == 56, "exit_rec");
_Static_assert(sizeof(struct recent_rec) == 312, "recent_rec");
_Static_assert(sizeof(struct reclaim_rec) == 88, "reclaim_rec");
_Static_assert(sizeof(struct sleep) == 48, "sleep");
_Static_assert(sizeof(struct sleeps) == 200, "sleeps");
_Static_assert(sizeof(struct blocked_rec) == 544, "blocked_rec");
#endif
