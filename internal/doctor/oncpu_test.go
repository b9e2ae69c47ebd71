package doctor

import (
	"math"
	"testing"
)

func TestSampledFloor(t *testing.T) {
	for _, c := range []struct {
		k, n uint64
		want float64
	}{
		{10, 10, 0.714}, // all in one place: below 1
		{16, 23, 0.487}, // the starved writer of kernel-hotspot/half-second
		{0, 30, 0},
		{15, 30, 0.329},
		{500, 1000, 0.468},
	} {
		if got := sampledFloor(c.k, c.n); math.Abs(got-c.want) > 0.0006 {
			t.Errorf("sampledFloor(%d, %d) = %.4f, want %.3f", c.k, c.n, got, c.want)
		}
	}
	if sampledFloor(0, 0) != 0 {
		t.Error("no samples must give no share")
	}
}

// Three writers on two CPUs: the one that got the least CPU spent 30% of
// its lifetime in fadvise64 and was on the CPU for 23 samples, 16 of them
// in fadvise64. Its share is the samples'; a process whose samples do not
// clear its lifetime share keeps the lifetime share.
func TestTimeShare(t *testing.T) {
	const nr = 221
	const life = 500_000_000
	cpu := func(in, all uint64) *procCPU {
		return &procCPU{all: all, byNr: map[int32]uint64{nr: in, -1: all - in}}
	}
	for _, c := range []struct {
		name      string
		in, tns   uint64
		cpu       *procCPU
		want      float64
		fromCPU   bool
		threshold bool // share >= warnShare
	}{
		{"starved writer", 150_000_000, life, cpu(16, 23), 16.0 / 23, true, true},
		{"no samples", 150_000_000, life, nil, 0.3, false, true},
		{"too few samples", 100_000_000, life, cpu(9, 9), 0.2, false, false},
		{"samples not clearly above the lifetime share", 300_000_000, life, cpu(40, 60), 0.6, false, true},
		// 12 samples are 60 ms: under a tenth of 1 s of thread time.
		{"idle process", 100_000_000, 2 * life, cpu(12, 12), 0.1, false, false},
		{"busy elsewhere", 50_000_000, life, cpu(3, 60), 0.1, false, false},
		// A weighted sample of the latencies above the thread's lifetime.
		{"estimate above the lifetime", 535_000_000, life, nil, 1, false, true},
	} {
		got, fromCPU := timeShare(c.in, c.tns, c.cpu, nr)
		if math.Abs(got-c.want) > 1e-9 || fromCPU != c.fromCPU || (got >= warnShare) != c.threshold {
			t.Errorf("%s: share %.3f (from samples %v), want %.3f (%v)", c.name, got, fromCPU, c.want, c.fromCPU)
		}
	}
}
