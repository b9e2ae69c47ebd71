/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Small tp_btf programs for bench/tpmicro, one building block each: en_*
 * on sys_enter, ex_* on sys_exit. Not part of sysray.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
char LICENSE[] SEC("license") = "GPL";

struct st { __u64 a[64]; };
struct { __uint(type, BPF_MAP_TYPE_TASK_STORAGE); __uint(map_flags, BPF_F_NO_PREALLOC); __type(key, int); __type(value, struct st); } tsa SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_TASK_STORAGE); __uint(map_flags, BPF_F_NO_PREALLOC); __type(key, int); __type(value, struct st); } tsb SEC(".maps");
struct mkey { __u64 cg; __u32 pid; __u32 nr; };
struct val { __u64 c[40]; };
struct { __uint(type, BPF_MAP_TYPE_PERCPU_HASH); __uint(max_entries, 65536); __type(key, struct mkey); __type(value, struct val); } ph SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 65536); __type(key, __u32); __type(value, struct st); } th SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, struct st); } pa SEC(".maps");
volatile const struct val vzero;
volatile const struct st szero;

SEC("tp_btf/sys_enter") int BPF_PROG(en_empty) { return 0; }
SEC("tp_btf/sys_exit") int BPF_PROG(ex_empty) { return 0; }
SEC("tp_btf/sys_exit") int BPF_PROG(ex_tsmiss) {
	struct st *s = bpf_task_storage_get(&tsa, bpf_get_current_task_btf(), 0, 0);
	if (s) s->a[0]++;
	return 0; }
SEC("tp_btf/sys_enter") int BPF_PROG(en_tscreate) {
	struct st *s = bpf_task_storage_get(&tsb, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (s) s->a[0]++;
	return 0; }
SEC("tp_btf/sys_exit") int BPF_PROG(ex_tshit) {
	struct st *s = bpf_task_storage_get(&tsb, bpf_get_current_task_btf(), 0, 0);
	if (s) s->a[1]++;
	return 0; }
SEC("tp_btf/sys_exit") int BPF_PROG(ex_ktime) { volatile __u64 t = bpf_ktime_get_ns(); return 0; }
SEC("tp_btf/sys_exit") int BPF_PROG(ex_jiffies) { volatile __u64 t = bpf_jiffies64(); return 0; }
SEC("tp_btf/sys_exit") int BPF_PROG(ex_phash, struct pt_regs *regs, long ret) {
	struct task_struct *t = bpf_get_current_task_btf();
	struct mkey k = { .cg = 1234, .pid = t->tgid, .nr = regs->orig_ax };
	struct val *v = bpf_map_lookup_elem(&ph, &k);
	if (!v) { bpf_map_update_elem(&ph, &k, (void *)&vzero, BPF_NOEXIST); v = bpf_map_lookup_elem(&ph, &k); if (!v) return 0; }
	v->c[0]++;
	return 0; }
SEC("tp_btf/sys_exit") int BPF_PROG(ex_parray) {
	__u32 z = 0; struct st *s = bpf_map_lookup_elem(&pa, &z);
	if (s) s->a[0]++;
	return 0; }
SEC("tp_btf/sys_exit") int BPF_PROG(ex_tidhash) {
	__u32 tid = bpf_get_current_task_btf()->pid;
	struct st *s = bpf_map_lookup_elem(&th, &tid);
	if (!s) { bpf_map_update_elem(&th, &tid, (void *)&szero, BPF_NOEXIST); return 0; }
	s->a[0]++;
	return 0; }
SEC("tp_btf/sys_exit") int BPF_PROG(ex_regs, struct pt_regs *regs, long ret) {
	volatile long nr = regs->orig_ax; return 0; }
struct slot { __u32 tid; __u32 nr; __u64 jts; __u64 ts; __u64 gen; };
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 1); __type(key, __u32); __type(value, struct slot); } ps SEC(".maps");
struct centry { __u64 cg; __u32 pid; __u32 nr; __u64 count; };
struct { __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); __uint(max_entries, 256); __type(key, __u32); __type(value, struct centry); } pc SEC(".maps");
SEC("tp_btf/sys_enter") int BPF_PROG(en_pslot, struct pt_regs *regs, long id) {
	__u32 z = 0; struct slot *s = bpf_map_lookup_elem(&ps, &z);
	if (!s) return 0;
	s->tid = bpf_get_current_task_btf()->pid; s->nr = id; s->jts = bpf_jiffies64(); s->gen = 1;
	return 0; }
SEC("tp_btf/sys_exit") int BPF_PROG(ex_pslot) {
	__u32 z = 0; struct slot *s = bpf_map_lookup_elem(&ps, &z);
	if (!s) return 0;
	if (s->tid != bpf_get_current_task_btf()->pid) return 0;
	s->tid = 0;
	volatile __u64 d = bpf_jiffies64() - s->jts;
	return 0; }
SEC("tp_btf/sys_exit") int BPF_PROG(ex_pcache, struct pt_regs *regs, long ret) {
	struct task_struct *t = bpf_get_current_task_btf();
	__u32 pid = t->tgid, nr = regs->orig_ax;
	__u32 i = (nr ^ (pid * 2654435761u >> 24)) & 255;
	struct centry *c = bpf_map_lookup_elem(&pc, &i);
	if (!c) return 0;
	if (c->cg == 1234 && c->pid == pid && c->nr == nr) { c->count++; return 0; }
	c->cg = 1234; c->pid = pid; c->nr = nr; c->count = 1;
	return 0; }
