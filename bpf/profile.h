/* SPDX-License-Identifier: GPL-2.0 */
/*
 * On-CPU sampling, counted per stack in the kernel.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * reclaim.h, whose definitions it uses.
 */
#ifndef SYSRAY_PROFILE_H
#define SYSRAY_PROFILE_H

/* CPU-clock (or cycles) sampling: counted per stack in the kernel, read once at the end. */
SEC("perf_event")
int on_cpu(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	if (id >> 32 == 0 || !selected()) /* idle */
		return 0;
	struct prof_key k = {};
	k.pid = id >> 32;
	k.kstack = stack_id(ctx, STK_PROFILE, 0);
	k.ustack = stack_id(ctx, STK_PROFILE, BPF_F_USER_STACK);
	struct task_state *st = bpf_task_storage_get(&tstate, bpf_get_current_task_btf(), 0, 0);
	if (st && st->call.active) {
		k.syscall = st->call.nr + 1;
	} else {
		__s32 nr = fast_call_nr();
		if (nr >= 0)
			k.syscall = nr + 1;
	}
	bpf_get_current_comm(k.comm, sizeof(k.comm));
	__u64 *n = bpf_map_lookup_elem(&profile, &k);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return 0;
	}
	__u64 one = 1;
	if (bpf_map_update_elem(&profile, &k, &one, BPF_NOEXIST)) {
		n = bpf_map_lookup_elem(&profile, &k);
		if (n)
			__sync_fetch_and_add(n, 1);
		else {
			__u32 zero = 0;
			__u64 *lost = bpf_map_lookup_elem(&prof_lost, &zero);
			if (lost)
				(*lost)++;
		}
	}
	return 0;
}

#endif
