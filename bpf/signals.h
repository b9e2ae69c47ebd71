/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Signals generated and delivered.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * faults.h, whose definitions it uses.
 */
#ifndef SYSRAY_SIGNALS_H
#define SYSRAY_SIGNALS_H

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
	if (!owns() || (!selected() && !task_selected(task)))
		return 0;
	__u32 target_pid = BPF_CORE_READ(task, tgid);
	__u32 target_tid = BPF_CORE_READ(task, pid);
	__u64 now = bpf_ktime_get_ns();

	/* A fault signal the thread raised itself: emit the fault that caused it first. */
	if (!cfg_all_faults && fault_signal(sig) && target_tid == (__u32)bpf_get_current_pid_tgid()) {
		struct task_state *st = bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0, 0);
		if (st && st->fault.ts && now - st->fault.ts < 1000000000ULL) {
			emit_kept_fault(st);
			st->fault.ts = 0;
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

#endif
