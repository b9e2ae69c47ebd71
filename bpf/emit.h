/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Records to the ring: headers, syscall arguments, and syscall records
 * staged per CPU.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * select.h, whose definitions it uses.
 */
#ifndef SYSRAY_EMIT_H
#define SYSRAY_EMIT_H

static __always_inline void count_drops(__u64 k)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&drops, &zero);
	if (n)
		*n += k;
}

static __always_inline void count_drop(void)
{
	count_drops(1);
}

static __always_inline void *cpu_ring(void)
{
	__u32 cpu = bpf_get_smp_processor_id();
	return bpf_map_lookup_elem(&rings, &cpu);
}

/* Waking the reader per record costs more than the record; wake it in bulk. */
static __always_inline __u64 wake_flags(void *rb)
{
	return bpf_ringbuf_query(rb, BPF_RB_AVAIL_DATA) >= cfg_wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									     : BPF_RB_NO_WAKEUP;
}

static __always_inline void fill_hdr(struct hdr *h, __u8 kind, __u16 size, __u64 ts)
{
	__u64 id = bpf_get_current_pid_tgid();
	h->kind = kind;
	h->flags = 0;
	h->size = size;
	h->cpu = bpf_get_smp_processor_id();
	h->pid = id >> 32;
	h->tid = (__u32)id;
	h->ts = ts;
	h->cgroup = bpf_get_current_cgroup_id();
	bpf_get_current_comm(h->comm, sizeof(h->comm));
}

/*
 * The current thread's id and name into its cache, as of name_gen gen (read
 * before them: a bump meanwhile leaves them stale, to be read again).
 */
static __always_inline void names_read(struct ids *ids, __u64 gen)
{
	struct task_struct *t = bpf_get_current_task_btf();
	ids->tid = t->pid;
	__builtin_memcpy(ids->comm, t->comm, TASK_COMM_LEN);
	ids->name_gen = gen;
}

/*
 * fill_hdr for the current thread's syscall records, from its cached ids:
 * the helpers fill_hdr calls cost more than the rest of a record together.
 * Its name is read again here when stale. Its key ids are read afresh for
 * this record but not cached: their owner (refresh_ids, fast_ids) must also
 * flush counts and read the selection again when they change.
 */
static __always_inline void fill_hdr_ids(struct hdr *h, struct ids *ids, __u8 kind, __u16 size, __u64 ts)
{
	struct ids now;
	if (ids->cg_gen != cgroup_gen) {
		now.cg = bpf_get_current_cgroup_id();
		now.tgid = bpf_get_current_pid_tgid() >> 32;
		names_read(&now, 0);
		ids = &now;
	} else {
		__u64 gen = name_gen;
		if (ids->name_gen != gen)
			names_read(ids, gen);
	}
	h->kind = kind;
	h->flags = 0;
	h->size = size;
	h->cpu = bpf_get_smp_processor_id();
	h->pid = ids->tgid;
	h->tid = ids->tid;
	h->ts = ts;
	h->cgroup = ids->cg;
	__builtin_memcpy(h->comm, ids->comm, TASK_COMM_LEN);
}

/* For records about a task that is not current (the unfinished-syscall iterator). */
static __always_inline void fill_hdr_task(struct hdr *h, struct task_struct *t, __u8 kind, __u16 size,
					  __u64 ts)
{
	h->kind = kind;
	h->flags = 0;
	h->size = size;
	h->cpu = bpf_get_smp_processor_id();
	h->pid = BPF_CORE_READ(t, tgid);
	h->tid = BPF_CORE_READ(t, pid);
	h->ts = ts;
	h->cgroup = task_cgroup(t);
	BPF_CORE_READ_STR_INTO(&h->comm, t, comm);
}

/* load_args at sys_enter, whose registers the verifier lets us read directly. */
static __always_inline void entry_args(struct call *c, struct pt_regs *regs)
{
	c->args[0] = regs->di;
	c->args[1] = regs->si;
	c->args[2] = regs->dx;
	c->args[3] = regs->r10;
	c->args[4] = regs->r8;
	c->args[5] = regs->r9;
}

/* A signal interrupted the call: it is held until the thread's next entry shows it reached user space. */
static __always_inline bool restarting(long ret)
{
	return ret <= -ERESTARTSYS && ret >= -ERESTART_RESTARTBLOCK;
}

static __always_inline void load_args(struct call *c, struct pt_regs *regs)
{
	c->args[0] = BPF_CORE_READ(regs, di);
	c->args[1] = BPF_CORE_READ(regs, si);
	c->args[2] = BPF_CORE_READ(regs, dx);
	c->args[3] = BPF_CORE_READ(regs, r10);
	c->args[4] = BPF_CORE_READ(regs, r8);
	c->args[5] = BPF_CORE_READ(regs, r9);
}

/*
 * Copies the first bytes of a DNS query to dst when the send c goes to
 * port 53 (CAP_DNS: the buffer args[1] of args[lenarg] bytes, of sendto
 * or of a write on a socket connected to port 53;
 * CAP_DNS_MMSG: the first iovec of msgvec[0] for the rule on argument 1,
 * of msgvec[1] for the one on argument 2, vlen: glibc sends A and AAAA
 * together; CAP_DNS_IOV: writev over TCP, where glibc's send_vc puts each
 * query after its two-byte length, in iovecs of their own (2, query[, 2,
 * query]): the first query for the rule on argument 1, the second for the
 * one on argument 2, iovcnt; a length and a query in one iovec give the
 * query, without its length; CAP_DNS_ANS: the ret bytes a read or recvfrom
 * put in the buffer args[1], from a socket dnswatch.h marked: the answer's
 * header and question, whose rcode says "no such name"). Returns the
 * bytes copied, plus
 * DNS_QUERY_MAX + 1 when the message was longer; 0 when nothing was.
 * Captures are kept and shown, and other traffic's bytes may hold
 * secrets: nothing is copied for any other destination.
 *
 * Global, not static: the verifier checks a global function once, on its
 * own, where a static one is walked again at every call with the caller's
 * states (over half of the doctor's sys_enter walk). Its pointers are then
 * checked by their types' sizes, and may be NULL.
 */
struct dns_bytes {
	char b[DNS_QUERY_MAX];
};

__noinline long dns_copy(struct dns_bytes *dst, struct call *c, long ret, __u32 rule)
{
	if (!dst || !c)
		return 0;
	/* the rule's kind, argument and length argument, packed: BPF calls take five arguments */
	__u8 kind = rule, arg = rule >> 8, lenarg = rule >> 16;
	const void *ptr = (const void *)c->args[1];
	/* sendto's dest_addr; write and send name none: the socket's peer says */
	const void *dest = c->nr == cfg_nr_sendto ? (const void *)c->args[4] : NULL;
	__u64 blen = lenarg < 6 ? c->args[lenarg & 7] : 0;
	if (kind == CAP_DNS_ANS) {
		/* a header is 12 bytes; glibc reads TCP's 2-byte length alone */
		if (ret < 12 || !dns_marked(c->args[0]))
			return 0;
		blen = ret;
	} else if (kind == CAP_DNS_MMSG) {
		/* message arg - 1, if it was sent */
		if (arg == 2) {
			if (ret < 2)
				return 0;
			ptr += sizeof(struct mmsghdr);
		}
		/* msgvec[i].msg_hdr: msg_name, then msg_iov[0] */
		struct user_msghdr m;
		struct iovec iov;
		if (bpf_probe_read_user(&m, sizeof(m), ptr) || !m.msg_iov || m.msg_iovlen == 0)
			return 0;
		if (bpf_probe_read_user(&iov, sizeof(iov), m.msg_iov))
			return 0;
		dest = m.msg_name;
		ptr = iov.iov_base;
		blen = iov.iov_len;
	} else if (kind == CAP_DNS_IOV) {
		/* iov[at] is a length: the query follows in iov[at + 1] */
		__u64 cnt = c->args[2], at = arg == 2 ? 2 : 0;
		struct iovec iov[2] = {};
		if (ret < 14 || cnt <= at || cnt > 1024)
			return 0;
		/* the socket first: any other writev reads no user memory (its peer is read again below only for port 53) */
		if (!fd_peer_dns(c->args[0]))
			return 0;
		if (bpf_probe_read_user(&iov, cnt > at + 1 ? sizeof(iov) : sizeof(iov[0]), ptr + at * sizeof(iov[0])))
			return 0;
		if (iov[0].iov_len == 2 && cnt > at + 1) {
			ptr = iov[1].iov_base;
			blen = iov[1].iov_len;
		} else if (arg == 1 && iov[0].iov_len > 2) {
			ptr = iov[0].iov_base + 2;
			blen = iov[0].iov_len - 2;
		} else {
			return 0;
		}
	}
	if (!ptr || blen == 0 || (kind != CAP_DNS_ANS && !dest_dns(dest, c->args[0])))
		return 0;
	__u32 len = blen > DNS_QUERY_MAX ? DNS_QUERY_MAX : blen;
	asm volatile("" : "+r"(len));
	len &= 0xff;
	if (len > DNS_QUERY_MAX)
		len = DNS_QUERY_MAX;
	if (bpf_probe_read_user(dst->b, len, ptr))
		return 0;
	return blen > DNS_QUERY_MAX ? len + DNS_QUERY_MAX + 1 : len;
}

/* Copies the arguments the user asked to see as strings or addresses. */
static __always_inline __u32 capture_args(struct sys_rec *r, char *data, struct call *c, long ret)
{
	__u32 nr = c->nr;
	__u32 off = 0;

	if (nr >= MAX_SYSCALL)
		return 0;
	/* After a successful execve the old memory is gone; the exec record names the file. */
	if (ret == 0 && (nr == cfg_nr_execve || nr == cfg_nr_execveat))
		return 0;

#pragma unroll
	for (int i = 0; i < DATA_SLOTS; i++) {
		__u8 kind = cap_rules[nr].kind[i];
		__u32 arg = cap_rules[nr].arg[i];
		__u32 lenarg = cap_rules[nr].lenarg[i];
		long n = 0;

		r->dlen[i] = 0;
		if (!kind || arg >= 6 || lenarg >= 6)
			continue;
		const void *ptr = (const void *)c->args[arg];
		if (!ptr)
			continue;
		if (off > DATA_SLOT)
			off = DATA_SLOT;
		char *dst = data + off;

		if (kind == CAP_PATH) {
			n = bpf_probe_read_user_str(dst, DATA_SLOT, ptr);
			if (n > 0) {
				n--; /* drop the NUL */
				if (n == DATA_SLOT - 1)
					r->dtrunc |= 1 << i;
			}
		} else if (kind == CAP_DNS || kind == CAP_DNS_MMSG || kind == CAP_DNS_IOV || kind == CAP_DNS_ANS) {
			/* no socket marked (always so in trace and record): no answer to copy, and no call */
			if (ret < 0 || (kind == CAP_DNS_ANS && dns_watching <= 0))
				continue;
			n = dns_copy((struct dns_bytes *)dst, c, ret, kind | arg << 8 | lenarg << 16);
			if (n > DNS_QUERY_MAX) { /* the message was longer */
				n -= DNS_QUERY_MAX + 1;
				r->dtrunc |= 1 << i;
			}
		} else {
			__u32 len;
			if (kind == CAP_SOCKADDR) {
				len = c->args[lenarg];
			} else {
				if (ret < 0)
					continue;
				if (bpf_probe_read_user(&len, sizeof(len), (void *)c->args[lenarg]))
					continue;
			}
			if (len == 0)
				continue;
			if (len > 128)
				len = 128;
			/* keep clang from reusing the unclamped register */
			asm volatile("" : "+r"(len));
			len &= 0xff;
			n = bpf_probe_read_user(dst, len, ptr) ? 0 : len;
		}
		if (n < 0 || (n == 0 && kind != CAP_PATH))
			continue;
		r->dset |= 1 << i;
		r->dlen[i] = n;
		r->darg[i] = arg;
		off += n;
	}
	return off;
}

static __always_inline void fill_sys(struct sys_rec *r, struct call *c, long ret, __u64 now)
{
	r->latency = now - c->ts;
	r->queued = c->queued;
	r->ret = ret;
	r->nr = c->nr;
#pragma unroll
	for (int i = 0; i < 6; i++)
		r->args[i] = c->args[i];
	/*
	 * The doctor fits latency against the process's mappings; counting the
	 * mmap calls it sees would miss the ones it did not sample. Only calls
	 * that cross over pay for the read, and only in the doctor's modes
	 * (sampled stat: `sysray doctor` and the agent's).
	 */
	r->maps = 0;
	if (cfg_stat && cfg_sample) {
		struct task_struct *t = bpf_get_current_task_btf();
		r->maps = BPF_CORE_READ(t, mm, map_count);
	}
}

static __always_inline bool has_captures(__u32 nr)
{
	return nr < MAX_SYSCALL && cap_rules[nr].kind[0];
}

static __always_inline void stage_flush(struct stage *sg)
{
	__u32 len = sg->len;
	if (len == 0 || len > STAGE_BYTES)
		return;
	void *rb = cpu_ring();
	if (!rb || bpf_ringbuf_output(rb, sg->buf, len, wake_flags(rb)))
		count_drops(sg->n); /* events, not batches */
	sg->len = 0;
	sg->n = 0;
}

static int stage_timer(void *map, __u32 *key, struct stage *sg)
{
	if (__sync_val_compare_and_swap(&sg->busy, 0, 1) != 0) {
		/* a producer holds it; try again shortly */
		bpf_timer_start(&sg->timer, STAGE_NS / 4, 0);
		return 0;
	}
	stage_flush(sg);
	sg->armed = 0;
	__sync_lock_test_and_set(&sg->busy, 0); /* release, as a full barrier */
	return 0;
}

/*
 * Stages a syscall record, with its captured arguments when cap; false when
 * the caller must emit it directly.
 */
static __always_inline bool stage_syscall(struct call *c, struct ids *ids, long ret, __u64 now, __u8 flags, bool cap)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct stage *sg = bpf_map_lookup_elem(&stages, &cpu);
	if (!sg)
		return false;
	if (__sync_val_compare_and_swap(&sg->busy, 0, 1) != 0)
		return false;
	if (!sg->inited) {
		bpf_timer_init(&sg->timer, &stages, CLOCK_MONOTONIC);
		bpf_timer_set_callback(&sg->timer, stage_timer);
		sg->inited = 1;
	}
	__u32 off = sg->len;
	/* Room for the largest record this call can make. */
	if (off > STAGE_BYTES - (cap ? sizeof(struct sys_big) : sizeof(struct sys_rec))) {
		stage_flush(sg);
		off = 0;
	}
	/* The verifier's own bound on off, whatever clang makes of the test above. */
	if (off > STAGE_BYTES - sizeof(struct sys_big) && cap)
		off = 0;
	if (off > STAGE_BYTES - sizeof(struct sys_rec))
		off = 0;
	struct sys_rec *r = (void *)(sg->buf + off);
	__u32 n = 0;
	r->dlen[0] = 0;
	r->dlen[1] = 0;
	r->dtrunc = 0;
	r->dset = 0;
	if (cap)
		n = capture_args(r, (char *)(r + 1), c, ret);
	if (n > DATA_SLOTS * DATA_SLOT)
		n = DATA_SLOTS * DATA_SLOT;
	/* Records stay 8-byte aligned; the reader steps by h.size and reads dlen bytes of it. */
	__u32 size = (sizeof(*r) + n + 7) & ~7;
	fill_hdr_ids(&r->h, ids, K_SYSCALL, size, c->ts);
	r->h.flags = flags;
	fill_sys(r, c, ret, now);
	sg->len = off + size;
	sg->n++;
	if (!sg->armed) {
		sg->armed = 1;
		bpf_timer_start(&sg->timer, STAGE_NS, BPF_F_TIMER_CPU_PIN);
	}
	__sync_lock_test_and_set(&sg->busy, 0); /* release, as a full barrier */
	return true;
}

/*
 * Emits the call c, of the thread whose cached ids are ids. task is NULL
 * when it is the current task.
 */
static __always_inline void emit_call(struct call *c, struct ids *ids, long ret, __u64 now, __u8 flags,
				      struct task_struct *task)
{
	bool plain = !has_captures(c->nr) || (flags & F_UNFINISHED) || task;
	if (!task && stage_syscall(c, ids, ret, now, flags, !plain))
		return;

	void *rb = cpu_ring();
	if (!rb) {
		count_drop();
		return;
	}

	if (plain) {
		struct sys_rec *r = bpf_ringbuf_reserve(rb, sizeof(*r), 0);
		if (!r) {
			count_drop();
			return;
		}
		if (task)
			fill_hdr_task(&r->h, task, K_SYSCALL, sizeof(*r), c->ts);
		else
			fill_hdr_ids(&r->h, ids, K_SYSCALL, sizeof(*r), c->ts);
		r->h.flags = flags;
		fill_sys(r, c, ret, now);
		if (task)
			r->maps = 0; /* fill_sys read the current task's, not this one's */
		r->dlen[0] = 0;
		r->dlen[1] = 0;
		r->dtrunc = 0;
		r->dset = 0;
		bpf_ringbuf_submit(r, wake_flags(rb));
		return;
	}

	__u32 zero = 0;
	struct sys_big *b = bpf_map_lookup_elem(&scratch, &zero);
	if (!b)
		return;
	b->r.dtrunc = 0;
	b->r.dset = 0;
	__u32 n = capture_args(&b->r, b->data, c, ret);
	__u32 size = sizeof(b->r) + n;
	if (size > sizeof(*b))
		size = sizeof(*b);
	fill_hdr_ids(&b->r.h, ids, K_SYSCALL, size, c->ts);
	b->r.h.flags = flags;
	fill_sys(&b->r, c, ret, now);
	if (bpf_ringbuf_output(rb, b, size, wake_flags(rb)))
		count_drop();
}

/*
 * emit_call for the current thread. Global, as dns_copy is: the verifier
 * walks it once, on its own, where it walked an inlined emit_call again
 * at each of its nine call sites, for every state that reached one (with
 * fill_sys's trusted read, over a third of the doctor's start-up). What it
 * costs at run time is a BPF-to-BPF call on the path of an event.
 */
__noinline int emit_current(struct call *c, struct ids *ids, long ret, __u64 now, __u8 flags)
{
	if (!c || !ids)
		return 0;
	emit_call(c, ids, ret, now, flags, NULL);
	return 0;
}

/*
 * The time st's call spent preempted, from sched_switch's count (its sleep
 * slots keep only the longest places; this counts them all). A call that
 * never switched out finds an earlier call's count (sl_owner): 0. The fast
 * path's rows follow no switches, and their calls' queued stays 0.
 */
static __always_inline void call_queued(struct task_state *st)
{
	st->call.queued = st->sleep.sl_owner == st->call.seq ? st->sleep.runq : 0;
}

/* Emits the syscall held in st. */
static __always_inline void emit_syscall(struct task_state *st, long ret, __u64 now, __u8 flags,
					 struct task_struct *task)
{
	call_queued(st);
	if (task)
		emit_call(&st->call, &st->ids, ret, now, flags, task);
	else
		emit_current(&st->call, &st->ids, ret, now, flags);
}

/* Emits a slow syscall with the places it slept. */
static __always_inline void emit_slow(struct task_state *st, long ret, __u64 now, __u8 flags)
{
	void *rb = cpu_ring();
	__u32 zero = 0;
	struct sys_slow *b = bpf_map_lookup_elem(&scratch, &zero);
	if (!rb || !b) {
		count_drop();
		return;
	}
	b->r.dtrunc = 0;
	b->r.dset = 0;
	b->r.dlen[0] = 0;
	b->r.dlen[1] = 0;
	__u32 n = 0;
	if (has_captures(st->call.nr))
		n = capture_args(&b->r, b->data, &st->call, ret);
	__builtin_memcpy(&b->sl, &st->sleep.sl, sizeof(b->sl));
	__u32 size = sizeof(b->r) + sizeof(b->sl) + n;
	if (size > sizeof(*b))
		size = sizeof(*b);
	fill_hdr_ids(&b->r.h, &st->ids, K_SYSCALL, size, st->call.ts);
	b->r.h.flags = F_SLEEPS | flags;
	call_queued(st);
	fill_sys(&b->r, &st->call, ret, now);
	if (bpf_ringbuf_output(rb, b, size, wake_flags(rb)))
		count_drop();
}

#endif
