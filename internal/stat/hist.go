// Package stat counts syscalls: calls, errors, time and latency
// histograms per process, cgroup and syscall, from the kernel's counters
// or from events, and prints them as strace -c does.
package stat

import "math/bits"

// Buckets is the number of latency buckets, HIST_BUCKETS in bpf/sysray.h.
const Buckets = 160

// Hist is a log-linear latency histogram: values below 8 ns exactly, then
// four buckets per power of two. A bucket is at most 25% of its lower
// bound wide, so its midpoint is within 12.5% of every value in it: the
// relative error of a percentile read from it.
type Hist [Buckets]uint64

// MaxRelError is the bound on a percentile's relative error.
const MaxRelError = 0.125

// Bucket is the bucket of a latency in ns; the kernel's hist_bucket.
func Bucket(v uint64) int {
	if v < 8 {
		return int(v)
	}
	msb := 63 - bits.LeadingZeros64(v)
	idx := msb*4 + int(v>>(msb-2)&3) - 4
	return min(idx, Buckets-1)
}

// bounds is the bucket's value range [lo, hi).
func bounds(i int) (lo, hi uint64) {
	if i < 8 {
		return uint64(i), uint64(i) + 1
	}
	msb, sub := (i+4)/4, uint64((i+4)%4)
	w := uint64(1) << (msb - 2)
	lo = (4 + sub) * w
	return lo, lo + w
}

// Add counts one latency.
func (h *Hist) Add(v uint64) { h[Bucket(v)]++ }

// Merge adds another histogram's counts.
func (h *Hist) Merge(o *Hist) {
	for i := range h {
		h[i] += o[i]
	}
}

// Quantile is the latency below which a fraction q of the counts fall: the
// midpoint of the bucket holding that rank, capped by max (the largest value
// seen) so that a quantile never exceeds what was measured.
func (h *Hist) Quantile(q float64, max uint64) uint64 {
	var n uint64
	for _, c := range h {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := uint64(q*float64(n-1)) + 1
	var seen uint64
	for i, c := range h {
		seen += c
		if seen >= rank {
			lo, hi := bounds(i)
			mid := lo + (hi-lo)/2
			if hi-lo == 1 {
				mid = lo
			}
			if max > 0 && mid > max {
				mid = max
			}
			return mid
		}
	}
	return max
}
