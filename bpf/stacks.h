/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Stacks deduplicated by content and named by id.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * maps.h, whose definitions it uses.
 */
#ifndef SYSRAY_STACKS_H
#define SYSRAY_STACKS_H

__u32 stack_next;

/* The id of the stack in b, n bytes of it filled; < 0 if there is none or no room. */
static __always_inline __s32 stack_intern(struct stack_buf *b, long n)
{
	if (n <= 0)
		return n < 0 ? n : -EFAULT;
	__u32 *known = bpf_map_lookup_elem(&stack_ids, b);
	if (known)
		return *known;
	__u32 id = __sync_fetch_and_add(&stack_next, 1);
	if (id >= STACK_MAX)
		return -ENOSPC;
	/* The stack first, then its id: whoever finds the id finds the stack. */
	if (bpf_map_update_elem(&stacks, &id, b, BPF_ANY))
		return -ENOSPC;
	if (bpf_map_update_elem(&stack_ids, b, &id, BPF_NOEXIST)) {
		/* Another CPU named it first (its id wins), or the map is busy. */
		known = bpf_map_lookup_elem(&stack_ids, b);
		return known ? *known : -EBUSY;
	}
	return id;
}

/* The id of the current stack (kernel, or user with BPF_F_USER_STACK); < 0 if there is none or no room. */
static __always_inline __s32 stack_id(void *ctx, __u32 slot, __u64 flags)
{
	struct stack_buf *b = bpf_map_lookup_elem(&stack_scratch, &slot);
	if (!b)
		return -ENOENT;
	/* The helper zeroes what the stack does not fill: equal stacks are equal keys. */
	return stack_intern(b, bpf_get_stack(ctx, b->ips, sizeof(b->ips), flags));
}

/* The id of a task's kernel stack, for a task that is not running (asleep where it switched out). */
static __always_inline __s32 task_stack_id(struct task_struct *task, __u32 slot)
{
	struct stack_buf *b = bpf_map_lookup_elem(&stack_scratch, &slot);
	if (!b)
		return -ENOENT;
	return stack_intern(b, bpf_get_task_stack(task, b->ips, sizeof(b->ips), 0));
}

#endif
