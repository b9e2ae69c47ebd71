/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Per-task state (task storage), and the generations that invalidate what it
 * caches.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * config.h, whose definitions it uses.
 */
#ifndef SYSRAY_STATE_H
#define SYSRAY_STATE_H

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

#endif
