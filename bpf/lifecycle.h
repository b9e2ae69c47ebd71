/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fork, exec and exit; the task iterators (calls in flight at the end,
 * blocked tasks); cgroup moves.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * signals.h, whose definitions it uses.
 */
#ifndef SYSRAY_LIFECYCLE_H
#define SYSRAY_LIFECYCLE_H

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

	/* The thread may now have the process's id (de_thread), and a new name. */
	__sync_fetch_and_add(&name_gen, 1);

	if (cfg_pids) {
		__u8 *v = bpf_map_lookup_elem(&pids, &tgid);
		if (v && (*v & SEL_PENDING)) {
			/*
			 * sysray's child was waiting for this execve: trace from here
			 * and count the execve itself, whose entry we could not see.
			 */
			*v = SEL_ACTIVE | SEL_FOLLOW;
			struct task_state *st = NULL;
			if (!fast_path() || !fast_selected_now(p))
				st = bpf_task_storage_get(&tstate, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
			if (st) {
				struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(p);
				st->call.nr = BPF_CORE_READ(regs, orig_ax);
				load_args(&st->call, regs);
				st->call.ts = now;
				st->call.seq++;
				st->call.gen = attach_gen;
				st->call.active = syscall_wanted(st->call.nr);
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

static __always_inline void emit_recent(void *rb, struct recent_calls *rcs, __u64 now)
{
	struct recent_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
	if (!r) {
		count_drop();
		return;
	}
	fill_hdr(&r->h, K_RECENT, sizeof(*r), now);
	__u32 total = rcs->n;
	__u32 n = total < RECENT ? total : RECENT;
	r->n = n;
	r->pad = 0;
#pragma unroll
	for (int i = 0; i < RECENT; i++) {
		__u32 idx = (total - n + i) & (RECENT - 1);
		if (i < n)
			r->c[i] = rcs->c[idx];
		else
			__builtin_memset(&r->c[i], 0, sizeof(r->c[i]));
	}
	bpf_ringbuf_submit(r, wake_flags(rb));
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *task, bool group_dead)
{
	__u64 now = bpf_ktime_get_ns();
	/*
	 * Killed by a signal in the doctor's mode: what it last did, since few
	 * calls were emitted. A thread that has a row keeps them there, read
	 * before the row is freed and emptied for its next owner; else in its
	 * task storage, below.
	 */
	bool killed = cfg_sample && (BPF_CORE_READ(task, exit_code) & 0x7f);
	bool recent_done = false;
	if (fast_doctor()) {
		__u64 me = (__u64)bpf_task_pt_regs(task);
		struct fast_row *fr = fast_row_of(me);
		if (fr && (fr->owner & ~FAST_IDLE) == me) {
			struct recent_calls *rr = &fr->recent;
			if (killed && rr->n && selected()) {
				void *rb = cpu_ring();
				if (rb)
					emit_recent(rb, rr, now);
				recent_done = true;
			}
			rr->n = 0;
		}
	}
	/* Before the selection: sysray's own threads have rows too. */
	if (fast_path())
		fast_release(task);
	/*
	 * Not selected(): a probe that handed over (owns) still flushes its
	 * counts and ends its own calls; only the exit's records are the
	 * owner's.
	 */
	if (!task_selected(task))
		return 0;
	struct task_state *st = bpf_task_storage_get(&tstate, task, 0, 0);
	/* Its pending counts would go with its storage. */
	if (st && budget_timing() && st->ids.cg_gen)
		pend_flush(&st->ids, &st->pend, false);
	/* exit and exit_group never return; neither does a syscall cut off by a fatal signal. */
	if (st && (st->call.active || st->call.held)) {
		if (cfg_stat && st->call.active) {
			late_args(&st->call, (struct pt_regs *)bpf_task_pt_regs(task), 0);
			untimed_entry(&st->call, &st->timing, now);
		}
		st->call.active = 0;
		st->call.held = 0;
		emit_syscall(st, 0, now, F_UNFINISHED, NULL);
	}

	void *rb = owns() ? cpu_ring() : NULL;
	/* Killed by a signal in the doctor's mode: what it last did, since few calls were emitted. */
	if (rb && killed && !recent_done && st && st->recent.n)
		emit_recent(rb, &st->recent, now);
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
	if (fast_record() || fast_doctor() || (fast_path() && !owns())) {
		/* Its call, if the fast path took it (stat's: only to count it lost, handover_lost). */
		struct fast_row *r = fast_pending_call((__u64)bpf_task_pt_regs(task));
		if (r && task_selected(task)) {
			if (r->call.held) {
				emit_call(&r->call, &r->ids, r->call.held_ret, r->call.held_end, 0, task);
			} else if (owns()) {
				__u64 now = bpf_ktime_get_ns();
				if (fast_doctor()) {
					late_args(&r->call, (struct pt_regs *)bpf_task_pt_regs(task), 0);
					untimed_entry(&r->call, &r->timing, now);
				}
				emit_call(&r->call, &r->ids, 0, now, F_UNFINISHED, task);
			} else {
				__sync_fetch_and_add(&handover_lost, 1);
			}
			r->call.held = 0;
		}
	}
	struct task_state *st = bpf_task_storage_get(&tstate, task, 0, 0);
	if (!st || !(st->call.active || st->call.held))
		return 0;
	if (!st->call.held && st->call.gen != attach_gen)
		return 0; /* a call entered under an earlier attach: its state is stale */
	if (!task_selected(task))
		return 0;
	if (st->call.held) {
		st->call.held = 0;
		emit_syscall(st, st->call.held_ret, st->call.held_end, 0, task);
	} else if (owns()) {
		/* A probe that handed over (owns) stops; the call does not end. */
		__u64 now = bpf_ktime_get_ns();
		if (cfg_stat) {
			late_args(&st->call, (struct pt_regs *)bpf_task_pt_regs(task), 0);
			untimed_entry(&st->call, &st->timing, now);
		}
		st->call.active = 0;
		emit_syscall(st, 0, now, F_UNFINISHED, task);
	} else {
		__sync_fetch_and_add(&handover_lost, 1);
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

/* A new name, by prctl, /proc/PID/comm or an execve: records take it from the thread's cached ids. */
SEC("tp_btf/task_rename")
int BPF_PROG(task_rename, struct task_struct *task, const char *comm)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	__sync_fetch_and_add(&name_gen, 1);
	if (task != cur)
		renamer = (__u64)bpf_task_pt_regs(cur);
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

#endif
