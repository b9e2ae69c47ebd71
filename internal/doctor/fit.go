package doctor

import (
	"math"
	"sort"
)

// point is one call: x is the state of its process, y its latency. approx
// marks a latency known only to a kernel tick.
type point struct {
	x, y   float64
	approx bool
}

// binnedFit fits y = a + b·x through one value of y per bin of x, in up to
// 20 bins and about 2 calls a bin (at least 6 bins). A bin of exactly timed
// calls gives its median, which shrugs off the outliers (an interrupt, a
// preemption) that would swamp a fit of raw latencies. A bin holding calls
// timed in ticks gives its mean: one such latency is off by up to a tick,
// but its expected value is the call's length, so the mean is unbiased
// where a median would snap to a tick. r2 is the fit quality over the bins.
func binnedFit(pts []point) (a, b, r2 float64, bins []point) {
	if len(pts) < 2 {
		return 0, 0, 0, nil
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].x < pts[j].x })
	lo, hi := pts[0].x, pts[len(pts)-1].x
	if hi <= lo {
		return 0, 0, 0, nil
	}
	nbins := min(20, max(6, len(pts)/2))
	width := (hi - lo) / float64(nbins)
	var cur []float64
	curBin, approx := 0, false
	flush := func() {
		if len(cur) == 0 {
			return
		}
		x := lo + (float64(curBin)+0.5)*width
		y := 0.0
		if approx {
			for _, v := range cur {
				y += v
			}
			y /= float64(len(cur))
		} else {
			y = median(cur)
		}
		bins = append(bins, point{x: x, y: y})
		cur, approx = cur[:0], false
	}
	for _, p := range pts {
		bin := min(int((p.x-lo)/width), nbins-1)
		if bin != curBin {
			flush()
			curBin = bin
		}
		cur = append(cur, p.y)
		approx = approx || p.approx
	}
	flush()
	if len(bins) < 5 {
		return 0, 0, 0, bins
	}
	var sx, sy, sxx, sxy float64
	n := float64(len(bins))
	for _, p := range bins {
		sx += p.x
		sy += p.y
		sxx += p.x * p.x
		sxy += p.x * p.y
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0, 0, 0, bins
	}
	b = (n*sxy - sx*sy) / den
	a = (sy - b*sx) / n
	mean := sy / n
	var ssTot, ssRes float64
	for _, p := range bins {
		ssTot += (p.y - mean) * (p.y - mean)
		r := p.y - (a + b*p.x)
		ssRes += r * r
	}
	if ssTot == 0 {
		return a, b, 0, bins
	}
	return a, b, math.Max(0, 1-ssRes/ssTot), bins
}

// median sorts v and returns its middle value, or the mean of the middle
// two: the upper one alone, in the two-call bins of a short run, would
// be the larger of every pair.
func median(v []float64) float64 {
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// rankMax bounds the calls the rank fit weighs: its pairs grow as their
// square, and 600 calls evenly spread over the state pin τ to a few
// hundredths.
const rankMax = 600

// The rank fit is the one a minority of slowed calls cannot bend: Kendall's
// τ-b between state and latency, and the Theil–Sen line (the median of the
// slopes between pairs of calls, and the median intercept under it). A
// hypervisor's pause or a neighbour thrashing the caches makes some calls in
// a stretch of the run take twice their time, in ways the kernel does not
// count as it counts the wait for a CPU (Syscall.Queued); a least-squares
// line chases them, while a count of pairs in order and a median slope
// barely move.

// rankSample returns pts, or every k-th of them in order of state (an even
// spread over it) when there are more than rankMax. pts must be sorted by
// x, as binnedFit leaves them.
func rankSample(pts []point) []point {
	if len(pts) <= rankMax {
		return pts
	}
	k := float64(len(pts)) / rankMax
	sub := make([]point, rankMax)
	for i := range sub {
		sub[i] = pts[int(float64(i)*k)]
	}
	return sub
}

// kendall returns τ-b between x and y, and its z score under no
// association.
func kendall(pts []point) (tau, z float64) {
	n := len(pts)
	if n < 3 {
		return 0, 0
	}
	var conc, disc, tiesX, tiesY float64
	for i := range pts {
		for j := i + 1; j < n; j++ {
			dx, dy := pts[j].x-pts[i].x, pts[j].y-pts[i].y
			switch {
			case dx == 0 && dy == 0:
				tiesX++
				tiesY++
			case dx == 0:
				tiesX++
			case dy == 0:
				tiesY++
			case (dx > 0) == (dy > 0):
				conc++
			default:
				disc++
			}
		}
	}
	pairs := float64(n) * float64(n-1) / 2
	if den := math.Sqrt((pairs - tiesX) * (pairs - tiesY)); den > 0 {
		tau = (conc - disc) / den
	}
	// The variance of conc−disc without ties; ties only narrow it, so
	// this z errs low.
	z = 3 * (conc - disc) / math.Sqrt(float64(n)*float64(n-1)*float64(2*n+5)/2)
	return tau, z
}

// theilSen returns the line y = a + b·x through the median slope between
// pairs of points of different x, and the median intercept under it.
func theilSen(pts []point) (a, b float64) {
	n := len(pts)
	slopes := make([]float64, 0, n*(n-1)/2)
	for i := range pts {
		for j := i + 1; j < n; j++ {
			if dx := pts[j].x - pts[i].x; dx != 0 {
				slopes = append(slopes, (pts[j].y-pts[i].y)/dx)
			}
		}
	}
	if len(slopes) == 0 {
		return 0, 0
	}
	b = median(slopes)
	rest := make([]float64, n)
	for i, p := range pts {
		rest[i] = p.y - b*p.x
	}
	return median(rest), b
}
