package agent

import "testing"

func TestSpread(t *testing.T) {
	sum := func(h *[promBuckets]uint64) (s uint64) {
		for _, x := range h {
			s += x
		}
		return s
	}
	// Weighted buckets of 16 and 1 spread to an exact count of 40, shape kept.
	var h [promBuckets]uint64
	h[2], h[5] = 32, 1
	spread(&h, 40, &promHist{})
	if sum(&h) != 40 || h[2] < 38 || h[5] > 2 {
		t.Errorf("spread to 40: %v", h[:8])
	}
	// Already right: untouched.
	h = [promBuckets]uint64{}
	h[1] = 7
	spread(&h, 7, &promHist{})
	if h[1] != 7 || sum(&h) != 7 {
		t.Errorf("exact histogram changed: %v", h[:4])
	}
	// Nothing timed this read: the cell's shape so far.
	all := promHist{}
	all[3], all[4] = 300, 100
	h = [promBuckets]uint64{}
	spread(&h, 8, &all)
	if h[3] != 6 || h[4] != 2 {
		t.Errorf("untimed calls spread over %v, want 6 and 2", h[:6])
	}
	// Nothing timed ever: unknown latency, the last bucket.
	h = [promBuckets]uint64{}
	spread(&h, 3, &promHist{})
	if h[promBuckets-1] != 3 || sum(&h) != 3 {
		t.Errorf("untimed calls with no shape: %v", h)
	}
}
