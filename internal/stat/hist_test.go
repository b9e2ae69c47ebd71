package stat

import (
	"math/rand/v2"
	"sort"
	"testing"
)

func TestBucketsCoverEveryValue(t *testing.T) {
	for _, v := range []uint64{0, 1, 7, 8, 9, 15, 16, 17, 100, 1000, 123456, 1 << 30, 1<<41 - 1} {
		i := Bucket(v)
		lo, hi := bounds(i)
		if v < lo || v >= hi {
			t.Errorf("Bucket(%d) = %d = [%d, %d)", v, i, lo, hi)
		}
		if v >= 8 && float64(hi-lo) > 0.25*float64(lo) {
			t.Errorf("bucket %d [%d, %d) is wider than 25%% of its bound", i, lo, hi)
		}
	}
	for i := 1; i < Buckets; i++ {
		_, phi := bounds(i - 1)
		lo, _ := bounds(i)
		if phi != lo {
			t.Fatalf("gap between buckets %d and %d: %d != %d", i-1, i, phi, lo)
		}
	}
}

// Percentiles from the histogram are within the stated error of exact ones.
func TestQuantileError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Hist
	var vals []uint64
	var max uint64
	for range 100000 {
		v := uint64(rng.ExpFloat64()*20000) + 100 // a latency-like tail
		vals = append(vals, v)
		h.Add(v)
		if v > max {
			max = v
		}
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := vals[int(q*float64(len(vals)-1))]
		got := h.Quantile(q, max)
		if d := float64(got) - float64(exact); d > MaxRelError*float64(exact) || -d > MaxRelError*float64(exact) {
			t.Errorf("p%v = %d, exact %d: off by more than %.1f%%", q*100, got, exact, MaxRelError*100)
		}
	}
}
