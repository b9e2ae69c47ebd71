package agent

import "github.com/sysray/sysray/internal/stat"

// The Prometheus histogram's finite bucket bounds are the powers of two
// from 2^10 ns (1.024 µs) to 2^35 ns (34.4 s). Every power of two from 8 ns
// up is a boundary of the kernel's log-linear histogram (four buckets per
// power of two, stat.Hist), so each kernel bucket lies wholly inside one
// Prometheus bucket and moves there exactly: nothing is split or guessed.
const (
	firstBoundLog2 = 10
	lastBoundLog2  = 35
	// promBuckets counts the finite buckets and +Inf.
	promBuckets = lastBoundLog2 - firstBoundLog2 + 2
)

// bucketOf maps each kernel bucket to its Prometheus bucket.
var bucketOf = func() (m [stat.Buckets]uint8) {
	for i := range m {
		lo := kernelLow(i)
		j := promBuckets - 1 // +Inf
		for k := firstBoundLog2; k <= lastBoundLog2; k++ {
			if lo < 1<<k {
				j = k - firstBoundLog2
				break
			}
		}
		m[i] = uint8(j)
	}
	return m
}()

// kernelLow is the smallest latency (ns) in kernel bucket i: the inverse of
// stat.Bucket, whose values are exact below 8 ns and then four to a power
// of two.
func kernelLow(i int) uint64 {
	if i < 8 {
		return uint64(i)
	}
	msb, sub := (i+4)/4, uint64((i+4)%4)
	return (4 + sub) << (msb - 2)
}

// Bounds are the finite upper bounds of the Prometheus buckets, in seconds.
func Bounds() []float64 {
	b := make([]float64, 0, promBuckets-1)
	for k := firstBoundLog2; k <= lastBoundLog2; k++ {
		b = append(b, float64(uint64(1)<<k)/1e9)
	}
	return b
}

// promHist is a kernel histogram folded onto the Prometheus buckets. Its
// counts are kept modulo 2^32, as the kernel's per-CPU buckets are: a sum
// of wrapped 32-bit counters is right modulo 2^32, so the difference of two
// reads is too, as long as fewer than 2^32 calls land in one bucket between
// reads.
type promHist [promBuckets]uint32

func fold(h *stat.Hist) (p promHist) {
	for i, n := range h {
		p[bucketOf[i]] += uint32(n)
	}
	return p
}
