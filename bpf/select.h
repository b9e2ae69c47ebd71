/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Which tasks and syscalls are traced, and which timing mode the constants
 * chose.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * stacks.h, whose definitions it uses.
 */
#ifndef SYSRAY_SELECT_H
#define SYSRAY_SELECT_H

static __always_inline __u64 task_cgroup(struct task_struct *t)
{
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
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

/*
 * The current task, for a new event: not while another probe owns them
 * (owns). The task iterators and the rows' cached selection (fast_ids)
 * use tgid_selected and task_selected, which do not ask: a probe handing
 * over still finishes what it began.
 */
static __always_inline bool selected(void)
{
	if (!owns())
		return false;
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

/* A syscall whose short sleeps carry no stack (wait_mask). */
static __always_inline bool waits_by_design(__u32 nr)
{
	return cfg_lean_stacks && nr < MAX_SYSCALL && ((wait_mask[nr / 64] >> (nr % 64)) & 1);
}

static __always_inline bool syscall_wanted(__u32 nr)
{
	if (!cfg_syscalls)
		return true;
	if (nr >= MAX_SYSCALL)
		return false;
	return (sys_mask[nr / 64] >> (nr % 64)) & 1;
}

#endif
