/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What user space sets before load (constants the verifier folds), the
 * numbers the programs share, and the unused globals that keep every record
 * type in the BTF.
 *
 * Part of the one BPF object sysray loads; included first by sysray.bpf.c.
 */
#ifndef SYSRAY_CONFIG_H
#define SYSRAY_CONFIG_H

/*
 * BTF keeps only the types of globals, maps and functions, not of locals:
 * these unused pointers keep every record type and enum in the object, so
 * bpf2go emits them and internal/probe checks decode.go against them.
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
const enum hdr_flag *rec_flag __attribute__((unused));
const enum cap_kind *rec_cap __attribute__((unused));

#define SIGILL 4
#define SIGTRAP 5
#define SIGBUS 7
#define SIGFPE 8
#define SIGSEGV 11
#define SIGSYS 31
#define SECCOMP_MODE_FILTER 2

#define ERESTARTSYS 512
#define ENOENT 2
#define ENOMEM 12
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
 * Budgeted timing: the count of a call that is neither timed nor failed
 * waits in its thread, one slot per syscall number mod 32 (a syscall that
 * collides takes the slot over), until its syscall's next timed call, a
 * read of the counts or the thread's exit adds it to the stats map: the
 * map's hash lookup costs more than the rest of counting such a call.
 */
#define PEND_SLOTS 32
#define PEND_MAX 0x7fffffffu /* a slot's count goes to the map before it can wrap */
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
volatile const __u8 cfg_lean_stacks; /* with cfg_stacks: only the sleeping kernel stacks and the waker's
				      * identity (the doctor's needs), not the user stack or the waker's stack */
volatile const __u8 cfg_stat;        /* count syscalls in the kernel instead of emitting them */
volatile const __u32 cfg_sample;     /* stat mode: still emit failures, the call after one, slow calls
				      * (>= cfg_slow) and 1 in cfg_sample others (a power of two; 0: none) */
volatile const __u64 cfg_sample_gap; /* and at most one such sample per thread per this many ns */
volatile const __u8 cfg_firsts;      /* with cfg_sample: also a process's first calls of a syscall on a CPU (ACC_FIRST) */
volatile const __u64 cfg_tick_ns;    /* budgeted timing: one jiffy, which bounds an untimed long call; 0: unknown */
volatile const __u32 cfg_budget;     /* budgeted timing (stat without samples): calls of a syscall a
				      * thread has timed by the clock per jiffy; 0 times every call */
volatile const __u32 cfg_every_shift; /* budgeted timing: past the budget, 1 in 2^this is timed */
volatile const __u64 cfg_slow;       /* emit sleep stacks for syscalls at least this slow */
volatile const __u64 cfg_wakeup_bytes; /* wake the reader once this much is queued */
volatile const __u32 cfg_nr_execve;
volatile const __u32 cfg_nr_sendto; /* the one DNS-capturing call whose args[4] is a destination */
volatile const __u32 cfg_nr_execveat;
volatile const __u32 cfg_nr_rt_sigreturn;
volatile const __u32 cfg_nr_exit;
volatile const __u32 cfg_nr_exit_group;
volatile const __u32 cfg_fast_shift; /* stat's fast path: 32 - log2(rows of fast_rows) */
volatile const __u64 sys_mask[MAX_SYSCALL / 64];
/*
 * With cfg_lean_stacks: syscalls that wait by design (poll, epoll_wait,
 * nanosleep...). Their interruptible sleeps are the wait they were asked
 * for, so such a sleep's stack is taken as it wakes, and only for a sleep
 * of at least cfg_defer_ns: what the doctor looks for in them (an audit
 * backlog's wait, uninterruptible anyway) is long.
 */
volatile const __u64 wait_mask[MAX_SYSCALL / 64];
volatile const __u64 cfg_defer_ns;
volatile const struct cap_rule cap_rules[MAX_SYSCALL];

#endif
