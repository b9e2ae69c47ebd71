package doctor

import (
	"cmp"
	"math"
	"slices"
	"sort"
)

// point is one call: x is the state of its process, y its latency. approx
// marks a latency known only to a kernel tick. seq is the call's place
// among its process's calls of that syscall, in the order they were made
// (fits sort points by x).
type point struct {
	x, y   float64
	approx bool
	seq    uint64
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

// A spell is a stretch of consecutive calls that all ran well over the
// trend of the others: the whole process slowed for a while, from outside
// (a neighbour on the host, a vCPU held), while the walk itself went on
// growing. In one table of map32's forks (from a CI miss) every call from 2,300 to
// 3,400 threads took about 2.7 times its trend, and so did the process's
// thread creations and mmaps; its forks' ranks gave τ 0.67, and in a CI run
// of the same variant τ 0.57, under the 0.63 ranks need, though the other
// three quarters of the calls rose in step with the threads.
//
// withoutSpell looks for such a stretch among pts (already cut to rankMax)
// and returns the calls outside it when there is one:
//   - spellMinCalls: at least 3 calls in a row. One or two slow calls are
//     outliers, which ranks already shrug off.
//   - spellMaxShare: at most 29% of the calls, the Theil–Sen line's
//     breakdown point (1 − 1/√2): a line through all the calls still
//     follows the trend with that share off it anywhere, so it can judge
//     which calls ran over it, and the rest's line is the one reported.
//   - spellMinFactor: each call of the stretch at least 1.5 times the line
//     through all the calls. In that table the 29 forks outside the
//     spell scatter about their own trend by up to 1.6 times, two of them
//     over 1.5 and never two in a row, while the spell's ran 2.4 to 3.3
//     times that trend (2.0 to 2.8 times the line through all the calls).
//     A stretch only a little over the trend is noise, and leaving it out
//     would only flatter the ranks.
//
// Of the stretches that qualify, the one whose removal leaves the rest's
// ranks most in order is taken, and it is taken out only: a stretch of
// calls faster than the trend (the normal calls after a spell) never is, so
// a spell cannot be made into the top of a growth by cutting what followed
// it. windows is how many stretches qualified: the search picked the best
// of them, so the caller asks the rest for a z that many times less likely
// from noise (spellZ).
const (
	spellMinCalls  = 3
	spellMaxShare  = 0.29
	spellMinFactor = 1.5
)

type spell struct {
	calls   int     // of pts
	x0, x1  float64 // the state over the stretch
	factor  float64 // the stretch's median latency over the line's
	windows int
}

func withoutSpell(pts []point) (rest []point, sp spell, ok bool) {
	n := len(pts)
	maxLen := int(spellMaxShare * float64(n))
	if maxLen < spellMinCalls {
		return nil, spell{}, false
	}
	a, b := theilSen(pts)
	ord := slices.Clone(pts)
	slices.SortStableFunc(ord, func(p, q point) int { return cmp.Compare(p.seq, q.seq) })
	above := make([]bool, n)
	for i, p := range ord {
		t := a + b*p.x
		above[i] = t > 0 && p.y >= spellMinFactor*t
	}
	// sgn[i*n+j], i < j: +1 for a pair in order, −1 out of order, 0 tied.
	// Taking the stretch [s, e] away leaves
	//   S_rest = S − Σ_{i in it} row_i + S_within
	// (the row sums count the pairs inside twice), so each stretch
	// costs one pass over its own pairs.
	sgn := make([]int8, n*n)
	row := make([]int, n)
	total := 0
	for i := range ord {
		for j := i + 1; j < n; j++ {
			dx, dy := ord[j].x-ord[i].x, ord[j].y-ord[i].y
			var v int8
			switch {
			case dx == 0 || dy == 0:
			case (dx > 0) == (dy > 0):
				v = 1
			default:
				v = -1
			}
			sgn[i*n+j] = v
			row[i] += int(v)
			row[j] += int(v)
			total += int(v)
		}
	}
	bestS, bestE, best := -1, -1, math.Inf(-1)
	for s := range ord {
		within, rows := 0, 0
		for e := s; e < n && e-s < maxLen && above[e]; e++ {
			for i := s; i < e; i++ {
				within += int(sgn[i*n+e])
			}
			rows += row[e]
			if e-s+1 < spellMinCalls {
				continue
			}
			sp.windows++
			m := float64(n - (e - s + 1))
			if tau := float64(total-rows+within) / (m * (m - 1) / 2); tau > best {
				bestS, bestE, best = s, e, tau
			}
		}
	}
	if bestS < 0 {
		return nil, spell{}, false
	}
	rest = append(slices.Clone(ord[:bestS]), ord[bestE+1:]...)
	in := ord[bestS : bestE+1]
	ratios := make([]float64, len(in))
	sp.x0, sp.x1 = in[0].x, in[0].x
	for i, p := range in {
		ratios[i] = p.y / (a + b*p.x)
		sp.x0, sp.x1 = min(sp.x0, p.x), max(sp.x1, p.x)
	}
	sp.calls, sp.factor = len(in), median(ratios)
	return rest, sp, true
}

// spellZ is the z the calls outside a spell must reach: growthMinZ's
// two-sided p of 0.0001, divided among the stretches the search chose from
// (Bonferroni), since the best of many is likelier from noise than any one.
func spellZ(windows int) float64 {
	return math.Sqrt2 * math.Erfinv(1-1e-4/float64(max(windows, 1)))
}

// tCrit is Student's t for a two-sided p of 0.001, by degrees of freedom.
var tCrit = []float64{4: 8.610, 5: 6.869, 6: 5.959, 7: 5.408, 8: 5.041, 9: 4.781, 10: 4.587,
	11: 4.437, 12: 4.318, 13: 4.221, 14: 4.140, 15: 4.073, 16: 4.015, 17: 3.965, 18: 3.922}

// medianU is v's median (the upper middle for an even count), v unchanged.
func medianU(v []uint64) uint64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]uint64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
