/* SPDX-License-Identifier: GPL-2.0 */
/*
 * User page faults and legacy vsyscall emulation.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * syscalls.h, whose definitions it uses.
 */
#ifndef SYSRAY_FAULTS_H
#define SYSRAY_FAULTS_H

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
			st->fault.ts = now;
			st->fault.addr = address;
			st->fault.ip = ip;
			st->fault.err = error_code;
			st->fault.sp = regs->sp;
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
	fill_hdr(&r->h, K_FAULT, sizeof(*r), st->fault.ts);
	r->addr = st->fault.addr;
	r->ip = st->fault.ip;
	r->error = st->fault.err;
	r->sp = st->fault.sp;
	bpf_ringbuf_submit(r, wake_flags(rb));
}

#endif
