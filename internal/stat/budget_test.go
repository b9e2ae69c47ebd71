package stat

import (
	"math/rand"
	"sort"
	"testing"
)

// RankError against the sampling it describes: calls within a budget all
// timed, the rest timed one in every at random and weighted by every. Over
// many runs the rank at which the weighted histogram is read must lie
// within the bound about 99% of the time, and the bound must not be so
// loose that it always holds by a wide margin.
func TestRankErrorCoversSampling(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	const calls, budget, every, runs = 20000, 2000, 16, 400
	// Latencies spread over many buckets, as a syscall's are.
	lat := make([]uint64, calls)
	for i := range lat {
		lat[i] = uint64(200 + rng.ExpFloat64()*5000)
	}
	sorted := append([]uint64(nil), lat...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	for _, q := range []float64{0.5, 0.99} {
		var outside int
		var widest float64
		for range runs {
			var timed uint64
			var below, total float64 // weighted counts at or below the exact q-quantile
			x := sorted[int(q*calls)]
			for i, l := range lat {
				w := 1.0
				if i >= budget {
					if rng.Intn(every) != 0 {
						continue
					}
					w = every
				}
				timed++
				total += w
				if l <= x {
					below += w
				}
			}
			r := RankError(q, calls, timed, every)
			widest = max(widest, r)
			// Where the exact quantile falls among the weighted counts, against q.
			if d := below/total - (float64(int(q*calls))+1)/calls; d > r || -d > r {
				outside++
			}
		}
		t.Logf("q=%g: outside the bound in %d of %d runs (bound up to %.4f)", q, outside, runs, widest)
		// 1% expected; 3% leaves room for chance over 400 runs.
		if outside > runs*3/100 {
			t.Errorf("q=%g: the rank fell outside the bound in %d of %d runs (bound up to %.4f)", q, outside, runs, widest)
		}
		if outside == 0 && widest > 0.05 {
			t.Errorf("q=%g: bound %.4f never reached in %d runs: too loose", q, widest, runs)
		}
	}
	if RankError(0.99, 100, 100, 16) != 0 || RankError(0.5, 100, 50, 0) != 0 {
		t.Error("no sampling must mean no rank error")
	}
}
