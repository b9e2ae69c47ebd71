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

/* The syscall the thread is in, or was last in. */
struct call {
	__u64 ts; /* entry; budgeted timing: 0 when the clock did not time it */
	__u64 args[6];
	__u32 nr;
	__u8 active;
	__u8 held; /* returned -ERESTART*: emit once we know whether it reached user space */
	__u8 prev_failed; /* the thread's previous syscall failed: emit this one (retries) */
	__u8 pad;
	__s64 held_ret;
	__u64 held_end;
	__u64 seq; /* syscalls entered: names the call in flight */
	__u64 gen; /* attach_gen when the thread last entered a call */
	__u64 queued; /* ns preempted, set just before the call is emitted (call_queued) */
};

/*
 * The thread's ids and name, cached for the stats key and record headers:
 * reading them takes helper calls, and they change only when their
 * generation moves.
 */
struct ids {
	__u32 tgid;
	__u32 sel; /* the fast path: the thread is selected (read with the rest) */
	__u64 cg;     /* cgroup id */
	__u64 cg_gen; /* cgroup_gen when tgid, cg and sel were read; 0: never */
	__u64 name_gen; /* name_gen when tid and comm were read; 0: never */
	__u32 tid;
	__u32 pad;
	char comm[TASK_COMM_LEN];
};

/* Which calls the clock times and which cross over (stat mode). */
struct timing {
	__u32 tick;       /* sampled stat: calls seen, for 1-in-cfg_sample sampling */
	__u32 weight;     /* budgeted: calls the call in flight stands for if short; 0 when not timed */
	__u64 jts;        /* budgeted: jiffies at entry */
	__u64 sampled_at; /* when the thread's last sampled call ended */
	__u64 record_at;  /* sampled mode: when the thread's last record call crossed over */
	__u64 last_clk;   /* budgeted: the thread's last clock read */
	__u64 prev_clk;   /* budgeted: the one before the call in flight's entry, when it was timed */
	__u64 rng;        /* budgeted: picks the calls timed past the budget */
	__u32 budget[BUDGET_SLOTS]; /* budgeted: per syscall slot, jiffies << 8 | calls in that jiffy */
};

/*
 * Budgeted timing: counts not yet in the stats map, per slot (nr + 1) << 32
 * | calls, under the key ids held when they were made. Changed only with
 * atomics: a read of the counts takes them from another CPU.
 */
struct pending {
	__u64 w[PEND_SLOTS];
};

/* Where the syscall in flight is sleeping (cfg_stacks). */
struct sleep_track {
	__u64 off_ts; /* switched out at; 0 while on CPU */
	__s32 off_kstack;
	__u8 off_preempted;
	__u8 have_waker;
	__u8 pad[2];
	__u64 sl_owner; /* seq of the syscall the sleep slots belong to */
	__u64 runq;     /* ns the call in flight spent preempted (valid while sl_owner == seq) */
	__u32 waker_pid;
	__u32 waker_tid;
	__s32 waker_kstack;
	char waker_comm[TASK_COMM_LEN];
	struct sleeps sl;
};

/* Sampled stat (the doctor): the thread's last calls, for a death by signal (most are not emitted). */
struct recent_calls {
	__u32 n;
	__u32 pad;
	struct recent_call c[RECENT];
};

/* The last page fault, kept until a fault signal shows whether it mattered. */
struct kept_fault {
	__u64 ts;
	__u64 addr;
	__u64 ip;
	__u64 err;
	__u64 sp;
};

/*
 * The fast path (fast.h): a thread's call in flight, its cached ids, and in
 * stat its budgets and pending counts, in the row its registers' address
 * hashes to. 640 bytes: rows do not share cache lines.
 */
struct fast_row {
	__u64 owner; /* the thread's registers' address while in a call, + FAST_IDLE between; 0: free */
	struct call call; /* ts, nr and gen; args and held in record */
	struct ids ids;
	struct timing timing;
	struct pending pend;
	__u64 pad[4];
	/*
	 * The doctor's alone: its thread's last calls. Last, so that the other
	 * modes load the table with rows of FAST_ROW_LEAN bytes and never
	 * reach it (the verifier does not walk what fast_doctor() rules out).
	 * In the row, not a map beside it: a second lookup a call was 4.5 ns
	 * of the doctor's exit (bench/bpflines.sh).
	 */
	struct recent_calls recent;
	__u64 pad2[7];
};
#define FAST_ROW_LEAN 640
_Static_assert(__builtin_offsetof(struct fast_row, recent) == FAST_ROW_LEAN, "rows without recent calls are 640 bytes");
_Static_assert(sizeof(struct fast_row) == 960, "a fast_row is 960 bytes: rows do not share cache lines");

struct task_state {
	struct call call;
	struct ids ids;
	struct timing timing;
	struct pending pend;
	struct sleep_track sleep;
	struct recent_calls recent;
	struct kept_fault fault;
	__u64 reclaim_ts; /* in memory-cgroup reclaim since; 0: not */
	__u64 dreclaim_ts; /* in global direct reclaim since; 0: not */
	__u64 compact_ts;  /* in direct compaction since; 0: not */
	__s64 dreclaim_order; /* the order direct reclaim was asked for */
};

/*
 * Bumped whenever a task changes cgroup. Reading the cgroup id costs a helper
 * call and four pointer loads per syscall; a thread caches it with the
 * generation it read it in (struct ids), and reads it again only after a
 * move, with its process and whether it is selected.
 */
volatile __u64 cgroup_gen = 1;

/*
 * Bumped whenever a task execs (its thread id may become the process's, its
 * name changes) or is renamed: what record headers take from the cache
 * besides the key ids. Apart from cgroup_gen, so that a host running many
 * programs does not make every thread read its key again, and flush its
 * pending counts (stat.h), at every execve.
 */
volatile __u64 name_gen = 1;

/*
 * The kernel announces a rename (task_rename) just before it writes the
 * name. A thread renamed by another (a write to /proc/PID/task/TID/comm)
 * may read its name between the two and cache the old one under the new
 * generation; so name_gen is bumped once more when the renamer's syscall
 * returns, the name written. This holds the renamer's registers until then.
 */
volatile __u64 renamer;

/*
 * Bumped by user space each time it attaches sys_enter and sys_exit again
 * (the agent's duty cycling). A call a thread entered under an earlier
 * attach, or while they were off, is none of this attach's business: its
 * state is stale, and an exit without a seen entry is no seccomp refusal.
 */
volatile __u64 attach_gen = 1;

/*
 * The serial of the probe that takes new calls and events: the high 32 bits
 * of its attach_gen, which its duty cycling's resumes (the low 32) leave
 * alone. A map of its own, so that a probe loaded to take over from another
 * shares it (the agent's reload: Config.After): user space sets it to the
 * new probe's serial in one write, and from then on every call is entered
 * by exactly one of the two. The old one still finishes the calls it saw
 * enter, so a reload neither loses nor counts twice a call that ends
 * within its grace (internal/agent). A probe alone (serial 0) owns it from
 * the start.
 */
volatile __u64 owner SEC(".data.owner");

static __always_inline bool owns(void)
{
	return owner == attach_gen >> 32;
}

/*
 * Calls this probe saw enter and had not seen end when it stopped, another
 * probe owning new calls by then (owns): in flight across a handover for
 * longer than its grace, counted by neither probe. The stop's walk
 * (inflight) counts them, for user space to say so.
 */
volatile __u64 handover_lost;

#endif
