/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Stat mode: counting calls in the kernel, with budgeted or exact timing, and
 * which calls still cross over as events.
 *
 * Part of the one BPF object sysray loads; included by sysray.bpf.c after
 * emit.h, whose definitions it uses.
 */
#ifndef SYSRAY_STAT_H
#define SYSRAY_STAT_H

/*
 * Budgeted timing: the clock times the call entering now. The thread's
 * last two reads are kept: an untimed call's latency is bounded by the
 * last one before it (budget_latency).
 */
static __always_inline void clock_entry(struct timing *t, __u64 *ts)
{
	__u64 now = bpf_ktime_get_ns();
	t->prev_clk = t->last_clk;
	t->last_clk = now;
	*ts = now;
}

/* Budgeted timing: whether the clock times this call, and what it stands for. */
static __always_inline void budget_entry(struct timing *t, __u64 *ts, __u32 nr)
{
	__u64 j = bpf_jiffies64();
	t->jts = j;
	__u32 *b = &t->budget[nr & (BUDGET_SLOTS - 1)];
	__u32 tag = (__u32)j << 8, v = *b;
	if ((v & ~0xffu) != tag)
		v = tag; /* a new jiffy: a new budget */
	__u32 n = v & 0xff;
	if (n < 0xff)
		v++;
	*b = v;
	__u32 w = 1;
	if (n >= cfg_budget) {
		/* Random, not every Nth: a loop's calls alternate (a read that fills, one that finds nothing). */
		t->rng = t->rng * 6364136223846793005ULL + 1442695040888963407ULL;
		w = (t->rng >> (64 - cfg_every_shift)) == 0 ? 1u << cfg_every_shift : 0;
	}
	t->weight = w;
	if (!w) {
		*ts = 0;
		return;
	}
	clock_entry(t, ts);
}

static __always_inline struct pcount *pcount_of(__u32 pid)
{
	struct pcount *c = bpf_map_lookup_elem(&pcounts, &pid);
	if (c)
		return c;
	struct pcount zero = {};
	bpf_map_update_elem(&pcounts, &pid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&pcounts, &pid);
}

/* A sample crosses over only if the thread's last one did cfg_sample_gap ago. */
static __always_inline bool sample_gap(struct timing *t, __u64 now)
{
	if (now - t->sampled_at < cfg_sample_gap)
		return false;
	t->sampled_at = now;
	return true;
}

/*
 * True once every cfg_sample calls of the thread, at most once per
 * cfg_sample_gap: a thread in a tight loop would otherwise send the reader
 * tens of thousands of samples a second, and on a small host the reader's
 * CPU is the traced program's.
 */
static __always_inline bool sample_tick(struct timing *t, __u64 now)
{
	return (t->tick++ & (cfg_sample - 1)) == 0 && sample_gap(t, now);
}

/* How long the call in flight has run, in whole jiffies (budgeted timing). */
static __always_inline __u64 jiffy_latency(struct timing *t)
{
	return (bpf_jiffies64() - t->jts) * cfg_tick_ns;
}

/* Budgeted timing: a call in flight that the clock did not time gets an entry time from jiffies. */
static __always_inline void untimed_entry(struct call *c, struct timing *t, __u64 now)
{
	if (budget_timing() && !c->ts)
		c->ts = now - jiffy_latency(t);
}

/* Stat mode: the arguments of a call about to be emitted, from its registers. */
static __always_inline void late_args(struct call *c, struct pt_regs *regs, long ret)
{
	/* A successful execve or a sigreturn replaced the registers; sigreturn has no arguments. */
	if ((ret == 0 && (c->nr == cfg_nr_execve || c->nr == cfg_nr_execveat)) || c->nr == cfg_nr_rt_sigreturn) {
#pragma unroll
		for (int i = 0; i < 6; i++)
			c->args[i] = 0;
		return;
	}
	load_args(c, regs);
}

/* A new key starts from this (too large for the BPF stack). */
volatile const struct stat_val stat_zero;

/*
 * The histogram's bucket of v: four a power of two, past the first eight.
 * Without a branch: (t + 2^k - 1) >> k is 1 for 0 < t < 2^k and 0 for t = 0,
 * which finds the top bit in six shifts. The branches this replaced made
 * every caller's walk 64 walks in the verifier (it keeps msb's values
 * apart, as they index hist), most of sys_exit's load time in the doctor.
 */
static __always_inline __u32 hist_bucket(__u64 v)
{
	if (v < 8)
		return v;
	__u64 x = v, s, msb;
	/* clang would fold each step back into a compare and a branch */
	s = ((x >> 32) + 0xffffffffULL) >> 32 << 5;
	asm volatile("" : "+r"(s));
	msb = s;
	x >>= s;
	s = ((x >> 16) + 0xffffULL) >> 16 << 4;
	asm volatile("" : "+r"(s));
	msb += s;
	x >>= s;
	s = ((x >> 8) + 0xffULL) >> 8 << 3;
	asm volatile("" : "+r"(s));
	msb += s;
	x >>= s;
	s = ((x >> 4) + 0xfULL) >> 4 << 2;
	asm volatile("" : "+r"(s));
	msb += s;
	x >>= s;
	s = ((x >> 2) + 0x3ULL) >> 2 << 1;
	asm volatile("" : "+r"(s));
	msb += s;
	x >>= s;
	msb += x >> 1;
	__u32 idx = msb * 4 + ((v >> (msb - 2)) & 3) - 4;
	return idx < HIST_BUCKETS ? idx : HIST_BUCKETS - 1;
}

/*
 * The key's cell of the stats map, made if new; if the map cannot make it,
 * the key's cell in the spill (maps.h); NULL when neither has room, its n
 * calls counted as lost.
 */
static __always_inline struct stat_val *stat_cell(struct stat_key *k, __u64 n)
{
	struct stat_val *v = bpf_map_lookup_elem(&stats, k);
	if (v)
		return v;
	/* Made, or made by another CPU meanwhile (EEXIST): either way it is there. */
	long err = bpf_map_update_elem(&stats, k, (void *)&stat_zero, BPF_NOEXIST);
	v = bpf_map_lookup_elem(&stats, k);
	if (v)
		return v;
	/* Only a want of memory spills: a full table (E2BIG) is the table's size, as said. */
	if (err == -ENOMEM) {
		v = bpf_map_lookup_elem(&spill, k);
		if (v)
			return v;
		bpf_map_update_elem(&spill, k, (void *)&stat_zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&spill, k);
		if (v)
			return v;
	}
	/*
	 * One key, and why as a field: a key that depended on err kept err's
	 * two values apart in the verifier's states to the end of every
	 * caller, and made sys_exit's verification three times as long (0.43
	 * s to 1.37 s at each start in stat mode).
	 */
	__u32 z = 0;
	struct lost *lost = bpf_map_lookup_elem(&stat_lost, &z);
	if (!lost)
		return NULL;
	if (err == -ENOMEM)
		lost->nomem += n;
	else
		lost->full += n;
	return NULL;
}

/*
 * A selected thread entered call id and no memory was found for its state
 * (task storage comes from the same per-CPU allocator as the stats map's
 * cells, and a burst of new threads empties both): the call cannot be
 * counted or emitted, so it is counted as lost, as stat_cell counts a cell
 * it could not make. exit and exit_group never return: recorded, they are
 * events (unfinished) that are lost; stat counts calls that return only.
 */
static __always_inline void lost_call(long id)
{
	if (!cfg_stat) {
		count_drop();
		return;
	}
	if (id == cfg_nr_exit || id == cfg_nr_exit_group)
		return;
	__u32 z = 0;
	struct lost *lost = bpf_map_lookup_elem(&stat_lost, &z);
	if (lost)
		lost->nomem++;
}

/*
 * Adds a pending slot's calls (w, taken from it) to the stats map, under
 * the thread's key (cgroup cg, process tgid). Global, not static: the
 * verifier checks a global function once, on its own, where a static one
 * is walked again at each call with the caller's states (PEND_SLOTS calls
 * in each pend_flush: a third of the doctor's sys_exit walk). Hence the
 * scalar arguments, which a global function is checked against without
 * knowing where they came from.
 */
__noinline int pend_add(__u64 cg, __u32 tgid, __u64 w)
{
	__u32 n = (__u32)w;
	if (!n || !(w >> 32))
		return 0;
	struct stat_key k = {
		.cgroup = cg,
		.pid = tgid,
		.nr = (w >> 32) - 1,
	};
	struct stat_val *v = stat_cell(&k, n);
	if (v)
		v->count += n;
	return 0;
}

/*
 * Takes every pending count of the thread to the map. other: true when the
 * thread may be running on another CPU (a read of the counts); a slot that
 * changes under us is then left for the thread's next timed call or the
 * next read.
 */
static __always_inline void pend_flush(struct ids *ids, struct pending *p, bool other)
{
	for (int i = 0; i < PEND_SLOTS; i++) {
		__u64 w = p->w[i];
		if (!(__u32)w)
			continue;
		__u64 tag = w & ~0xffffffffULL;
		if (other) {
			if (__sync_val_compare_and_swap(&p->w[i], w, tag) != w)
				continue;
		} else {
			w = __sync_lock_test_and_set(&p->w[i], tag);
		}
		pend_add(ids->cg, ids->tgid, w);
	}
}

/* What stat_account saw of a call. */
#define ACC_FIRST 1  /* one of its cell's first calls (the 1st, 2nd, 4th, ... 64th) */
#define ACC_RECORD 2 /* slower than any call of its cell before, on this CPU */

/*
 * Counts the call. hw is what it weighs in the histogram (0: its latency is
 * not known well enough), tw what it weighs in the total and the max (0:
 * nothing). Returns ACC_FIRST for the first calls of its syscall in its
 * process on this CPU (the 1st, 2nd, 4th, 8th... up to the 64th), which the
 * doctor emits besides its 1-in-cfg_sample sample, so that a syscall a process
 * makes 30 times still shows how its latency moves (a fork that slows as
 * mappings grow), at a cost bounded by log2 per process; and ACC_RECORD for
 * a call slower than any before it in its cell.
 *
 * Budgeted timing counts a call that weighs nothing and did not fail in its
 * thread's pending slot (PEND_SLOTS): neither ACC_ bit can be set for it.
 */
static __always_inline __u32 count_call(struct ids *ids, struct pending *p, __u32 nr, long ret, __u64 lat, __u32 hw,
					 __u32 tw, bool slept, __u64 runq)
{
	bool failed = ret < 0 && ret >= -4095;
	__u64 *pend = &p->w[nr & (PEND_SLOTS - 1)];
	__u64 tag = (__u64)(nr + 1) << 32;
	if (budget_timing() && !hw && !tw && !failed && !slept) {
		__u64 w = *pend;
		if ((w & ~0xffffffffULL) == tag && (__u32)w < PEND_MAX) {
			__sync_fetch_and_add(pend, 1);
			return 0;
		}
	}
	struct stat_key k = {
		.cgroup = ids->cg,
		.pid = ids->tgid,
		.nr = nr,
	};
	struct stat_val *v = stat_cell(&k, 1);
	if (!v)
		return 0;
	if (budget_timing() && *pend != tag) {
		/* Claim the slot for this syscall, taking what waits in it. */
		__u64 w = __sync_lock_test_and_set(pend, tag);
		if ((w & ~0xffffffffULL) == tag)
			v->count += (__u32)w;
		else
			pend_add(ids->cg, ids->tgid, w);
	}
	/* Per-CPU values: no atomics needed. */
	v->count++;
	v->total += lat * tw;
	if (slept)
		v->runq += runq;
	__u32 acc = 0;
	if (tw && lat > v->max) {
		v->max = lat;
		acc |= ACC_RECORD;
	}
	if (hw) { /* the histogram is of the calls timed by the clock (or long: budget_latency) */
		v->timed++;
		__u32 b = hist_bucket(lat);
		if (b < HIST_BUCKETS)
			v->hist[b] += hw;
	}
	if (failed) {
		v->errors++;
		struct errno_key ek = {.pid = k.pid, .nr = nr, .err = -ret};
		__u64 *n = bpf_map_lookup_elem(&errnos, &ek);
		if (n) {
			(*n)++;
		} else {
			__u64 one = 1;
			bpf_map_update_elem(&errnos, &ek, &one, BPF_NOEXIST);
		}
	}
	__u64 c = v->count;
	if (c <= 64 && (c & (c - 1)) == 0)
		acc |= ACC_FIRST;
	return acc;
}

/* A thread's ids for the stats key: read again after a cgroup move, its pending counts first taken to the key they were made under. */
static __always_inline void refresh_ids(struct ids *ids, struct pending *p)
{
	__u64 gen = cgroup_gen;
	if (ids->cg_gen == gen)
		return;
	if (budget_timing() && ids->cg_gen)
		pend_flush(ids, p, false);
	ids->cg = bpf_get_current_cgroup_id();
	ids->tgid = bpf_get_current_pid_tgid() >> 32;
	ids->cg_gen = gen;
}

/*
 * count_call for the call the thread's task storage holds. Global, as
 * pend_add is: sys_exit reaches it with the many states its tests before
 * it keep apart (a failure, a sample, a DNS watch), and walked count_call
 * inline once for each, two thirds of its walk. The fast path's rows,
 * where stat's calls are counted, keep count_call inline.
 */
__noinline int stat_account(struct task_state *st, long ret, __u64 lat, __u32 hw, __u32 tw)
{
	if (!st)
		return 0;
	refresh_ids(&st->ids, &st->pend);
	bool slept = cfg_stacks && st->sleep.sl_owner == st->call.seq;
	return count_call(&st->ids, &st->pend, st->call.nr, ret, lat, hw, tw, slept, slept ? st->sleep.runq : 0);
}

/*
 * Budgeted timing: the call's latency and its weight in the histogram. A
 * short call weighs what budget_entry gave it; a call that crossed a tick
 * and may have taken LONG_NS counts as itself, timed or not: untimed, its
 * latency is bounded by the thread's last clock read, which in a thread busy
 * enough to be sampled is a few calls back. The test for "long" reads the
 * same things for timed and untimed calls, so none is counted both in person
 * and through a sample. A short untimed call's latency is unknown: 0, and
 * weight 0. *now is the clock if it was read, else 0.
 */
static __always_inline __u64 budget_latency(struct timing *tm, __u64 ts, __u64 *now, __u32 *w)
{
	__u64 d = bpf_jiffies64() - tm->jts;
	*now = 0;
	*w = 0;
	if (!ts && !d)
		return 0;
	__u64 t = bpf_ktime_get_ns();
	__u64 bound = t - (ts ? tm->prev_clk : tm->last_clk);
	/* It began in jiffy jts: a stale last read cannot make it longer. */
	if (cfg_tick_ns && bound > (d + 1) * cfg_tick_ns)
		bound = (d + 1) * cfg_tick_ns;
	tm->last_clk = t;
	*now = t;
	*w = d && bound >= LONG_NS ? 1 : tm->weight;
	return ts ? t - ts : bound;
}

#endif
