/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every map but the per-task storage (state.h): selection, rings and drops,
 * scratch records, stacks, the per-CPU staging of syscall records, the
 * counts of stat mode, the blocked-task scratch and the profile.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * state.h, whose definitions it uses.
 */
#ifndef SYSRAY_MAPS_H
#define SYSRAY_MAPS_H

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

/*
 * Sleeps whose end no program saw: neither the waking nor the switch back
 * in ran our programs, yet the task reached sys_exit (about one sleep in a
 * thousand under load on these VMs). The sleep is closed at the exit, so
 * its time is whole, but a stack deferred to the switch-in is gone.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} unseen SEC(".maps");

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
enum { STK_SWITCH, STK_WAKING, STK_PROFILE, STK_RECLAIM, STK_EXIT, STK_SLOTS };

/* off_kstack of a sleep whose stack is taken when it wakes, if at all. */
#define STACK_DEFERRED (-1000)

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STK_SLOTS);
	__type(key, __u32);
	__type(value, struct stack_buf);
} stack_scratch SEC(".maps");

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
	__u16 n; /* records in buf */
	__u8 buf[STAGE_BYTES];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* one per possible CPU, set at load */
	__type(key, __u32);
	__type(value, struct stage);
} stages SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* 1 << (32 - cfg_fast_shift), set at load */
	__type(key, __u32);
	__type(value, struct fast_row); /* FAST_ROW_LEAN bytes of it but in the doctor, set at load */
} fast_rows SEC(".maps");

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

/*
 * Cells the stats map could not make for want of memory rather than room.
 * Its per-CPU values come from the kernel's per-CPU allocator, which a
 * program may not wait on: under a burst of new processes it runs out of
 * ready pages until a worker adds more (2,000 short processes, 66,000 new
 * cells: 102 refused). These are allocated when the map is made (the
 * loader sizes it, spillCells: 1 entry outside stat mode);
 * the reader adds each to its key's cell of the stats map, if any.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct stat_key);
	__type(value, struct stat_val);
} spill SEC(".maps");

/*
 * Calls the stats map, and the spill after it, had no cell for, by why:
 * those the full table refused and those refused for want of memory once
 * the spill was full too (nomem counts, too, calls whose thread had no
 * memory for its state: lost_call). The two have different cures (a
 * smaller selection; fewer new processes at once), so the reader tells
 * them apart.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lost);
} stat_lost SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct blocked_rec);
} blocked_scratch SEC(".maps");

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

#endif
